"""``temporal``: per rank, the GPU's time split into idle, compute and non-compute (HTA's
``get_temporal_breakdown``).

Per rank, over HTA's events with a stream: kernel time is the span from the first merged kernel
interval's start to the last one's end; idle time is the part of it no kernel covers; compute time
is what the computation kernels' merged intervals cover; non-compute time is the rest.
"""
from __future__ import annotations

import numpy as np

from .frame import COMPUTATION, Frame, hta_map, hta_order, merged_intervals
from .result import AnalysisResult, ranks_text

COLUMNS = ["rank", "idle_us", "compute_us", "non_compute_us", "kernel_us", "idle_pct", "compute_pct",
           "non_compute_pct"]


def rank_times(f: Frame, options: dict) -> tuple[float, float, float] | None:
    """(kernel span, busy time, computation busy time) of one rank; None without kernels."""
    k = f.on_streams()
    if not len(k):
        return None
    k = k.take(hta_order(k))
    starts, ends = merged_intervals(k.ts, k.end)
    compute = k.kernel_types == COMPUTATION
    cs, ce = merged_intervals(k.ts[compute], k.end[compute])
    return float(ends[-1] - starts[0]), float((ends - starts).sum()), float((ce - cs).sum())


def run(engine, *, include_last_step: bool = False) -> AnalysisResult:
    per_rank = hta_map(engine, rank_times, {"include_last_step": include_last_step})
    out = []
    for rank, times in per_rank.items():
        if times is None:
            continue
        kernel, busy, compute = times
        idle = kernel - busy
        non_compute = kernel - compute - idle
        out.append({"rank": rank, "idle_us": idle, "compute_us": compute, "non_compute_us": non_compute,
                    "kernel_us": kernel, **_pcts(idle, compute, non_compute, kernel)})
    missing = [r for r, times in per_rank.items() if times is None]
    notes = [f"ranks without GPU kernels (no temporal breakdown): {ranks_text(missing)}"] if missing else []
    return AnalysisResult("temporal", COLUMNS, out, notes, title="Temporal breakdown (µs) per rank")


def _pcts(idle: float, compute: float, non_compute: float, kernel: float) -> dict:
    """Percentages as HTA rounds them (numpy's round to 2 decimals)."""
    if not kernel:
        return {"idle_pct": None, "compute_pct": None, "non_compute_pct": None}
    vals = np.round(100 * (np.array([idle, compute, non_compute]) / kernel), 2).tolist()
    return {"idle_pct": vals[0], "compute_pct": vals[1], "non_compute_pct": vals[2]}
