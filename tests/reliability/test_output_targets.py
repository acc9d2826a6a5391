"""Writing an output never replaces what stands at the target unless it is a
regular file. Symlinks are followed (the link stays), character devices and FIFOs are written
directly, directories are refused with one clear error; regular files stay atomic."""
from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from xpuprof.outputs import OutputError, write_output_bytes
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

pytestmark = pytest.mark.slow


def _builder():
    b = TraceBuilder(pid=1)
    b.add_slice("work", 1_000_000_000, 5_000, 1, 1, cat="user_annotation")
    return b


def test_symlink_target_is_followed_and_the_link_kept(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_chrome_trace(_builder(), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["traceEvents"]
    assert not list(tmp_path.glob("*.tmp"))


def test_fifo_is_written_directly_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = {}

    def read():
        with open(fifo, "rb") as f:  # blocks until the writer opens the FIFO
            got["data"] = f.read()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    write_chrome_trace(_builder(), fifo)
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got["data"])["traceEvents"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a character device node needs root")
def test_character_device_is_not_replaced(tmp_path):
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null node of our own
    write_chrome_trace(_builder(), dev)
    write_output_bytes(dev, b"{}")
    assert stat.S_ISCHR(os.stat(dev).st_mode)


def test_directory_target_is_one_clear_error(tmp_path):
    with pytest.raises(OutputError, match=r"it is a directory"):
        write_chrome_trace(_builder(), tmp_path)


def test_regular_file_stays_atomic_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "summary.jsonl"
    target.write_text('{"valid": true}')

    class Boom(RuntimeError):
        pass

    import xpuprof.outputs as outputs

    real_open_output = outputs.open_output

    def failing_open_output(dest, *a, **k):  # the write fails once the temporary file exists
        f = real_open_output(dest, *a, **k)
        f.close()
        raise Boom("disk full")

    monkeypatch.setattr(outputs, "open_output", failing_open_output)
    with pytest.raises(Boom):
        write_output_bytes(target, b'{"new": 1}')
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"valid": True}
    assert not list(tmp_path.glob("*.tmp"))


def test_merge_output_through_a_symlink(tmp_path):
    from xpuprof.analysis.merge import merge_traces

    src = tmp_path / "src"
    src.mkdir()
    rank = src / "r.pt.trace.json"
    rank.write_text(json.dumps({"baseTimeNanoseconds": 0, "schemaVersion": 1,
                                "traceEvents": [{"ph": "i", "name": "x", "ts": 0, "pid": 0, "tid": 0}]}))
    real = tmp_path / "merged.json"
    link = tmp_path / "out.json"
    link.symlink_to(real)
    merge_traces([rank], link)
    assert link.is_symlink() and json.loads(real.read_text())["traceEvents"]


# ------------------------------------------------------------------ paths naming an open descriptor
# /dev/stdout, /dev/fd/N, /proc/self/fd/N: written through the descriptor, never reopened (a "wb" reopen
# truncates the file the shell opened with >>) and never renamed over (the link resolves to that file).

def _read_all(fd: int, got: dict) -> threading.Thread:
    def read():
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
        got["data"] = b"".join(chunks)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("form", ["/proc/self/fd/{fd}", "/dev/fd/{fd}", "/proc/{pid}/fd/{fd}"])
def test_a_pipe_named_by_its_descriptor_is_written_through_it(form):
    r, w = os.pipe()
    got: dict = {}
    reader = _read_all(r, got)
    try:
        write_chrome_trace(_builder(), form.format(fd=w, pid=os.getpid()))
        os.fstat(w)  # still open: the writer closed its own duplicate only
    finally:
        os.close(w)
    reader.join(timeout=60)
    os.close(r)
    assert json.loads(got["data"])["traceEvents"]


@pytest.mark.parametrize("writer", ["trace", "bytes"])
def test_appending_descriptor_keeps_what_the_file_held(tmp_path, writer):
    """``prog -o /dev/stdout >> log.txt``: the log keeps its lines and the output follows them."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"IMPORTANT\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        target = f"/dev/fd/{fd}"
        if writer == "trace":
            write_chrome_trace(_builder(), target)
        else:
            write_output_bytes(target, b'{"report": 1}\n')
    finally:
        os.close(fd)
    data = log.read_bytes()
    assert data.startswith(b"IMPORTANT\n"), data[:40]
    body = json.loads(data[len(b"IMPORTANT\n"):])
    assert body.get("traceEvents") or body == {"report": 1}
    assert stat.S_ISREG(os.stat(log).st_mode) and not list(tmp_path.glob("*.tmp"))


def test_descriptor_without_append_is_written_at_its_offset(tmp_path):
    """``prog -o /dev/stdout > out``: written where the descriptor stands (the shell already truncated)."""
    out = tmp_path / "out.txt"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, b"head\n")
        write_output_bytes(f"/proc/self/fd/{fd}", b"body\n")
        os.write(fd, b"tail\n")  # the offset moved on: the descriptor was shared, not reopened
    finally:
        os.close(fd)
    assert out.read_bytes() == b"head\nbody\ntail\n"


def test_read_only_or_closed_descriptor_is_one_clear_error(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("keep")
    fd = os.open(src, os.O_RDONLY)
    try:
        with pytest.raises(OutputError, match=r"open for reading only"):
            write_output_bytes(f"/dev/fd/{fd}", b"x")
    finally:
        os.close(fd)
    with pytest.raises(OutputError, match=r"not open in this process"):
        write_output_bytes(f"/dev/fd/{fd}", b"x")
    assert src.read_text() == "keep"


def test_another_process_file_descriptor_is_refused_and_kept(tmp_path):
    """/proc/<pid>/fd/N of another process naming a file: refused (reopening would overwrite it)."""
    import subprocess
    import sys

    log = tmp_path / "child.log"
    log.write_text("child wrote this\n")
    with open(log, "a") as out:
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                                 stdout=out)
    try:
        with pytest.raises(OutputError, match=r"another process's descriptor of a regular file"):
            write_output_bytes(f"/proc/{child.pid}/fd/1", b"x")
    finally:
        child.communicate(b"")
    assert log.read_text() == "child wrote this\n"


def _cli(tmp_path, *argv, stdout):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(xpuprof_root())),
                                                                     os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "xpuprof", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          cwd=tmp_path, env=env, timeout=300)


def xpuprof_root() -> str:
    import xpuprof

    return str(Path(xpuprof.__file__).resolve().parent.parent)


def _rank_traces(tmp_path):
    paths = []
    for rank in (0, 1):
        b = _builder()
        b.set_distributed_info({"rank": rank, "world_size": 2})
        b.add_slice("kern", 1_000_000_000 + rank, 7_000, 1, 2, cat="kernel")
        paths.append(str(write_chrome_trace(b, tmp_path / f"r{rank}.json")))
    return paths


def test_cli_outputs_to_dev_stdout_through_a_pipe(tmp_path):
    """``xpuprof merge … -o /dev/stdout | …`` and ``report -o /dev/stdout | …``: the stream holds the output."""
    import subprocess

    a, b = _rank_traces(tmp_path)
    merged = _cli(tmp_path, "merge", a, b, "-o", "/dev/stdout", stdout=subprocess.PIPE)
    assert merged.returncode == 0, merged.stderr.decode()
    assert json.loads(merged.stdout)["traceEvents"]  # the summary line went to stderr, not into the JSON
    report = _cli(tmp_path, "report", a, "--format", "csv", "-o", "/dev/stdout", stdout=subprocess.PIPE)
    assert report.returncode == 0, report.stderr.decode()
    assert report.stdout.decode().splitlines()[0].startswith("kernel,calls")


def test_cli_output_to_dev_stdout_appended_to_a_log(tmp_path):
    """``xpuprof report T -o /dev/stdout >> log.txt`` keeps the log's lines."""
    a, _ = _rank_traces(tmp_path)
    log = tmp_path / "log.txt"
    log.write_bytes(b"IMPORTANT\n")
    with open(log, "ab") as out:
        r = _cli(tmp_path, "report", a, "--format", "csv", "-o", "/dev/stdout", stdout=out)
    assert r.returncode == 0, r.stderr.decode()
    lines = log.read_text().splitlines()
    assert lines[0] == "IMPORTANT" and lines[1].startswith("kernel,calls"), lines[:3]


@pytest.mark.parametrize("command", ["merge", "report"])
@pytest.mark.parametrize("target", ["/dev/full", "a directory"])
def test_cli_unwritable_output_is_one_line(tmp_path, capsys, command, target):
    from xpuprof.cli import main

    a, b = _rank_traces(tmp_path)
    out = str(tmp_path) if target == "a directory" else target
    if target == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    rc = main([command, a, b, "-o", out] if command == "merge" else [command, a, "-o", out])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc != 0 and len(lines) == 1 and lines[0].startswith(f"xpuprof {command}: cannot write"), err
    assert ("No space left" in err) if target == "/dev/full" else ("is a directory" in err)
