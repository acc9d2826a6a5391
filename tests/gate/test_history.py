"""The run history directory: one file per run, safe for concurrent writers, a retention rule, only the
owner's regular files read, and a directory that is not a history refused before anything is written."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import orjson
import pytest

from xpuprof.analysis.history import MARKER, History, HistoryError, HistoryRun, KernelRecord
from xpuprof.analysis.samples import SampleStats

KEY = {"config_hash": "c0ffee", "device": "cpu", "machine": "m1"}


def _run(t: float = 1.7e9, key=KEY, *, n: int = 5) -> HistoryRun:
    stats = SampleStats.of([1000 + i for i in range(n)])
    return HistoryRun(dict(key), {"k n=1": KernelRecord("k n=1", "kernel", stats, {"XVE_STALL": 12.5})},
                      {"name": "t"}, {"id": key["machine"]}, None, "test", t)


def test_a_run_round_trips_through_its_file(tmp_path):
    h = History(tmp_path / "h")
    path = h.append(_run(n=600))  # more calls than the samples kept: the summary is the sketch
    data = orjson.loads(path.read_bytes())
    assert data["kind"] == "xpuprof-history-run" and data["series"] == path.parent.name
    assert data["kernels"][0]["identity"] == {"base": "k", "params": {"n": "1"}} and "samples_ns" not in data["kernels"][0]
    got = h.read(path.parent.name)
    (run,) = got.runs
    assert got.skipped == [] and got.total == 1
    assert run.kernels["k n=1"].stats == _run(n=600).kernels["k n=1"].stats
    assert run.kernels["k n=1"].metrics == {"XVE_STALL": 12.5} and run.key == KEY
    assert (tmp_path / "h" / MARKER).is_file()


def _append_many(root: str, count: int, start, worker: int) -> None:
    start.wait()
    h = History(root)
    for i in range(count):
        h.append(_run(1.7e9 + worker * 1000 + i))


def test_two_processes_appending_50_runs_each_leave_100_readable_runs(tmp_path):
    root = tmp_path / "h"
    History(root).ensure()
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_append_many, args=(str(root), 50, start, w)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    h = History(root)
    (series,) = h.series_ids()
    got = h.read(series)
    assert len(got.runs) == 100 and got.skipped == [] and got.total == 100
    assert len({r.run_id for r in got.runs}) == 100
    assert not [n for n in os.listdir(root / series) if n.startswith(".") or n.endswith(".tmp")]


def test_retention_keeps_the_newest_runs_of_each_series(tmp_path):
    h = History(tmp_path / "h")
    for i in range(7):
        h.append(_run(1.7e9 + i), keep=5)
    other = h.append(_run(1.6e9, {**KEY, "machine": "m2"}), keep=5)
    series = h.find(KEY)
    got = h.read(series)
    assert [r.time for r in got.runs] == [1.7e9 + i for i in range(2, 7)]
    assert h.read(other.parent.name).total == 1  # another series is not pruned by this one
    assert [r.time for r in h.read(series, window=2).runs] == [1.7e9 + 5, 1.7e9 + 6]


def test_links_foreign_and_broken_files_are_skipped_and_said(tmp_path):
    h = History(tmp_path / "h")
    path = h.append(_run())
    d = path.parent
    (d / "20260101T000000.000000Z-host-1-deadbeef.json").write_text('{"kind": "something else"}')
    (d / "20260101T000000.000001Z-host-1-deadbeee.json").write_text("{not json")
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_bytes(path.read_bytes())
    os.symlink(elsewhere, d / "20260101T000000.000002Z-host-1-deadbeed.json")
    (d / "notes.txt").write_text("ignored: not a run file name")
    got = h.read(d.name)
    assert len(got.runs) == 1
    assert len(got.skipped) == 3 and all("skipped" in s for s in got.skipped)
    assert any("not a history run" in s for s in got.skipped)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_a_run_file_owned_by_another_user_is_not_read(tmp_path):
    h = History(tmp_path / "h")
    path = h.append(_run())
    os.chown(path, 12345, 12345)
    got = h.read(path.parent.name)
    assert got.runs == [] and "owned by uid 12345" in got.skipped[0]


def test_a_directory_that_is_not_a_history_is_refused(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(HistoryError, match="not an xpuprof history"):
        History(tmp_path / "mine").ensure()
    with pytest.raises(HistoryError, match="no such history directory"):
        History(tmp_path / "absent").check_readable()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / MARKER).write_text('{"format": "xpuprof-history", "version": 99}')
    with pytest.raises(HistoryError, match="version 99"):
        History(tmp_path / "old").check_readable()
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]


def test_runs_are_readable_with_the_standard_library_alone(tmp_path):
    """No pyarrow, no numpy: a history is JSON files (json.loads reads each)."""
    import json

    path = History(tmp_path / "h").append(_run())
    data = json.loads(Path(path).read_text())
    assert data["kernels"][0]["samples_ns"] == [1000, 1001, 1002, 1003, 1004]
