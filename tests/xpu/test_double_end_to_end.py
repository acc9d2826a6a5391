"""The whole live path against the PTI-ABI double: load, enable, C callbacks from a foreign thread
holding a lock the caller also takes, flush, drain, decode, builder, JSON."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from slice_tables import slice_table
from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.vendors import pti
from xpuprof.backends.xpu import emit
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.clock import now_ns
from xpuprof.config.options import ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder


def by_cat(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


def test_full_path_produces_kineto_xpu_json(pti_double, tmp_path, run_session):
    rc, api, builder, trace, (t0, t1) = run_session(pti_double, tmp_path, flags=pti_double.P2P | pti_double.COMMS)
    assert rc == 0, "the workload's lock wait timed out: the buffer callbacks deadlocked"
    kernels = by_cat(trace, "kernel")
    assert [k["name"] for k in kernels[:2]] == ["gemm_kernel<float>", "relu_kernel"]
    assert len(kernels) == 6
    k0 = kernels[0]
    assert k0["pid"] == 0 and k0["tid"] == 7 and kernels[1]["pid"] == 1 and kernels[1]["tid"] == 8
    assert k0["args"]["External id"] == 4242
    assert k0["args"]["source_file_name"] == "gemm.cpp" and "source_file_name" not in kernels[1]["args"]
    assert k0["args"]["context"] == "0x00000000000000c0" and k0["args"]["l0 queue"] == "0x0000000000001000"
    assert k0["args"]["sycl queue"] == 7 and k0["dur"] == 2.0
    assert k0["args"]["submitted_rel_to_start"] == -2.0 and k0["args"]["appended_rel_to_start"] == -3.0
    # timestamps converted from the double's clock domain (monotonic + 1e17) into the trace's epoch
    base = trace["baseTimeNanoseconds"]
    start_ns = base + round(k0["ts"] * 1000)
    assert t0 - 1_000_000 <= start_ns <= t1 + 1_000_000
    copies = by_cat(trace, "gpu_memcpy")
    # memory-type wording comes from the loaded PTI (ptiViewMemoryTypeToString), as in Kineto
    assert copies[0]["name"] == "Memcpy H2D (Host (Driver Allocated) -> Device)"
    assert copies[0]["args"]["src memory"] == "Host (Driver Allocated)"
    assert copies[0]["args"]["bytes"] == 1 << 20 and copies[0]["args"]["memory bandwidth (GB/s)"] == pytest.approx(1048.576)
    assert copies[0]["args"]["l0 call"] == "zeCommandListAppendMemoryCopy"
    assert any(c["name"] == "Memcpy D2D (P2P)" and c["args"]["toDevice"] == 1 for c in copies)
    fills = by_cat(trace, "gpu_memset")
    assert fills[0]["name"] == "Memset (0 -> Device)" and fills[0]["args"]["bytes"] == 4096
    runtime = by_cat(trace, "xpu_runtime")
    assert {r["name"] for r in runtime} == {"urEnqueueKernelLaunch", "urEnqueueUSMMemcpy", "urEnqueueUSMFill"}
    import os
    assert runtime[0]["pid"] == os.getpid() and runtime[0]["args"]["External id"] == 4242
    driver = by_cat(trace, "xpu_driver")
    assert {d["name"] for d in driver} == {"zeCommandListAppendLaunchKernel"}
    syncs = by_cat(trace, "xpu_sync")
    assert len(syncs) == 6 and syncs[0]["pid"] == emit.OVERHEAD_PID and syncs[0]["name"] == "zeCommandQueueSynchronize"
    assert syncs[0]["args"]["Type"] == "HOST_COMMAND_QUEUE" and syncs[0]["args"]["Event_handle"] == "0x000000000000e000"
    overhead = by_cat(trace, "overhead")
    assert overhead[0]["name"] == "Buffer Flush" and overhead[0]["pid"] == emit.OVERHEAD_PID
    assert overhead[0]["args"]["overhead count"] == 3
    # their own process, which no real process or device shares and every viewer keeps (not Kineto's -1)
    assert 1 << 22 < emit.OVERHEAD_PID < 1 << 31 and emit.OVERHEAD_PID % 4
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert names[emit.OVERHEAD_PID] == "XPU Sync and Overhead" and names[0] != names[emit.OVERHEAD_PID]
    comms = by_cat(trace, "collective_comm")
    assert comms[0]["name"] == "xccl::allreduce" and comms[0]["args"]["Communicator_id"] == 77
    # flows: one s per launching runtime call, one f per device op; driver calls sharing a kernel's id end nothing
    flows = [e for e in trace["traceEvents"] if e.get("cat") == "ac2g"]
    starts = [f for f in flows if f["ph"] == "s"]
    ends = [f for f in flows if f["ph"] == "f"]
    assert len(starts) == len(ends) == 18  # 6 kernels + 6 copies + 6 fills
    assert {f["id"] for f in starts} == {f["id"] for f in ends}
    assert all(f.get("bp") == "e" for f in ends) and not any("bp" in f for f in starts)
    assert all(f["pid"] == os.getpid() for f in starts)
    kernel_flow_ends = [f for f in ends if f["id"] == k0["args"]["correlation"]]
    assert kernel_flow_ends[0]["pid"] == 0 and kernel_flow_ends[0]["tid"] == 7
    # rows and metadata
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    assert {"name": "thread_name", "pid": 0, "tid": 7} in [{k: e[k] for k in ("name", "pid", "tid")} for e in meta]
    assert any(e["name"] == "thread_name" and e["args"]["name"] == "Stream 8" for e in meta)
    assert trace["xpupti_version"] == "0.99.0-xpuprof-double"
    # kernels kept for per-kernel metrics
    found, idx = api.kernels.find(np.array([1, 2, 999], np.uint64))
    assert found.tolist() == [True, True, False]
    assert api.kernels.name[idx[1]] == "relu_kernel" and api.kernels.device[idx[1]] == 1


def test_unknown_kinds_and_window_drops_are_counted(pti_double, tmp_path, run_session):
    rc, api, builder, trace, _ = run_session(pti_double, tmp_path, iterations=3, flags=pti_double.FUTURE_RECORD)
    assert rc == 0
    assert trace["dropped_records"]["xpu: unknown record kind 13"] == 1
    # records from before start() fall outside the window and are counted, not silently lost
    api2 = XpuptiActivityApi(frozenset({ActivityType.CONCURRENT_KERNEL}), library=pti_double.lib, device_uuids=[bytes(range(0xA0, 0xAF)) + b"\x00"])
    assert pti_double.workload_holding_gil(4) == 0
    api2.start()
    api2.stop()
    b = TraceBuilder()
    api2.process(b, ProcessWindow(api2.start_ns, now_ns()))
    assert b.dropped == {"xpu: out of window": 4}
    assert slice_table(b)["ts"].size == 0


def test_only_selected_types_are_enabled_and_written(pti_double, tmp_path, run_session):
    rc, api, builder, trace, _ = run_session(pti_double, tmp_path, types=frozenset({ActivityType.CONCURRENT_KERNEL}))
    assert rc == 0
    # the external-correlation view joins by itself (as in Kineto): kernels stay linkable to their ranges
    assert set(api.enabled_views) == {pti.ViewKind.DEVICE_GPU_KERNEL, pti.ViewKind.EXTERNAL_CORRELATION}
    cats = {e.get("cat") for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert cats == {"kernel"}


def test_python_callbacks_deadlock_where_the_c_callbacks_do_not(pti_double):
    """The double reproduces PTI's deadlock: a ctypes callback needs the GIL that the caller holds
    while it waits for the lock the callback's thread holds. The C callbacks finish (rc 0 above);
    Python callbacks make the caller's bounded wait time out (ETIMEDOUT)."""
    import errno

    kept = []

    @pti.BUFFER_REQUESTED
    def request(buf, size):
        b = ctypes.create_string_buffer(1 << 16)
        kept.append(b)
        buf[0] = ctypes.cast(b, ctypes.POINTER(ctypes.c_ubyte))
        size[0] = len(b)

    @pti.BUFFER_COMPLETED
    def complete(buf, size, used):
        kept.append(used)

    lib = pti_double.lib
    assert lib.ptiViewSetCallbacks(ctypes.cast(request, ctypes.c_void_p), ctypes.cast(complete, ctypes.c_void_p)) == 0
    assert lib.ptiViewEnable(int(pti.ViewKind.DEVICE_GPU_KERNEL)) == 0
    rc = pti_double.workload_holding_gil(2, 0, timeout_ms=300)
    pti_double.c.xpd_wait_idle()  # GIL released: the stuck callback can now run and the collector ends
    assert rc == errno.ETIMEDOUT


