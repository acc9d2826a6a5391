"""Issue 13: traces shaped as the consumers (HTA, TensorBoard, Catapult) need them.

- default categories are Kineto main's / torch.profiler's vendor names (HTA matches `^(.+)_runtime`
  and only `cuda_runtime` for launch analysis); the generic names on request;
- the sim writes a vendor's trace (`sim_vendor`: xpu, cuda, hip) and is physically plausible: no
  device work starts before the call that launched it (every flow's `f` at or after its `s`);
- per-kernel metrics never add a second `kernel` slice (TensorBoard would count every kernel twice).
"""
from __future__ import annotations

import json
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


# --- physical plausibility: the rules every sim trace keeps (issue 13 audit: A, B) ----------------

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
    for call in calls.values():
        inside = [r for r in ranges if r["tid"] == call["tid"] and r["ts"] - NS <= call["ts"]
                  and call["ts"] + call["dur"] <= r["ts"] + r["dur"] + NS]
        if ranges and not inside:
            problems.append(f"{call['name']} (correlation {call['args']['correlation']}) overflows its range")
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
    from xpuprof.trace.builder import TraceBuilder
    from xpuprof.trace.chrome import iter_event_chunks

    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, "sim_vendor": vendor},
                                 experimental=xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)))
    types = SimBackend.supported_activities() if metrics else \
        SimBackend.supported_activities() - {ActivityType.XPU_SCOPE_PROFILER, ActivityType.GPU_PM_COUNTER,
                                              ActivityType.HARDWARE_COUNTERS}
    session = SimBackend().configure(types, cfg)
    session.start()
    marks = []
    for cid, (thread, enter, exit_) in enumerate(ranges, start=1):
        marks += [(enter, 0, cid, thread), (exit_, 1, -1, thread)]
    t0 = 10**12
    for t, _, cid, thread in sorted(marks):
        session.correlation_log.append(cid, thread, t0 + t)
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
    its copy); only a range under 2 us gets a shorter launch call (all of the range)."""
    from xpuprof.backends import sim

    spans = [300_000, 40_000, 5_000, 3_000, 2_500, 1_500]  # the 1st and 5th want a copy too
    ranges = [(7, i * 400_000, i * 400_000 + span) for i, span in enumerate(spans)]
    evs = _sim_events_from_ranges(ranges, "cuda")
    assert not physics_problems(evs)
    calls = sorted((e for e in evs if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    launch = [round(e["dur"] * 1000) for e in calls if e["name"] == "cudaLaunchKernel"]
    assert launch == [sim.LAUNCH_CALL_NS] * 3 + [3_000, 2_500, 1_500] and sim.MIN_CALL_NS == 2_000
    copies = [round(e["dur"] * 1000) for e in calls if e["name"] == "cudaMemcpyAsync"]
    assert copies == [sim.COPY_CALL_NS]  # the 2.5 us range has no room for a 2 us copy call too


def test_a_sync_the_queue_cannot_reach_compresses_the_work_before_it():
    """Seven 5 us ranges launch ~150 us of kernels, then a 4 us range syncs: the queue cannot drain
    before that range ends, so the work since the previous sync is scaled down (durations, gaps,
    latency together) until it does; nothing after the sync is touched."""
    from xpuprof.backends import sim

    ranges = [(7, i * 6_000, i * 6_000 + 5_000) for i in range(7)] + [(7, 42_000, 46_000)]
    ranges += [(7, 60_000 + i * 100_000, 60_000 + i * 100_000 + 90_000) for i in range(3)]  # room again
    evs = _sim_events_from_ranges(ranges, "cuda")
    assert not physics_problems(evs)  # the sync call inside its 4 us range, after the work it waits for
    kernels = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    nominal = [sim.KERNELS[j % len(sim.KERNELS)][1] for j in range(len(kernels))]  # range j runs kernel j % 5
    assert sum(k["dur"] * 1000 for k in kernels[:8]) < 0.5 * sum(nominal[:8])  # compressed to fit
    assert all(0.85 * n <= k["dur"] * 1000 <= 1.15 * n + 1 for k, n in zip(kernels[8:], nominal[8:]))  # untouched
