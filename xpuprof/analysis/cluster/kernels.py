"""``kernels`` and ``kernel-types``: GPU time per kernel and per kernel type (HTA's
``get_gpu_kernel_breakdown``, its two tables).

``kernels`` (all ranks together): per (kernel type, name) calls, sum, mean, min, max, standard
deviation and percentiles (p50, p90, p99). Percentiles come from mergeable log-bucket histograms
(buckets 1 % wide; each bucket remembers its smallest and largest value), so groups of ranks
combine by addition and a percentile is within 1 % of the exact (nearest-rank) value; exact when
all values in its bucket are equal. ``--top N`` keeps the N busiest names of each type and folds
the rest into one ``others`` row (exact sums and merged histograms).

``kernels --by-rank``: HTA's per-rank table exactly, its folding included: per rank and type,
when more than ``top`` names (default 10) ran, the names past the ``duration_ratio`` quantile of
the cumulative time (default 0.8) or past the top ``top`` become ``others``, and then every row's
max/min/mean/std are taken over the per-name sums (HTA's choice). Percentiles are given for the
rows that are one kernel name.

``kernel-types``: the time each combination of kernel types ran at once (computation,
communication, memory; "COMPUTATION overlapping COMMUNICATION"...), summed over ranks, with its
percentage.
"""
from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
import numpy as np

from .frame import COMMUNICATION, COMPUTATION, MEMORY, Frame, hta_map, state_name, state_times
from .result import AnalysisResult

BUCKET_BASE = 1.01
NONPOSITIVE = -(1 << 40)  # the bucket of values <= 0
PERCENTILES = (50, 90, 99)
COLUMNS = ["kernel_type", "name", "calls", "sum_us", "mean_us", "min_us", "max_us", "std_us", "p50_us", "p90_us",
           "p99_us"]
TYPES_ALL = (COMPUTATION, COMMUNICATION, MEMORY)


def _types(include_memory: bool) -> tuple[str, ...]:
    return TYPES_ALL if include_memory else TYPES_ALL[:2]


def rank_groups(f: Frame, options: dict) -> dict[tuple, "_Group"]:
    """(kernel type, name) -> the exact, mergeable statistics of one rank's kernels of that name (µs)."""
    k = f.on_streams()
    k = k.take(k.of_types(_types(options["include_memory"])))
    ktype = k.kernel_types
    order = np.lexsort((k.dur, k.name))
    codes, dur = k.name[order], k.dur[order]
    cuts = np.flatnonzero(np.diff(codes)) + 1
    out: dict[tuple, _Group] = {}
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(codes)]) if len(codes) else ():
        d = dur[lo:hi]  # ascending
        g = _Group(len(d), float(d.sum()), float(d[0]), float(d[-1]), _square_sum(d),
                   float(np.square(d - d.mean()).sum()) if len(d) > 1 else 0.0)
        b = np.where(d > 0, np.floor(np.log(np.where(d > 0, d, 1)) / np.log(BUCKET_BASE)), NONPOSITIVE).astype(np.int64)
        buckets, first, count = np.unique(b, return_index=True, return_counts=True)  # b rises with d: runs
        for bucket, i, n in zip(buckets.tolist(), first.tolist(), count.tolist()):
            g.hist[bucket] = [n, float(d[i]), float(d[i + n - 1])]
        out[(ktype[order[lo]], f.texts[codes[lo]])] = g
    return out


def _square_sum(d: np.ndarray) -> int | None:
    """The exact sum of squares of whole-number durations (None when one is not whole)."""
    if not (d == np.floor(d)).all():
        return None
    whole = d.astype(np.int64)
    top = int(np.abs(whole).max()) if len(whole) else 0
    if top * top * len(whole) < 1 << 62:
        return int(np.square(whole).sum())
    return sum(x * x for x in whole.tolist())


