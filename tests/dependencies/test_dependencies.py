"""The shared inter-stream dependency resolver, once per vendor naming (cuda, hip, xpu)."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.backends.dependencies import DEPENDENCY_FLOW_BASE, DependencyError, DependencyResolver
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

VENDORS = ["cuda", "hip", "xpu"]


def _events(builder):
    return [e for chunk in iter_event_chunks(builder) for e in chunk]


def _emit_waits(builder, dep, *, handles, corr, ts, pid, tid, kinds, event_based):
    """What a backend does for a batch of syncs: one slice each with the wait args, plus arrows."""
    res = dep.resolve(handles, corr)
    args = {dep.sync_kind_arg: list(kinds), "stream": np.asarray(tid), "correlation": np.asarray(corr)}
    args.update(dep.wait_args(handles, res, event_based))
    builder.add_slices(names=list(kinds), ts=ts, dur=np.full(len(ts), 10), pid=pid, tid=tid, cat="cuda_sync",
                       args=args)
    dep.add_flows(builder, res, wait_corr_ids=corr, wait_ts=ts, wait_pid=pid, wait_tid=tid)
    return res


@pytest.mark.parametrize("vendor", VENDORS)
def test_dependency_resolved_end_to_end(vendor):
    dep = DependencyResolver(vendor)
    b = TraceBuilder(pid=1)
    # Producer: event 0xE recorded on stream 7 at correlation 10 (its row: device 0, stream 7).
    dep.add_records([0xE], [10], [7], ts=[BASE_TIME_NS + 1_000], pid=[0], tid=[7])
    _emit_waits(b, dep, handles=[0xE], corr=[12], ts=[BASE_TIME_NS + 2_000], pid=[0], tid=[9], kinds=["Stream Wait Event"],
                event_based=[True])
    evs = _events(b)
    (wait,) = [e for e in evs if e["ph"] == "X"]
    assert wait["args"]["wait_on_stream"] == 7
    assert wait["args"][f"wait_on_{vendor}_event_record_corr_id"] == 10
    assert wait["args"][f"wait_on_{vendor}_event_id"] == 0xE
    assert wait["args"][f"{vendor}_sync_kind"] == "Stream Wait Event"
    assert wait["tid"] == 9
    flows = [e for e in evs if e["ph"] in "sf"]
    assert len(flows) == 2
    s, f = sorted(flows, key=lambda e: e["ph"] != "s")
    assert s["id"] == f["id"] and s["id"] >= DEPENDENCY_FLOW_BASE
    assert (s["pid"], s["tid"], f["pid"], f["tid"]) == (0, 7, 0, 9)
    assert s["ts"] < f["ts"] and s["cat"] == f["cat"] == "ac2g" and f["bp"] == "e" and "bp" not in s


@pytest.mark.parametrize("vendor", VENDORS)
def test_record_arriving_out_of_order_is_found(vendor):
    dep = DependencyResolver(vendor)
    dep.add_records([5], [40], [3])  # a later record delivered first
    dep.add_records([5], [20], [2])  # the one the wait at 30 belongs to, delivered late
    res = dep.resolve([5], [30])
    assert res.found.tolist() == [True]
    assert (res.stream[0], res.record_corr_id[0]) == (2, 20)
    later = dep.resolve([5], [50])  # and the one delivered first is still there for a later wait
    assert (later.stream[0], later.record_corr_id[0]) == (3, 40)


@pytest.mark.parametrize("vendor", VENDORS)
def test_reused_handle_picks_the_earlier_record(vendor):
    dep = DependencyResolver(vendor)
    dep.add_records([1, 1, 1], [10, 50, 90], [4, 5, 6])
    res = dep.resolve([1, 1, 1, 1], [50, 51, 60, 10])
    # The wait at 50 must not take the record at 50 (not strictly before) nor the one at 90.
    assert res.record_corr_id.tolist() == [10, 50, 50, -1]
    assert res.stream.tolist() == [4, 5, 5, -1]
    assert res.found.tolist() == [True, True, True, False]


@pytest.mark.parametrize("vendor", VENDORS)
def test_history_cleared_on_reset(vendor):
    dep = DependencyResolver(vendor)
    dep.add_records([1], [10], [4])
    assert dep.resolve([1], [11]).found.tolist() == [True]
    dep.reset()
    assert len(dep) == 0
    res = dep.resolve([1], [11])
    assert res.found.tolist() == [False] and res.stream.tolist() == [-1]


@pytest.mark.parametrize("vendor", VENDORS)
def test_event_synchronize_resolves_its_producer(vendor):
    dep = DependencyResolver(vendor)
    b = TraceBuilder(pid=1)
    dep.add_records([0xAB, 0xCD], [3, 4], [11, 12], ts=[100, 110], pid=[0, 0], tid=[11, 12])
    # Event synchronize: a host-side wait with no consumer stream (tid 1 like Kineto's -1 sanitized).
    res = _emit_waits(b, dep, handles=[0xCD], corr=[8], ts=[500], pid=[0], tid=[1], kinds=["Event Sync"],
                      event_based=[True])
    assert res.stream.tolist() == [12] and res.record_corr_id.tolist() == [4]
    (x,) = [e for e in _events(b) if e["ph"] == "X"]
    assert x["args"]["wait_on_stream"] == 12
    assert x["args"][f"wait_on_{vendor}_event_id"] == 0xCD


@pytest.mark.parametrize("vendor", VENDORS)
def test_unresolved_wait_still_carries_the_event_id(vendor):
    dep = DependencyResolver(vendor)
    b = TraceBuilder(pid=1)
    dep.add_records([1], [100], [2])  # only a record *after* the wait
    _emit_waits(b, dep, handles=[77, 1], corr=[5, 6], ts=[10, 20], pid=[0, 0], tid=[3, 3],
                kinds=["Stream Wait Event", "Event Sync"], event_based=[True, True])
    xs = [e for e in _events(b) if e["ph"] == "X"]
    assert [x["args"][f"wait_on_{vendor}_event_id"] for x in xs] == [77, 1]
    if vendor == "hip":  # the ROCm design: the raw event id always, producer fields omitted
        assert all("wait_on_stream" not in x["args"] and "wait_on_hip_event_record_corr_id" not in x["args"]
                   for x in xs)
    else:  # cuda as Kineto HEAD (its tests expect -1); xpu the same (README)
        assert [x["args"]["wait_on_stream"] for x in xs] == [-1, -1]
        assert [x["args"][f"wait_on_{vendor}_event_record_corr_id"] for x in xs] == [-1, -1]
    assert not [e for e in _events(b) if e["ph"] in "sf"]  # no arrow without a producer


@pytest.mark.parametrize("vendor", VENDORS)
def test_default_stream_resolves(vendor):
    dep = DependencyResolver(vendor)
    dep.add_records([9], [1], [0])  # recorded on the null/default stream (id 0)
    res = dep.resolve([9], [2])
    assert res.found.tolist() == [True] and res.stream.tolist() == [0] and res.record_corr_id.tolist() == [1]


@pytest.mark.parametrize("vendor", VENDORS)
def test_non_event_syncs_carry_no_wait_args(vendor):
    dep = DependencyResolver(vendor)
    b = TraceBuilder(pid=1)
    dep.add_records([1], [1], [4])
    _emit_waits(b, dep, handles=[1, 0], corr=[2, 3], ts=[10, 20], pid=[0, 0], tid=[1000004, 1000005],
                kinds=["Stream Wait Event", "Stream Sync"], event_based=[True, False])
    xs = [e for e in _events(b) if e["ph"] == "X"]
    assert "wait_on_stream" in xs[0]["args"]
    assert not any(k.startswith("wait_on") for k in xs[1]["args"])


def test_bulk_resolution_matches_a_brute_force_reference():
    rng = np.random.default_rng(1234)
    n = 5000
    handles = rng.integers(0, 50, n).astype(np.uint64) * np.uint64(0x1000) + np.uint64(0x7F0000000000)
    corr = rng.permutation(np.arange(1, 2 * n + 1))[:n]
    streams = rng.integers(0, 8, n)
    dep = DependencyResolver("cuda")
    for lo in range(0, n, 700):  # several batches, arriving in shuffled corr order
        dep.add_records(handles[lo:lo + 700], corr[lo:lo + 700], streams[lo:lo + 700])
    waits_h = rng.choice(handles, 2000)
    waits_c = rng.integers(0, 2 * n + 2, 2000)
    res = dep.resolve(waits_h, waits_c)
    for h, c, got_s, got_c in zip(waits_h.tolist(), waits_c.tolist(), res.stream.tolist(), res.record_corr_id.tolist()):
        m = (handles == h) & (corr < c)
        if m.any():
            i = np.flatnonzero(m)[np.argmax(corr[m])]
            assert (got_s, got_c) == (int(streams[i]), int(corr[i]))
        else:
            assert (got_s, got_c) == (-1, -1)


def test_bad_vendor_and_out_of_range_corr_are_clear_errors():
    with pytest.raises(ValueError, match="unknown dependency vendor 'rocm'.*cuda, hip, xpu"):
        DependencyResolver("rocm")
    dep = DependencyResolver("hip")
    with pytest.raises(DependencyError, match="correlation ids must be"):
        dep.add_records([1], [-1], [0])
    with pytest.raises(DependencyError, match="correlation ids must be"):
        dep.resolve([1], [1 << 41])


def test_vendors_use_distinct_flow_id_blocks():
    ids = {v: int(DependencyResolver(v).flow_ids([7])[0]) for v in VENDORS}
    assert len(set(ids.values())) == 3


def _one_wait_rocm(decoder, builder, *, record: bool):
    """HIP: optionally hipEventRecord(E) (corr 1), then hipStreamWaitEvent(E) (corr 2)."""
    from xpuprof.backends.rocm.records import EVENT_OP_DTYPE, OP_RECORD, OP_STREAM_WAIT, RocmRecords
    from xpuprof.vendors.rocprofiler import HIP_API_DTYPE

    api = np.zeros(2, HIP_API_DTYPE)
    api["size"], api["operation"] = 56, [1, 2]
    api["correlation_id"]["internal"] = [1, 2]
    api["start_timestamp"] = [BASE_TIME_NS + 10, BASE_TIME_NS + 20]
    api["end_timestamp"] = api["start_timestamp"] + 5
    ops = [(2, OP_STREAM_WAIT, 0xE, 0xB0)] + ([(1, OP_RECORD, 0xE, 0xA0)] if record else [])
    rec = RocmRecords(hip_api=api if record else api[1:], event_ops=np.array(ops, EVENT_OP_DTYPE),
                      api_names={1: "hipEventRecord", 2: "hipStreamWaitEvent"})
    decoder.write(builder, None, rec)
    (wait,) = [e for e in _events(builder) if e.get("name") == "hipStreamWaitEvent"]
    return wait["args"]


def test_rocm_decoder_uses_the_sessions_empty_resolver():
    from xpuprof.backends.rocm.emit import RocmEmitter

    session_resolver = DependencyResolver("hip")  # empty, so len() == 0 and bool() is False
    decoder = RocmEmitter(pid=1, dependencies=session_resolver)
    assert decoder.dependencies is session_resolver
    _one_wait_rocm(decoder, TraceBuilder(pid=1), record=True)
    assert len(session_resolver) == 1  # the record went into the session's resolver
    session_resolver.reset()  # what a new session does
    args = _one_wait_rocm(decoder, TraceBuilder(pid=1), record=False)
    assert "wait_on_hip_event_record_corr_id" not in args  # nothing leaked from the previous session


def test_cuda_decoder_uses_the_sessions_empty_resolver():
    from xpuprof.backends.cuda.emit import CudaEmitter

    session_resolver = DependencyResolver("cuda")
    assert CudaEmitter(lambda k, c: "x", session_resolver).dependencies is session_resolver
