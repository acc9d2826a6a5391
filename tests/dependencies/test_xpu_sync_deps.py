"""XPU inter-stream dependencies: PTI sync records (built byte by byte) -> decode -> emit -> trace args and arrows."""
from __future__ import annotations

import struct

from xpuprof.activity import ActivityType
from xpuprof.backends.dependencies import DependencyResolver
from xpuprof.backends.xpu import records as decode
from xpuprof.vendors import pti
from xpuprof.backends.xpu.context import RecordContext
from xpuprof.backends.xpu.emit import write_records
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

BARRIER = pti.SYNC_TYPES.index("GPU_BARRIER_EXECUTION")
BARRIER_MEM = pti.SYNC_TYPES.index("GPU_BARRIER_MEMORY")
HOST_EVENT = pti.SYNC_TYPES.index("HOST_EVENT")
HOST_FENCE = pti.SYNC_TYPES.index("HOST_FENCE")
EV_A, EV_B = 0xE0A0, 0xE0B0
Q1, Q2 = 0x1000, 0x2000


def h(v: int) -> str:
    return f"0x{v:016x}"  # the trace's handle spelling (hex_column)


def sync(kind, corr, start, event, queue=Q1):
    """``pti_view_record_synchronization`` (72 bytes), the layout pti.RecordSynchronization mirrors."""
    rec = struct.pack("<IIQQQQQIIIIII", 11, kind, 0xC0, queue, event, start, start + 10, 5678, corr, 0, 0, 4, 1)
    assert len(rec) == 72
    return rec


def run(*records: bytes) -> tuple[list[dict], list[dict]]:
    d = decode.decode_buffers([b"".join(records)], decode.LayoutWalker())
    b = TraceBuilder()
    write_records(d, RecordContext("0.0", BASE_TIME_NS + 1_000_000), b, None, frozenset({ActivityType.XPU_SYNC}))
    events = [e for chunk in iter_event_chunks(b) for e in chunk]
    syncs = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["args"]["correlation"])
    flows = [e for e in events if e.get("ph") in ("s", "f")]
    return syncs, flows


def test_host_event_wait_resolves_its_barrier_end_to_end():
    syncs, flows = run(sync(BARRIER, 10, 100, EV_A, Q2), sync(HOST_EVENT, 11, 200, EV_A))
    rec, wait = syncs
    assert rec["args"]["Event_handle"] == h(EV_A) and rec["args"]["Queue_handle"] == h(Q2)
    assert "wait_on_xpu_event_id" not in rec["args"]
    assert wait["args"]["Type"] == "HOST_EVENT"
    assert wait["args"]["wait_on_xpu_event_id"] == h(EV_A)
    assert wait["args"]["wait_on_xpu_event_record_corr_id"] == 10 and wait["args"]["wait_on_stream"] == Q2
    start = [f for f in flows if f["ph"] == "s"]
    end = [f for f in flows if f["ph"] == "f"]
    assert len(start) == 1 and len(end) == 1 and start[0]["id"] == end[0]["id"]
    assert start[0]["cat"] == "ac2g" and start[0]["ts"] < end[0]["ts"]


def test_record_arriving_after_its_wait_is_still_found():
    syncs, _ = run(sync(HOST_EVENT, 21, 300, EV_A), sync(BARRIER_MEM, 20, 100, EV_A, Q2))
    assert syncs[1]["args"]["wait_on_xpu_event_record_corr_id"] == 20


def test_reused_handle_resolves_to_the_earlier_record():
    syncs, _ = run(sync(BARRIER, 30, 100, EV_A, Q1), sync(HOST_EVENT, 31, 200, EV_A),
                   sync(BARRIER, 32, 300, EV_A, Q2))
    wait = syncs[1]
    assert wait["args"]["wait_on_xpu_event_record_corr_id"] == 30 and wait["args"]["wait_on_stream"] == Q1


def test_unresolved_wait_still_carries_the_event_id_and_draws_no_arrow():
    syncs, flows = run(sync(BARRIER, 40, 100, EV_A), sync(HOST_EVENT, 41, 200, EV_B), sync(HOST_FENCE, 42, 300, 0))
    wait, fence = syncs[1], syncs[2]
    assert wait["args"]["wait_on_xpu_event_id"] == h(EV_B)
    assert wait["args"]["wait_on_xpu_event_record_corr_id"] == -1 and wait["args"]["wait_on_stream"] == -1
    assert "wait_on_xpu_event_id" not in fence["args"]  # not event-based
    assert flows == []


def test_queue_handle_zero_is_a_real_stream():
    syncs, flows = run(sync(BARRIER, 50, 100, EV_A, queue=0), sync(HOST_EVENT, 51, 200, EV_A))
    assert syncs[1]["args"]["wait_on_stream"] == 0 and syncs[1]["args"]["wait_on_xpu_event_record_corr_id"] == 50
    assert len(flows) == 2


def test_history_is_per_session():
    run(sync(BARRIER, 60, 100, EV_A))
    syncs, _ = run(sync(HOST_EVENT, 61, 200, EV_A))  # a new session's pass: the old record is gone
    assert syncs[0]["args"]["wait_on_xpu_event_record_corr_id"] == -1
    r = DependencyResolver("xpu")
    r.add_record(EV_A, 1, Q1)
    r.reset()
    assert len(r) == 0 and not r.resolve([EV_A], [2]).found.any()
