"""``temporal``: per rank, the GPU's time split into idle, compute and non-compute (HTA's
``get_temporal_breakdown``).

Per rank, over HTA's events with a stream: kernel time is the span from the first merged kernel
interval's start to the last one's end; idle time is the part of it no kernel covers; compute time
is what the computation kernels' merged intervals cover; non-compute time is the rest.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .frame import COMPUTATION, create_frame, steps_params, union_sql
from .result import AnalysisResult

COLUMNS = ["rank", "idle_us", "compute_us", "non_compute_us", "kernel_us", "idle_pct", "compute_pct",
           "non_compute_pct"]


def task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params)
    every = union_sql("(SELECT * FROM hta_frame WHERE stream <> -1)")
    compute = union_sql(f"""(SELECT f.* FROM hta_frame f JOIN ktypes k ON f.name = k.name
                             WHERE f.stream <> -1 AND k.kernel_type = '{COMPUTATION}')""")
    return con.execute(f"""
        WITH a AS ({every}), c AS ({compute}),
        span AS (SELECT rank, arg_max(e, grp) - arg_min(s, grp) AS kernel, sum(e - s) AS busy FROM a GROUP BY rank),
        comp AS (SELECT rank, sum(e - s) AS compute FROM c GROUP BY rank)
        SELECT span.rank, span.kernel, span.busy, coalesce(comp.compute, 0) FROM span LEFT JOIN comp USING (rank)
        ORDER BY span.rank""").fetchall()


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