class _Group:
    """Exact, mergeable statistics of one group of durations (µs)."""

    __slots__ = ("n", "sum", "min", "max", "sumsq", "m2", "hist")

    def __init__(self, n: int = 0, total: float = 0.0, lo: float = math.inf, hi: float = -math.inf,
                 sumsq: int | None = 0, m2: float = 0.0) -> None:
        self.n, self.sum, self.min, self.max = n, total, lo, hi
        self.sumsq = sumsq  # exact while every value is a whole number (then std is exact too)
        self.m2 = m2  # the sum of squared deviations from the mean (Chan's parallel merge)
        self.hist: dict[int, list] = {}

    def add_bucket(self, b: int, count: int, lo: float, hi: float) -> None:
        got = self.hist.get(b)
        if got is None:
            self.hist[b] = [count, lo, hi]
        else:
            got[0] += count
            got[1], got[2] = min(got[1], lo), max(got[2], hi)

    def merge(self, other: "_Group") -> None:
        n = self.n + other.n
        if self.n and other.n:
            delta = other.sum / other.n - self.sum / self.n
            self.m2 += other.m2 + delta * delta * self.n * other.n / n
        else:
            self.m2 += other.m2
        self.n, self.sum = n, self.sum + other.sum
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.sumsq = None if self.sumsq is None or other.sumsq is None else self.sumsq + other.sumsq
        for b, (c, lo, hi) in other.hist.items():
            self.add_bucket(b, c, lo, hi)

    @property
    def std_us(self) -> float:
        if self.n < 2:
            return 0.0
        if self.sumsq is not None and float(self.sum).is_integer():
            total = int(self.sum)
            return math.sqrt(Fraction(self.sumsq * self.n - total * total, self.n * (self.n - 1)))
        return math.sqrt(max(self.m2, 0.0) / (self.n - 1))

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile from the histogram: the bucket holding the value of rank
        ceil(p/100 * n); its value when the bucket holds one value, else its geometric middle."""
        k = max(1, math.ceil(p / 100 * self.n))
        seen = 0
        for b in sorted(self.hist):
            c, lo, hi = self.hist[b]
            seen += c
            if seen >= k:
                if lo == hi or b == NONPOSITIVE:
                    return hi
                return min(max(BUCKET_BASE ** (b + 0.5), lo), hi)
        return self.max

    def row(self) -> dict:
        out = {"calls": self.n, "sum_us": self.sum, "mean_us": self.sum / self.n if self.n else None,
               "min_us": self.min, "max_us": self.max, "std_us": self.std_us}
        out.update({f"p{p}_us": self.percentile(p) for p in PERCENTILES})
        return out


def run(engine, *, by_rank: bool = False, top: int | None = None, duration_ratio: float = 0.8,
        include_memory: bool = True, include_last_step: bool = False) -> AnalysisResult:
    groups: dict[tuple, _Group] = {}
    for rank, part in hta_map(engine, rank_groups, {"include_memory": include_memory,
                                                    "include_last_step": include_last_step}).items():
        for (ktype, name), g in part.items():
            key = (rank if by_rank else -1, ktype, name)
            if key in groups:
                groups[key].merge(g)
            else:
                groups[key] = g
    top = None if top is not None and top < 0 else (10 if top is None and by_rank else top)  # -1: all
    if by_rank:
        rows = _hta_rows(groups, len(groups) + 1 if top is None else top, duration_ratio)
        return AnalysisResult("kernels", ["rank"] + COLUMNS, rows, title="GPU kernels per rank (µs)")
    rows = []
    by_type: dict[str, list] = defaultdict(list)
    for (_, ktype, name), g in groups.items():
        by_type[ktype].append((name, g))
    for ktype in sorted(by_type):
        items = sorted(by_type[ktype], key=lambda x: (-x[1].sum, x[0]))
        if top is not None and len(items) > top:
            rest = _Group()
            for _, g in items[top:]:
                rest.merge(g)
            items = items[:top] + [("others", rest)]
        rows += [{"kernel_type": ktype, "name": name, **g.row()} for name, g in items]
    return AnalysisResult("kernels", COLUMNS, rows, title="GPU kernels, all ranks (µs)")


def _hta_rows(groups: dict[tuple, _Group], num_kernels: int, duration_ratio: float) -> list[dict]:
    per: dict[tuple, list] = defaultdict(list)
    for (rank, ktype, name), g in groups.items():
        per[(rank, ktype)].append((name, g))
    rows = []
    for (rank, ktype), items in per.items():
        items.sort(key=lambda x: (-x[1].sum, x[0]))
        if len(items) > num_kernels:
            sums = np.array([g.sum for _, g in items])
            cum = np.cumsum(sums)
            cut = np.quantile(cum, duration_ratio)
            folded: dict[str, list] = defaultdict(list)
            for i, (name, g) in enumerate(items):
                folded["others" if cum[i] > cut or i >= num_kernels else name].append(g)
            for name, gs in folded.items():
                s = np.array([g.sum for g in gs])
                row = {"rank": rank, "kernel_type": ktype, "name": name, "calls": sum(g.n for g in gs),
                       "sum_us": float(s.sum()), "mean_us": float(s.mean()), "min_us": float(s.min()),
                       "max_us": float(s.max()), "std_us": float(s.std(ddof=1)) if len(s) > 1 else 0.0}
                if len(gs) == 1 and name != "others":
                    row.update({f"p{p}_us": gs[0].percentile(p) for p in PERCENTILES})
                rows.append(row)
        else:
            rows += [{"rank": rank, "kernel_type": ktype, "name": name, **g.row()} for name, g in items]
    rows.sort(key=lambda r: (r["kernel_type"], r["name"], r["rank"]))
    return rows


# ----------------------------------------------------------------------------- kernel types
def rank_type_times(f: Frame, options: dict) -> dict[int, float]:
    return state_times(f, _types(options["include_memory"]))


def run_types(engine, *, include_memory: bool = True, include_last_step: bool = False) -> AnalysisResult:
    types = _types(include_memory)
    totals: dict[int, float] = defaultdict(float)
    for part in hta_map(engine, rank_type_times, {"include_memory": include_memory,
                                                  "include_last_step": include_last_step}).values():
        for state, time in part.items():
            totals[state] += time
    grand = sum(totals.values())
    rows = [{"kernel_type": state_name(s, types), "sum_us": t,
             "percentage": float(np.round(100 * t / grand, 1)) if grand else None}
            for s, t in sorted(totals.items(), key=lambda x: (-x[1], x[0]))]
    return AnalysisResult("kernel-types", ["kernel_type", "sum_us", "percentage"], rows,
                          title="GPU time by kernel type, all ranks (µs)")
