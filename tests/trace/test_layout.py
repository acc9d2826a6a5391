"""The layout pass (issue 38): every slice we write nests on its track, on a lane of its own when it must,
and every id is one every viewer keeps.

The rule on arrays (``trace.layout.lanes``) is checked against a brute-force definition and its C walks
against the Python copies; the pass on live traces (asyncio tasks, threads launching onto one device
stream, per-kernel metrics), on read tables, on the store, and its metadata.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import numpy as np
import pytest

import xpuprof
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder
from xpuprof.trace.ids import LANE_TID_FIRST, MAX_ID
from xpuprof.trace.layout import ORIGINAL_TID, lay_out
from xpuprof.trace.layout import lanes as L
from xpuprof.trace.layout.check import nesting_report, slice_multiset
from xpuprof.trace.read.kineto import read_trace
from xpuprof.trace.write.chrome import write_chrome_trace


def _nests(s, e) -> bool:
    """The definition: no two slices overlap partly (closed containment nests)."""
    return not any(s[i] < s[j] < e[i] < e[j] for i in range(len(s)) for j in range(len(s)))


@pytest.fixture(params=["C", "Python"])
def walks(request, monkeypatch):
    if request.param == "C" and L.native() is None:
        pytest.skip("xpuprof._native.lanes is not built (python setup.py build_ext --inplace)")
    if request.param == "Python":
        monkeypatch.setattr(L, "_c_walks", None)
    return request.param


def test_the_walks_agree_with_the_definition(walks):
    rng = np.random.default_rng(38)
    for _ in range(1500):
        n, t = int(rng.integers(1, 14)), int(rng.integers(1, 4))
        track, start = rng.integers(0, t, n), rng.integers(0, 20, n)
        end = start + rng.integers(0, 8, n)  # zero-length slices and shared bounds included
        order, offsets, nests = L.walk(track, start, end)
        for k in range(len(nests)):
            rows = order[offsets[k]:offsets[k + 1]]
            assert sorted(rows.tolist()) == np.flatnonzero(track == k).tolist()
            assert nests[k] == _nests(start[rows], end[rows])
            assert not L.spilled(track, start, end)[rows].any() if nests[k] else L.spilled(track, start, end)[rows].any()
        lane, lanes = L.plan_lanes(track, start, end, rng.integers(0, 3, n), rng.integers(0, 2, n))
        for k in np.unique(track).tolist():
            if nests[k]:
                assert not lane[track == k].any()  # a track that nests is left as it is
            for number in np.unique(lane[track == k]).tolist():
                rows = (track == k) & (lane == number)
                assert _nests(start[rows], end[rows])
        assert sum(ln.slices for ln in lanes) == int((lane > 0).sum())


def test_the_c_walks_equal_the_python_copies():
    if L.native() is None:
        pytest.skip("xpuprof._native.lanes is not built")
    rng = np.random.default_rng(7)
    for _ in range(1000):
        n = int(rng.integers(1, 60))
        s = np.sort(rng.integers(0, 100, n))
        e = s + rng.integers(0, 25, n)
        o = np.lexsort((-e, s))
        s, e = s[o], e[o]
        got, used = L.stack_lanes(s, e)
        want, want_used = L.stack_lanes_py(s.tolist(), e.tolist())
        assert (got.tolist(), used) == (want, want_used)
        assert (L.keep_track(s, e) == L.keep_track_py(s.tolist(), e.tolist())).all()
        assert (L.spilled_in_order(s, e) == L.spilled_py(s, e)).all()


def test_flow_ends_bind_to_the_innermost_slice_by_the_definition():
    """A flow end whose id names no slice binds to the innermost slice around it: the latest start, then the
    shortest, then the first row. Checked against that definition on random tracks (ties of start and end
    included); the search no longer scans the track once per flow end (quadratic: minutes at 1 M slices)."""
    import types

    from xpuprof.trace.layout.apply import bind_flows, last_at_least

    rng = np.random.default_rng(11)
    for trial in range(200):
        n, m = int(rng.integers(1, 300)), int(rng.integers(1, 150))
        s = rng.integers(0, 1000, n) // (40 if trial % 2 else 1)
        e = s + rng.integers(0, 200, n) // (40 if trial % 2 else 1)
        lane = rng.integers(0, 5, n).astype(np.int32)
        rows = types.SimpleNamespace(track=np.zeros(n, np.int64), start=s, end=e, klass=np.zeros(n, np.int64),
                                     correlation=np.full(n, -1))
        q = rng.integers(-5, 1300, m) // (40 if trial % 2 else 1)
        got = bind_flows(rows, lane, np.zeros(m, np.int64), q, np.full(m, 7), np.array([0]))
        for i in range(m):
            around = [j for j in range(n) if s[j] <= q[i] <= e[j]]
            want = min(around, key=lambda j: (-s[j], e[j], j)) if around else None
            assert got[i] == (lane[want] if want is not None else 0), (trial, i)
    values = rng.integers(0, 50, 5000)
    upto, floor = rng.integers(0, 5001, 700), rng.integers(0, 55, 700)
    want = [max((p for p in range(u) if values[p] >= f), default=-1) for u, f in zip(upto, floor)]
    assert last_at_least(values, upto, floor).tolist() == want


def test_a_range_child_follows_its_range_to_its_lane():
    """Two tasks' ranges cross on one thread: the side that moves fewer slices leaves (task A and its inner
    range, 2, against task B and the 2 it holds): A's inner range goes where A went; a range inside both goes
    under the one that began last."""
    start = np.array([0, 1, 5, 6, 30])  # task A [0, 100] + child [1, 90]; task B [5, 200] + child [6, 190]
    end = np.array([100, 90, 200, 190, 40])  # ... and B's second child [30, 40], inside A's child too
    lane, lanes = L.plan_lanes(np.zeros(5, np.int64), start, end)
    assert lane.tolist() == [1, 1, 0, 0, 0] and [ln.slices for ln in lanes] == [2]


def test_a_short_range_across_a_long_one_leaves_not_the_long_one():
    """A prefetch range entered before a step's forward and left inside it: the prefetch goes to a lane, the
    forward and its ops stay on the thread (HTA's critical path reads them there)."""
    start = np.array([0, 5, 10, 20, 40])  # step [0, 1000], prefetch [5, 60], forward [10, 500] + ops
    end = np.array([1000, 60, 500, 30, 50])
    lane, lanes = L.plan_lanes(np.zeros(5, np.int64), start, end)
    assert lane.tolist() == [0, 1, 0, 0, 0] and [ln.slices for ln in lanes] == [1]


# ----------------------------------------------------------------------------- asyncio tasks, live
def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


async def _task(i: int) -> None:
    with xpuprof.record_function(f"task{i}"):
        for k in range(2):
            with xpuprof.record_function(f"task{i}.step{k}"):
                _spin(5_000)
                await asyncio.sleep(0.0002 * (i % 3))


def _asyncio_profile(tasks: int = 20, **kw):
    async def main():
        await asyncio.gather(*(_task(i) for i in range(tasks)))

    with xpuprof.profile(**kw) as prof:
        asyncio.run(main())
    return prof


def test_asyncio_task_ranges_are_laid_out_on_lanes(tmp_path):
    prof = _asyncio_profile(activities=["cpu"])
    before = nesting_report(prof.builder)
    assert before.improper > 20, before  # the tasks' ranges interleave on the thread's one row
    path = prof.export_chrome_trace(tmp_path / "a.pt.trace.json")
    assert nesting_report(path).improper == 0
    assert slice_multiset(path) == slice_multiset(prof.builder)  # every slice is there, at its time
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    host_tid = next(e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
                    and "(MainThread)" in e["args"]["name"] and " \u00b7 lane " not in e["args"]["name"])
    real = {e["tid"] for e in events if e.get("ph") in ("X", "i", "C") and ORIGINAL_TID not in e.get("args", {})}
    moved = [e for e in events if e.get("ph") == "X" and ORIGINAL_TID in e.get("args", {})]
    assert moved and {e["args"][ORIGINAL_TID] for e in moved} == {host_tid}
    lanes = {e["tid"] for e in moved}
    assert not lanes & real and all(LANE_TID_FIRST <= t <= MAX_ID for t in lanes)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    sorts = {e["tid"]: e["args"]["sort_index"] for e in events if e.get("ph") == "M" and e["name"] == "thread_sort_index"}
    assert all(names[t].startswith(names[host_tid] + " \u00b7 lane ") for t in lanes)
    assert {sorts[t] for t in lanes} == {sorts[host_tid]}  # drawn beside their thread
    meta = data["laneLayout"]
    assert meta["moved_slices"] == len(moved) == sum(d["slices"] for d in meta["lanes"])
    assert {d["lane_tid"] for d in meta["lanes"]} == lanes and {d["tid"] for d in meta["lanes"]} == {host_tid}
    # a range entered right after its task's (no await between) goes where its task's range went: a task's
    # range that left the thread takes it along (a later task's range that crossed only the inner one may
    # move it off a task that stays; the second step, entered after an await, may go under another task's
    # range that began since: the trace does not say whose it is)
    rows = {e["name"]: e["tid"] for e in events if e.get("ph") == "X"}
    assert all(rows[f"task{i}.step0"] == rows[f"task{i}"] for i in range(20) if rows[f"task{i}"] != host_tid)
    assert sum(rows[f"task{i}"] != host_tid for i in range(20)) >= 10


def test_launch_arrows_follow_their_calls_to_the_lanes(tmp_path):
    """Tasks launching onto the sim device: each ac2g arrow starts on the row its launch call is drawn on."""
    prof = _asyncio_profile(8, activities=["cpu", "xpu"], backends=["sim"])
    path = prof.export_chrome_trace(tmp_path / "a.pt.trace.json")
    assert nesting_report(path).improper == 0
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    calls = {(e["args"]["correlation"]): e for e in events if e.get("ph") == "X" and e.get("cat") == "xpu_runtime"
             and "correlation" in e.get("args", {})}
    starts = [e for e in events if e.get("ph") == "s"]
    assert starts and data["laneLayout"]["flow_ends_moved"] > 0
    for s in starts:
        call = calls[s["id"]]
        assert (s["pid"], s["tid"]) == (call["pid"], call["tid"])
        assert call["ts"] <= s["ts"] <= call["ts"] + call["dur"]


# ----------------------------------------------------------------------------- device rows
def _device_builder() -> TraceBuilder:
    """One stream: kernels back to back (their metric slices overlap the next kernel's), launched by two host
    threads whose ranges' device annotations overlap each other."""
    b = TraceBuilder(pid=50)
    t0 = BASE_TIME_NS + 10**9
    n = 12
    start = t0 + np.arange(n, dtype=np.int64) * 10_000  # back to back: each kernel ends where the next starts
    end = start + 10_000
    thread = np.arange(n) % 2  # threads 501 and 502 alternate on the stream
    ext = np.where(thread == 0, 1 + np.arange(n) // 4, 100 + np.arange(n) // 4)  # 4 kernels per host range
    corr = np.arange(1, n + 1)
    for th, tid in ((0, 501), (1, 502)):
        rows = np.flatnonzero(thread == th)
        for r in range(0, len(rows), 2):
            e = int(ext[rows[r]])
            lo, hi = int(start[rows[r]]) - 3_000, int(end[rows[min(r + 1, len(rows) - 1)]])
            b.add_slice(f"range{e}", lo, hi - lo, 50, tid, cat="user_annotation", external_id=e)
        b.add_slices(names=["urEnqueueKernelLaunch"] * len(rows), ts=start[rows] - 2_500, dur=1_000, pid=50, tid=tid,
                     cat="runtime", vendor="xpu", external_id=ext[rows], args={"correlation": corr[rows]})
        b.add_flows(flow_ids=corr[rows], ts=start[rows] - 2_500, pid=50, tid=tid, start=True)
    b.add_slices(names=[f"kernel{i}" for i in range(n)], ts=start, dur=end - start, pid=0, tid=7, cat="kernel",
                 vendor="xpu", external_id=ext, args={"correlation": corr, "stream": np.full(n, 7)})
    b.add_flows(flow_ids=corr, ts=start, pid=0, tid=7, start=False)
    b.add_per_kernel_metrics(kernel_names=[f"kernel{i}" for i in range(n)], start_ns=start, end_ns=end, pid=0, tid=7,
                             metrics={"GpuTime": (end - start).astype(float)}, units={"GpuTime": "ns"})
    from xpuprof.trace.builder.gpu_annotations import add_gpu_user_annotations

    add_gpu_user_annotations(b)
    b.set_thread_name(0, 7, "stream 7")
    b.set_window(t0 - 10_000, int(end[-1]) + 10_000)
    return b


def test_device_annotations_and_metrics_go_to_lanes_of_their_own_and_kernels_stay(tmp_path):
    b = _device_builder()
    before = nesting_report(b)
    assert before.improper > 0 and set(before.tracks) == {(0, 0, 7)}, before
    path = write_chrome_trace(b, tmp_path / "d.pt.trace.json")
    assert nesting_report(path).improper == 0
    assert slice_multiset(path) == slice_multiset(b)
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
             and e["pid"] == 0}
    rows = Counter((e["cat"], names.get(e["tid"])) for e in events if e.get("ph") == "X" and e["pid"] == 0)
    assert rows[("kernel", "stream 7")] == 12  # every kernel on its stream's row (TensorBoard, HTA read them there)
    # all metric slices on rows of their own; back to back, each overlaps the next by 2 ns: two rows, alternating
    assert rows[("xpu_scope_profiler", "stream 7 \u00b7 metrics")] == rows[("xpu_scope_profiler", "stream 7 \u00b7 metrics 2")] == 6
    ann = {name for (cat, name), n in rows.items() if cat == "gpu_user_annotation"}
    assert "stream 7 \u00b7 annotations of thread 502" in ann or "stream 7 \u00b7 annotations of thread 501" in ann
    moved = [e for e in events if e.get("ph") == "X" and ORIGINAL_TID in e.get("args", {})]
    assert {e["args"][ORIGINAL_TID] for e in moved} == {7} and all(e["cat"] != "kernel" for e in moved)
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    for f in (e for e in events if e.get("ph") == "f"):  # the arrows still end at their kernels
        assert (f["pid"], f["tid"], f["ts"]) == (0, 7, kernels[f["id"]]["ts"])
    holds = {d["holds"] for d in data["laneLayout"]["lanes"]}
    assert holds == {"device annotations", "per-kernel metrics"}


# ----------------------------------------------------------------------------- ids, read tables, the store
def test_ids_outside_32_bits_get_free_ones_and_the_trace_says_which(tmp_path):
    b = TraceBuilder(pid=1)
    t0 = BASE_TIME_NS + 10**9
    b.add_slice("sync", t0, 100, -1, 0, cat="xpu_sync")  # Kineto's pid for XPU sync rows
    b.add_slice("op", t0, 100, 1, 2**40 + 3, cat="cpu_op")  # a 64-bit thread handle as tid
    b.add_slice("op", t0 + 500, 100, 1, 2**40 + 3, cat="cpu_op")
    b.add_slice("far", t0, 100, 2**33, 5, cat="cpu_op")
    b.set_process_name(-1, "XPU Sync and Overhead")
    b.set_thread_name(1, 2**40 + 3, "worker")
    path = write_chrome_trace(b, tmp_path / "i.pt.trace.json")
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    for e in events:
        for key in ("pid", "tid"):
            if isinstance(e.get(key), int):
                assert 0 <= e[key] <= MAX_ID, e
    pids = dict(map(tuple, data["idMap"]["pids"]))
    assert pids[-1] == 0x7FFFFFFE and pids[2**33] not in (0x7FFFFFFE, 1)
    ((pid, old, new),) = data["idMap"]["tids"]
    assert (pid, old) == (1, 2**40 + 3) and {e["tid"] for e in events if e.get("name") == "op"} == {new}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and "name" in e["args"]}
    assert names[(0x7FFFFFFE, 0)] == "XPU Sync and Overhead" and names[(1, new)] == "worker"


