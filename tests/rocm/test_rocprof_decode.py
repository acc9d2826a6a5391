"""ROCm decoding on records built byte by byte to rocprofiler-sdk's documented layouts."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.rocm import rocprof
from xpuprof.backends.rocm.backend import RocmBackend
from xpuprof.backends.rocm.decode import EVENT_OP_DTYPE, OP_EVENT_SYNC, OP_RECORD, OP_STREAM_WAIT, RocmRecords, \
    RocprofDecoder
from xpuprof.backends.registry import get_backend_class
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder import TraceBuilder
from xpuprof.trace.chrome import iter_event_chunks

T0 = BASE_TIME_NS + 5_000_000
AGENT = 0xA6E


def _api(op, corr, start, end, tid=77):
    # {u64 size; i32 kind; i32 operation; {u64 internal; u64 external}; u64 start; u64 end; u64 thread_id}
    return struct.pack("<QiiQQQQQ", 56, 5, op, corr, 0, start, end, tid)


def _dispatch(corr, start, end, queue, kernel_id, grid=(256, 1, 1), wg=(64, 1, 1)):
    info = struct.pack("<QQQQQII3I3I", 128, AGENT, queue, kernel_id, corr, 0, 2048, *wg, *grid) + b"\0" * 56
    return struct.pack("<QiiQQQQQ", 56 + len(info), 11, 0, corr, 0, 88, start, end) + info


def _copy(corr, start, end, op, nbytes):
    return struct.pack("<QiiQQQQQQQQ", 80, 10, op, corr, 0, 88, start, end, AGENT, 0x1, nbytes)


def _arr(blobs, dtype):
    return np.frombuffer(b"".join(blobs), dtype=dtype).copy()


def test_layouts_match_the_documented_sizes():
    assert ctypes.sizeof(rocprof.HipApiRecord) == 56
    assert ctypes.sizeof(rocprof.KernelDispatchInfo) == 128
    assert ctypes.sizeof(rocprof.KernelDispatchRecord) == 56 + 128
    assert ctypes.sizeof(rocprof.MemoryCopyRecord) == 80
    assert rocprof.KernelDispatchRecord.start_timestamp.offset == 40  # thread_id precedes the timestamps
    assert rocprof.HipApiRecord.thread_id.offset == 48  # ...but follows them in the API record
    assert len(_dispatch(1, 2, 3, 4, 5)) == rocprof.DISPATCH_DTYPE.itemsize


def test_short_records_are_refused():
    bad = _arr([_api(1, 1, T0, T0 + 1)], rocprof.HIP_API_DTYPE)
    bad["size"] = 40
    with pytest.raises(rocprof.RocprofAbiError, match="40-byte record.*needs 56"):
        rocprof.check_sizes(bad["size"], rocprof.HipApiRecord)


def _decode(rec):
    b = TraceBuilder(pid=4321)
    RocprofDecoder(pid=4321).process(b, ProcessWindow(T0, T0 + 10**9), rec)
    return b, [e for chunk in iter_event_chunks(b) for e in chunk]


def test_dispatch_rows_dense_streams_and_hsa_queue():
    rec = RocmRecords(
        hip_api=_arr([_api(10, 1, T0, T0 + 5), _api(10, 2, T0 + 6, T0 + 9), _api(99, 3, T0, T0 + 1)],
                     rocprof.HIP_API_DTYPE),
        dispatch=_arr([_dispatch(1, T0 + 10, T0 + 110, 0xBEEF, 7), _dispatch(2, T0 + 20, T0 + 40, 0xCAFE, 7)],
                      rocprof.DISPATCH_DTYPE),
        event_ops=np.array([(1, 0, 0, 0x5000), (2, 0, 0, 0x6000)], EVENT_OP_DTYPE),
        api_names={10: "hipLaunchKernel", 99: "hipGetDevice"}, kernel_names={7: "_Z4axpyPfS_"},
        agent_device={AGENT: 1})
    b, evs = _decode(rec)
    kern = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["args"]["correlation"])
    assert [k["name"] for k in kern] == ["axpy(float*, float*)"] * 2
    assert [(k["pid"], k["tid"]) for k in kern] == [(1, 1), (1, 2)]  # two HIP streams -> logical 1, 2
    assert kern[0]["args"]["hsa_queue"] == "0x000000000000beef"
    assert kern[0]["args"]["grid"] == [256, 1, 1] and kern[0]["args"]["block"] == [64, 1, 1]
    assert kern[0]["args"]["kind"] == "Dispatch Kernel"
    assert kern[0]["dur"] == 0.099  # ts = begin + 1
    rt = [e for e in evs if e.get("cat") == "runtime"]
    assert [r["name"] for r in rt] == ["hipLaunchKernel"] * 2  # hipGetDevice suppressed
    flows = [e for e in evs if e["ph"] in "sf"]
    assert sorted((f["ph"], f["id"]) for f in flows) == [("f", 1), ("f", 2), ("s", 1), ("s", 2)]


def test_copy_rows():
    rec = RocmRecords(copies=_arr([_copy(5, T0, T0 + 1001, 2, 4000)], rocprof.COPY_DTYPE), agent_device={AGENT: 0})
    _, evs = _decode(rec)
    (cp,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert cp["name"] == "Memcpy HtoD (Host -> Device)" and cp["args"]["kind"] == "HtoD"
    assert cp["args"]["memory bandwidth (GB/s)"] == 4.0 and cp["args"]["bytes"] == 4000


def test_hip_stream_wait_event_and_event_sync_are_resolved():
    rec = RocmRecords(
        hip_api=_arr([_api(20, 40, T0 + 100, T0 + 110, tid=1), _api(21, 41, T0 + 200, T0 + 210, tid=2),
                      _api(22, 42, T0 + 300, T0 + 310, tid=2), _api(22, 43, T0 + 400, T0 + 410, tid=2)],
                     rocprof.HIP_API_DTYPE),
        event_ops=np.array([(40, OP_RECORD, 0xE0, 0x5000), (41, OP_STREAM_WAIT, 0xE0, 0x6000),
                            (42, OP_EVENT_SYNC, 0xE0, 0), (43, OP_EVENT_SYNC, 0xE1, 0)], EVENT_OP_DTYPE),
        api_names={20: "hipEventRecord", 21: "hipStreamWaitEvent", 22: "hipEventSynchronize"})
    _, evs = _decode(rec)
    rows = {e["args"]["correlation"]: e for e in evs if e.get("cat") == "runtime"}
    assert rows[40]["args"]["event"] == "0x00000000000000e0" and rows[40]["args"]["stream"] == "0x0000000000005000"
    w = rows[41]["args"]
    assert (w["hip_sync_kind"], w["wait_on_stream"], w["wait_on_hip_event_record_corr_id"]) == \
        ("Stream Wait Event", 0x5000, 40)
    assert w["wait_on_hip_event_id"] == "0x00000000000000e0"
    s = rows[42]["args"]
    assert (s["hip_sync_kind"], s["wait_on_stream"], s["wait_on_hip_event_record_corr_id"]) == ("Event Sync", 0x5000, 40)
    u = rows[43]["args"]  # never recorded: still names the event
    assert u["wait_on_hip_event_id"] == "0x00000000000000e1" and u["wait_on_stream"] == -1
    arrows = [e for e in evs if e["ph"] in "sf" and e["id"] >= (1 << 48)]
    assert sorted((e["ph"], e["tid"]) for e in arrows) == [("f", 2), ("f", 2), ("s", 1), ("s", 1)]


def test_probe_reports_missing_sdk_cleanly(monkeypatch):
    monkeypatch.setenv("ROCPROFILER_SDK_LIBRARY", "/nonexistent/librocprofiler-sdk.so")
    monkeypatch.setenv("ROCM_PATH", "/nonexistent-rocm")
    res = RocmBackend.probe()
    if res.available:
        pytest.skip("rocprofiler-sdk is installed here")
    assert res.reason.startswith("rocprofiler-sdk not found")
    assert get_backend_class("rocm") is RocmBackend


@pytest.mark.rocm
def test_hardware_probe():
    res = RocmBackend.probe()
    if not res:
        pytest.skip(res.reason)
    assert "rocprofiler-sdk" in res.reason
