"""Progress on long work (issue 39 item 7): ``convert``, ``report``, ``analyze`` and ``merge`` over many ranks
draw a bar on a terminal and nothing elsewhere, and end with one summary line instead of a line per rank;
a directory's ranks run in numeric order (``rank2`` before ``rank10``; they ran 0, 1, 10, 100, ...).

Defects, each failing before the fix: ``convert`` of N ranks printed N + 1 lines when not on a terminal;
files in a directory were taken in string order, so ranks from positions went to the wrong files; no
command showed progress on a terminal; ``merge`` listed every rank's clock shift on its one line."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from html_job import write_job
from xpuprof.cli import main

REPO = Path(__file__).resolve().parents[2]


def tiny_traces(d: Path, n: int, *, ranked: bool = False) -> list[Path]:
    """``w<i>.json``: trace i holds i + 1 kernels (its rank, when it names none, comes from its position);
    ``ranked``: each names its rank i in distributedInfo."""
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1000.0 + 10 * j, "dur": 5.0, "pid": 1, "tid": 7}
                  for j in range(i + 1)]
        doc = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"}
        if ranked:
            doc["distributedInfo"] = {"rank": i, "world_size": n}
        path = d / f"w{i}.json"
        path.write_text(json.dumps(doc))
        out.append(path)
    return out


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal (what rich draws into when the bar shows)."""

    def isatty(self) -> bool:
        return True


def on_a_terminal(monkeypatch) -> FakeTerminal:
    """stderr a terminal from here on (set in the test itself: pytest's capture re-sets sys.stderr after the
    fixtures are made)."""
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("TERM", "xterm-256color")
    return term


def _store_slices(store: Path) -> dict[int, int]:
    from xpuprof.trace.read.store import open_store

    s = open_store(store)
    return {r: int(s.meta(r).get("slices") or 0) for r in s.ranks}


def test_a_directory_is_read_in_numeric_order(tmp_path):
    from xpuprof.trace.read.inputs import expand_inputs

    tiny_traces(tmp_path / "t", 12)
    names = [p.name for p in expand_inputs([tmp_path / "t"]).traces]
    assert names == [f"w{i}.json" for i in range(12)], names  # was w0, w1, w10, w11, w2, ...


