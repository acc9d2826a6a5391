"""Analyses that walk each stream's events in time order: ``idle`` (HTA's
``get_idle_time_breakdown``), ``queue`` (``get_queue_length_summary``) and ``memory-bw``
(``get_memory_bw_summary``).

HTA sorts these events with pandas' default sort (numpy's quicksort, not stable), so events at the
same timestamp come in an order only that sort decides, and queue lengths and bandwidth sums
depend on it. Each task therefore fetches a rank's events in HTA's row order and sorts them with
the same numpy sort on the same dtype, which gives HTA's order; SQL filters and joins before that.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from .frame import MEMORY, create_frame, index_correlation_sql, rank_batches, steps_params
from .result import AnalysisResult

KERNEL_CATEGORIES = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
# HTA's get_runtime_launch_events_query: the runtime calls that put work on a stream.
LAUNCH_NAMES = ("cudaMemsetAsync", "cudaMemcpyAsync", "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream")
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
DESCRIBE = ("count", "mean", "std", "min", "p25", "p50", "p75", "max")


def _sql_names(names: Sequence[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def _frame_with_links() -> str:
    return f"""(SELECT f.*, ic.index_correlation FROM hta_frame f JOIN ({index_correlation_sql()}) ic
                ON f.rank = ic.rank AND f.idx = ic.idx)"""


def describe(values: np.ndarray) -> dict:
    """pandas' ``describe()`` of one column (std with ddof 1, quartiles linearly interpolated)."""
    v = np.asarray(values, np.float64)
    n = len(v)
    q = np.quantile(v, [0.25, 0.5, 0.75]) if n else [np.nan] * 3
    return {"count": n, "mean": float(v.mean()) if n else None, "std": float(v.std(ddof=1)) if n > 1 else None,
            "min": float(v.min()) if n else None, "p25": float(q[0]), "p50": float(q[1]), "p75": float(q[2]),
            "max": float(v.max()) if n else None}


# ----------------------------------------------------------------------------- idle
def idle_task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params, kernel_types=False)
    sql = f"""
    WITH f AS {_frame_with_links()},
    k AS (SELECT * FROM f WHERE stream <> -1 AND cat IN ({_sql_names(KERNEL_CATEGORIES)}))
    SELECT k.rank, k.stream, k.ts, k.dur, r.ts AS ts_runtime FROM k
    LEFT JOIN (SELECT DISTINCT rank, idx, ts FROM f) r ON r.rank = k.rank AND r.idx = k.index_correlation
    ORDER BY k.rank, k.part, k.idx"""
    delay = params["consecutive_kernel_delay"]
    out = []
    for rank, c in rank_batches(con, sql):
        streams = list(dict.fromkeys(c["stream"].tolist()))
        for stream in streams:
            sel = c["stream"] == stream
            ts = c["ts"][sel].astype(np.int64) if np.all(c["ts"][sel] == np.floor(c["ts"][sel])) else c["ts"][sel]
            order = np.argsort(ts, kind="quicksort")
            start = c["ts"][sel][order]
            end = start + c["dur"][sel][order]
            runtime = np.asarray(c["ts_runtime"][sel][order], np.float64)
            prev_end = np.concatenate([[np.nan], end[:-1]])
            gap = start - prev_end
            with np.errstate(invalid="ignore"):
                host = runtime > prev_end
                kernel = ~host & (gap < delay)
            cat = np.where(host, 0, np.where(kernel, 1, 2))
            sums = {i: float(np.nansum(gap[cat == i])) for i in np.unique(cat).tolist()}
            out += [(rank, int(stream), IDLE_CATEGORIES[i], t) for i, t in sums.items()]
    return out


def run_idle(engine, *, consecutive_kernel_delay: float = 30, include_last_step: bool = False) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    params["consecutive_kernel_delay"] = consecutive_kernel_delay
    rows = []
    per_stream: dict[tuple, list] = defaultdict(list)
    for part in engine.run(idle_task, params):
        for rank, stream, cat, t in part:
            per_stream[(rank, stream)].append((cat, t))
    for (rank, stream), cats in sorted(per_stream.items()):
        total = sum(t for _, t in cats)
        for cat, t in sorted(cats, key=lambda x: IDLE_CATEGORIES.index(x[0])):
            ratio = float(np.round(t / total, 2)) if total else None
            rows.append({"rank": rank, "stream": stream, "idle_category": cat, "idle_time_us": float(np.round(t, 2)),
                         "idle_time_ratio": ratio})
    return AnalysisResult("idle", ["rank", "stream", "idle_category", "idle_time_us", "idle_time_ratio"], rows,
                          title="GPU idle time by cause, per rank and stream (µs)")


