"""`xpuprof run` checks that its outputs can be written BEFORE the workload runs
(read-only directory, a file where the directory should be, summary.jsonl a directory), says so in
one line (no traceback), and on a full disk leaves the earlier summary.jsonl intact and no temp file."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from xpuprof.cli import main

pytestmark = pytest.mark.slow

MARK_MODULE = "import os\ndef step(marker):\n    open(marker, 'w').close()\n"


def _config(tmp_path: Path, iterations: int = 3) -> tuple[Path, Path]:
    (tmp_path / "markstep.py").write_text(MARK_MODULE)
    marker = tmp_path / "workload-ran"
    cfg = tmp_path / "w.yaml"
    cfg.write_text(f'name: w\nworkload: {{callable: "markstep:step", kwargs: {{marker: "{marker}"}}}}\n'
                   f"warmup: 0\niterations: {iterations}\nactivities: [user_annotation]\n")
    return cfg, marker


@contextlib.contextmanager
def _tmpfs(path: Path, options: str):
    """A small tmpfs at ``path`` (root and a working mount only; otherwise the test skips saying why)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (full-disk / read-only filesystem case)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _assert_refused_before_workload(capsys, rc: int, marker: Path, *words: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert not marker.exists(), "the workload ran although the outputs could not be written"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("xpuprof run: cannot write"), err
    assert "Traceback" not in err and all(w in err for w in words), err
    return err


def test_read_only_output_directory_is_refused_before_the_workload(tmp_path, capsys):
    cfg, marker = _config(tmp_path)
    if os.geteuid() == 0:  # root ignores permission bits: a read-only filesystem is the real case
        with _tmpfs(tmp_path / "ro", "ro,size=64k") as ro:
            rc = main(["run", str(cfg), "--out", str(ro / "out"), "--no-progress"])
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            rc = main(["run", str(cfg), "--out", str(ro / "out"), "--no-progress"])
        finally:
            ro.chmod(0o755)
    _assert_refused_before_workload(capsys, rc, marker, str(ro / "out"))


def test_existing_read_only_directory_is_refused_before_the_workload(tmp_path, capsys):
    cfg, marker = _config(tmp_path)
    if os.geteuid() == 0:
        pytest.skip("root writes into a mode-0555 directory; the read-only filesystem case covers root")
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
    finally:
        out.chmod(0o755)
    _assert_refused_before_workload(capsys, rc, marker, str(out))


def test_a_file_where_the_output_directory_should_be_is_refused_before_the_workload(tmp_path, capsys):
    cfg, marker = _config(tmp_path)
    clash = tmp_path / "out"
    clash.write_text("not a directory")
    rc = main(["run", str(cfg), "--out", str(clash), "--no-progress"])
    _assert_refused_before_workload(capsys, rc, marker, str(clash))
    assert clash.read_text() == "not a directory"


def test_summary_json_that_is_a_directory_is_refused_before_the_workload(tmp_path, capsys):
    cfg, marker = _config(tmp_path)
    out = tmp_path / "out"
    (out / "summary.jsonl").mkdir(parents=True)
    rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
    _assert_refused_before_workload(capsys, rc, marker, "summary.jsonl", "a directory")


def test_full_disk_keeps_the_earlier_summary_and_leaves_no_temp_file(tmp_path, capsys):
    cfg, marker = _config(tmp_path, iterations=20_000)  # a trace far larger than the filesystem
    with _tmpfs(tmp_path / "small", "size=48k") as small:
        out = small / "out"
        out.mkdir()
        earlier = b'{"kind": "xpuprof-run-summary", "points": []}'
        (out / "summary.jsonl").write_bytes(earlier)
        rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
        captured = capsys.readouterr()
        assert rc == 1
        assert marker.exists()  # the check passes on a writable disk; the failure is found when it fills
        assert "Traceback" not in captured.err + captured.out
        assert "No space left on device" in captured.out + captured.err
        left = sorted(p.name for p in out.iterdir())
        assert not [n for n in left if n.endswith(".tmp")], left
        summary = (out / "summary.jsonl").read_bytes()
        # Either the earlier summary is intact or a complete new one was written: never a broken file.
        assert summary == earlier or json.loads(summary)["kind"] == "xpuprof-run-summary"


def test_full_disk_at_the_trace_keeps_the_measured_iterations_and_names_the_file(tmp_path, capsys):
    """The trace write hitting ENOSPC replaced the point's result: the summary showed Iters 0 (the
    measured iteration times dropped) and an error that named no file."""
    cfg, _marker = _config(tmp_path, iterations=20_000)  # a trace far larger than the filesystem
    with _tmpfs(tmp_path / "small", "size=48k") as small:
        out = small / "out"
        rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
        captured = capsys.readouterr()
        assert rc == 1 and "Traceback" not in captured.err + captured.out
        (point,) = json.loads((out / "summary.jsonl").read_text())["points"]  # written once the .tmp was removed
    assert point["iteration_time"]["count"] == 20_000, point["iteration_time"]
    assert point["traces"] == []
    assert point["error"].startswith(f"trace not written: cannot write {out}/") and \
        point["error"].endswith(".pt.trace.json: No space left on device"), point["error"]


def test_ranks_sharing_an_output_directory_keep_their_own_summaries(tmp_path, capsys, monkeypatch):
    """RANK=0 and RANK=1 writing to one --out replaced each other's summary.jsonl."""
    cfg, _marker = _config(tmp_path, iterations=2)
    out = tmp_path / "out"
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
        assert f"summary: {out / f'summary.rank{rank}.jsonl'}" in capsys.readouterr().out
    summaries = {p.name: json.loads(p.read_text()) for p in out.glob("summary*.jsonl")}
    assert set(summaries) == {"summary.rank0.jsonl", "summary.rank1.jsonl"}
    traces = set()
    for rank in (0, 1):
        (point,) = summaries[f"summary.rank{rank}.jsonl"]["points"]
        (trace,) = point["traces"]
        traces.add(trace)
        assert json.loads(Path(trace).read_text())["distributedInfo"]["rank"] == rank  # the rank is in the trace
    assert len(traces) == 2
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0  # no rank: the plain name
    assert (out / "summary.jsonl").exists()
