"""ROCm decoding on records built byte by byte to rocprofiler-sdk's documented layouts."""
from __future__ import annotations

import ctypes
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.vendors import rocprofiler as rocprof
from xpuprof.backends.rocm.backend import RocmBackend
from xpuprof.backends.rocm.emit import RocmEmitter
from xpuprof.backends.rocm.records import EVENT_OP_DTYPE, OP_DEVICE_SYNC, OP_EVENT_SYNC, OP_LAUNCH, OP_RECORD, \
    OP_STREAM_SYNC, OP_STREAM_WAIT, RocmRecords
from xpuprof.backends.registry import get_backend_class
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

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


# sizeof/offsetof printed from the real headers of each SDK generation (data/print_layouts.py).
LAYOUTS = json.loads((Path(__file__).parent / "data" / "rocprofiler_sdk_layouts.json").read_text())["versions"]
MIRRORS = {  # header struct -> {SDK major: our mirror}
    "rocprofiler_buffer_tracing_hip_api_record_t": {0: rocprof.HipApiRecord, 1: rocprof.HipApiRecordV1},
    "rocprofiler_buffer_tracing_kernel_dispatch_record_t": {0: rocprof.KernelDispatchRecord,
                                                            1: rocprof.KernelDispatchRecord},
    "rocprofiler_buffer_tracing_memory_copy_record_t": {0: rocprof.MemoryCopyRecord, 1: rocprof.MemoryCopyRecordV1},
    "rocprofiler_dispatch_counting_service_record_t": {0: rocprof.DispatchCountingRecord,
                                                       1: rocprof.DispatchCountingRecord},
}


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_buffer_record_mirrors_match_the_real_headers(version):
    structs = LAYOUTS[version]["structs"]
    major = int(version.split(".")[0])
    for header_name, by_major in MIRRORS.items():
        mirror, real = by_major[major], structs[header_name]
        assert ctypes.sizeof(mirror) == real["size"], (version, header_name)
        for fname, (offset, size) in real["fields"].items():
            ours = getattr(mirror, fname)
            assert (ours.offset, ours.size) == (offset, size), (version, header_name, fname)
        # the record's own size picks exactly this mirror
        assert rocprof.layout_for(next(k for k, v in rocprof.KNOWN_LAYOUTS.items()
                                       if any(m is mirror for m, _ in v.values())),
                                  np.array([real["size"]], np.uint64)) is mirror


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_callback_record_layout_matches_the_real_headers(version):
    from xpuprof.backends.rocm.activity_api import load_rocbuf

    real = LAYOUTS[version]["structs"]["rocprofiler_callback_tracing_record_t"]
    layout = rocprof.callback_layout(tuple(int(x) for x in version.split(".")))
    # 0.x: kind@32 payload@48 (56 bytes); 1.x: kind@40 payload@56 (64 bytes) - the C part has one
    # callback per layout, and the version picks it.
    assert (real["size"], real["fields"]["kind"][0], real["fields"]["payload"][0]) == \
        ((56, 32, 48) if layout == 0 else (64, 40, 56))
    rb = load_rocbuf()
    assert rb.callback_addresses(layout)["hip"] != rb.callback_addresses(1 - layout)["hip"]


def test_unknown_sdk_generation_and_callback_layout_are_refused():
    with pytest.raises(rocprof.RocprofAbiError, match="rocprofiler-sdk 2.0.0 .*known: 0.x, 1.x"):
        rocprof.callback_layout((2, 0, 0))
    from xpuprof.backends.rocm.activity_api import load_rocbuf

    with pytest.raises(ValueError, match="unknown rocprofiler-sdk callback record layout 2"):
        load_rocbuf().callback_addresses(2)


@pytest.mark.parametrize("size", [40, 72])
def test_records_of_unknown_size_are_refused(size):
    bad = _arr([_api(1, 1, T0, T0 + 1)], rocprof.HIP_API_DTYPE)
    bad["size"] = size
    with pytest.raises(rocprof.RocprofAbiError, match=f"HIP API records of {size} bytes.*56 bytes .*0.x.*64 bytes"):
        rocprof.check_sizes(bad["size"], "HIP API")


def _api_v1(op, corr, start, end, tid=77, ancestor=0):
    # SDK 1.x: {u64 size; i32 kind; i32 op; {u64 internal; u64 external; u64 ancestor}; u64 start; u64 end; u64 tid}
    return struct.pack("<QiiQQQQQQ", 64, 5, op, corr, 0, ancestor, start, end, tid)


