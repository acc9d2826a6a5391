"""Analyses that walk each stream's events in time order: ``idle`` (HTA's
``get_idle_time_breakdown``), ``queue`` (``get_queue_length_summary``) and ``memory-bw``
(``get_memory_bw_summary``).

HTA sorts these events with pandas' default sort (numpy's quicksort, not stable), so events at the
same timestamp come in an order only that sort decides, and queue lengths and bandwidth sums
depend on it. Each rank's events are therefore put in HTA's row order and sorted with the same numpy
sort on the same dtype, which gives HTA's order.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from .frame import DESCRIBE, MEMORY, Frame, describe, hta_map, memory_kernel_type
from .result import AnalysisResult

KERNEL_CATEGORIES = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
# HTA's get_runtime_launch_events_query: the runtime calls that put work on a stream.
LAUNCH_NAMES = ("cudaMemsetAsync", "cudaMemcpyAsync", "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream")
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")


def _quicksort(ts: np.ndarray) -> np.ndarray:
    """HTA's sort of these rows by time: numpy's quicksort, on int64 when every time is whole (pandas' dtype)."""
    return np.argsort(ts.astype(np.int64) if np.all(ts == np.floor(ts)) else ts, kind="quicksort")


# ----------------------------------------------------------------------------- idle
def rank_idle(f: Frame, options: dict) -> list[tuple]:
    """(stream, idle category, time) of one rank: each gap before a kernel on its stream is host wait when
    the kernel's launch ended after the previous kernel, kernel wait when shorter than the delay option."""
    k = f.take((f.stream != -1) & f.where("cat", KERNEL_CATEGORIES.__contains__))
    at = {i: t for i, t in zip(f.idx.tolist(), f.ts.tolist())}  # the launch's start, by its index
    launched = np.array([at.get(i, np.nan) for i in k.index_correlation.tolist()], np.float64)
    out = []
    for stream in dict.fromkeys(k.stream.tolist()):
        sel = k.stream == stream
        order = _quicksort(k.ts[sel])
        start = k.ts[sel][order]
        end = start + k.dur[sel][order]
        runtime = launched[sel][order]
        prev_end = np.concatenate([[np.nan], end[:-1]])
        gap = start - prev_end
        with np.errstate(invalid="ignore"):
            host = runtime > prev_end
            kernel = ~host & (gap < options["consecutive_kernel_delay"])
        cat = np.where(host, 0, np.where(kernel, 1, 2))
        out += [(int(stream), IDLE_CATEGORIES[i], float(np.nansum(gap[cat == i]))) for i in np.unique(cat).tolist()]
    return out


def run_idle(engine, *, consecutive_kernel_delay: float = 30, include_last_step: bool = False) -> AnalysisResult:
    per_stream: dict[tuple, list] = defaultdict(list)
    for rank, part in hta_map(engine, rank_idle, {"consecutive_kernel_delay": consecutive_kernel_delay,
                                                  "include_last_step": include_last_step}).items():
        for stream, cat, t in part:
            per_stream[(rank, stream)].append((cat, t))
    rows = []
    for (rank, stream), cats in sorted(per_stream.items()):
        total = sum(t for _, t in cats)
        for cat, t in sorted(cats, key=lambda x: IDLE_CATEGORIES.index(x[0])):
            ratio = float(np.round(t / total, 2)) if total else None
            rows.append({"rank": rank, "stream": stream, "idle_category": cat, "idle_time_us": float(np.round(t, 2)),
                         "idle_time_ratio": ratio})
    return AnalysisResult("idle", ["rank", "stream", "idle_category", "idle_time_us", "idle_time_ratio"], rows,
                          title="GPU idle time by cause, per rank and stream (µs)")


# ----------------------------------------------------------------------------- queue length
def rank_queue(f: Frame, options: dict) -> list[tuple]:
    """(stream, queue length statistics) of one rank. HTA's rows: the launches (each with the stream of the
    GPU events of its correlation; none: left out), then those GPU events, each list in row order; then one
    sort by time; the queue is the running count of launches less finished events."""
    gpu = np.flatnonzero(f.stream != -1)
    launch = np.flatnonzero(f.named(LAUNCH_NAMES + tuple(options.get("extra_launch_names", ())))
                            & (f.index_correlation > 0))
    by_corr = gpu[np.argsort(f.correlation[gpu], kind="stable")]
    corr_sorted = f.correlation[by_corr]
    lo = np.searchsorted(corr_sorted, f.correlation[launch], "left")
    hi = np.searchsorted(corr_sorted, f.correlation[launch], "right")
    n = np.maximum(hi - lo, 1)  # a launch with no GPU event is one row without a stream
    matched = np.repeat(hi > lo, n)
    pick = np.repeat(lo, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    stream = np.where(matched, f.stream[by_corr[np.minimum(pick, max(len(by_corr) - 1, 0))]]
                      if len(by_corr) else np.nan, np.nan).astype(np.float64)
    done = gpu[np.isin(f.correlation[gpu], f.correlation[launch])]
    ts = np.concatenate([np.repeat(f.ts[launch], n), f.ts[done]])
    q = np.concatenate([np.ones(int(n.sum()), np.int64), -np.ones(len(done), np.int64)])
    stream = np.concatenate([stream, f.stream[done].astype(np.float64)])
    order = _quicksort(ts)
    stream, q = stream[order], q[order]
    return [(int(s), describe(np.cumsum(q[stream == s]))) for s in np.unique(stream[~np.isnan(stream)]).tolist()]


def run_queue(engine, *, include_last_step: bool = False, extra_launch_names: Sequence[str] = ()) -> AnalysisResult:
    got = hta_map(engine, rank_queue, {"include_last_step": include_last_step,
                                       "extra_launch_names": list(extra_launch_names)})
    rows = sorted(({"rank": r, "stream": s, **d} for r, part in got.items() for s, d in part),
                  key=lambda r: (r["rank"], r["stream"]))
    return AnalysisResult("queue", ["rank", "stream", *DESCRIBE], rows,
                          title="Queue length (launched, not yet finished GPU operations) per rank and stream",
                          units={c: "operations" for c in DESCRIBE if c != "count"})


# ----------------------------------------------------------------------------- memory bandwidth
def rank_memory_bw(f: Frame, options: dict) -> list[tuple]:
    """(copy kind, bandwidth statistics) of one rank: HTA puts each copy's bandwidth at its start (+) and end
    (-), sorts them by time and keeps the running sum per kind where it is positive."""
    m = f.take((f.stream != -1) & f.of_types((MEMORY,)))
    kind = np.array([memory_kernel_type(t) if t is not None else "" for t in m.texts], object)[m.name]
    dur = np.where(m.dur == 0, 1, m.dur)
    t = np.concatenate([m.ts, m.ts + dur]).astype(np.float64)
    bw = np.concatenate([m.memory_bw, -m.memory_bw]).astype(np.float64)
    name = np.concatenate([kind, kind])
    order = np.argsort(t, kind="quicksort")
    bw, name = bw[order], name[order]
    out = []
    for n in sorted(set(name.tolist())):
        series = np.cumsum(bw[name == n])
        positive = series[series > 0]
        if len(positive):
            out.append((n, describe(positive)))
    return out


def run_memory_bw(engine, *, include_last_step: bool = False) -> AnalysisResult:
    got = hta_map(engine, rank_memory_bw, {"include_last_step": include_last_step})
    rows = sorted(({"rank": r, "name": n, **d} for r, part in got.items() for n, d in part),
                  key=lambda r: (r["rank"], r["name"]))
    return AnalysisResult("memory-bw", ["rank", "name", *DESCRIBE], rows,
                          title="Memory bandwidth of copies and sets (GB/s) per rank",
                          units={c: "GB/s" for c in DESCRIBE if c != "count"})