def _overlapping_kineto_json(path, *, tasks: int = 6) -> None:
    """A torch.profiler-shaped trace whose thread holds interleaving ranges (as torch writes asyncio tasks)."""
    events = [{"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {"name": "thread 9 (MainThread)"}}]
    for i in range(tasks):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"task{i}", "pid": 9, "tid": 9,
                       "ts": 100.0 + 10 * i, "dur": 200.0, "args": {"External id": i + 1}})
        events.append({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 9, "tid": 9, "ts": 101.5 + 10 * i,
                       "dur": 190.0, "args": {"External id": 100 + i}})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def test_a_read_trace_is_laid_out_and_laying_out_again_moves_nothing(tmp_path):
    src = tmp_path / "torch.json"
    _overlapping_kineto_json(src)
    table = read_trace(src)
    assert nesting_report(table).improper == 10
    out = write_chrome_trace(table, tmp_path / "laid.json")
    assert nesting_report(out).improper == 0 and slice_multiset(out) == slice_multiset(src)
    again = lay_out(read_trace(out))
    assert again.layout.moved == 0 and not again.layout.ids
    second = write_chrome_trace(read_trace(out), tmp_path / "again.json")
    assert json.loads(second.read_text())["traceEvents"] == json.loads(out.read_text())["traceEvents"]


