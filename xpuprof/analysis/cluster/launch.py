"""``launch`` (HTA's ``get_cuda_kernel_launch_stats``) and ``overlap`` (``get_comm_comp_overlap``).

launch: every GPU event and the CPU call that launched it (one correlation id): the CPU call's
duration, the GPU event's duration, and the launch delay (GPU start - CPU end, at least 0). Per
rank: counts, means, percentiles and HTA's outliers (a runtime call over ``runtime_cutoff`` µs, a
delay over ``launch_delay_cutoff`` µs, a GPU event shorter than its launch); ``events=True`` gives
HTA's per-correlation rows instead.

overlap: per rank, the share of communication kernels' time that computation kernels overlap.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .frame import COMMUNICATION, COMPUTATION, Frame, hta_map, state_times
from .result import AnalysisResult

LAUNCH_KERNEL = ("cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution")
LAUNCH_MEMORY = ("cudaMemsetAsync", "cudaMemcpyAsync")
SUMMARY = ["rank", "launches", "cpu_duration_mean_us", "cpu_duration_max_us", "gpu_duration_mean_us",
           "gpu_duration_max_us", "launch_delay_mean_us", "launch_delay_p50_us", "launch_delay_p99_us",
           "launch_delay_max_us", "runtime_outliers", "delay_outliers", "gpu_shorter_than_cpu"]
EVENTS = ["rank", "correlation", "cpu_duration_us", "gpu_duration_us", "launch_delay_us"]


def rank_launches(f: Frame, options: dict):
    """One rank's launches: every (CPU call, GPU event) pair sharing a correlation that a launch call carries,
    in HTA's order (the CPU rows, each with its GPU rows, in row order): per-launch rows with ``events``,
    else the rank's summary (None without launches)."""
    names = LAUNCH_KERNEL + (LAUNCH_MEMORY if options["include_memory_events"] else ())
    carried = np.unique(f.correlation[f.named(names + tuple(options.get("extra_launch_names", ())))])
    linked = np.isin(f.correlation, carried)
    cpu = np.flatnonzero(linked & (f.stream == -1))
    gpu = np.flatnonzero(linked & (f.stream != -1))
    gpu = gpu[np.argsort(f.correlation[gpu], kind="stable")]
    lo = np.searchsorted(f.correlation[gpu], f.correlation[cpu], "left")
    n = np.searchsorted(f.correlation[gpu], f.correlation[cpu], "right") - lo
    c = np.repeat(cpu, n)
    g = gpu[np.repeat(lo, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)]
    cpu_dur, gpu_dur = f.dur[c], f.dur[g]
    delay = np.maximum(f.ts[g] - f.ts[c] - f.dur[c], 0)
    if options["events"]:
        return [(f.rank, *r) for r in zip(f.correlation[c].tolist(), cpu_dur.tolist(), gpu_dur.tolist(),
                                           delay.tolist())]
    if not len(c):
        return None
    p50, p99 = np.quantile(delay, [0.5, 0.99], method="inverted_cdf").tolist()
    return (f.rank, len(delay), float(cpu_dur.mean()), float(cpu_dur.max()), float(gpu_dur.mean()),
            float(gpu_dur.max()), float(delay.mean()), p50, p99, float(delay.max()),
            int((cpu_dur > options["runtime_cutoff"]).sum()), int((delay > options["launch_delay_cutoff"]).sum()),
            int((gpu_dur < cpu_dur).sum()))


def run_launch(engine, *, events: bool = False, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100,
               include_memory_events: bool = True, include_last_step: bool = False,
               extra_launch_names: Sequence[str] = ()) -> AnalysisResult:
    got = hta_map(engine, rank_launches, {
        "include_last_step": include_last_step, "events": events, "runtime_cutoff": runtime_cutoff,
        "launch_delay_cutoff": launch_delay_cutoff, "include_memory_events": include_memory_events,
        "extra_launch_names": list(extra_launch_names)})
    if events:
        rows = [dict(zip(EVENTS, r)) for part in got.values() for r in part]
        return AnalysisResult("launch", EVENTS, rows, title="CPU-to-GPU launches (µs)")
    rows = [dict(zip(SUMMARY, r)) for r in got.values() if r is not None]
    return AnalysisResult("launch", SUMMARY, rows, title="CPU-to-GPU launch delays per rank (µs)",
                          notes=[f"outliers: runtime calls over {runtime_cutoff} µs, launch delays over "
                                 f"{launch_delay_cutoff} µs, GPU events shorter than their launch call"])


# ----------------------------------------------------------------------------- overlap
def rank_overlap(f: Frame, options: dict) -> dict[int, float]:
    return state_times(f, (COMPUTATION, COMMUNICATION))


def run_overlap(engine, *, include_last_step: bool = False) -> AnalysisResult:
    rows = []
    for rank, states in hta_map(engine, rank_overlap, {"include_last_step": include_last_step}).items():
        comm = states.get(2, 0.0) + states.get(3, 0.0)
        both = states.get(3, 0.0)
        pct = float(np.round(100 * both / comm, 2)) if comm else None
        rows.append({"rank": rank, "comp_comm_overlap_pct": pct, "communication_us": comm, "overlapped_us": both})
    notes = [] if any(r["communication_us"] for r in rows) else ["no communication kernels (nccl*Kernel, oneccl_*): no overlap"]
    return AnalysisResult("overlap", ["rank", "comp_comm_overlap_pct", "communication_us", "overlapped_us"], rows,
                          notes, title="Computation overlapping communication, per rank")
