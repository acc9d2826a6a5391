"""Runtime records PTI wrote without a thread id (intel-pti 1.2.0 writes 0 in every SYCL runtime
record) are placed on their calling thread: from the driver calls sharing their correlation id,
else from the range that pushed their External id; what neither tells is counted and named.

Records are built as PTI lays them out (pti.record_dtype mirrors pti_view.h); the real-stack check
is tests/xpu/test_real_sycl.py::test_runtime_calls_sit_on_the_calling_thread."""
from __future__ import annotations

import numpy as np

from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow, RangeThreads
from xpuprof.backends.xpu import capture, records as decode
from xpuprof.vendors import pti
from xpuprof.backends.xpu.context import RecordContext
from xpuprof.backends.xpu.emit import UNKNOWN_THREAD_ROW, write_records
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

PID = 4321
TYPES = frozenset({ActivityType.RUNTIME, ActivityType.DRIVER, ActivityType.EXTERNAL_CORRELATION})


def api(kind: pti.ViewKind, rows: list[tuple[int, int, int]]) -> np.ndarray:
    """(correlation id, thread id, start) per record."""
    a = np.zeros(len(rows), pti.record_dtype(kind))
    a["_view_kind"] = int(kind)
    for i, (corr, tid, start) in enumerate(rows):
        a[i]["_correlation_id"], a[i]["_thread_id"], a[i]["_process_id"] = corr, tid, PID
        a[i]["_start_timestamp"], a[i]["_end_timestamp"] = start, start + 50
        a[i]["_api_group"], a[i]["_api_id"] = 1, corr
    return a


def external(pairs: list[tuple[int, int]]) -> np.ndarray:
    a = np.zeros(len(pairs), pti.record_dtype(pti.ViewKind.EXTERNAL_CORRELATION))
    a["_view_kind"] = int(pti.ViewKind.EXTERNAL_CORRELATION)
    a["_external_kind"] = int(pti.ExternalKind.CUSTOM_0)
    for i, (corr, ext) in enumerate(pairs):
        a[i]["_correlation_id"], a[i]["_external_id"] = corr, ext
    return a


def records(runtime, driver=(), ext=()) -> decode.DecodedRecords:
    return decode.DecodedRecords({int(pti.ViewKind.RUNTIME_API): api(pti.ViewKind.RUNTIME_API, runtime),
                                  int(pti.ViewKind.DRIVER_API): api(pti.ViewKind.DRIVER_API, list(driver)),
                                  int(pti.ViewKind.EXTERNAL_CORRELATION): external(list(ext))})


def emit(recs, range_threads=None):
    b = TraceBuilder(pid=PID)
    result = write_records(recs, RecordContext("1.2.0", BASE_TIME_NS), b, None, TYPES, range_threads=range_threads)
    events = [e for chunk in iter_event_chunks(b) for e in chunk]
    return b, result, events


def runtime_tids(events) -> dict[int, int]:
    return {e["args"]["correlation"]: e["tid"] for e in events
            if e.get("ph") == "X" and e.get("cat", "").endswith("runtime")}  # xpu_runtime (Kineto)


def test_a_runtime_record_takes_the_thread_of_its_driver_calls_and_its_flow_starts_there():
    b, result, events = emit(records(runtime=[(7, 0, 1_000)], driver=[(7, 777, 1_010), (7, 777, 1_020)]))
    assert runtime_tids(events) == {7: 777}
    starts = [e for e in events if e.get("ph") == "s"]
    assert [(e["id"], e["tid"]) for e in starts] == [(7, 777)]  # the arrow leaves the call's own row
    assert result.thread_sources == {"records_without_thread": 1, "from_driver_calls": 1, "from_external_id": 0,
                                     "unknown": 0}
    assert b.metadata["xpu_runtime_threads"] == result.thread_sources


def test_a_runtime_record_takes_the_thread_that_pushed_its_external_id():
    threads = RangeThreads.from_pairs([50, 51], [900, 901])
    _, result, events = emit(records(runtime=[(1, 0, 1_000), (2, 0, 2_000)], ext=[(1, 51), (2, 50)]), threads)
    assert runtime_tids(events) == {1: 901, 2: 900}
    assert result.thread_sources["from_external_id"] == 2 and result.thread_sources["unknown"] == 0


def test_the_window_carries_the_range_threads_a_live_session_uses():
    window = ProcessWindow(0, 1 << 62, RangeThreads.from_pairs([51], [901]))
    b = TraceBuilder(pid=PID)
    write_records(records(runtime=[(1, 0, 1_000)], ext=[(1, 51)]), RecordContext("1.2.0", BASE_TIME_NS), b, window,
                  TYPES)
    assert runtime_tids([e for chunk in iter_event_chunks(b) for e in chunk]) == {1: 901}


def test_a_record_nothing_places_stays_on_a_row_named_unknown_and_is_counted(caplog):
    b, result, events = emit(records(runtime=[(1, 0, 1_000), (2, 0, 2_000)], driver=[(2, 55, 2_010)]),
                             RangeThreads.from_pairs([], []))
    assert runtime_tids(events) == {1: 0, 2: 55}
    assert result.thread_sources == {"records_without_thread": 2, "from_driver_calls": 1, "from_external_id": 0,
                                     "unknown": 1}
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert rows[(PID, 0)] == UNKNOWN_THREAD_ROW


def test_records_with_their_thread_are_left_alone_and_add_no_metadata():
    b, result, events = emit(records(runtime=[(1, 1234, 1_000)], driver=[(1, 999, 1_010)]),
                             RangeThreads.from_pairs([1], [5]))
    assert runtime_tids(events) == {1: 1234}
    assert result.thread_sources == {} and "xpu_runtime_threads" not in b.metadata


def test_range_threads_lookup_is_zero_for_unknown_and_zero_ids():
    threads = RangeThreads(lambda: (np.array([30, 10, 20]), np.array([3, 1, 2])))
    assert threads.lookup(np.array([10, 20, 30, 40, 0])).tolist() == [1, 2, 3, 0, 0]


def test_a_capture_keeps_the_range_threads_so_replay_places_records_identically(tmp_path):
    recs = records(runtime=[(1, 0, 1_000)], ext=[(1, 51)])
    buf = b"".join(recs.get(k).tobytes() for k in (pti.ViewKind.RUNTIME_API, pti.ViewKind.EXTERNAL_CORRELATION))
    path = tmp_path / "run.ptiraw"
    capture.save(path, [buf], RecordContext("1.2.0", BASE_TIME_NS), TYPES, ProcessWindow(0, 1 << 62),
                 range_threads=(np.array([51]), np.array([901])))
    b = TraceBuilder(pid=PID)
    capture.replay(path, b)
    assert runtime_tids([e for chunk in iter_event_chunks(b) for e in chunk]) == {1: 901}
    b = TraceBuilder(pid=PID)
    capture.replay(path, b, use_window=False)  # the threads do not depend on the window
    assert runtime_tids([e for chunk in iter_event_chunks(b) for e in chunk]) == {1: 901}
