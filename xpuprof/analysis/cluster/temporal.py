"""``temporal``: per rank, the GPU's time split into idle, compute and non-compute (HTA's
``get_temporal_breakdown``).

Per rank, over HTA's events with a stream: kernel time is the span from the first merged kernel
interval's start to the last one's end; idle time is the part of it no kernel covers; compute time
is what the computation kernels' merged intervals cover; non-compute time is the rest.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .frame import COMPUTATION, create_frame, rank_batches, steps_params
from .result import AnalysisResult

COLUMNS = ["rank", "idle_us", "compute_us", "non_compute_us", "kernel_us", "idle_pct", "compute_pct",
           "non_compute_pct"]


def merged_intervals(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's ``merge_kernel_intervals`` of intervals already in HTA's row order (ts, then row):
    (start, end) of each merged group, in time order (``frame.union_sql``'s groups)."""
    if not len(ts):
        return ts, end
    covered = np.maximum.accumulate(end)
    new = np.empty(len(ts), bool)
    new[0] = True
    np.greater(ts[1:], covered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return ts[starts], np.maximum.reduceat(end, starts)


def task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    """Per rank (kernel span, busy time, computation busy time): the intervals merged in numpy over
    one rank's kernels at a time, streamed in HTA's row order (a window in SQL costs twice as much)."""
    create_frame(con, params)
    sql = f"""SELECT f.rank, f.ts, f.end_ts, (k.kernel_type = '{COMPUTATION}')::TINYINT AS compute
              FROM hta_frame f LEFT JOIN ktypes k ON f.name = k.name WHERE f.stream <> -1
              ORDER BY f.rank, f.ts, f.part, f.idx"""
    out = []
    for rank, c in rank_batches(con, sql):
        starts, ends = merged_intervals(c["ts"], c["end_ts"])
        is_compute = c["compute"] == 1
        cs, ce = merged_intervals(c["ts"][is_compute], c["end_ts"][is_compute])
        out.append((rank, float(ends[-1] - starts[0]), float((ends - starts).sum()), float((ce - cs).sum())))
    return out


def run(engine, *, include_last_step: bool = False) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    rows = sorted(r for part in engine.run(task, params) for r in part)
    out, notes = [], []
    seen = set()
    for rank, kernel, busy, compute in rows:
        seen.add(rank)
        idle = kernel - busy
        non_compute = kernel - compute - idle
        out.append({"rank": rank, "idle_us": idle, "compute_us": compute, "non_compute_us": non_compute,
                    "kernel_us": kernel, **_pcts(idle, compute, non_compute, kernel)})
    missing = [r for r in engine.store.ranks if r not in seen]
    if missing:
        notes.append(f"ranks without GPU kernels (no temporal breakdown): {_ranks_text(missing)}")
    return AnalysisResult("temporal", COLUMNS, out, notes, title="Temporal breakdown (µs) per rank")


def _pcts(idle: float, compute: float, non_compute: float, kernel: float) -> dict:
    """Percentages as HTA rounds them (numpy's round to 2 decimals)."""
    if not kernel:
        return {"idle_pct": None, "compute_pct": None, "non_compute_pct": None}
    vals = np.round(100 * (np.array([idle, compute, non_compute]) / kernel), 2).tolist()
    return {"idle_pct": vals[0], "compute_pct": vals[1], "non_compute_pct": vals[2]}


def _ranks_text(ranks: list[int], limit: int = 20) -> str:
    text = ", ".join(map(str, ranks[:limit]))
    return text + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")