def test_the_store_holds_the_laid_out_rows(tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.write.parquet import write_store

    prof = _asyncio_profile(6, activities=["cpu"])
    write_store(prof.builder, tmp_path / "s")
    got = read_store(tmp_path / "s")
    assert nesting_report(got).improper == 0 and nesting_report(prof.builder).improper > 0
    assert slice_multiset(got) == slice_multiset(prof.builder)
    assert "laneLayout" in got.traces[0].header


def test_a_trace_that_nests_is_written_as_it_was(tmp_path):
    """No lane, no metadata key, the same table: the pass costs nothing visible on a trace that nests."""
    b = TraceBuilder(pid=3)
    t0 = BASE_TIME_NS + 10**9
    b.add_slice("outer", t0, 1_000, 3, 3)
    b.add_slice("inner", t0 + 10, 100, 3, 3)
    table = b.freeze()
    assert lay_out(table) is table and table.layout.moved == 0
    data = json.loads(write_chrome_trace(b, tmp_path / "n.json").read_text())
    assert "laneLayout" not in data and "idMap" not in data


def test_tid_0_beside_a_tid_equal_to_its_pid_gets_a_tid_of_its_own(tmp_path):
    """Perfetto draws tid 0 as the process's own thread (tid = pid): device 2's streams 0 and 2 would be one."""
    b = TraceBuilder(pid=1)
    t0 = BASE_TIME_NS + 10**9
    b.add_slice("k0", t0, 100, 2, 0, cat="kernel")
    b.add_slice("k2", t0 + 50, 100, 2, 2, cat="kernel")
    b.add_counter("mem", t0, {"bytes": 1.0}, 2, 0)
    b.set_process_name(2, "GPU 2")
    b.set_thread_name(2, 0, "stream 0")
    b.set_thread_name(2, 2, "stream 2")
    data = json.loads(write_chrome_trace(b, tmp_path / "z.json").read_text())
    ((pid, old, new),) = data["idMap"]["tids"]
    assert (pid, old) == (2, 0) and LANE_TID_FIRST <= new <= MAX_ID
    rows = {e["name"]: e["tid"] for e in data["traceEvents"] if e.get("ph") in ("X", "C")}
    assert rows == {"k0": new, "k2": 2, "mem": 0}  # a counter is the process's: its row stays
    meta = {(e["name"], e["tid"]): e["args"] for e in data["traceEvents"] if e.get("ph") == "M" and e["pid"] == 2}
    assert meta[("thread_name", new)] == {"name": "stream 0"} and ("process_name", 0) in meta  # process rows keep tid 0


def test_small_segments_get_the_track_codes_the_factorizer_gives():
    """TrackCodes.of_rows finds a small segment's tracks in Python (merge's 1,000 small ranks): the same codes,
    new tracks met in the same order, as the factorized path, for ints, labels, events without a pid, negative
    and wide ids (a wide column falls back to the factorizer)."""
    from xpuprof.trace.layout.tracks import SMALL_SEGMENT_ROWS, TrackCodes, Where

    rng = np.random.default_rng(7)
    pools = [np.array([0, 1, 7, 4242, 4243]), np.array([-5, 3, 1 << 40, -(1 << 62)]), np.array([2, 3])]
    fallbacks = 0
    for case in range(300):
        n = int(rng.integers(2, SMALL_SEGMENT_ROWS + 1))
        pid = rng.choice(pools[case % 3], n).astype(np.int64)
        tid = rng.choice(pools[(case + 1) % 3], n).astype(np.int64)
        pid_label = rng.choice(np.array([-1, -1, 0, 1, -2], np.int32), n) if case % 4 else np.full(n, -1, np.int32)
        tid_label = rng.choice(np.array([-1, -1, -1, 1], np.int32), n)
        w = Where(pid, pid_label, tid, tid_label, ["Spans", "PyTorch Profiler"])
        fast, slow = TrackCodes(), TrackCodes()
        fast.code((9, "seen", "before")), slow.code((9, "seen", "before"))
        got = fast.of_rows(case, w)
        cols = [pid, pid_label.astype(np.int64), tid, tid_label.astype(np.int64)]
        want = slow._factorized(case, w, cols, [c for c in cols if len(set(c.tolist())) > 1])
        fallbacks += fast._few_rows(case, w, cols, [c for c in cols if len(set(c.tolist())) > 1]) is None
        assert got.tolist() == want.tolist() and fast.keys == slow.keys, case
    assert 0 < fallbacks < 300  # both paths were taken


def test_a_metadata_pid_past_int64_is_remapped_without_an_overflow(tmp_path, capsys):
    """A metadata row may name a pid no int64 holds (JSON allows any integer; found by the hostile-trace fuzz
    through ``merge``): the layout gives it a free id like any out-of-range pid - it raised OverflowError
    building the rows' lookup of int64 pids, which no row can match - and merge/convert succeed."""
    from xpuprof.cli import main
    from xpuprof.trace.layout.layout import lay_out
    from xpuprof.trace.read.kineto import read_document

    big = 1 << 63
    doc = {"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 5, "tid": 1},
                           {"ph": "M", "name": "process_name", "pid": big, "args": {"name": "p"}}]}
    out = lay_out(read_document(doc))
    assert big in out.layout.ids[0]["pid"] and len(out.columns("slices")) == 1
    t = tmp_path / "t.json"
    t.write_text(json.dumps(doc))
    assert main(["merge", str(t), str(t), "-o", str(tmp_path / "m.json")]) == 0, capsys.readouterr().err
    assert main(["convert", str(t), "-o", str(tmp_path / "s.store")]) == 0, capsys.readouterr().err