# ----------------------------------------------------------------------------- queue length
def queue_task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params, kernel_types=False)
    names = _sql_names(LAUNCH_NAMES + tuple(params.get("extra_launch_names", ())))
    # HTA's rows: the launches (with the stream of the GPU events of their correlation; none: left
    # out), then those GPU events, each list in frame order; then one sort by ts.
    sql = f"""
    WITH f AS {_frame_with_links()},
    g AS (SELECT * FROM f WHERE stream <> -1),
    l AS (SELECT * FROM f WHERE name IN ({names}) AND index_correlation > 0),
    rows AS (
        SELECT l.rank, 0 AS side, l.part, l.idx, g.part AS gpart, g.idx AS gidx, l.ts, g.stream, 1 AS q
        FROM l LEFT JOIN g ON l.rank = g.rank AND l.correlation = g.correlation
        UNION ALL
        SELECT g.rank, 1, g.part, g.idx, 0, 0, g.ts, g.stream, -1 FROM g
        WHERE g.correlation IN (SELECT correlation FROM l WHERE l.rank = g.rank))
    SELECT rank, ts, stream, q FROM rows ORDER BY rank, side, part, idx, gpart, gidx"""
    out = []
    for rank, c in rank_batches(con, sql):
        order = np.argsort(c["ts"].astype(np.int64) if np.all(c["ts"] == np.floor(c["ts"])) else c["ts"],
                           kind="quicksort")
        stream = np.asarray(c["stream"], np.float64)[order]
        q = c["q"][order]
        for s in np.unique(stream[~np.isnan(stream)]).tolist():
            out.append((rank, int(s), describe(np.cumsum(q[stream == s]))))
    return out


def run_queue(engine, *, include_last_step: bool = False, extra_launch_names: Sequence[str] = ()) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    params["extra_launch_names"] = list(extra_launch_names)
    rows = [{"rank": r, "stream": s, **d} for part in engine.run(queue_task, params) for r, s, d in part]
    rows.sort(key=lambda r: (r["rank"], r["stream"]))
    return AnalysisResult("queue", ["rank", "stream", *DESCRIBE], rows,
                          title="Queue length (launched, not yet finished GPU operations) per rank and stream",
                          units={c: "operations" for c in DESCRIBE if c != "count"})


# ----------------------------------------------------------------------------- memory bandwidth
def membw_task(con, ranks: Sequence[int], params: dict) -> list[tuple]:
    create_frame(con, params)
    sql = f"""
    SELECT f.rank, k.memory_type AS name, f.ts, CASE WHEN f.dur = 0 THEN 1 ELSE f.dur END AS dur, f.memory_bw_gbps AS bw
    FROM hta_frame f JOIN ktypes k ON f.name = k.name
    WHERE f.stream <> -1 AND k.kernel_type = '{MEMORY}' ORDER BY f.rank, f.part, f.idx"""
    out = []
    for rank, c in rank_batches(con, sql):
        # HTA: the starts (+bw), then the ends (-bw), one sort by time, a running sum per copy kind.
        t = np.concatenate([c["ts"], c["ts"] + c["dur"]]).astype(np.float64)
        bw = np.concatenate([c["bw"], -c["bw"]]).astype(np.float64)
        name = np.concatenate([c["name"], c["name"]])
        order = np.argsort(t, kind="quicksort")
        bw, name = bw[order], name[order]
        for n in sorted(set(name.tolist())):
            series = np.cumsum(bw[name == n])
            positive = series[series > 0]
            if len(positive):
                out.append((rank, n, describe(positive)))
    return out


def run_memory_bw(engine, *, include_last_step: bool = False) -> AnalysisResult:
    params = steps_params(engine, include_last_step=include_last_step)
    rows = [{"rank": r, "name": n, **d} for part in engine.run(membw_task, params) for r, n, d in part]
    rows.sort(key=lambda r: (r["rank"], r["name"]))
    return AnalysisResult("memory-bw", ["rank", "name", *DESCRIBE], rows,
                          title="Memory bandwidth of copies and sets (GB/s) per rank",
                          units={c: "GB/s" for c in DESCRIBE if c != "count"})