def test_many_small_buffers_round_trip_through_the_c_queue(pti_double):
    from xpuprof._native import ptibuf

    cfg = ProfilerConfig(custom={"xpu_buffer_bytes": 4096})
    api = XpuptiActivityApi(frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME}), cfg,
                            library=pti_double.lib)
    try:
        api.start()
        assert pti_double.workload_holding_gil(200) == 0
        api.stop()
        stats = ptibuf.stats()
        assert len(api.buffers) > 10 and stats["completed"] == stats["drained"] == len(api.buffers)
        assert stats["pending"] == 0 and stats["request_failures"] == 0
        b = TraceBuilder()
        api.process(b, ProcessWindow(0, now_ns()))
        assert len(api.kernels) == 200
        assert sorted(api.kernels.kernel_id.tolist()) == list(range(1, 201))
        assert len(slice_table(b, "runtime")["ts"]) == 600  # launch, copy and fill calls
    finally:
        ptibuf.set_buffer_size(ptibuf.DEFAULT_BUFFER_SIZE)


def test_buffer_size_bounds():
    from xpuprof._native import ptibuf

    with pytest.raises(ValueError, match="between 4096 bytes and 16 GiB"):
        ptibuf.set_buffer_size(100)
    assert ptibuf.buffer_size() == ptibuf.DEFAULT_BUFFER_SIZE == 4 << 20