def test_sdk_1x_hip_api_records_decode_with_their_own_layout():
    from xpuprof.backends.rocm.records import rows_of as _rows

    blob = b"".join([_api_v1(10, 1, T0, T0 + 5, tid=31, ancestor=9), _api_v1(10, 2, T0 + 6, T0 + 9, tid=32)])
    rows = _rows((64, blob), "HIP API")
    assert rows.dtype == rocprof.HIP_API_V1_DTYPE
    _, evs = _decode(RocmRecords(hip_api=rows, api_names={10: "hipLaunchKernel"}))
    rt = sorted((e for e in evs if e.get("ph") == "X"), key=lambda e: e["args"]["correlation"])
    assert [(r["ts"] * 1000 % 10**6, r["tid"]) for r in rt] == [(0.0, 31), (6.0, 32)]
    assert [round(r["dur"] * 1000) for r in rt] == [5, 3]


def _decode(rec):
    b = TraceBuilder(pid=4321)
    RocmEmitter(pid=4321).write(b, ProcessWindow(T0, T0 + 10**9), rec)
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
    rt = [e for e in evs if e.get("cat") == "cuda_runtime"]  # Kineto's ROCm path writes cuda_runtime
    assert [r["name"] for r in rt] == ["hipLaunchKernel"] * 2  # hipGetDevice suppressed
    flows = [e for e in evs if e["ph"] in "sf"]
    assert sorted((f["ph"], f["id"]) for f in flows) == [("f", 1), ("f", 2), ("s", 1), ("s", 2)]
    # the device's process is named and sorted after the host's, as Kineto's ROCm rows (HTA's amd_trace:
    # labels "GPU <d>", sort index 5000000 + d) and our CUDA rows do
    meta = {(e["name"], e["pid"]): e["args"] for e in evs if e["ph"] == "M"}
    assert meta[("process_name", 1)] == {"name": "GPU 1"} and meta[("process_labels", 1)] == {"labels": "GPU 1"}
    assert meta[("process_sort_index", 1)] == {"sort_index": 5_000_001}


