"""``launch`` (HTA's ``get_cuda_kernel_launch_stats``) and ``overlap`` (``get_comm_comp_overlap``).

launch: every GPU event and the CPU call that launched it (one correlation id): the CPU call's
duration, the GPU event's duration, and the launch delay (GPU start - CPU end, at least 0). Per
rank: counts, means, percentiles and HTA's outliers (a runtime call over ``runtime_cutoff`` µs, a
delay over ``launch_delay_cutoff`` µs, a GPU event shorter than its launch); ``events=True`` gives
HTA's per-correlation rows instead.

overlap: per rank, the share of communication kernels' time that computation kernels overlap.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from .frame import COMMUNICATION, COMPUTATION, create_frame, rank_batches, state_time_sql, steps_params
from .result import AnalysisResult

LAUNCH_KERNEL = ("cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution")
LAUNCH_MEMORY = ("cudaMemsetAsync", "cudaMemcpyAsync")
SUMMARY = ["rank", "launches", "cpu_duration_mean_us", "cpu_duration_max_us", "gpu_duration_mean_us",
           "gpu_duration_max_us", "launch_delay_mean_us", "launch_delay_p50_us", "launch_delay_p99_us",
           "launch_delay_max_us", "runtime_outliers", "delay_outliers", "gpu_shorter_than_cpu"]
EVENTS = ["rank", "correlation", "cpu_duration_us", "gpu_duration_us", "launch_delay_us"]


def launch_task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params, kernel_types=False)
    names = LAUNCH_KERNEL + (LAUNCH_MEMORY if params["include_memory_events"] else ())
    names += tuple(params.get("extra_launch_names", ()))
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    sql = f"""
    WITH corr AS (SELECT DISTINCT rank, correlation FROM hta_frame WHERE name IN ({quoted})),
    cpu AS (SELECT f.* FROM hta_frame f JOIN corr c ON f.rank = c.rank AND f.correlation = c.correlation
            WHERE f.stream = -1),
    gpu AS (SELECT f.* FROM hta_frame f JOIN corr c ON f.rank = c.rank AND f.correlation = c.correlation
            WHERE f.stream <> -1)
    SELECT cpu.rank, cpu.correlation, cpu.dur AS cpu_duration, gpu.dur AS gpu_duration,
           greatest(gpu.ts - cpu.ts - cpu.dur, 0) AS launch_delay
    FROM cpu JOIN gpu ON cpu.rank = gpu.rank AND cpu.correlation = gpu.correlation
    ORDER BY cpu.rank, cpu.part, cpu.idx, gpu.part, gpu.idx"""
    if params["events"]:
        return con.execute(sql).fetchall()
    out = []
    for rank, c in rank_batches(con, sql):
        cpu, gpu, delay = c["cpu_duration"], c["gpu_duration"], c["launch_delay"]
        p50, p99 = np.quantile(delay, [0.5, 0.99], method="inverted_cdf").tolist()
        out.append((rank, len(delay), float(cpu.mean()), float(cpu.max()), float(gpu.mean()), float(gpu.max()),
                    float(delay.mean()), p50, p99, float(delay.max()), int((cpu > params["runtime_cutoff"]).sum()),
                    int((delay > params["launch_delay_cutoff"]).sum()), int((gpu < cpu).sum())))
    return out


def run_launch(engine, *, events: bool = False, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100,
               include_memory_events: bool = True, include_last_step: bool = False,
               extra_launch_names: Sequence[str] = ()) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    params.update(events=events, runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff,
                  include_memory_events=include_memory_events, extra_launch_names=list(extra_launch_names))
    parts = [r for part in engine.run(launch_task, params) for r in part]
    if events:
        rows = [dict(zip(EVENTS, r)) for r in parts]
        rows.sort(key=lambda r: r["rank"])  # stable: each rank's rows keep HTA's order
        return AnalysisResult("launch", EVENTS, rows, title="CPU-to-GPU launches (µs)")
    rows = sorted((dict(zip(SUMMARY, r)) for r in parts), key=lambda r: r["rank"])
    return AnalysisResult("launch", SUMMARY, rows, title="CPU-to-GPU launch delays per rank (µs)",
                          notes=[f"outliers: runtime calls over {runtime_cutoff} µs, launch delays over "
                                 f"{launch_delay_cutoff} µs, GPU events shorter than their launch call"])


# ----------------------------------------------------------------------------- overlap
def overlap_task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params)
    return con.execute(state_time_sql((COMPUTATION, COMMUNICATION))).fetchall()


def run_overlap(engine, *, include_last_step: bool = False) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    per: dict[int, dict[int, float]] = defaultdict(dict)
    for part in engine.run(overlap_task, params):
        for rank, state, t in part:
            per[rank][int(state)] = t
    rows = []
    for rank in engine.store.ranks:
        states = per.get(rank, {})
        comm = states.get(2, 0.0) + states.get(3, 0.0)
        both = states.get(3, 0.0)
        pct = float(np.round(100 * both / comm, 2)) if comm else None
        rows.append({"rank": rank, "comp_comm_overlap_pct": pct, "communication_us": comm, "overlapped_us": both})
    notes = [] if any(r["communication_us"] for r in rows) else ["no communication kernels (nccl*Kernel, oneccl_*): no overlap"]
    return AnalysisResult("overlap", ["rank", "comp_comm_overlap_pct", "communication_us", "overlapped_us"], rows,
                          notes, title="Computation overlapping communication, per rank")
