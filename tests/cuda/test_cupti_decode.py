"""CUPTI decoding without a GPU: records built from cupti-python's own numpy record dtypes."""
from __future__ import annotations

import ctypes

import numpy as np
import orjson
import pytest

cupti_mod = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")

from xpuprof.activity import ActivityType  # noqa: E402
from xpuprof.backends.base import ProcessWindow  # noqa: E402
from xpuprof.backends.cuda import emit as decode, records  # noqa: E402
from xpuprof.backends.cuda.emit import CudaEmitter, DecodeOptions  # noqa: E402
from xpuprof.clock import BASE_TIME_NS  # noqa: E402
from xpuprof.trace.builder.builder import TraceBuilder  # noqa: E402
from xpuprof.trace.write.chrome import iter_event_chunks  # noqa: E402

c = cupti_mod
T0 = BASE_TIME_NS + 10_000_000
RUNTIME_NAMES = {100: "cudaLaunchKernel_v7000", 101: "cudaStreamWaitEvent_v3020", 102: "cudaEventRecord",
                 103: "cudaStreamSynchronize_v3020", 104: "cudaGetDevice", 105: "cudaMemcpyAsync_v3020",
                 106: "cudaEventSynchronize", 107: "cudaMalloc_v3020"}


def _names(kind, cbid):
    return RUNTIME_NAMES[cbid] if kind == records.KIND_RUNTIME else {7: "cuLaunchKernel", 8: "cuCtxGetCurrent"}[cbid]


def _rows(dtype, n, **cols):
    arr = np.zeros(n, dtype=dtype)
    for k, v in cols.items():
        arr[k] = v
    return arr


def _kernel(n=1, **cols):
    base = dict(kind=records.KIND_CONCURRENT_KERNEL, device_id=0, context_id=1, stream_id=7, grid_x=4, grid_y=2,
                grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32, static_shared_memory=1024,
                dynamic_shared_memory=512, name=0x1000)
    base.update(cols)
    return _rows(c.activity_kernel13_dtype, n, **base)


def _api(cbid, corr, start, end, tid=4242):
    return _rows(c.activity_api_dtype, 1, kind=records.KIND_RUNTIME, cbid=cbid, correlation_id=corr, start=start,
                 end=end, process_id=99, thread_id=tid)


def _sync(type_, corr, start, stream, event_id=0, ctx=1):
    return _rows(c.activity_synchronization2_dtype, 1, kind=records.KIND_SYNCHRONIZATION, type=type_,
                 correlation_id=corr, start=start, end=start + 50, context_id=ctx, stream_id=stream,
                 cuda_event_id=event_id)


def _event(corr, stream, event_id, ts, ctx=1):
    return _rows(c.activity_cuda_event2_dtype, 1, kind=records.KIND_CUDA_EVENT, correlation_id=corr, context_id=ctx,
                 stream_id=stream, event_id=event_id, device_id=0, device_timestamp=ts)


def _events(builder):
    return [e for chunk in iter_event_chunks(builder) for e in chunk]


def _decode(chunks, **opts):
    b = TraceBuilder(pid=99)
    dec = CudaEmitter(_names, options=DecodeOptions(**opts))
    dec.write(b, ProcessWindow(T0, T0 + 10**9), records.gather_records(chunks))
    return b, _events(b)


def test_kind_and_enum_values_match_cupti_python():
    assert records.KIND_CONCURRENT_KERNEL == c.ActivityKind.CONCURRENT_KERNEL
    assert records.KIND_SYNCHRONIZATION == c.ActivityKind.SYNCHRONIZATION
    assert records.KIND_CUDA_EVENT == c.ActivityKind.CUDA_EVENT
    assert records.KIND_EXTERNAL_CORRELATION == c.ActivityKind.EXTERNAL_CORRELATION
    assert records.KIND_OVERHEAD == c.ActivityKind.OVERHEAD
    for kind in ("MEMCPY", "MEMSET", "KERNEL", "DRIVER", "RUNTIME"):
        assert getattr(records, f"KIND_{kind}") == c.ActivityKind[kind]
    assert decode.MEMCPY_KINDS[c.ActivityMemcpyKind.PTOP] == "PtoP"
    assert decode.MEMORY_KINDS[c.ActivityMemoryKind.MANAGED_STATIC] == "Managed Static"
    assert decode.SYNC_KINDS[c.ActivitySynchronizationType.STREAM_WAIT_EVENT] == "Stream Wait Event"
    assert decode.EXTERNAL_KIND_CUSTOM0 == c.ExternalCorrelationKind.CUSTOM0
    for m in c.ActivityOverheadKind:
        if m.name not in ("FORCE_INT", "UVM_ACTIVITY_INIT"):
            assert m.value in decode.OVERHEAD_KINDS


