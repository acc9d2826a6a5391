"""Traces shaped as the consumers (HTA, TensorBoard, Catapult) need them.

- default categories are Kineto main's / torch.profiler's vendor names (HTA matches `^(.+)_runtime`
  and only `cuda_runtime` for launch analysis); the generic names on request;
- the sim writes a vendor's trace (`sim_vendor`: xpu, cuda, hip) and is physically plausible: no
  device work starts before the call that launched it (every flow's `f` at or after its `s`);
- per-kernel metrics never add a second `kernel` slice (TensorBoard would count every kernel twice).
"""
from __future__ import annotations

import json
import struct
import sys
import threading
import time

import pytest

import xpuprof
from xpuprof.backends.base import BackendError
from xpuprof.config.yamlconfig import parse_config


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _sim_trace(tmp_path, n=60, seed=0, metrics=(), **config):
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, **config.pop("custom", {})}, **config)
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(backends=["sim"], config=cfg, experimental_config=exp) as prof:
        for i in range(n):
            with xpuprof.record_function(f"step{i % 5}"):
                _spin(2_000 + 37_000 * (i % 9))  # ranges from 2 us to ~300 us: short copies, long spans
    return json.loads(prof.export_chrome_trace(tmp_path / f"t{seed}.json").read_text())["traceEvents"]


def test_device_streams_serialize(tmp_path):
    evs = _sim_trace(tmp_path)
    for stream in {(e["pid"], e["tid"]) for e in evs if e.get("cat") in ("kernel", "gpu_memcpy")}:
        rows = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                      if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy") and (e["pid"], e["tid"]) == stream)
        assert all(b[0] >= a[1] - 1e-3 for a, b in zip(rows, rows[1:])), f"overlapping work on {stream}"


@pytest.mark.parametrize("vendor,runtime_cat,launch", [
    ("xpu", "xpu_runtime", "urEnqueueKernelLaunch"),
    ("cuda", "cuda_runtime", "cudaLaunchKernel"),
    ("hip", "cuda_runtime", "hipLaunchKernel"),  # Kineto's ROCm path writes cuda_runtime
])
def test_sim_vendor_flavour_names_and_default_vendor_categories(tmp_path, vendor, runtime_cat, launch):
    evs = _sim_trace(tmp_path, n=12, custom={"sim_vendor": vendor})
    runtime = [e for e in evs if e.get("ph") == "X" and e.get("cat") == runtime_cat]
    assert launch in {e["name"] for e in runtime}
    assert not [e for e in evs if e.get("cat") == "runtime"]


def test_generic_categories_on_request(tmp_path):
    evs = _sim_trace(tmp_path, n=12, generic_categories=True)
    assert {e["name"] for e in evs if e.get("cat") == "runtime"} >= {"urEnqueueKernelLaunch"}
    assert not [e for e in evs if str(e.get("cat", "")).endswith("_runtime")]


def test_unknown_sim_vendor_is_one_clear_error(tmp_path):
    with pytest.raises(BackendError, match=r"sim_vendor 'nvidia' is not known; valid: xpu, cuda, hip"):
        _sim_trace(tmp_path, n=1, custom={"sim_vendor": "nvidia"})


def test_per_kernel_metrics_add_no_second_kernel(tmp_path):
    evs = _sim_trace(tmp_path, n=20, metrics=["GpuTime"])
    kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == 20 and not [k for k in kernels if k["name"].startswith("metrics: ")]
    assert [e for e in evs if e.get("ph") == "C" and "GpuTime" in e.get("args", {})]  # still visible


def test_yaml_custom_reaches_the_backends():
    cfg = parse_config("workload: {builtin: gemm}\nbackends: [sim]\ncustom: {sim_vendor: cuda}\n"
                       "output: {generic_categories: true}\n")
    pc = cfg.points[0].profiler_config()
    assert pc.custom == {"sim_vendor": "cuda"} and pc.generic_categories