def test_convert_of_many_ranks_prints_one_line_with_its_ranks_in_order(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    tiny_traces(tmp_path / "t", 40)
    assert main(["convert", str(tmp_path / "t"), "-o", str(tmp_path / "s")]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and not captured.out, lines  # was 41: a line per rank, then the total
    assert "40 of 40 trace(s) into" in lines[0] and "ranks 0-39" in lines[0] and "rank from position" in lines[0]
    assert "\x1b" not in captured.err  # no bar, no colour: not a terminal
    # each position's rank went to the file of that number (w10 is rank 10, not rank 2)
    assert _store_slices(tmp_path / "s") == {i: i + 1 for i in range(40)}


def test_one_trace_still_names_its_file_and_rank(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    (path,) = tiny_traces(tmp_path / "t", 1, ranked=True)
    assert main(["convert", str(path), "-o", str(tmp_path / "s")]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert f"rank 0 <- {path}" in line and "rank from distributedInfo" in line and "1 events" in line


def test_failed_ranks_keep_their_lines_beside_the_summary(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    tiny_traces(tmp_path / "t", 6, ranked=True)
    (tmp_path / "t" / "w3.json").write_text('{"traceEvents": [')
    assert main(["convert", str(tmp_path / "t"), "-o", str(tmp_path / "s")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert "w3.json" in lines[0]
    assert "5 of 6 trace(s)" in lines[1] and "ranks 0-2, 4, 5 (" in lines[1]


def test_convert_reads_back_no_rank_it_wrote(tmp_path, monkeypatch, capsys):
    """Each rank's report summary read the whole store back: N * (N + 1) / 2 partitions' metadata for N
    ranks (1,000 ranks did not finish in 15 minutes); then one partition per rank; now none (the summary is
    computed from the rows convert wrote)."""
    pytest.importorskip("pyarrow")
    import xpuprof.trace.read.store as store_module

    read = []
    real = store_module._read_meta
    monkeypatch.setattr(store_module, "_read_meta", lambda path, parts: (read.append(len(parts)), real(path, parts))[1])
    tiny_traces(tmp_path / "t", 20)
    assert main(["convert", str(tmp_path / "t"), "-o", str(tmp_path / "s")]) == 0
    assert read == [], read  # was [1, 2, ..., 20], then [1] * 20
    assert main(["report", str(tmp_path / "s"), "--format", "json"]) == 0  # the store is whole, and its report
    assert '"ranks"' in capsys.readouterr().out


@pytest.mark.slow
def test_convert_of_1000_ranks_prints_at_most_3_lines(tmp_path):
    """The issue's figure, as a user runs it (a fresh process, stderr a pipe)."""
    pytest.importorskip("pyarrow")
    tiny_traces(tmp_path / "t", 1000)
    proc = subprocess.run([sys.executable, "-m", "xpuprof", "convert", str(tmp_path / "t"), "-o", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 3 and "ranks 0-999" in lines[-1], lines[:5]
    slices = _store_slices(tmp_path / "s")
    assert [slices[r] for r in (0, 1, 2, 10, 100, 999)] == [1, 2, 3, 11, 101, 1000]


def _in_a_pty(argv: list[str], cols: int = 100) -> tuple[int, str]:
    """Run ``argv`` with stdin/stdout/stderr on a pseudo-terminal ``cols`` wide; (exit status, what it drew)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": str(cols)}
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 300)
        if not ready:
            break
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def test_a_terminal_shows_the_bar_then_one_line(tmp_path):
    pytest.importorskip("pyarrow")
    write_job(tmp_path / "job", ranks=12)
    rc, drawn = _in_a_pty([sys.executable, "-m", "xpuprof", "convert", str(tmp_path / "job"), "-o",
                           str(tmp_path / "s")])
    assert rc == 0, drawn[-2000:]
    assert "converting" in drawn and re.search(r"\d+/12 traces", drawn), drawn[:2000]
    assert "\x1b[?25l" in drawn  # a live display (cursor hidden while it draws), erased at the end
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    last = plain.replace("\r\n", "\n").split("\r")[-1].strip()
    assert last.startswith("xpuprof convert: 12 of 12 trace(s)") and "ranks 0-11" in last, last
    assert " <- " not in plain  # no line per rank


@pytest.fixture(scope="module")
def job12(tmp_path_factory) -> Path:
    return write_job(tmp_path_factory.mktemp("job12") / "traces", ranks=12)[0].parent


@pytest.mark.parametrize("command", ["report", "merge", "analyze", "convert"])
def test_each_long_command_draws_its_bar_on_a_terminal(job12, tmp_path, monkeypatch, command):
    store = tmp_path / "s"
    if command == "analyze":
        pytest.importorskip("duckdb")
        assert main(["convert", str(job12), "-o", str(store)]) == 0
    terminal = on_a_terminal(monkeypatch)
    argv = {"report": ["report", str(job12)], "merge": ["merge", str(job12), "-o", str(tmp_path / "m.merged.json")],
            "analyze": ["analyze", str(store), "temporal"], "convert": ["convert", str(job12), "-o", str(store)]}
    assert main(argv[command]) == 0
    drawn = terminal.getvalue()
    what = {"report": "reading", "merge": "merging", "analyze": "analyzing", "convert": "converting"}[command]
    assert what in drawn and re.search(r"\d+/12 (traces|ranks|inputs)", drawn), drawn[:1500]


def test_no_bar_for_small_work_or_outside_the_command_line(tmp_path, monkeypatch):
    write_job(tmp_path / "two", ranks=2)
    write_job(tmp_path / "many", ranks=8)
    terminal = on_a_terminal(monkeypatch)
    assert main(["report", str(tmp_path / "two")]) == 0
    assert "reading" not in terminal.getvalue()  # two files: over before a bar helps
    from xpuprof.analysis.report import build_report

    before = terminal.getvalue()
    build_report([tmp_path / "many"])  # a library call: never draws, even on a terminal
    assert terminal.getvalue() == before


def test_merge_says_many_ranks_in_one_short_line(tmp_path, capsys, make_trace):
    """It listed every rank's clock shift: 1,000 ranks made one line of 30,000 characters."""
    for r in range(12):
        make_trace(tmp_path / "job" / f"w.{100 + r}.rank{r}.pt.trace.json", r, world=12, offset_ns=r * 1_000_000)
    assert main(["merge", str(tmp_path / "job"), "-o", str(tmp_path / "m.merged.json"), "--align", "start"]) == 0
    out = capsys.readouterr()
    (line,) = out.out.splitlines()
    assert line.startswith("merged ranks 0-11 (") and len(line) < 250, line
    assert "clock shifts from -11.000 ms (rank 11) to +0.000 ms (rank 0)" in line, line
    assert main(["merge", str(tmp_path / "job"), "-o", str(tmp_path / "n.merged.json")]) == 0
    assert "clocks as recorded" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["report", "merge", "convert", "diff", "analyze"])
def test_no_progress_draws_nothing_on_a_terminal(job12, tmp_path, monkeypatch, command):
    """``--no-progress``, as ``xpuprof run`` spells it, on every command that draws a bar."""
    store = tmp_path / "s"
    if command == "analyze":
        pytest.importorskip("duckdb")
        assert main(["convert", str(job12), "-o", str(store)]) == 0
    argv = {"report": ["report", str(job12)], "merge": ["merge", str(job12), "-o", str(tmp_path / "m.merged.json")],
            "convert": ["convert", str(job12), "-o", str(store)], "diff": ["diff", str(job12), str(job12)],
            "analyze": ["analyze", str(store), "temporal"]}[command]
    terminal = on_a_terminal(monkeypatch)
    assert main([*argv, "--no-progress"]) == 0
    assert "\x1b[?25l" not in terminal.getvalue() and "/12 " not in terminal.getvalue()


def test_ray_groups_advance_the_bar_as_they_finish(monkeypatch):
    """Ray's tasks are waited for one by one while a bar shows (each finished group advances it by its ranks);
    their results keep the groups' order whatever order they finish in."""
    from xpuprof.analysis.engines.ray_engine import RayEngine
    from xpuprof.progress import shown

    class FakeRay:  # finishes the tasks last first
        def __init__(self):
            self.waits = 0

        def wait(self, refs, num_returns=1):
            self.waits += 1
            return refs[-1:], refs[:-1]

        def get(self, refs):
            return [f"result of {r}" for r in refs]

    engine = object.__new__(RayEngine)  # no cluster: only the gathering is tested
    engine._ray = FakeRay()
    terminal = on_a_terminal(monkeypatch)
    with shown():
        out = engine._gather(["g0", "g1", "g2"], [5, 5, 2])
    assert out == ["result of g0", "result of g1", "result of g2"] and engine._ray.waits == 3
    assert "analyzing" in terminal.getvalue() and re.search(r"\d+/12 ranks", terminal.getvalue())
    engine._ray = FakeRay()
    assert engine._gather(["g0"], [12]) == ["result of g0"] and engine._ray.waits == 0  # no terminal: one get