def test_dtype_lookup_follows_record_classes():
    assert records.dtype_for_class(c.ActivityKernel13) == c.activity_kernel13_dtype
    assert records.dtype_for_class(c.ActivityAPI) == c.activity_api_dtype
    assert records.dtype_for_class(c.ActivityMemcpyPtoP4) == c.activity_memcpy_pto_p4_dtype


def test_capture_copies_a_buffer_of_cupti_record_objects():
    # Lay records out in one buffer like CUPTI does and hand cupti-python record objects over it.
    chunk = records.pack([_kernel(2, start=[T0, T0 + 10], end=[T0 + 5, T0 + 20], correlation_id=[1, 2]),
                          _api(100, 1, T0 - 100, T0 - 50)])
    buf = ctypes.create_string_buffer(chunk.data, len(chunk.data))
    base = ctypes.addressof(buf)
    name = ctypes.create_string_buffer(b"_Z6vecAddPfS_S_i")
    objs = []
    for off, kind in zip(chunk.offsets.tolist(), chunk.kinds.tolist()):
        cls = c.ActivityKernel13 if kind == records.KIND_CONCURRENT_KERNEL else c.ActivityAPI
        if cls is c.ActivityKernel13:
            ctypes.c_int64.from_address(base + off + c.activity_kernel13_dtype.fields["name"][1]).value = \
                ctypes.addressof(name)
        objs.append(cls.from_ptr(base + off, owner=buf))
    got = records.capture(objs)
    assert got.kinds.tolist() == [10, 10, 5]
    assert got.rows([records.KIND_CONCURRENT_KERNEL])["correlation_id"].tolist() == [1, 2]
    assert list(got.names.values()) == ["_Z6vecAddPfS_S_i"]
    b, evs = _decode([got])
    kern = [e for e in evs if e.get("cat") == "kernel"]
    assert [k["name"] for k in kern] == ["vecAdd(float*, float*, float*, int)"] * 2


def test_kernel_rows_and_args_like_kineto():
    k = _kernel(1, start=T0 + 100, end=T0 + 1100, correlation_id=5, queued=T0 + 50, graph_id=3, channel_id=2)
    ext = _rows(c.activity_external_correlation_dtype, 1, kind=records.KIND_EXTERNAL_CORRELATION,
                external_kind=c.ExternalCorrelationKind.CUSTOM0, external_id=777, correlation_id=5)
    launch = _api(100, 5, T0 + 10, T0 + 60)
    chunk = records.pack([k, ext, launch], names={0x1000: "_Z6vecAddPfS_S_i"})
    b, evs = _decode([chunk], sm_count={0: 4})
    (kern,) = [e for e in evs if e.get("cat") == "kernel"]
    assert (kern["pid"], kern["tid"], kern["dur"]) == (0, 7, 1.0)
    a = kern["args"]
    assert list(a)[0] == "External id" and a["External id"] == 777
    assert a["grid"] == [4, 2, 1] and a["block"] == [128, 1, 1]
    assert a["shared memory"] == 1536 and a["registers per thread"] == 32
    assert a["blocks per SM"] == 2.0 and a["warps per SM"] == 8.0
    assert (a["device"], a["context"], a["stream"], a["correlation"], a["graph id"], a["channel"]) == (0, 1, 7, 5, 3, 2)
    (rt,) = [e for e in evs if e.get("cat") == "cuda_runtime"]
    assert rt["name"] == "cudaLaunchKernel" and (rt["pid"], rt["tid"]) == (99, 4242)
    assert rt["args"] == {"External id": 777, "cbid": 100, "correlation": 5}
    flows = sorted((e for e in evs if e["ph"] in "sf"), key=lambda e: e["ph"] != "s")
    assert [(f["ph"], f["id"], f["pid"], f["tid"]) for f in flows] == [("s", 5, 99, 4242), ("f", 5, 0, 7)]
    assert b.thread_names[(0, 7)] == "stream 7 "


