"""``stragglers``: per-step time per rank, and the ranks that stand out.

Steps are the ``ProfilerStep#N`` ranges that torch.profiler's and xpuprof's ``step()`` record on the
host. Per rank: how many steps, their mean / median / max duration, and how late the rank starts
its steps (mean over steps of its start minus the earliest rank's start of that step, on the
epoch clock: each rank's ``base_time_ns`` plus its ``ts``). A rank is a straggler when its mean
step time is both ``threshold_pct`` % above the median rank's and more than ``z`` robust standard
deviations (1.4826 x the median absolute deviation) above it, or when it starts its steps that
late relative to the others' start lag by the same rules.
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ..engines.base import Reads, per_rank_slices
from .result import AnalysisResult

STEP_NAME = re.compile(r"^ProfilerStep#([0-9]{1,18})$")
READS = Reads(("slices",), {"slices": ["dur"]})
HOST_CATEGORIES = ("user_annotation", "cpu_op", "python_function")
COLUMNS = ["rank", "steps", "mean_step_us", "median_step_us", "max_step_us", "vs_median_pct", "step_z",
           "start_lag_us", "lag_z", "straggler"]


def rank_steps(table, params: dict) -> list[tuple]:
    """Task (``Engine.map``): per rank of the group and step N, the host's ``ProfilerStep#N`` range (the
    longest when a step shows on several threads, the earliest of equal ones): (rank, N, start epoch ns,
    duration ns)."""
    out = []
    for rank, _, s in per_rank_slices(table):
        strings = list(s.strings)
        number = np.array([int(m.group(1)) if (m := STEP_NAME.match(t)) else -1 for t in strings] + [-1], np.int64)
        host = np.array([t in HOST_CATEGORIES for t in strings] + [False], bool)
        rows = np.flatnonzero((number[s.name] >= 0) & host[s.cat]
                              & (True if s.dur_present is None else np.asarray(s.dur_present, bool)))
        step, start, dur = number[s.name[rows]], np.asarray(s.ts, np.int64)[rows], np.asarray(s.dur, np.int64)[rows]
        order = np.lexsort((start, -dur, step))
        first = np.ones(len(order), bool)
        first[1:] = step[order][1:] != step[order][:-1]
        out += [(rank, n, t, d) for n, t, d in zip(step[order][first].tolist(), start[order][first].tolist(),
                                                   dur[order][first].tolist())]
    return out


def _robust_z(values: np.ndarray) -> np.ndarray:
    med = np.median(values)
    mad = np.median(np.abs(values - med)) * 1.4826
    if mad == 0:
        return np.where(values == med, 0.0, np.inf * np.sign(values - med))
    return (values - med) / mad


def run(engine, *, threshold_pct: float = 5.0, z: float = 3.5) -> tuple[AnalysisResult, list[dict]]:
    """The per-rank table and the per-(rank, step) rows (for the HTML report's per-rank view)."""
    steps = sorted(r for part in engine.map(rank_steps, reads=READS) for r in part)
    if not steps:
        return AnalysisResult("stragglers", COLUMNS, [], [
            "no ProfilerStep#N ranges in the store: per-step times need the profiler's step() (torch.profiler's "
            "schedule, or xpuprof's profile.step())"], title="Stragglers"), []
    first_start: dict[int, int] = {}
    for _, step, start, _ in steps:
        first_start[step] = min(first_start.get(step, start), start)
    per_rank: dict[int, list] = defaultdict(list)
    step_rows = []
    for rank, step, start, dur in steps:
        lag = (start - first_start[step]) / 1e3
        per_rank[rank].append((dur / 1e3, lag))
        step_rows.append({"rank": rank, "step": step, "step_us": dur / 1e3, "start_lag_us": lag})
    ranks = sorted(per_rank)
    means = np.array([np.mean([d for d, _ in per_rank[r]]) for r in ranks])
    lags = np.array([np.mean([lag for _, lag in per_rank[r]]) for r in ranks])
    median = float(np.median(means))
    step_z, lag_z = _robust_z(means), _robust_z(lags)
    lag_median = float(np.median(lags))
    rows = []
    for i, r in enumerate(ranks):
        durs = np.array([d for d, _ in per_rank[r]])
        vs = 100 * (means[i] - median) / median if median else 0.0
        slow = vs > threshold_pct and step_z[i] > z
        late = lags[i] - lag_median > median * threshold_pct / 100 and lag_z[i] > z
        rows.append({"rank": r, "steps": len(durs), "mean_step_us": float(means[i]),
                     "median_step_us": float(np.median(durs)), "max_step_us": float(durs.max()),
                     "vs_median_pct": float(np.round(vs, 2)), "step_z": _finite(step_z[i]),
                     "start_lag_us": float(lags[i]), "lag_z": _finite(lag_z[i]), "straggler": bool(slow or late)})
    notes = []
    flagged = [r["rank"] for r in rows if r["straggler"]]
    notes.append(f"stragglers: {', '.join(map(str, flagged))}" if flagged else "no straggler among "
                 f"{len(rows)} ranks (mean step time within {threshold_pct}% or {z} robust SDs of the median)")
    return AnalysisResult("stragglers", COLUMNS, rows, notes, title="Per-step time per rank"), step_rows


def _finite(x: float) -> float | None:
    return float(np.round(x, 2)) if np.isfinite(x) else (None if np.isnan(x) else float(x))
