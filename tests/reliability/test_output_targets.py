"""Issue 14 item 1: writing an output never replaces what stands at the target unless it is a
regular file. Symlinks are followed (the link stays), character devices and FIFOs are written
directly, directories are refused with one clear error; regular files stay atomic."""
from __future__ import annotations

import json
import os
import stat
import threading

import pytest

from xpuprof.trace.builder import TraceBuilder
from xpuprof.trace.chrome import write_chrome_trace
from xpuprof.trace.outputs import OutputError, write_output_bytes


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

    real_open = open

    def failing_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        if "w" in mode and str(path).endswith(".tmp"):
            f.close()
            raise Boom("disk full")
        return f

    import builtins
    monkeypatch.setattr(builtins, "open", failing_open)
    with pytest.raises(Boom):
        write_output_bytes(target, b'{"new": 1}')
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"valid": True}
    assert not list(tmp_path.glob("*.tmp"))


def test_merge_output_through_a_symlink(tmp_path):
    from xpuprof.analysis.merge import _write

    real = tmp_path / "merged.json"
    link = tmp_path / "out.json"
    link.symlink_to(real)
    _write(link, {"baseTimeNanoseconds": 0, "schemaVersion": 1}, [{"ph": "i", "name": "x", "ts": 0, "pid": 0, "tid": 0}])
    assert link.is_symlink() and json.loads(real.read_text())["traceEvents"]
