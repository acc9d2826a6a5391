"""One kernel's (or range's) per-call durations in one run, summarized for the history and the gate.

Durations are compared in log space (a slow-down multiplies a duration). ``SampleStats.of`` computes,
from every call:
- the median and the MAD of log durations, then the calls within ``CLEAN_MADS`` robust standard
  deviations of the median (an outlier call - a preemption, a page fault - is left out, said by
  ``kept`` < ``calls``), and their mean (``loc``) and standard deviation (``sd``): the run's location
  and its standard error ``sd / sqrt(kept)``, which is all the decision rule reads;
- the median, min, max and a few quantiles in ns, for tables and plots;
- the durations themselves when a run has at most ``KEEP_SAMPLES`` calls (else the summary above is the
  compact sketch of them: what the rule reads is exact either way, computed from every call).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CLEAN_MADS = 4.5  # a normal call is further than this from the median once in ~150,000
KEEP_SAMPLES = 512
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class SampleStats:
    calls: int
    kept: int  # calls within CLEAN_MADS of the median
    loc: float  # mean of ln(ns) over the kept calls
    sd: float  # their standard deviation (ddof 1; 0 with one call)
    median_ns: float
    min_ns: float
    max_ns: float
    total_ns: float
    quantiles_ns: tuple[float, ...] = ()  # at QUANTILES
    samples_ns: tuple[float, ...] | None = None  # every call, when at most KEEP_SAMPLES

    @property
    def se(self) -> float:
        """Standard error of ``loc``."""
        return self.sd / math.sqrt(self.kept) if self.kept > 1 else math.nan

    @property
    def location_ns(self) -> float:
        """The run's typical call (exp of ``loc``): the geometric mean of the kept calls."""
        return math.exp(self.loc)

    @classmethod
    def of(cls, durations_ns) -> "SampleStats":
        d = np.asarray(durations_ns, np.float64)
        if not len(d):
            raise ValueError("no calls to summarize")
        return batch_stats(d[None, :])[0]

    def to_dict(self) -> dict:
        out = {"calls": self.calls, "kept": self.kept, "loc": self.loc, "sd": self.sd, "median_ns": self.median_ns,
               "min_ns": self.min_ns, "max_ns": self.max_ns, "total_ns": self.total_ns,
               "quantiles_ns": list(self.quantiles_ns)}
        if self.samples_ns is not None:
            out["samples_ns"] = [int(v) if float(v).is_integer() else v for v in self.samples_ns]
        return out

    @classmethod
    def from_dict(cls, d) -> "SampleStats":
        """A summary as ``to_dict`` wrote it; ``ValueError`` naming the field for anything else."""
        if not isinstance(d, dict):
            raise ValueError(f"a call summary must be an object, not {type(d).__name__}")

        def num(key, *, low=-math.inf):
            v = d.get(key)
            if type(v) not in (int, float) or not math.isfinite(v) or v < low:
                raise ValueError(f"{key} must be a finite number >= {low:g}, not {v!r}"[:160])
            return v

        calls, kept = int(num("calls", low=1)), int(num("kept", low=1))
        if kept > calls:
            raise ValueError(f"kept ({kept}) is more than calls ({calls})")
        q = d.get("quantiles_ns") or []
        s = d.get("samples_ns")
        for key, seq in (("quantiles_ns", q), ("samples_ns", s or [])):
            if not isinstance(seq, list) or not all(type(v) in (int, float) and math.isfinite(v) for v in seq):
                raise ValueError(f"{key} must be a list of finite numbers")
        if s is not None and len(s) != calls:
            raise ValueError(f"samples_ns holds {len(s)} values for {calls} calls")
        return cls(calls, kept, float(num("loc")), float(num("sd", low=0)), float(num("median_ns", low=0)),
                   float(num("min_ns", low=0)), float(num("max_ns", low=0)), float(num("total_ns", low=0)),
                   tuple(float(v) for v in q), None if s is None else tuple(float(v) for v in s))


def batch_stats(durations_ns: np.ndarray) -> list[SampleStats]:
    """``SampleStats`` of each row of a (groups, calls) matrix of durations (ns): the rule of the module
    docstring, along the rows at once."""
    d = np.maximum(np.asarray(durations_ns, np.float64), 1.0)  # a 0 ns slice (clock granularity) as 1 ns
    if d.ndim != 2 or not d.shape[1]:
        raise ValueError("no calls to summarize")
    x = np.log(d)
    med = np.median(x, axis=1, keepdims=True)
    dev = np.abs(x - med)
    scale = MAD_TO_SD * np.median(dev, axis=1, keepdims=True)
    # over half the calls equal (MAD 0): the mean deviation still sees the others' spread
    scale = np.where(scale > 0, scale, 1.2533 * dev.mean(axis=1, keepdims=True))
    keep = (dev <= CLEAN_MADS * scale) | (scale == 0)
    kept = keep.sum(axis=1)
    loc = (x * keep).sum(axis=1) / kept
    sq = (((x - loc[:, None]) * keep) ** 2).sum(axis=1)
    sd = np.sqrt(sq / np.maximum(kept - 1, 1)) * (kept > 1)
    q = np.quantile(d, QUANTILES, axis=1).T
    med_ns, lo, hi, total = np.median(d, axis=1), d.min(axis=1), d.max(axis=1), d.sum(axis=1)
    keep_all = d.shape[1] <= KEEP_SAMPLES
    return [SampleStats(int(d.shape[1]), int(kept[i]), float(loc[i]), float(sd[i]), float(med_ns[i]), float(lo[i]),
                        float(hi[i]), float(total[i]), tuple(q[i].tolist()),
                        tuple(d[i].tolist()) if keep_all else None) for i in range(len(d))]


def stats_by_name(names, durations_ns) -> dict[str, SampleStats]:
    """``SampleStats`` per distinct name (rows: parallel arrays of names and durations)."""
    names = np.asarray(names, dtype=object)
    dur = np.asarray(durations_ns, np.float64)
    if not len(names):
        return {}
    uniq, codes = np.unique(names.astype(str), return_inverse=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    return {str(u): SampleStats.of(dur[order[bounds[i]:bounds[i + 1]]]) for i, u in enumerate(uniq.tolist())}