@pytest.mark.parametrize("seed", [0, 1])
def test_device_work_waits_only_for_its_own_stream(tmp_path, seed):
    """An item that starts well after its launch call waited for the item before it on ITS stream
    (the only dependency a trace without wait events can express; HTA's critical path follows it)."""
    evs = _sim_trace(tmp_path, seed=seed, custom={"sim_vendor": "cuda"})
    launch_end = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in evs if e.get("cat") == "cuda_runtime"}
    work = sorted((e for e in evs if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")),
                  key=lambda e: e["ts"])
    prev_end: dict = {}
    slack_us = 10.0  # launch latency plus queue gap
    for e in work:
        row = (e["pid"], e["tid"])
        waited = e["ts"] - launch_end[e["args"]["correlation"]] > slack_us
        assert not waited or abs(e["ts"] - prev_end.get(row, -1e18)) < slack_us, \
            f"{e['name']} (correlation {e['args']['correlation']}) waited for nothing on its stream"
        prev_end[row] = e["ts"] + e["dur"]


# --- physical plausibility: the rules every sim trace keeps ----------------

DEVICE_CATS = ("kernel", "gpu_memcpy")
SYNC_CATS = ("cuda_sync", "xpu_sync")
NS = 5e-4  # half a nanosecond, in the trace's µs


def _is_runtime(e) -> bool:
    return e.get("ph") == "X" and (e.get("cat") == "runtime" or str(e.get("cat", "")).endswith("_runtime"))


def physics_problems(evs) -> list[str]:
    """What breaks the sim's physics: a flow or device item before its call, two items at once on a
    row, a row not in launch order, a sync call (or its device-side row) that returns before the work
    submitted before it ends, a runtime call outside the innermost range it was made in."""
    problems = []
    xs = [e for e in evs if e.get("ph") == "X"]
    calls = {e["args"]["correlation"]: e for e in xs if _is_runtime(e)}
    device = [e for e in xs if e.get("cat") in DEVICE_CATS]
    syncs = [e for e in xs if e.get("cat") in SYNC_CATS]
    starts = {e["id"]: e["ts"] for e in evs if e.get("ph") == "s"}
    for f in (e for e in evs if e.get("ph") == "f"):
        if f["ts"] < starts.get(f["id"], float("inf")) - NS:
            problems.append(f"flow {f['id']} ends {starts[f['id']] - f['ts']:.3f} us before it starts")
    for e in device:
        call = calls[e["args"]["correlation"]]
        if e["ts"] < call["ts"] - NS:
            problems.append(f"{e['name']} (correlation {e['args']['correlation']}) starts before its call")
    rows: dict = {}
    for e in device:
        rows.setdefault((e["pid"], e["tid"]), []).append(e)
    for row, items in rows.items():
        items.sort(key=lambda e: e["ts"])
        for a, b in zip(items, items[1:]):
            if b["ts"] < a["ts"] + a["dur"] - NS:
                problems.append(f"row {row}: {b['name']} starts while {a['name']} runs")
        launched = [calls[e["args"]["correlation"]]["ts"] for e in items]
        if launched != sorted(launched):
            problems.append(f"row {row} runs its work out of launch order")
    for row in syncs:
        call = calls[row["args"]["correlation"]]
        waited = [e["ts"] + e["dur"] for e in device if calls[e["args"]["correlation"]]["ts"] <= call["ts"]]
        drained = max(waited, default=float("-inf"))
        if call["ts"] + call["dur"] < drained - NS:
            problems.append(f"{call['name']} (correlation {row['args']['correlation']}) returns "
                            f"{drained - call['ts'] - call['dur']:.3f} us before the work it waits for ends")
        if row["ts"] + row["dur"] < drained - NS:
            problems.append(f"{row['name']} row {row['args']['correlation']} ends before the work it waits for")
        if row["ts"] < call["ts"] - NS or row["ts"] + row["dur"] > call["ts"] + call["dur"] + NS:
            problems.append(f"{row['name']} row {row['args']['correlation']} lies outside its call")
    ranges = [e for e in xs if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")]
    ns = lambda us: round(us * 1000)  # noqa: E731 (the trace's 3 decimals of a us are whole ns)
    for call in calls.values():
        inside = [r for r in ranges if r["tid"] == call["tid"] and r["ts"] - NS <= call["ts"]
                  and call["ts"] + call["dur"] <= r["ts"] + r["dur"] + NS]
        if ranges and not inside:
            problems.append(f"{call['name']} (correlation {call['args']['correlation']}) overflows its range")
        elif inside:  # strictly inside: at its range's own bounds a viewer cannot tell range from call
            r = min(inside, key=lambda r: r["dur"])
            if not ns(r["ts"]) < ns(call["ts"]) <= ns(call["ts"] + call["dur"]) < ns(r["ts"] + r["dur"]):
                problems.append(f"{call['name']} (correlation {call['args']['correlation']}) is not strictly "
                                f"inside its range {r['name']}")
    return problems


# A long range, then short ones that launch faster than the device runs (a backlog), then a short
# range: with one thread, every 8th range (the one that syncs) is the last of these.
BACKLOG_SPANS_NS = (300_000, 5_000, 5_000, 5_000, 5_000, 5_000, 5_000, 10_000)


def _threaded_sim_trace(tmp_path, threads: int, seed=0, n=24, **custom):
    """BACKLOG_SPANS_NS on several threads at once (each thread shifted by one); a short switch
    interval makes the threads interleave inside ranges (one thread's range entered first, another's
    launch made first)."""
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, **custom})
    gate = threading.Barrier(threads)

    def body(k):
        gate.wait()
        for i in range(n):
            with xpuprof.record_function(f"t{k}.step{i % 5}"):
                _spin(BACKLOG_SPANS_NS[(i + k) % len(BACKLOG_SPANS_NS)])

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with xpuprof.profile(backends=["sim"], config=cfg) as prof:
            workers = [threading.Thread(target=body, args=(k,)) for k in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
    finally:
        sys.setswitchinterval(old)
    return json.loads(prof.export_chrome_trace(tmp_path / f"mt{seed}.json").read_text())["traceEvents"]


@pytest.mark.parametrize("vendor", ["xpu", "cuda", "hip"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_flow_runs_forward_in_time(tmp_path, vendor, threads, seed):
    """Every f at or after its s (the sim once made a kernel ready at the copy call before its own
    launch), and every sync call returns after the work submitted before it, any thread's (audit A:
    the call returned up to 1.2 ms early; B: with threads the queue followed range-entry order), with
    one thread and with three interleaving ones; plus the rest of physics_problems."""
    evs = _threaded_sim_trace(tmp_path, threads, seed, sim_vendor=vendor)
    starts = {e["id"]: e["ts"] for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] for e in evs if e["ph"] == "f"}
    assert ends and set(ends) <= set(starts)
    assert [e for e in evs if e.get("cat") in SYNC_CATS], "no syncs to check"
    assert len({e["tid"] for e in evs if _is_runtime(e)}) == threads
    problems = physics_problems(evs)
    assert not problems, f"{len(problems)} problems, e.g. {problems[:4]}"


def _sim_events_from_ranges(ranges, vendor="cuda", seed=0, metrics=()):
    """The sim's events for host ranges given as (thread, enter ns, exit ns) on the monotonic clock,
    with the ranges themselves as user_annotation slices: interleavings and range lengths no real
    run pins down."""
    from xpuprof.activity import ActivityType
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.backends.sim import SimBackend
    from xpuprof.clock import MONOTONIC_TO_EPOCH_NS
    from xpuprof.trace.builder.builder import TraceBuilder
    from xpuprof.trace.write.chrome import iter_event_chunks

    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, "sim_vendor": vendor},
                                 experimental=xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)))
    types = SimBackend.supported_activities() if metrics else \
        SimBackend.supported_activities() - {ActivityType.XPU_SCOPE_PROFILER, ActivityType.GPU_PM_COUNTER,
                                              ActivityType.HARDWARE_COUNTERS}
    session = SimBackend().configure(types, cfg)
    session.start()
    marks = []
    for cid, (thread, enter, exit_) in enumerate(ranges, start=1):
        marks += [(enter, 0, cid, thread), (exit_, 1, -cid, thread)]
    t0 = 10**12
    for t, _, cid, thread in sorted(marks):  # (id, thread, ns, parent id) on enter, (-id, thread, ns, 0) on exit
        session.correlation_log.append(cid, thread, t0 + t, 0)
    session.stop()
    b = TraceBuilder(pid=4321)
    session.process(b, ProcessWindow(0, 2**62))
    b.add_slices(names=[f"range{i}" for i in range(len(ranges))], ts=[t0 + e + MONOTONIC_TO_EPOCH_NS for _, e, _ in ranges],
                 dur=[x - e for _, e, x in ranges], pid=4321, tid=[t for t, _, _ in ranges],
                 cat=ActivityType.USER_ANNOTATION, external_id=list(range(1, len(ranges) + 1)))
    return [e for chunk in iter_event_chunks(b) for e in chunk]


