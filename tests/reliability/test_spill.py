"""The crash-safe copy of a recording (host/spill.py) in one process: every closed range is on file at once,
read back without the process's help, built into a trace marked truncated; the directory is private."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

import xpuprof
from xpuprof.host import recorder, spill
from xpuprof.ondemand import crashsafe

pytestmark = pytest.mark.skipif(not recorder.FAST_PATH, reason="the crash-safe copy lives in the C recorder's logs")


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    proc = spill.ProcessSpill(str(root))
    monkeypatch.setattr(spill, "_home", proc)
    yield proc
    monkeypatch.setattr(spill, "_home", None)


def test_every_closed_range_is_on_file_while_the_process_still_records(home, tmp_path):
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(20_000):
            with xpuprof.record_function(f"step {i % 7}", {"i": i} if i % 2 else None):
                pass
        xpuprof.instant("mark")
        rec = recorder.active_recorder()
        read = spill.SpilledRecorder(home.dfd, "c1")  # what a parent reads now, with no help from this process
        assert np.array_equal(read.ranges.array, recorder.log_array(rec.ranges))
        assert read.name_texts(range(len(read.name_ends) - 1)) == rec.name_texts(range(len(rec.names)))
        blob, ends = recorder.area_arrays(rec.args_area)
        assert np.array_equal(read.args_area.array, blob) and np.array_equal(read.args_area.ends.array[:, 0], ends)
        assert len(read.instants) == 1 and read.thread_names == rec.thread_names
        path = crashsafe.write_recovered(home.dfd, "c1", spill.process_facts(), str(tmp_path / "out"),
                                         "the process was killed by SIGKILL")
    trace = json.loads(path.read_text())
    assert trace["truncated"] == "the process was killed by SIGKILL"
    assert trace["crash_recovery"]["not_kept"] and "args_not_kept" not in trace["crash_recovery"]
    ranges = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert len(ranges) == 20_000 and sorted(e["args"]["i"] for e in ranges if "i" in e["args"])[:2] == [1, 3]
    assert {e["name"] for e in ranges} == {f"step {k}" for k in range(7)}
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "cpu_instant_event"] == ["mark"]
    # the profile's own trace, built at stop: the crash-safe copy is gone then
    assert not [n for n in os.listdir(home.dfd) if n.startswith("c1.")]
    own = json.loads(prof.export_chrome_trace(tmp_path / "own.json").read_text())
    assert "truncated" not in own


def test_the_ranges_open_now_are_on_file_and_leave_it_when_closed(home):
    outer = xpuprof.record_function("outer")
    with xpuprof.profile(activities=["cpu"]):
        outer.__enter__()
        with xpuprof.record_function("inner"):
            read = spill.SpilledRecorder(home.dfd, "c1")
            assert sorted(read.name_texts(read.truncated.array[:, 4].tolist())) == ["inner", "outer"]
        for _ in range(1000):  # rows are reused: the file holds as many rows as ranges were open at once
            with xpuprof.record_function("again"):
                pass
        read = spill.SpilledRecorder(home.dfd, "c1")
        assert read.name_texts(read.truncated.array[:, 4].tolist()) == ["outer"]
        end = read.last_ns() + 5
        assert read.close_open_at(end) == 1 and read.truncated.array[0, 1] == end
        assert (os.stat("c1.open", dir_fd=home.dfd).st_size - spill.HEADER_BYTES) // 40 <= 4096
        outer.__exit__(None, None, None)


def test_the_spill_is_bounded_by_the_recording_cap(home, monkeypatch):
    monkeypatch.setenv("XPUPROF_MAX_RECORD_BYTES", "512K")
    with xpuprof.profile(activities=["cpu"]):
        for _ in range(50_000):
            with xpuprof.record_function("step"):
                pass
        # the open ranges' rows are bounded by how many are open at once, not by the cap
        sizes = {n: os.stat(n, dir_fd=home.dfd).st_size for n in os.listdir(home.dfd)
                 if n.startswith("c") and n != "c1.open"}
    assert sum(sizes.values()) <= (512 << 10) + 16 * spill.HEADER_BYTES + 4096, sizes


def test_the_root_must_be_private_and_not_a_link(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(spill.SpillError, match="not private to this user"):
        spill.ProcessSpill(str(shared))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(private)
    with pytest.raises(spill.SpillError, match="spill directory"):
        spill.ProcessSpill(str(tmp_path / "link"))
    proc = spill.ProcessSpill(str(private))
    st = os.stat(proc.path)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE(os.stat("process.json", dir_fd=proc.dfd).st_mode) == 0o600
    proc.close(remove=True)
    assert not os.listdir(private)


def test_a_planted_file_is_never_written_through(home, tmp_path, caplog):
    """Files are created exclusively without following links: a name that exists means no crash-safe copy
    (said once), never a write through it; the recording goes on in memory."""
    target = tmp_path / "victim"
    target.write_text("keep")
    os.symlink(target, "c1.ranges", dir_fd=home.dfd)
    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("step"):
            pass
    assert os.readlink("c1.ranges", dir_fd=home.dfd) == str(target) and target.read_text() == "keep"
    assert "no crash-safe copy of this recording" in caplog.text
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"] == ["step"]


def test_damaged_files_read_as_what_they_still_hold(home, tmp_path):
    with xpuprof.profile(activities=["cpu"]):
        for _ in range(100):
            with xpuprof.record_function("step"):
                pass
        # a header claiming more rows than the file holds, and a file of garbage
        fd = os.open("c1.ranges", os.O_RDWR, dir_fd=home.dfd)
        os.pwrite(fd, (10**12).to_bytes(8, "little"), 16)
        os.close(fd)
        fd = os.open("c1.args.ends", os.O_RDWR, dir_fd=home.dfd)
        os.pwrite(fd, b"garbage!", 0)
        os.close(fd)
        read = spill.SpilledRecorder(home.dfd, "c1")
        assert 100 <= len(read.ranges) <= (os.stat("c1.ranges", dir_fd=home.dfd).st_size - 64) // 48
        assert len(read.args_area.ends) == 0