def test_reexec_is_a_no_op_when_nothing_is_missing(monkeypatch):
    calls = []
    monkeypatch.setattr(pti.os, "execve", lambda *a: calls.append(a))
    monkeypatch.setenv("XPUPROF_REEXECED", "1")
    pti.reexec_with_library_path(["-m", "xpuprof"])
    monkeypatch.delenv("XPUPROF_REEXECED")
    monkeypatch.setattr(pti, "find_pti_library", lambda: pti.Path("/nowhere/libpti_view.so"))
    pti.reexec_with_library_path(["-m", "xpuprof"])
    assert calls == []


def test_reexec_adds_the_library_dir(monkeypatch, tmp_path):
    (tmp_path / "pti").mkdir()
    (tmp_path / "pti" / "libpti.so").write_bytes(b"")
    (tmp_path / "libxptifw.so").write_bytes(b"")
    calls = []
    monkeypatch.setattr(pti.os, "execve", lambda exe, argv, env: calls.append((argv, env)))
    monkeypatch.setattr(pti, "find_pti_library", lambda: tmp_path / "libpti_view.so")
    monkeypatch.delenv("XPUPROF_REEXECED", raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    pti.reexec_with_library_path(["-m", "xpuprof", "run"])
    (argv, env), = calls
    assert argv[1:] == ["-m", "xpuprof", "run"]
    assert env["LD_LIBRARY_PATH"] == f"{tmp_path.resolve()}:/opt/x" and env["XPUPROF_REEXECED"] == "1"