def _interleaved_ranges(seed, threads=3, per_thread=12):
    """Each thread: back-to-back ranges of 2 us to 300 us with short host gaps, all threads at once."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for thread in range(101, 101 + threads):
        t = int(rng.integers(0, 20_000))
        for _ in range(per_thread):
            span = int(rng.choice([2_000, 5_000, 20_000, 40_000, 150_000, 300_000]))
            out.append((thread, t, t + span))
            t += span + int(rng.integers(500, 20_000))
    return out


@pytest.mark.parametrize("vendor", ["xpu", "cuda", "hip"])
@pytest.mark.parametrize("seed", range(6))
def test_interleaved_threads_queue_in_launch_order_and_syncs_drain(vendor, seed):
    """Audit B: the queue followed range-entry order, so a kernel launched at 179 us waited behind
    one launched at 331 us; and a sync returned before earlier-submitted work on its stream ended."""
    problems = physics_problems(_sim_events_from_ranges(_interleaved_ranges(seed), vendor, seed))
    assert not problems, f"{len(problems)} problems, e.g. {problems[:4]}"


def test_calls_last_as_long_as_real_ones_and_fit_their_range():
    """Audit C: launch calls lasted a range's eighth (0.3-0.7 us in short ranges); HTA rounds a call's
    start up and its end down to whole us, so such a call became 0 us and HTA left its kernel off the
    critical-path graph. A call now lasts what a real one does where its range has room and shares a
    short range with the range's other calls, each at least 2 us (a range without room for that drops
    its copy); a shorter range gets a shorter launch call. Calls keep CALL_EDGE_NS (a 16th of a short
    range) from their range's ends: strictly inside it (issue 38)."""
    from xpuprof.backends import sim

    spans = [300_000, 40_000, 5_000, 3_000, 2_500, 1_500]  # the 1st and 5th want a copy too
    ranges = [(7, i * 400_000, i * 400_000 + span) for i, span in enumerate(spans)]
    evs = _sim_events_from_ranges(ranges, "cuda")
    assert not physics_problems(evs)
    calls = sorted((e for e in evs if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    launch = [round(e["dur"] * 1000) for e in calls if e["name"] == "cudaLaunchKernel"]
    inner = [span - 2 * min(span // 16, sim.CALL_EDGE_NS) for span in spans[3:]]
    assert inner == [2_800, 2_300, 1_314]
    assert launch == [sim.LAUNCH_CALL_NS] * 3 + inner and sim.MIN_CALL_NS == 2_000
    copies = [round(e["dur"] * 1000) for e in calls if e["name"] == "cudaMemcpyAsync"]
    assert copies == [sim.COPY_CALL_NS]  # the 2.5 us range has no room for a 2 us copy call too


def test_a_sync_the_queue_cannot_reach_compresses_the_work_before_it():
    """Seven 5 us ranges launch ~150 us of kernels, then a 4.5 us range syncs (room for a 2 us launch
    and a 2 us sync call strictly inside it): the queue cannot drain before that range ends, so the work
    since the previous sync is scaled down (durations, gaps, latency together) until it does; nothing
    after the sync is touched."""
    from xpuprof.backends import sim
    from xpuprof.backends.sim.launches import kernel_class

    ranges = [(7, i * 6_000, i * 6_000 + 5_000) for i in range(7)] + [(7, 42_000, 46_500)]
    ranges += [(7, 60_000 + i * 100_000, 60_000 + i * 100_000 + 90_000) for i in range(3)]  # room again
    evs = _sim_events_from_ranges(ranges, "cuda")
    assert not physics_problems(evs)  # the sync call inside its 4.5 us range, after the work it waits for
    kernels = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    # a range without work args runs the kernel class its name picks (the kernel is named after the range)
    nominal = [sim.KERNEL_CLASSES[kernel_class(k["name"].removeprefix("sim_"))][1] for k in kernels]
    assert sum(k["dur"] * 1000 for k in kernels[:8]) < 0.5 * sum(nominal[:8])  # compressed to fit
    assert all(0.85 * n <= k["dur"] * 1000 <= 1.15 * n + 1 for k, n in zip(kernels[8:], nominal[8:]))  # untouched


# --- vendor fidelity: each flavour's rows are what our real backend for that vendor writes (audit D) --

REF_T0 = 10**9  # ns after the trace's base time


def _events(builder):
    from xpuprof.trace.write.chrome import iter_event_chunks

    return [e for chunk in iter_event_chunks(builder) for e in chunk]


def _xpu_reference(metrics: dict):
    """One copy, one kernel launch and one queue finish through the XPU backend's writer (PTI record
    layouts, intel-pti 1.2.0's strings), plus the scope profiler's per-kernel metrics."""
    import numpy as np

    from xpuprof.activity import ActivityType
    from xpuprof.backends.xpu import records as decode
    from xpuprof.vendors import pti
    from xpuprof.backends.xpu.context import ApiNameCache, RecordContext, StringCache
    from xpuprof.backends.xpu.metrics_scope import KernelTable, ScopeMetadata, ScopeResults, emit_scope_metrics
    from xpuprof.backends.xpu.scope_api import MetricArgsEmitter
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder

    V = pti.ViewKind

    def rec(kind, n, **cols):
        a = np.zeros(n, pti.record_dtype(kind))
        a["_view_kind"] = int(kind)
        for k, v in cols.items():
            a[k] = v
        return a

    t = REF_T0
    rt = rec(V.RUNTIME_API, 3, _correlation_id=[1, 2, 3], _thread_id=77, _process_id=4321, _api_group=2,
             _api_id=[1, 2, 3], _start_timestamp=[t, t + 10_000, t + 20_000], _end_timestamp=[t + 5_000, t + 14_000, t + 90_000])
    kernel = rec(V.DEVICE_GPU_KERNEL, 1, _correlation_id=2, _start_timestamp=t + 30_000, _end_timestamp=t + 80_000,
                 _append_timestamp=t + 12_000, _submit_timestamp=t + 13_000, _sycl_queue_id=1, _queue_handle=0x1000,
                 _context_handle=0xC0, _name=0x55, _kernel_id=9, _sycl_node_id=4, _sycl_invocation_id=4)
    copy = rec(V.DEVICE_GPU_MEM_COPY, 1, _correlation_id=1, _start_timestamp=t + 6_000, _end_timestamp=t + 9_000,
               _append_timestamp=t + 2_000, _submit_timestamp=t + 3_000, _sycl_queue_id=1, _queue_handle=0x1000,
               _context_handle=0xC0, _bytes=4096, _memcpy_type=pti.MEMCPY_TYPES.index("H2D"), _mem_src=1, _mem_dst=2,
               _name=0x66, _mem_op_id=5)
    sync = rec(V.DEVICE_SYNCHRONIZATION, 1, _correlation_id=3, _start_timestamp=t + 21_000, _end_timestamp=t + 85_000,
               _thread_id=77, _synch_type=pti.SYNC_TYPES.index("HOST_COMMAND_LIST"), _api_group=1, _api_id=150,
               _queue_handle=0x1000, _context_handle=0xC0)
    ext = rec(V.EXTERNAL_CORRELATION, 3, _correlation_id=[1, 2, 3], _external_id=42,
              _external_kind=int(pti.ExternalKind.CUSTOM_0))
    records = decode.DecodedRecords({int(V.RUNTIME_API): rt, int(V.DEVICE_GPU_KERNEL): kernel,
                                     int(V.DEVICE_GPU_MEM_COPY): copy, int(V.DEVICE_SYNCHRONIZATION): sync,
                                     int(V.EXTERNAL_CORRELATION): ext})
    memory = ("Host (User Allocated)", "Host (Driver Allocated)", "Device", "Shared")  # intel-pti 1.2.0
    ctx = RecordContext("1.2.0", BASE_TIME_NS, strings=StringCache({0x55: "sim_gemm_f32_128x128",
                                                                    0x66: "zeCommandListAppendMemoryCopy"}),
                        api_names=ApiNameCache({(2, 1): "urEnqueueUSMMemcpy", (2, 2): "urEnqueueKernelLaunch",
                                                (2, 3): "urQueueFinish", (1, 150): "zeCommandListHostSynchronize"}),
                        memory_type_name=memory.__getitem__)
    results = None
    if metrics:
        results = ScopeResults(np.array([9], np.uint64), np.array([0x1000], np.uint64), ["sim_gemm_f32_128x128"],
                               {m: np.array([1.0]) for m in metrics},
                               ScopeMetadata(list(metrics), list(metrics.values()), [0] * len(metrics)))
    types = frozenset({ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY,
                       ActivityType.XPU_SYNC, ActivityType.EXTERNAL_CORRELATION})
    b = TraceBuilder(pid=4321)
    MetricArgsEmitter(results, ctx, types).write(b, None, records)
    if results is not None:
        s, e = BASE_TIME_NS + t + 30_000, BASE_TIME_NS + t + 80_000
        emit_scope_metrics(b, results, KernelTable(np.array([9], np.uint64), np.array([s]), np.array([e]),
                                                   np.array([0]), np.array([1]), np.array(["sim_gemm_f32_128x128"], object)))
    return _events(b)


def _cuda_reference(metrics: dict):
    """The same through the CUDA decoder (cupti-python's record dtypes) and PM sampling's writer."""
    import numpy as np

    c = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")
    from xpuprof.backends.cuda import records
    from xpuprof.backends.cuda.emit import CudaEmitter, DecodeOptions
    from xpuprof.backends.cuda.pm_sampling_api import emit_samples
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder

    def rows(dtype, n, **cols):
        a = np.zeros(n, dtype=dtype)
        for k, v in cols.items():
            a[k] = v
        return a

    t = BASE_TIME_NS + REF_T0
    api = rows(c.activity_api_dtype, 3, kind=records.KIND_RUNTIME, cbid=[41, 211, 131], correlation_id=[1, 2, 3],
               start=[t, t + 10_000, t + 20_000], end=[t + 5_000, t + 14_000, t + 90_000], process_id=4321, thread_id=77)
    kern = rows(c.activity_kernel13_dtype, 1, kind=records.KIND_CONCURRENT_KERNEL, device_id=0, context_id=1,
                stream_id=7, grid_x=512, grid_y=1, grid_z=1, block_x=256, block_y=1, block_z=1, registers_per_thread=64,
                name=0x1000, correlation_id=2, start=t + 30_000, end=t + 80_000)
    copy = rows(c.activity_memcpy6_dtype, 1, kind=records.KIND_MEMCPY, copy_kind=c.ActivityMemcpyKind.HTOD,
                src_kind=c.ActivityMemoryKind.PINNED, dst_kind=c.ActivityMemoryKind.DEVICE, bytes=4096, device_id=0,
                context_id=1, stream_id=7, correlation_id=1, start=t + 6_000, end=t + 9_000)
    sync = rows(c.activity_synchronization2_dtype, 1, kind=records.KIND_SYNCHRONIZATION,
                type=c.ActivitySynchronizationType.STREAM_SYNCHRONIZE, correlation_id=3, start=t + 21_000,
                end=t + 85_000, context_id=1, stream_id=7)
    names = {41: "cudaMemcpyAsync_v3020", 211: "cudaLaunchKernel_v7000", 131: "cudaStreamSynchronize_v3020"}
    h100 = {"numSms": 132, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "warpSize": 32,
            "sharedMemPerMultiprocessor": 233472, "maxBlocksPerMultiProcessor": 32, "computeMajor": 9}
    b = TraceBuilder(pid=4321)
    CudaEmitter(lambda kind, cbid: names[cbid], options=DecodeOptions(device_props={0: h100})).write(
        b, None, records.gather_records([records.pack([api, kern, copy, sync], names={0x1000: "sim_gemm_f32_128x128"})]))
    if metrics:
        emit_samples(b, 0, list(metrics), np.array([t + 30_000, t + 80_000]), np.ones((2, len(metrics))))
    return _events(b)


def _rocm_reference(metrics: dict):
    """The same through the ROCm decoder (rocprofiler-sdk record layouts, hipLaunchKernel etc. with
    the operation ids of rocprofiler-sdk's hip/runtime_api_id.h)."""
    import numpy as np

    from xpuprof.backends.base import ProcessWindow
    from xpuprof.vendors import rocprofiler as rocprof
    from xpuprof.backends.rocm.emit import RocmEmitter
    from xpuprof.backends.rocm.records import EVENT_OP_DTYPE, OP_LAUNCH, OP_STREAM_SYNC, RocmRecords
    from xpuprof.trace.builder.builder import TraceBuilder

    agent, t = 0xA6E, REF_T0
    api = b"".join(struct.pack("<QiiQQQQQ", 56, 5, op, corr, 42, start, end, 77)
                   for op, corr, start, end in ((268, 1, t, t + 5_000), (214, 2, t + 10_000, t + 14_000),
                                                (346, 3, t + 20_000, t + 90_000)))
    info = struct.pack("<QQQQQII3I3I", 128, agent, 0xBEEF, 7, 2, 0, 0, 256, 1, 1, 512, 1, 1) + b"\0" * 56
    dispatch = struct.pack("<QiiQQQQQ", 56 + len(info), 11, 0, 2, 42, 77, t + 30_000, t + 80_000) + info
    copy = struct.pack("<QiiQQQQQQQQ", 80, 10, 2, 1, 42, 77, t + 6_000, t + 9_000, agent, 0x1, 4096)
    rec = RocmRecords(hip_api=np.frombuffer(api, rocprof.HIP_API_DTYPE).copy(),
                      dispatch=np.frombuffer(dispatch, rocprof.DISPATCH_DTYPE).copy(),
                      copies=np.frombuffer(copy, rocprof.COPY_DTYPE).copy(),
                      event_ops=np.array([(1, OP_LAUNCH, 0, 0x7000), (2, OP_LAUNCH, 0, 0x7000),
                                          (3, OP_STREAM_SYNC, 0, 0x7000)], EVENT_OP_DTYPE),
                      api_names={268: "hipMemcpyAsync", 214: "hipLaunchKernel", 346: "hipStreamSynchronize"},
                      kernel_names={7: "sim_gemm_f32_128x128"}, agent_device={agent: 0, 0x1: 0})
    b = TraceBuilder(pid=4321)
    RocmEmitter(pid=4321).write(b, ProcessWindow(0, 2**62), rec)
    if metrics:  # RocprofCounterApi.process's call, as it makes it
        b.add_per_kernel_metrics(kernel_names=["sim_gemm_f32_128x128"], start_ns=[t + 30_000], end_ns=[t + 80_000],
                                 pid=0, tid=1, metrics={m: [1.0] for m in metrics}, counter_name="rocm", vendor="rocm",
                                 extra_args={"correlation": np.array([2]), "dispatch_id": np.array([1])})
    return _events(b)


def _row_shapes(evs) -> dict:
    """What each kind of row looks like, whatever its times and ids: name, category, arg names, and
    where it sits (a sync row: on the calling thread's row or on the stream's row + 1000000)."""
    xs = [e for e in evs if e.get("ph") == "X"]
    kernel = next(e for e in xs if e.get("cat") == "kernel")
    copy = next(e for e in xs if e.get("cat") == "gpu_memcpy")
    sync = next(e for e in xs if e.get("cat") in SYNC_CATS)
    calls = {e["args"]["correlation"]: e for e in xs if _is_runtime(e)}
    keys = lambda e: sorted(set(e.get("args", {})) - {"External id"})  # noqa: E731
    call = lambda e: calls[e["args"]["correlation"]]  # noqa: E731
    shapes = {f"{role} call": (call(e)["name"], call(e)["cat"], keys(call(e))) for role, e in
              (("copy", copy), ("launch", kernel), ("sync", sync))}
    shapes.update({role: (e["name"] if role != "kernel" else "", e["cat"], keys(e)) for role, e in
                   (("copy", copy), ("kernel", kernel), ("sync row", sync))})
    from xpuprof.backends.xpu.emit import OVERHEAD_PID  # XPU syncs: a process of their own (Kineto: -1)

    shapes["sync row at"] = ("calling thread" if (sync["pid"], sync["tid"]) == (OVERHEAD_PID, call(sync)["tid"]) else
                             "stream + 1000000" if (sync["pid"], sync["tid"]) == (kernel["pid"], kernel["tid"] + 1_000_000)
                             else (sync["pid"], sync["tid"]))
    shapes["sync row flow"] = any(e.get("ph") == "f" and e["id"] == sync["args"]["correlation"] and
                                  (e["pid"], e["tid"]) == (sync["pid"], sync["tid"]) for e in evs)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e.get("ph") == "M" and e["name"] == "thread_name"}
    shapes["stream row name"] = names.get((kernel["pid"], kernel["tid"]), "").replace(str(kernel["tid"]), "<n>")
    metric_rows = [e for e in xs if e["name"].startswith("metrics: ")]
    shapes["metric slices"] = sorted({(e["cat"], tuple(keys(e))) for e in metric_rows})
    shapes["metric counters"] = sorted({(e["cat"], str(e["pid"]).replace(str(kernel["pid"]), "<device>"), e["tid"] == 0,
                                         tuple(sorted(e["args"]))) for e in evs if e.get("ph") == "C"})
    return shapes


REFERENCES = {"xpu": _xpu_reference, "cuda": _cuda_reference, "hip": _rocm_reference}


@pytest.mark.parametrize("metrics", [False, True], ids=["plain", "metrics"])
@pytest.mark.parametrize("vendor", ["xpu", "cuda", "hip"])
def test_each_flavour_writes_its_vendors_rows_as_our_backend_does(vendor, metrics):
    """Audit D: every flavour wrote CUDA-shaped kernel and sync args (the XPU one even cuda_sync rows
    on pid 0 with `sync_kind`, where the CUDA decoder writes `cuda_sync_kind`), and per-kernel
    metrics in xpu_scope_profiler for every vendor. Each flavour's rows (calls, copies, kernels, sync
    rows and where they sit, stream rows, metric slices and counters) must look exactly like those
    our real backend for that vendor writes from its own records."""
    wanted = {"GpuTime": "ns", "XVE_ACTIVE": "percent"} if metrics else {}
    reference = _row_shapes(REFERENCES[vendor](wanted))
    ranges = [(7, i * 400_000, i * 400_000 + 300_000) for i in range(8)]  # a copy in the 1st, a sync in the 8th
    sim = _row_shapes(_sim_events_from_ranges(ranges, vendor, metrics=list(wanted)))
    assert sim == reference
