"""Outputs shared with other writers and other users: every writer's temporary file is its own
(created exclusively, never through a symlink, in the target's directory), concurrent writers to one
path end with one complete file from one of them, and re-writing a file keeps who may read it."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof import outputs
from xpuprof.outputs import OutputError, open_output, output_file, write_output_bytes

REPO = Path(__file__).resolve().parents[2]
OTHER_UID = 65534  # nobody


def _builder(name: str = "work") -> TraceBuilder:
    b = TraceBuilder(pid=1)
    b.add_slice(name, 1_000_000_000, 5_000, 1, 1, cat="user_annotation")
    return b


def _names(trace_path: Path) -> set[str]:
    return {e["name"] for e in json.loads(trace_path.read_text())["traceEvents"] if e.get("ph") == "X"}


def test_a_writer_that_starts_while_another_writes_leaves_one_complete_file(tmp_path):
    """Writer A opens its file and writes half; writer B writes the whole path; A finishes. The path
    holds one writer's complete document, and both writers succeed."""
    out = tmp_path / "out.json"
    with output_file(out) as dest_a:
        with open_output(dest_a) as fa:
            fa.write(b'{"writer": "A", "pad": "')
            write_output_bytes(out, b'{"writer": "B"}')
            fa.write(b'aaaa"}')
    assert json.loads(out.read_text()) in ({"writer": "A", "pad": "aaaa"}, {"writer": "B"})
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("what", ["trace", "summary"])
def test_concurrent_processes_writing_one_path_end_with_one_writers_file(tmp_path, what):
    """Two processes exporting to one path, many times each: every read is one complete document."""
    out = tmp_path / ("trace.json" if what == "trace" else "summary.jsonl")
    child = r"""
import json, sys
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.outputs import write_output_bytes
who, out, what = sys.argv[1], sys.argv[2], sys.argv[3]
for i in range(25):
    if what == "trace":
        b = TraceBuilder(pid=1)
        for j in range(2000):
            b.add_slice(f"{who}", 1_000_000_000 + j * 10, 5, 1, 1, cat="user_annotation")
        write_chrome_trace(b, out)
    else:
        write_output_bytes(out, (json.dumps({"writer": who, "points": [who * 50] * 2000}) + "\n").encode())
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", child, who, str(out), what], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for who in ("A", "B")]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (so, se) in zip(procs, results):
        assert p.returncode == 0 and so.strip() == b"ok", se.decode()[-2000:]
    if what == "trace":
        assert len(_names(out)) == 1  # one writer's events, never a mix
    else:
        doc = json.loads(out.read_text())
        assert {doc["writer"]} == set(p[0] for p in doc["points"])
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("write", ["trace", "bytes"])
def test_a_symlink_planted_at_the_old_temporary_name_is_never_followed(tmp_path, write):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out.json"
    planted = tmp_path / "out.json.tmp"
    planted.symlink_to(victim)
    if write == "trace":
        write_chrome_trace(_builder(), out)
        assert _names(out) == {"work"}
    else:
        write_output_bytes(out, b'{"a": 1}')
        assert json.loads(out.read_text()) == {"a": 1}
    assert victim.read_text() == "precious"
    assert stat.S_ISREG(os.lstat(out).st_mode)  # the output is a file, not the planted link moved into place
    assert planted.is_symlink() and os.readlink(planted) == str(victim)  # left where it was


def test_a_users_own_file_at_the_old_temporary_name_is_kept(tmp_path):
    mine = tmp_path / "out.json.tmp"
    mine.write_text("my notes")
    write_chrome_trace(_builder(), tmp_path / "out.json")
    assert mine.read_text() == "my notes"


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o604])
@pytest.mark.parametrize("write", ["trace", "bytes"])
def test_rewriting_a_file_keeps_its_permission_bits(tmp_path, mode, write):
    out = tmp_path / "private.json"
    out.write_text("{}")
    out.chmod(mode)
    if write == "trace":
        write_chrome_trace(_builder(), out)
    else:
        write_output_bytes(out, b'{"b": 2}')
    assert stat.S_IMODE(os.stat(out).st_mode) == mode


def test_a_new_file_follows_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        write_output_bytes(tmp_path / "new.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == 0o600


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="keeping another user's ownership needs root (chown of the new file)")
def test_root_rewriting_another_users_file_keeps_its_owner(tmp_path):
    out = tmp_path / "theirs.json"
    out.write_text("{}")
    os.chown(out, OTHER_UID, OTHER_UID)
    out.chmod(0o640)
    write_chrome_trace(_builder(), out)
    st = os.stat(out)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_UID, 0o640)
    assert _names(out) == {"work"}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="planting a link owned by another user needs root (lchown)")
def test_a_symlink_owned_by_another_user_at_the_output_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    os.lchown(link, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match=r"symbolic link owned by another user \(uid 65534\)"):
        write_chrome_trace(_builder(), link)
    with pytest.raises(OutputError, match=r"uid 65534"):
        write_output_bytes(link, b"x")
    assert victim.read_text() == "precious" and link.is_symlink()


def test_an_own_symlink_is_still_followed(tmp_path):
    real = tmp_path / "real.json"
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_output_bytes(link, b'{"c": 3}')
    assert link.is_symlink() and json.loads(real.read_text()) == {"c": 3}


def test_a_temporary_file_that_cannot_be_made_is_named_as_the_output(tmp_path, monkeypatch):
    import errno

    import xpuprof.outputs as outputs
    from xpuprof.outputs import write_error_line

    real_open = os.open

    def refusing_open(path, flags, *a, **k):  # a directory this user may not write (root may write any)
        if flags & os.O_EXCL:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(outputs.os, "open", refusing_open)
    target = tmp_path / "out.json"
    with pytest.raises(OSError) as info:
        write_output_bytes(target, b"x")
    assert write_error_line(target, info.value) == f"cannot write {target}: Permission denied"
    assert not target.exists() and not list(tmp_path.iterdir())


# A second SIGINT/SIGTERM raises ``RunInterrupted`` (a BaseException) from the signal handler wherever the main
# thread stands: inside the atomic write's own steps too. CI once found a trace's ``*.tmp`` left behind.
class _Interrupt(BaseException):
    pass


def _raise_interrupt(*_a, **_k):
    raise _Interrupt()


@pytest.mark.parametrize("step", ["replace", "stat"])
def test_an_interrupt_in_the_final_rename_leaves_no_temporary_file(tmp_path, monkeypatch, step):
    target = tmp_path / "out.json"
    real = getattr(os, step)

    def interrupted(*a, **k):
        if step == "stat" and (not a or a[0] != target.name or not list(tmp_path.glob("*.tmp"))):
            return real(*a, **k)  # not the final check (the first one runs before the temporary file exists)
        raise _Interrupt()

    monkeypatch.setattr(os, step, interrupted)
    with pytest.raises(_Interrupt):
        write_output_bytes(target, b"{}")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupt_while_the_temporary_file_is_prepared_leaves_none(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_bytes(b"old")  # over an existing file the temporary one takes its mode: a step after the open
    monkeypatch.setattr(outputs, "_keep_owner_and_mode", _raise_interrupt)
    with pytest.raises(_Interrupt):
        write_output_bytes(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"] and target.read_bytes() == b"old"


def test_an_interrupt_while_an_inline_sink_releases_a_chunk_does_not_hang_the_abort(tmp_path):
    """One CPU: the sink writes on the caller's thread; an interrupt there must not leave abort() waiting for
    a chunk no thread will ever finish."""
    import threading

    from xpuprof.trace.write.sinks import ChunkSink

    with open(tmp_path / "f", "wb") as f:
        sink = ChunkSink(f.fileno(), threads=1)
        aborted = threading.Event()
        original_deliver = sink._deliver

        def deliver(seq, payload, release):
            original_deliver(seq, payload, _raise_interrupt)

        sink._deliver = deliver
        with pytest.raises(_Interrupt):
            sink.put(b"data")

        def abort():
            sink.abort()
            aborted.set()

        t = threading.Thread(target=abort, daemon=True)
        t.start()
        t.join(timeout=30)  # a bound on a hang, not a synchronisation: abort() returns at once when right
        assert aborted.is_set(), "ChunkSink.abort() waits for a chunk the interrupted caller never finished"