def test_copy_rows():
    rec = RocmRecords(copies=_arr([_copy(5, T0, T0 + 1001, 2, 4000)], rocprof.COPY_DTYPE), agent_device={AGENT: 0})
    _, evs = _decode(rec)
    (cp,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert cp["name"] == "Memcpy HtoD (Host -> Device)" and cp["args"]["kind"] == "HtoD"
    assert cp["args"]["memory bandwidth (GB/s)"] == 4.0 and cp["args"]["bytes"] == 4000


def test_hip_stream_wait_event_and_event_sync_are_resolved():
    rec = RocmRecords(
        hip_api=_arr([_api(20, 40, T0 + 100, T0 + 110, tid=1), _api(21, 41, T0 + 200, T0 + 210, tid=2),
                      _api(22, 42, T0 + 300, T0 + 310, tid=2), _api(22, 43, T0 + 400, T0 + 410, tid=2),
                      _api(10, 39, T0 + 50, T0 + 60, tid=1)],
                     rocprof.HIP_API_DTYPE),
        dispatch=_arr([_dispatch(39, T0 + 70, T0 + 90, 0xBEEF, 7)], rocprof.DISPATCH_DTYPE),
        event_ops=np.array([(40, OP_RECORD, 0xE0, 0x5000), (41, OP_STREAM_WAIT, 0xE0, 0x6000),
                            (42, OP_EVENT_SYNC, 0xE0, 0), (43, OP_EVENT_SYNC, 0xE1, 0), (39, OP_LAUNCH, 0, 0x5000)],
                           EVENT_OP_DTYPE),
        api_names={10: "hipLaunchKernel", 20: "hipEventRecord", 21: "hipStreamWaitEvent", 22: "hipEventSynchronize"},
        agent_device={AGENT: 0})
    _, evs = _decode(rec)
    rows = {e["args"]["correlation"]: e for e in evs if e.get("cat") == "cuda_runtime" or e.get("name", "").startswith("hip")}
    (kernel,) = [e for e in evs if e.get("cat") == "kernel"]
    # hipEventRecord: hip_event (the handle, hex like wait_on_hip_event_id) + hip_stream (the row id)
    assert rows[40]["args"]["hip_event"] == "0x00000000000000e0"
    assert rows[40]["args"]["hip_stream"] == kernel["tid"] == kernel["args"]["stream"]
    assert "event" not in rows[40]["args"] and "stream" not in rows[40]["args"]
    w = rows[41]["args"]
    assert (w["sync_type"], w["wait_on_hip_event_record_corr_id"]) == ("Stream Wait Event", 40)
    assert w["wait_on_stream"] == kernel["tid"]  # names the stream the way the GPU rows do
    assert w["wait_on_hip_event_id"] == rows[40]["args"]["hip_event"]
    s = rows[42]["args"]
    assert (s["sync_type"], s["wait_on_stream"], s["wait_on_hip_event_record_corr_id"]) == \
        ("Event Sync", kernel["tid"], 40)
    u = rows[43]["args"]  # never recorded: names the event, producer fields omitted (ROCm design)
    assert u["wait_on_hip_event_id"] == "0x00000000000000e1"
    assert "wait_on_stream" not in u and "wait_on_hip_event_record_corr_id" not in u
    arrows = [e for e in evs if e["ph"] in "sf" and e["id"] >= (1 << 48)]
    assert sorted((e["ph"], e["tid"]) for e in arrows) == [("f", 2), ("f", 2), ("s", 1), ("s", 1)]


def test_stream_and_device_sync_rows_like_cuda():
    rec = RocmRecords(
        hip_api=_arr([_api(10, 1, T0 + 10, T0 + 20, tid=88), _api(30, 2, T0 + 30, T0 + 90, tid=88),
                      _api(31, 3, T0 + 100, T0 + 150, tid=88)], rocprof.HIP_API_DTYPE),  # _dispatch's thread 88
        dispatch=_arr([_dispatch(1, T0 + 25, T0 + 80, 0xBEEF, 7)], rocprof.DISPATCH_DTYPE),
        event_ops=np.array([(1, OP_LAUNCH, 0, 0x7000), (2, OP_STREAM_SYNC, 0, 0x7000), (3, OP_DEVICE_SYNC, 0, 0)],
                           EVENT_OP_DTYPE),
        api_names={10: "hipLaunchKernel", 30: "hipStreamSynchronize", 31: "hipDeviceSynchronize"},
        agent_device={AGENT: 1})
    _, evs = _decode(rec)
    (kernel,) = [e for e in evs if e.get("cat") == "kernel"]
    api = {e["name"]: e["args"] for e in evs if e.get("ph") == "X" and e.get("name", "").startswith("hip")}
    assert (api["hipStreamSynchronize"]["sync_type"], api["hipStreamSynchronize"]["hip_stream"]) == \
        ("Stream Sync", kernel["tid"])
    assert (api["hipDeviceSynchronize"]["sync_type"], api["hipDeviceSynchronize"]["hip_stream"]) == ("Device Sync", -1)
    gpu = {e["name"]: e for e in evs if e.get("cat") == "cuda_sync"}
    assert (gpu["Stream Sync"]["pid"], gpu["Stream Sync"]["tid"]) == (1, kernel["tid"] + 1_000_000)
    assert (gpu["Device Sync"]["pid"], gpu["Device Sync"]["tid"]) == (1, 1_000_000)  # the thread's last device
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert names[(1, kernel["tid"] + 1_000_000)] == f"stream {kernel['tid']} (sync)"
    assert names[(1, 1_000_000)] == "Device 1 (sync)"
    flows = {(e["ph"], e["id"]) for e in evs if e["ph"] in "sf"}
    assert {("s", 2), ("f", 2), ("s", 3), ("f", 3)} <= flows  # the call -> its sync row


def test_every_hip_launch_api_layout_matches_the_real_api_args():
    from xpuprof.backends.rocm.activity_api import HIP_ARG_LAYOUT

    for version, data in LAYOUTS.items():
        real = data["hip_args"]
        for fn, (_code, ev, st) in HIP_ARG_LAYOUT.items():
            if fn not in real:  # no handle args (hipDeviceSynchronize), or new in SDK 1.0
                assert (ev, st) == (-1, -1) or (fn == "hipEventRecordWithFlags" and version < "1"), (version, fn)
                continue
            if ev >= 0:
                assert real[fn]["event"] == ev, (version, fn)
            if st >= 0:
                assert real[fn]["stream"] == st, (version, fn)
    for fn in ("hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipExtLaunchKernel", "hipLaunchKernel_spt",
               "hipLaunchCooperativeKernel", "hipGraphLaunch", "hipMemcpyWithStream", "hipMemsetAsync",
               "hipEventRecord_spt", "hipStreamWaitEvent_spt", "hipStreamSynchronize", "hipDeviceSynchronize"):
        assert fn in HIP_ARG_LAYOUT


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


def _seeded_records(seed):
    """Launches on four streams and raw queues, copies, event records, waits and stream/device
    syncs, from a seeded generator."""
    rng = np.random.default_rng(seed)
    api, disp, copies, ops = [], [], [], []
    corr, t = 0, T0
    for _ in range(300):
        corr, t = corr + 1, t + int(rng.integers(10, 100))
        what = int(rng.integers(0, 10))
        stream = 0x5000 + int(rng.integers(0, 4))
        if what < 6:
            api.append(_api(10, corr, t, t + 5, tid=88))
            grid = (256, 1, 1) if rng.random() < 0.8 else (int(rng.integers(1, 999)), 2, 1)
            disp.append(_dispatch(corr, t + 8, t + 40, 0xBEEF + int(rng.integers(0, 3)), int(rng.integers(0, 9)),
                                  grid=grid))
            if rng.random() < 0.7:
                ops.append((corr, OP_LAUNCH, 0, stream))
        elif what < 8:
            api.append(_api(40, corr, t, t + 5, tid=88))
            copies.append(_copy(corr, t + 6, t + 30, int(rng.integers(1, 5)), int(rng.integers(1, 1 << 20))))
            ops.append((corr, OP_LAUNCH, 0, stream))
        else:
            op = [OP_RECORD, OP_STREAM_WAIT, OP_EVENT_SYNC, OP_STREAM_SYNC, OP_DEVICE_SYNC][int(rng.integers(0, 5))]
            api.append(_api(20 + op, corr, t, t + 20, tid=88))
            ops.append((corr, op, 0xE0 + int(rng.integers(0, 3)), stream))
    return RocmRecords(
        hip_api=_arr(api, rocprof.HIP_API_DTYPE), dispatch=_arr(disp, rocprof.DISPATCH_DTYPE),
        copies=_arr(copies, rocprof.COPY_DTYPE), event_ops=np.array(ops, EVENT_OP_DTYPE),
        api_names={10: "hipLaunchKernel", 40: "hipMemcpyAsync", 20 + OP_RECORD: "hipEventRecord",
                   20 + OP_STREAM_WAIT: "hipStreamWaitEvent", 20 + OP_EVENT_SYNC: "hipEventSynchronize",
                   20 + OP_STREAM_SYNC: "hipStreamSynchronize", 20 + OP_DEVICE_SYNC: "hipDeviceSynchronize"},
        kernel_names={k: f"_Z7kernel{k}v" for k in range(9)}, agent_device={AGENT: 1, 0x1: 0})


def test_released_records_and_one_value_columns_give_the_same_events(monkeypatch):
    """The session hands its records over (release: each array dropped once
    written, dispatches cut to the three fields device syncs read) and one-value columns are
    stored once. Keeping every array whole gives the same events, in the same order."""
    from xpuprof.backends import common as flows
    from xpuprof.backends.rocm import emit as decode
    from xpuprof.trace.builder import columns as builder_mod

    def events(release):
        rec = _seeded_records(9)
        b = TraceBuilder(pid=4321)
        RocmEmitter(pid=4321).write(b, ProcessWindow(T0, T0 + 10**9), rec, release=release)
        assert (rec.hip_api is None and rec.dispatch is None and rec.copies is None) == release
        return [e for chunk in iter_event_chunks(b) for e in chunk]

    lean = events(True)
    for module in (builder_mod, decode, flows):
        monkeypatch.setattr(module, "stored_once",
                            lambda values, dtype=None: values if dtype is None else values.astype(dtype))
    assert lean == events(False)
    cats = {e.get("cat") for e in lean}
    assert {"kernel", "gpu_memcpy", "cuda_runtime", "cuda_sync"} <= cats, cats
    assert any(e.get("name") == "Device Sync" for e in lean) and any(e["ph"] == "s" for e in lean)


def test_stream_table_looks_up_like_the_dict_it_replaced():
    """correlation id -> HIP stream for whole columns, with a dict's last-wins semantics (the dict
    built one Python object per launch)."""
    from xpuprof.backends.rocm.emit import StreamTable

    rng = np.random.default_rng(4)
    corr = rng.integers(1, 400, 1000).astype(np.uint64)
    stream = rng.integers(0x5000, 0x5008, 1000).astype(np.uint64)
    want = dict(zip(corr.tolist(), stream.tolist()))
    query = rng.integers(0, 500, 3000)
    got = StreamTable(corr, stream).lookup(query)
    assert got.tolist() == [want.get(c, -1) for c in query.tolist()]
    assert not StreamTable(np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    assert StreamTable(np.zeros(0, np.uint64), np.zeros(0, np.uint64)).lookup(query[:3]).tolist() == [-1] * 3