def test_memcpy_memset_names_bandwidth_and_window_drop():
    cp = _rows(c.activity_memcpy6_dtype, 2, kind=records.KIND_MEMCPY, copy_kind=c.ActivityMemcpyKind.HTOD,
               src_kind=c.ActivityMemoryKind.PINNED, dst_kind=c.ActivityMemoryKind.DEVICE, bytes=4000,
               start=[T0, T0 - 10**9], end=[T0 + 2000, T0 - 10**9 + 5], device_id=0, context_id=1, stream_id=7,
               correlation_id=[9, 10])
    ms = _rows(c.activity_memset4_dtype, 1, kind=records.KIND_MEMSET, memory_kind=c.ActivityMemoryKind.DEVICE,
               bytes=64, start=T0 + 5, end=T0 + 5, device_id=0, context_id=1, stream_id=7, correlation_id=11)
    b, evs = _decode([records.pack([cp, ms])])
    (m,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert m["name"] == "Memcpy HtoD (Pinned -> Device)"
    assert m["args"]["memory bandwidth (GB/s)"] == 2.0 and m["args"]["bytes"] == 4000
    (s,) = [e for e in evs if e.get("cat") == "gpu_memset"]
    assert s["name"] == "Memset (Device)" and "memory bandwidth (GB/s)" not in s["args"]  # zero duration
    assert b.dropped == {"cuda memcpy out of window": 1}


def test_peer_to_peer_copies_carry_kinetos_from_in_to_args_in_order():
    """MEMCPY2 rows share the copy rows' writer (``_copy_like``): Kineto's from/in/to device and context args
    first, then stream, correlation, bytes and bandwidth, in that order (the JSON's key order)."""
    p2p = _rows(c.activity_memcpy_pto_p4_dtype, 1, kind=records.KIND_MEMCPY2, copy_kind=c.ActivityMemcpyKind.PTOP,
                src_kind=c.ActivityMemoryKind.DEVICE, dst_kind=c.ActivityMemoryKind.DEVICE, bytes=8000,
                start=T0 + 100, end=T0 + 2100, device_id=1, context_id=3, stream_id=5, correlation_id=12,
                src_device_id=1, dst_device_id=2, src_context_id=3, dst_context_id=4)
    _, evs = _decode([records.pack([p2p])])
    (m,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert m["name"] == "Memcpy PtoP (Device -> Device)" and (m["pid"], m["tid"]) == (1, 5)
    assert list(m["args"].items())[:10] == [
        ("fromDevice", 1), ("inDevice", 1), ("toDevice", 2), ("fromContext", 3), ("inContext", 3), ("toContext", 4),
        ("stream", 5), ("correlation", 12), ("bytes", 8000), ("memory bandwidth (GB/s)", 4.0)]


def test_runtime_filtering_and_driver_allow_list():
    drv = _rows(c.activity_api_dtype, 2, kind=records.KIND_DRIVER, cbid=[7, 8], correlation_id=[20, 21],
                start=[T0, T0 + 10], end=[T0 + 5, T0 + 15], process_id=99, thread_id=1)
    chunk = records.pack([_api(104, 22, T0, T0 + 1), _api(107, 23, T0, T0 + 1), drv])
    _, evs = _decode([chunk])
    assert sorted(e["name"] for e in evs if e["ph"] == "X") == ["cuLaunchKernel", "cudaMalloc"]
    assert not [e for e in evs if e["ph"] in "sf"]  # no device ends: no dangling arrows


def test_stream_wait_event_resolves_producer_and_draws_arrow():
    # Stream 7 records event 3 (corr 30); stream 9 waits on it (corr 31); stream 9 then runs a kernel.
    chunk = records.pack([
        _kernel(1, start=T0 + 5000, end=T0 + 6000, stream_id=9, correlation_id=32),
        _sync(c.ActivitySynchronizationType.STREAM_WAIT_EVENT, 31, T0 + 200, 9, event_id=3),
        _event(30, 7, 3, T0 + 100),
        _api(102, 30, T0 + 90, T0 + 95), _api(101, 31, T0 + 190, T0 + 195),
    ], names={0x1000: "k"})
    b, evs = _decode([chunk])
    (w,) = [e for e in evs if e.get("cat") == "cuda_sync"]
    assert w["name"] == "Stream Wait Event" and (w["pid"], w["tid"]) == (0, 9)
    assert w["args"]["cuda_sync_kind"] == "Stream Wait Event"
    assert (w["args"]["wait_on_stream"], w["args"]["wait_on_cuda_event_record_corr_id"],
            w["args"]["wait_on_cuda_event_id"]) == (7, 30, 3)
    (ev,) = [e for e in evs if e.get("cat") == "cuda_event"]
    assert ev["args"]["event_id"] == 3 and (ev["pid"], ev["tid"]) == (0, 7) and ev["dur"] == 0.001
    dep = [e for e in evs if e["ph"] in "sf" and e["id"] >= (1 << 48)]
    assert sorted((e["ph"], e["tid"]) for e in dep) == [("f", 9), ("s", 7)]


def test_event_sync_and_stream_sync_rows():
    chunk = records.pack([
        _kernel(1, start=T0 + 10, end=T0 + 20, correlation_id=1),
        _event(2, 7, 5, T0 + 30),
        _sync(c.ActivitySynchronizationType.EVENT_SYNCHRONIZE, 3, T0 + 40, decode.NO_STREAM, event_id=5),
        _sync(c.ActivitySynchronizationType.STREAM_SYNCHRONIZE, 4, T0 + 50, 7),
        _sync(c.ActivitySynchronizationType.EVENT_SYNCHRONIZE, 6, T0 + 60, decode.NO_STREAM, event_id=99),
    ], names={0x1000: "k"})
    b, evs = _decode([chunk])
    syncs = [e for e in evs if e.get("cat") == "cuda_sync"]
    es, ss, unres = sorted(syncs, key=lambda e: e["args"]["correlation"])
    assert es["name"] == "Event Sync" and es["tid"] == 1 and es["args"]["stream"] == -1
    assert (es["args"]["wait_on_stream"], es["args"]["wait_on_cuda_event_record_corr_id"]) == (7, 2)
    assert ss["name"] == "Stream Sync" and ss["tid"] == 1_000_007
    assert not any(k.startswith("wait_on") for k in ss["args"])
    assert b.thread_names[(0, 1_000_007)] == "stream 7 (sync)" and b.thread_sort[(0, 1_000_007)] == 7
    assert unres["args"]["wait_on_cuda_event_id"] == 99 and unres["args"]["wait_on_stream"] == -1


def test_wait_on_idle_stream_dropped_and_option_off():
    chunk = records.pack([_sync(c.ActivitySynchronizationType.STREAM_WAIT_EVENT, 1, T0, 9, event_id=1)])
    b, evs = _decode([chunk])
    assert not [e for e in evs if e.get("cat") == "cuda_sync"]
    assert b.dropped == {"cuda stream wait event on idle stream": 1}
    chunk = records.pack([_kernel(1, start=T0, end=T0 + 1, stream_id=9, correlation_id=2),
                          _sync(c.ActivitySynchronizationType.STREAM_WAIT_EVENT, 1, T0, 9, event_id=1)],
                         names={0x1000: "k"})
    _, evs = _decode([chunk], display_sync_wait_events=False)
    assert not [e for e in evs if e.get("cat") == "cuda_sync"]


def test_overhead_rows():
    ov = _rows(c.activity_overhead3_dtype, 1, kind=records.KIND_OVERHEAD,
               overhead_kind=c.ActivityOverheadKind.CUPTI_BUFFER_FLUSH, start=T0, end=T0 + 10)
    b, evs = _decode([records.pack([ov])])
    (o,) = [e for e in evs if e.get("cat") == "overhead"]
    assert o["name"] == "Buffer Flush" and o["pid"] == decode.OVERHEAD_PID and b.process_names[o["pid"]] == "CUPTI Overhead"
    assert 1 << 22 < o["pid"] < 1 << 31 and o["pid"] % 4  # no real pid, none Perfetto maps (Kineto writes -1)


def test_bulk_decode_is_columnar():
    n = 20000
    rng = np.random.default_rng(7)
    start = T0 + np.sort(rng.integers(0, 10**8, n))
    k = _kernel(n, start=start, end=start + 1000, correlation_id=np.arange(1, n + 1), stream_id=rng.integers(7, 11, n))
    chunk = records.pack([k], names={0x1000: "_Z4gemmv"})
    b = TraceBuilder(pid=1)
    CudaEmitter(_names).write(b, ProcessWindow(T0, T0 + 10**9), records.gather_records([chunk]))
    assert len(b.slices) == 1 and len(b.slices[0]) == n  # one batch, not one object per record


def _cupti_python_parser():
    """cupti-python's own record parser (what its buffer-completed wrapper hands the Python callback)."""
    import cupti.utils as cu

    cap = cu.__pyx_capi__["parseActivityStruct"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    proto = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    return proto(get_ptr(cap, get_name(cap)))


def test_capture_handles_records_parsed_by_cupti_python_which_are_copies():
    # cupti-python builds each record with from_ptr() and no owner, i.e. a private copy whose .ptr
    # is NOT inside CUPTI's buffer; capture must not assume the records are contiguous.
    parse = _cupti_python_parser()
    chunk = records.pack([_kernel(3, start=[T0, T0 + 10, T0 + 30], end=[T0 + 5, T0 + 20, T0 + 40],
                                  correlation_id=[1, 2, 3]),
                          _api(100, 1, T0 - 100, T0 - 50), _sync(3, 9, T0 + 50, 7)])
    buf = ctypes.create_string_buffer(chunk.data, len(chunk.data))
    base = ctypes.addressof(buf)
    name = ctypes.create_string_buffer(b"_Z6vecAddPfS_S_i")
    off_name = c.activity_kernel13_dtype.fields["name"][1]
    for off, kind in zip(chunk.offsets.tolist(), chunk.kinds.tolist()):
        if kind == records.KIND_CONCURRENT_KERNEL:
            ctypes.c_int64.from_address(base + off + off_name).value = ctypes.addressof(name)
    objs = [parse(base, len(chunk.data), base + off) for off in chunk.offsets.tolist()]
    assert type(objs[0]).__name__ == "ActivityKernel13"
    assert objs[0].ptr != base  # a copy, not a view
    got = records.capture(objs)
    # Only the records' own bytes are kept (not whatever heap lies between the scattered copies).
    assert len(got.data) <= len(chunk.data)
    del objs, buf  # CUPTI frees its buffer (and the record copies go) once the callback returns
    assert got.kinds.tolist() == [10, 10, 10, 5, 38]
    assert got.rows([records.KIND_CONCURRENT_KERNEL])["correlation_id"].tolist() == [1, 2, 3]
    assert got.rows([records.KIND_RUNTIME])["cbid"].tolist() == [100]
    assert got.rows([records.KIND_SYNCHRONIZATION])["type"].tolist() == [3]
    assert list(got.names.values()) == ["_Z6vecAddPfS_S_i"]


def test_peer_to_peer_copies_from_cupti_pythons_own_dtype():
    # CUPTI_ACTIVITY_KIND_MEMCPY2 records, laid out by cupti-python's activity_memcpy_pto_p4_dtype.
    assert records.KIND_MEMCPY2 == c.ActivityKind.MEMCPY2
    from xpuprof.backends.cuda.activity_api import KINDS_FOR

    assert records.KIND_MEMCPY2 in KINDS_FOR[ActivityType.GPU_MEMCPY]  # enabled with copies, as Kineto does
    p2p = _rows(c.activity_memcpy_pto_p4_dtype, 1, kind=records.KIND_MEMCPY2, copy_kind=c.ActivityMemcpyKind.PTOP,
                src_kind=c.ActivityMemoryKind.DEVICE, dst_kind=c.ActivityMemoryKind.DEVICE, bytes=1 << 20,
                start=T0 + 100, end=T0 + 100 + 2**20 // 8, device_id=1, context_id=11, stream_id=13,
                src_device_id=1, src_context_id=11, dst_device_id=0, dst_context_id=10, correlation_id=31)
    launch = _api(105, 31, T0, T0 + 50)
    assert records.dtype_for_class(c.ActivityMemcpyPtoP4) == p2p.dtype
    b, evs = _decode([records.pack([p2p, launch])])
    (cp,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert cp["name"] == "Memcpy PtoP (Device -> Device)"
    assert (cp["pid"], cp["tid"]) == (1, 13)
    a = cp["args"]
    assert (a["fromDevice"], a["inDevice"], a["toDevice"]) == (1, 1, 0)
    assert (a["fromContext"], a["inContext"], a["toContext"]) == (11, 11, 10)
    assert (a["stream"], a["correlation"], a["bytes"], a["memory bandwidth (GB/s)"]) == (13, 31, 1 << 20, 8.0)
    assert {(f["ph"], f["id"]) for f in evs if f["ph"] in "sf"} == {("s", 31), ("f", 31)}


def test_unknown_enum_values_get_kinetos_labels_not_a_neighbours():
    cp = _rows(c.activity_memcpy6_dtype, 2, kind=records.KIND_MEMCPY, copy_kind=[0, 42], src_kind=[9, 3],
               dst_kind=[3, 200], bytes=8, start=T0, end=T0 + 8, stream_id=7, correlation_id=[1, 2])
    ms = _rows(c.activity_memset4_dtype, 1, kind=records.KIND_MEMSET, memory_kind=12, bytes=8, start=T0, end=T0 + 8,
               stream_id=7, correlation_id=3)
    sy = _sync(0, 4, T0, 7)  # CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN
    sy9 = _sync(9, 5, T0 + 1, 7)
    ov = _rows(c.activity_overhead3_dtype, 3, kind=records.KIND_OVERHEAD,
               overhead_kind=[c.ActivityOverheadKind.UVM_ACTIVITY_INIT, 4242, 0], start=T0, end=T0 + 10)
    _, evs = _decode([records.pack([cp, ms, sy, sy9, ov])])
    names = sorted(e["name"] for e in evs if e.get("ph") == "X")
    assert "Memcpy <unknown> (Unrecognized -> Device)" in names and "Memcpy <unknown> (Device -> Unrecognized)" in names
    assert "Memset (Unrecognized)" in names
    assert names.count("Unknown Sync") == 2 and "Context Sync" not in names
    assert {"UVM Activity Init", "Unrecognized", "Unknown"} <= set(names)


def test_overhead_thread_id_only_from_thread_objects():
    ov = _rows(c.activity_overhead3_dtype, 2, kind=records.KIND_OVERHEAD,
               overhead_kind=c.ActivityOverheadKind.CUPTI_BUFFER_FLUSH, start=[T0, T0 + 20], end=[T0 + 10, T0 + 30],
               object_kind=[c.ActivityObjectKind.THREAD, c.ActivityObjectKind.DEVICE])
    ov["object_id"]["pt"]["thread_id"] = [4242, 0]
    ov["object_id"]["dcs"]["device_id"][1] = 3  # the union's first word: a device id, not a thread id
    ov["object_id"]["dcs"]["context_id"][1] = 77  # overlaps pt.thread_id
    _, evs = _decode([records.pack([ov])])
    tids = sorted(e["tid"] for e in evs if e.get("cat") == "overhead")
    assert tids == [0, 4242]


def test_kernel_queued_is_cuptis_raw_value_and_occupancy_args():
    k = _kernel(1, start=T0 + 100, end=T0 + 1100, correlation_id=5, queued=123456, grid_x=1024, grid_y=1, grid_z=1,
                block_x=256, registers_per_thread=32, static_shared_memory=0, dynamic_shared_memory=0)
    chunk = records.pack([k], names={0x1000: "k"})
    chunk.time_offset_ns = 10**15  # the CUPTI -> epoch offset a live session applies
    chunk_rows = chunk.rows([records.KIND_CONCURRENT_KERNEL])
    assert int(chunk_rows["queued"][0]) == 123456 and int(chunk_rows["start"][0]) == T0 + 100 + 10**15
    h100 = {"numSms": 132, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "warpSize": 32,
            "sharedMemPerMultiprocessor": 233472, "maxBlocksPerMultiProcessor": 32, "computeMajor": 9}
    b = TraceBuilder(pid=99)
    CudaEmitter(_names, options=DecodeOptions(device_props={0: h100})).write(
        b, None, records.gather_records([records.pack([k], names={0x1000: "k"})]))
    (kern,) = [e for e in _events(b) if e.get("cat") == "kernel"]
    a = kern["args"]
    assert a["queued"] == 123456
    assert a["blocks per SM"] == pytest.approx(1024 / 132) and a["warps per SM"] == pytest.approx(1024 / 132 * 8)
    # 8 warps/block: warps limit 64/8 = 8 blocks, registers 65536/(32*32) = 64 warps = 8 blocks;
    # min(8, 7.76) * 256 / 2048 = 97 %
    assert a["est. achieved occupancy %"] == 97


def test_bulk_rows_gathered_from_many_buffers_equal_the_per_buffer_rows(monkeypatch):
    """Kinds gathered straight into one array (C gather when built, numpy otherwise) equal
    the per-buffer structured rows concatenated, clock offsets included."""
    rng = np.random.default_rng(3)
    chunks = []
    for i in range(5):
        n = int(rng.integers(1, 300))
        start = T0 + np.sort(rng.integers(0, 10**6, n))
        k = _kernel(n, start=start, end=start + 10, correlation_id=np.arange(n) + 1, stream_id=rng.integers(1, 5, n))
        a = np.concatenate([_api(100, j, T0 + j, T0 + j + 5) for j in range(1, 20)])
        chunk = records.pack([a, k, a[:3]], names={0x1000: "_Z4gemmv"})
        chunk.time_offset_ns = 1000 * i
        chunks.append(chunk)
    want = {kind: np.concatenate([c.rows([kind]) for c in chunks]) for kind in (records.KIND_CONCURRENT_KERNEL,
                                                                                records.KIND_RUNTIME)}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(records, "_rowgather_module", None)
        for kind, rows in want.items():
            got = records.gather_kinds(list(chunks), (kind,))[kind]
            assert got.dtype == chunks[0].dtypes[kind]  # CUPTI's own layout (np.concatenate rewrote unions)
            plain = [f for f in rows.dtype.names if rows.dtype[f].fields is None]
            assert len(plain) >= 8
            for f in plain:
                assert got[f].tolist() == rows[f].tolist(), f


def _filled(dtype, n, kind, rng):
    """Records of one kind with every plain field set from the seeded generator (small values, so
    device ids stay indexable), times inside the window: a field the lean decode failed to keep
    would change the trace."""
    arr = np.zeros(n, dtype)

    def fill(view, dt):
        for name in dt.names:
            sub = dt.fields[name][0]
            if sub.names:
                fill(view[name], sub)
            elif sub.subdtype is None and sub.kind in "iu":
                view[name] = rng.integers(1, 4 if name.endswith("device_id") else 40, len(view))
    fill(arr, dtype)
    arr["kind"] = kind
    start = T0 + np.sort(rng.integers(0, 10**6, n))
    for f, v in (("start", start), ("end", start + rng.integers(1, 500, n)), ("completed", 0), ("queued", start - 5),
                 ("device_timestamp", start + 1), ("name", 0x1000 + 64 * rng.integers(0, 3, n)),
                 ("correlation_id", rng.integers(1, 200, n)), ("overhead_kind", 65536), ("object_kind", 2)):
        if f in dtype.names:
            arr[f] = v
    return arr


def _every_kind_chunks(seed):
    rng = np.random.default_rng(seed)
    kinds = [(c.activity_kernel13_dtype, records.KIND_CONCURRENT_KERNEL), (c.activity_memcpy6_dtype, records.KIND_MEMCPY),
             (c.activity_memcpy_pto_p4_dtype, records.KIND_MEMCPY2), (c.activity_memset4_dtype, records.KIND_MEMSET),
             (c.activity_api_dtype, records.KIND_RUNTIME), (c.activity_api_dtype, records.KIND_DRIVER),
             (c.activity_synchronization2_dtype, records.KIND_SYNCHRONIZATION),
             (c.activity_cuda_event2_dtype, records.KIND_CUDA_EVENT),
             (c.activity_external_correlation_dtype, records.KIND_EXTERNAL_CORRELATION),
             (c.activity_overhead3_dtype, records.KIND_OVERHEAD)]
    names = {0x1000: "_Z4gemmv", 0x1040: "_Z4axpyv", 0x1080: "kernel"}
    chunks = []
    for i in range(4):
        parts = [_filled(dt, int(rng.integers(1, 60)), kind, rng) for dt, kind in kinds]
        for p in parts:
            if p.dtype == c.activity_api_dtype:
                p["cbid"] = rng.choice([100, 101, 102, 103, 105, 106] if p["kind"][0] == records.KIND_RUNTIME else [7],
                                       len(p))
            if "type" in p.dtype.names:
                p["type"] = rng.integers(0, 6, len(p))
        chunk = records.pack(parts, names=names)
        chunk.time_offset_ns = 100 * i
        chunks.append(chunk)
    return chunks


@pytest.mark.parametrize("native", [True, False], ids=["C gather", "numpy gather"])
def test_lean_decode_writes_the_same_trace_as_whole_records(monkeypatch, tmp_path, native):
    """The decode keeps only the fields it reads (records.EMITTED_FIELDS), frees each buffer
    once gathered (release) and stores one-value columns once. With CUPTI's whole records, the
    buffers kept and every column full, the same events come out, in the same order."""
    from xpuprof.backends import common as flows
    from xpuprof.trace.builder import columns as builder_mod
    from xpuprof.trace.write.chrome import write_chrome_trace

    def trace(name, release, fields=records.EMITTED_FIELDS):
        b = TraceBuilder(pid=99)
        chunks = _every_kind_chunks(5)
        recs = records.gather_records(chunks, fields=fields, release=release)
        CudaEmitter(_names, options=DecodeOptions(sm_count={1: 108, 2: 108, 3: 108})).write(
            b, ProcessWindow(T0, T0 + 10**9), recs, release=release)
        assert all(ch is None for ch in chunks) == release
        (tmp_path / name).mkdir()
        write_chrome_trace(b, tmp_path / name / "trace.json")  # the file's name is in the trace
        return (tmp_path / name / "trace.json").read_bytes()

    if not native:
        monkeypatch.setattr(records, "_rowgather_module", None)
    lean = trace("lean", release=True)  # directory names of one length: the path is in the trace
    for module in (builder_mod, decode, flows):
        monkeypatch.setattr(module, "stored_once",
                            lambda values, dtype=None: values if dtype is None else values.astype(dtype))
    whole = trace("full", release=False, fields=None)
    evs = orjson.loads(lean)["traceEvents"]
    assert len(lean) == len(whole) and evs == orjson.loads(whole)["traceEvents"]  # the same events, in order
    cats = {e.get("cat") for e in evs}
    assert {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync", "cuda_event",
            "overhead"} <= cats, cats
    assert any(e["ph"] == "s" for e in evs) and any(e.get("args", {}).get("priority") for e in evs)


def test_large_buffers_live_in_their_own_pages_and_decode_the_same():
    """Chunks from 1 MiB up are copied into an anonymous mapping (freed straight back to the system,
    where glibc's heap would keep them); what decodes from it is what decodes from the bytes."""
    import mmap

    rows = _kernel(5000, start=T0 + np.arange(5000) * 10, end=T0 + np.arange(5000) * 10 + 5,
                   correlation_id=np.arange(5000) + 1)
    chunk = records.pack([rows], names={0x1000: "_Z4gemmv"})
    assert len(chunk.data) >= records.OWN_PAGES_FROM
    paged = records.own_pages(chunk.data)
    assert isinstance(paged, mmap.mmap) and paged[:] == chunk.data
    assert isinstance(records.own_pages(b"small"), bytes)
    on_pages = records.RawChunk(paged, chunk.offsets, chunk.kinds, chunk.dtypes, chunk.names)
    assert _decode([on_pages])[1] == _decode([chunk])[1]
