"""``stragglers``: the ranks the others wait for, and in which steps.

In synchronous training every rank's step ends in the same collectives, so step times equalize and
the slow rank does not show in them: it is the rank that *waits least* in the collectives while the
others wait for it. The rule reads per (rank, step) the step's start and duration and the time the
rank spent in collectives (``step_waits``), and compares each rank with the others step by step:

- what the others wait for rank r in step s (its *delay*): how much less r waits in collectives than
  the other ranks' median; in a job without collectives, the larger of how much longer its step takes
  and how much later it starts than theirs (``SIGNALS``; starts a step or more apart are not compared:
  those traces are not aligned in time);
- r is behind in step s when that delay exceeds the step's margin: ``threshold_pct`` % of the
  median rank's time for that step, and at least ``min_us`` µs;
- the steps named for r are those it is behind in by at least half its median delay over them
  (one late step in a run of short hiccups is named; hiccups next to its slow steps are not);
- r is a straggler when those steps' delays add up to ``threshold_pct`` % of the job's step time
  (the others lose that share of the run waiting for it) over two steps or more (``MIN_BEHIND_STEPS``:
  one late step is an event, such as the profiler starting later on one rank, not a slow rank).

Comparing each rank with the *others'* median works for 2 ranks (the other rank) as for 1,000; no
spread over ranks is estimated, so no rank count is too small. The last step is left out unless
``include_last_step`` (HTA's convention: its time holds the profiler's stop).

``judge`` is the rule: plain numpy over the per-(rank, step) rows, whichever engine or reader
read them (``run``: the ranks an engine reads, a store's or trace files'; ``from_traces``: files).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from . import step_waits
from .result import AnalysisResult

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_MIN_US = 100.0
# A straggler holds the others up in this many steps at least (all of them in a shorter run): one late
# step is an event (a pause, the profiler starting later on one rank than on the others), shown in its
# row, not a slow rank.
MIN_BEHIND_STEPS = 2
# The verdict first (a narrow terminal leaves out columns from the right), then what it rests on.
COLUMNS = ["rank", "straggler", "behind_steps", "cost_share_pct", "wait_us", "others_wait_us", "cost_us", "steps",
           "mean_step_us", "vs_median_pct", "start_lag_us", "explanation"]
# What makes the others wait for a rank in a step. With collectives: its wait in them against theirs
# only. Its step time and start say nothing there: steps end together at the collective, so a longer
# step is one that started earlier, and a late start that costs the others shows as their wait (start
# times across hosts also compare clocks that differ by their offsets). Without collectives: its step
# time and its start against theirs.
SIGNALS = ("wait", "step", "lag")
SOURCES = {"device": "communication kernels (NCCL's, RCCL's, oneCCL's) on the device",
           "host": "collective ranges on the host (gloo:*, nccl:*, ...)"}


@dataclass
class Verdict:
    """The rule's answer: per rank (``ranks`` order) and per (rank, step) (rows of ``ranks``, columns
    of ``steps``; NaN where a rank has no such step)."""

    ranks: np.ndarray
    steps: np.ndarray
    source: str  # "device", "host" or "" (no collectives: step time and start lag only)
    threshold_pct: float
    min_us: float
    step_us: np.ndarray
    lag_us: np.ndarray
    wait_us: np.ndarray  # NaN everywhere without a source
    others_wait_us: np.ndarray
    delay_us: np.ndarray
    cause: np.ndarray  # per (rank, step): the SIGNALS index the delay came from
    margin_us: np.ndarray  # per step
    named: np.ndarray  # bool: the steps named for each rank
    cost_us: np.ndarray  # per rank
    job_us: np.ndarray  # per rank: the median step times of the steps it was compared in, added up
    notes: list[str] = field(default_factory=list)

    @property
    def stragglers(self) -> list[int]:
        return [int(r) for r, s in zip(self.ranks, self.straggler) if s]

    @property
    def straggler(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            share = 100 * self.cost_us / self.job_us
        compared = (~np.isnan(self.step_us)).sum(axis=1)
        repeated = self.named.sum(axis=1) >= np.minimum(MIN_BEHIND_STEPS, compared)
        return (self.cost_us > 0) & (share >= self.threshold_pct) & repeated


def judge(rows: np.ndarray, *, threshold_pct: float = DEFAULT_THRESHOLD_PCT, min_us: float = DEFAULT_MIN_US,
          include_last_step: bool = False) -> Verdict | None:
    """The rule over ``step_waits`` rows (int64, ``step_waits.COLUMNS``); None without any step."""
    if not len(rows):
        return None
    notes = []
    ranks, ri = np.unique(rows[:, 0], return_inverse=True)
    steps = np.unique(rows[:, 1])
    if not include_last_step and len(steps) >= 2:
        rows = rows[rows[:, 1] != steps[-1]]
        notes.append(f"the last step (ProfilerStep#{steps[-1]}) is left out, as HTA does: its time holds the "
                     "profiler's stop (include_last_step keeps it)")
        steps = steps[:-1]
        ri = np.searchsorted(ranks, rows[:, 0])
    si = np.searchsorted(steps, rows[:, 1])
    shape = (len(ranks), len(steps))

    def matrix(values) -> np.ndarray:
        m = np.full(shape, np.nan)
        m[ri, si] = values
        return m

    dur = matrix(rows[:, 3] / 1e3)
    start = np.zeros(shape, np.int64)
    start[ri, si] = rows[:, 2]
    present = ~np.isnan(dur)
    earliest = np.where(present, start, np.iinfo(np.int64).max).min(axis=0)
    lag = matrix((rows[:, 2] - earliest[si]) / 1e3)
    shared = present.sum(axis=0) >= 2  # a step is compared when two ranks or more have it
    if (~shared).any():
        alone = steps[~shared]
        notes.append(f"{len(alone)} step(s) only one rank has are not compared (ProfilerStep#"
                     f"{_step_list(alone.tolist())})")
    if rows[:, 5].sum() > 0:
        source, wait = "device", matrix(rows[:, 4] / 1e3)
    elif rows[:, 7].sum() > 0:
        source, wait = "host", matrix(rows[:, 6] / 1e3)
    else:
        source, wait = "", np.full(shape, np.nan)
    compared = present & shared[None, :]
    ref = np.where(shared, _nanmedian_columns(np.where(compared, dur, np.nan)), np.nan)
    margin = np.maximum(min_us, threshold_pct / 100 * ref)

    def excess(m: np.ndarray) -> np.ndarray:
        """How far each cell is above the median of the other ranks' cells of its step."""
        m = np.where(compared, m, np.nan)
        return m - median_of_others(m)

    signals = np.full((len(SIGNALS),) + shape, np.nan)
    others = np.full(shape, np.nan)
    if source:
        others = median_of_others(np.where(compared, wait, np.nan))
        signals[SIGNALS.index("wait")] = others - wait
        notes.append(f"waits: each rank's time per step in {SOURCES[source]}")
    else:
        signals[SIGNALS.index("step")] = excess(dur)
        late = excess(lag)
        # ranks in one job start a step within a step of each other; further apart, their traces are not
        # aligned in time (separate runs, clocks that differ): their start says nothing about the job
        apart = np.abs(late) > ref[None, :]
        signals[SIGNALS.index("lag")] = np.where(apart, np.nan, late)
        notes.append("no collectives in the traces: stragglers from step time and start lag only")
        if apart.any():
            far = ranks[apart.any(axis=1)].tolist()
            notes.append(f"start lag left out where a rank starts a step more than a step away from the others' "
                         f"(rank{'s' if len(far) > 1 else ''} {_step_list(far)}): their traces are not aligned in "
                         "time (separate runs, or clocks that differ)")
    signals = np.where(compared[None], signals, np.nan)
    with np.errstate(invalid="ignore"):
        delay = np.where(np.isnan(signals).all(axis=0), np.nan, np.nanmax(np.where(np.isnan(signals), -np.inf, signals), axis=0))
    cause = np.argmax(np.where(np.isnan(signals), -np.inf, signals), axis=0)
    behind = delay > margin[None, :]
    typical = _nanmedian_rows(np.where(behind, delay, np.nan))
    named = behind & (delay >= typical[:, None] / 2)
    cost = np.where(named, delay, 0.0).sum(axis=1)
    job = np.where(compared, ref[None, :], 0.0).sum(axis=1)
    return Verdict(ranks, steps, source, threshold_pct, min_us, np.where(compared, dur, np.nan),
                   np.where(compared, lag, np.nan), np.where(compared, wait, np.nan), others, delay, cause, margin,
                   named, cost, job, notes)


def median_of_others(m: np.ndarray) -> np.ndarray:
    """Per cell of a (ranks, steps) matrix: the median of its column without it (NaN: absent, left out;
    NaN where no other value is present)."""
    n_rows, n_cols = m.shape
    filled = np.where(np.isnan(m), np.inf, m)
    order = np.argsort(filled, axis=0, kind="stable")
    ordered = np.take_along_axis(filled, order, axis=0)
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.arange(n_rows)[:, None].repeat(n_cols, 1), axis=0)
    count = (~np.isnan(m)).sum(axis=0)[None, :].repeat(n_rows, 0)
    others = np.where(np.isnan(m), count, count - 1)  # how many values the cell's median is taken over

    def at(j: np.ndarray) -> np.ndarray:
        """The j-th smallest of the others: the j-th of the column, or the next one past the cell."""
        k = np.clip(j + (j >= pos), 0, n_rows - 1)
        return np.take_along_axis(ordered, k, axis=0)

    lo = np.maximum(others - 1, 0) // 2
    hi = others // 2
    with np.errstate(invalid="ignore"):
        out = (at(lo) + at(hi)) / 2
    return np.where(others > 0, out, np.nan)


def _nanmedian_columns(m: np.ndarray) -> np.ndarray:
    if not m.size:
        return np.full(m.shape[1], np.nan)
    with np.errstate(all="ignore"):
        ok = ~np.isnan(m).all(axis=0)
        out = np.full(m.shape[1], np.nan)
        if ok.any():
            out[ok] = np.nanmedian(m[:, ok], axis=0)
    return out


def _nanmedian_rows(m: np.ndarray) -> np.ndarray:
    return _nanmedian_columns(m.T)


# ----------------------------------------------------------------------------- the result
def result(verdict: Verdict | None) -> AnalysisResult:
    """The per-rank table; its ``details``: one row per (rank, step) (the HTML's per-step cells)."""
    if verdict is None:
        return AnalysisResult("stragglers", COLUMNS, [], [
            "no ProfilerStep#N ranges: per-step times need the profiler's step() (torch.profiler's schedule, "
            "or xpuprof's profile.step())"], title="Stragglers")
    v = verdict
    compared = ~np.isnan(v.step_us)
    mean_step = _row_means(v.step_us)
    others_step = median_of_others(mean_step[:, None])[:, 0]
    flags = v.straggler
    lags, waits, others_waits = _row_means(v.lag_us), _row_means(v.wait_us), _row_means(v.others_wait_us)
    rows = []
    for i, rank in enumerate(v.ranks.tolist()):
        n = int(compared[i].sum())
        vs = 100 * (mean_step[i] - others_step[i]) / others_step[i] if n and others_step[i] else None
        named = v.steps[v.named[i]].tolist()
        share = 100 * v.cost_us[i] / v.job_us[i] if v.job_us[i] else 0.0
        wait, others = (waits[i], others_waits[i]) if v.source else (None, None)
        row = {"rank": rank, "steps": n, "mean_step_us": _num(mean_step[i]), "vs_median_pct": _num(vs, 2),
               "start_lag_us": _num(lags[i]), "wait_us": _num(wait), "others_wait_us": _num(others),
               "behind_steps": named, "cost_us": _num(v.cost_us[i]), "cost_share_pct": _num(share, 2),
               "straggler": bool(flags[i])}
        row["explanation"] = explain(row, len(v.ranks), v, i)
        rows.append(row)
    step_rows = [{"rank": int(v.ranks[i]), "step": int(v.steps[j]), "step_us": float(v.step_us[i, j]),
                  "start_lag_us": float(v.lag_us[i, j]), "wait_us": _num(v.wait_us[i, j]),
                  "others_wait_us": _num(v.others_wait_us[i, j]), "delay_us": _num(v.delay_us[i, j]),
                  "behind": bool(v.named[i, j])}
                 for i, j in zip(*np.nonzero(compared))]
    flagged = v.stragglers
    notes = list(v.notes)
    if len(rows) < 2:
        notes.append(f"one rank ({rows[0]['rank']}): no other rank to compare it with")
    else:
        notes.append(f"stragglers: {', '.join(map(str, flagged))}" if flagged else
                     f"no straggler among {len(rows)} ranks (none makes the others wait {v.threshold_pct:g}% of the "
                     "step time)")
    return AnalysisResult("stragglers", COLUMNS, rows, notes, title="Stragglers: what ranks wait for",
                          details=step_rows)


def explain(row: dict, n_ranks: int, v: Verdict, i: int) -> str:
    """One sentence per rank: what it waits (or how long its steps take) against the others, and what it
    costs them."""
    who = "the other rank's" if n_ranks == 2 else "the other ranks' median"
    if not row["steps"]:
        return "no step shared with another rank"
    if v.source:
        text = f"waits {_us(row['wait_us'])} per step in collectives against {who} {_us(row['others_wait_us'])}"
    else:
        vs = row["vs_median_pct"]
        text = (f"steps take {_us(row['mean_step_us'])}" + (f" ({vs:+.1f}% against {who})" if vs is not None else "")
                + f", start {_us(row['start_lag_us'])} after the earliest rank")
    named = row["behind_steps"]
    if not named:
        return text
    others = "the other rank" if n_ranks == 2 else "the others"
    # with collectives the others are seen waiting; without, it is behind them (they would wait at the
    # first synchronization)
    behind = (f"{others} wait{'s' if n_ranks == 2 else ''} for it" if v.source else f"it is behind {others}")
    causes = {SIGNALS[c] for c in v.cause[i, v.named[i]].tolist()}
    why = " and ".join(w for c, w in (("wait", "it waits less"), ("step", "its steps take longer"),
                                      ("lag", "it starts later")) if c in causes)
    per = f"{_us(row['cost_us'] / len(named))} per step in steps" if len(named) > 1 else f"{_us(row['cost_us'])} in step"
    return (f"{text}; {behind} ({why}) {per} {_step_list(named)}: {row['cost_share_pct']:.1f}% of the run's "
            "step time")


def _step_list(steps: Sequence[int], limit: int = 12) -> str:
    """3, 6, 9 / 1-10 / ... and 40 more: runs of consecutive steps shortened."""
    runs: list[list[int]] = []
    for s in steps:
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    more = len(parts) - limit
    return ", ".join(parts[:limit]) + (f" and {more} more" if more > 0 else "")


def _us(value) -> str:
    return "?" if value is None else f"{value:,.0f} µs"


def _row_means(m: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        n = (~np.isnan(m)).sum(axis=1)
        return np.where(n > 0, np.nansum(m, axis=1) / np.maximum(n, 1), np.nan)


def _num(x, digits: int | None = None) -> float | None:
    if x is None or not np.isfinite(x):
        return None
    return float(np.round(x, digits)) if digits is not None else float(x)


# ----------------------------------------------------------------------------- sources
def run(engine, *, threshold_pct: float = DEFAULT_THRESHOLD_PCT, min_us: float = DEFAULT_MIN_US,
        include_last_step: bool = False) -> AnalysisResult:
    """The ranks an engine reads (``analyze``, the report's per-rank view): a store's ranks, or trace files. A
    file whose rank is unknown, a rank two files claim and a merged view (``xpuprof merge``) are left out,
    each said in a note."""
    from ..engines.sources import TraceFiles

    _check_options(threshold_pct, min_us)
    params = {"named_only": isinstance(engine.source, TraceFiles)}
    parts: list[np.ndarray] = []
    notes: list[str] = []
    seen: dict[int, object] = {}
    for origin, rank, merged, rows in (t for part in engine.map(step_waits.trace_rows, params, step_waits.READS)
                                       for t in part):
        if merged:
            notes.append(f"{origin}: a merged view of several ranks (xpuprof merge) is left out; give the per-rank "
                         "traces")
        elif rank < 0:
            notes.append(f"{origin}: left out: no rank in its distributedInfo or its name (.rank<N>.)")
        elif rank in seen:
            notes.append(f"{origin}: left out: rank {rank} is also {seen[rank]}'s")
        else:
            seen[rank] = origin
            parts.append(np.array(rows, np.int64).reshape(-1, len(step_waits.COLUMNS)))
    if not seen and notes:  # nothing to compare: what was left out says why
        return AnalysisResult("stragglers", COLUMNS, [], notes, title="Stragglers")
    got = result(judge(step_waits.combine(parts), threshold_pct=threshold_pct, min_us=min_us,
                       include_last_step=include_last_step))
    got.notes[:0] = notes
    return got


def from_traces(paths: Iterable, **options) -> AnalysisResult:
    """Kineto JSON trace files (one per rank), as ``run`` reads them."""
    from ..engines import open_engine

    with open_engine(list(paths)) as engine:
        return run(engine, **options)


def _check_options(threshold_pct: float, min_us: float) -> None:
    from .result import AnalysisError

    if not (isinstance(threshold_pct, (int, float)) and 0 < threshold_pct < 1000):
        raise AnalysisError(f"--threshold-pct must be a percentage above 0 (and below 1000), not {threshold_pct!r}")
    if not (isinstance(min_us, (int, float)) and 0 <= min_us < 1e12):
        raise AnalysisError(f"--min-us must be a number of µs, 0 or more, not {min_us!r}")


# ----------------------------------------------------------------------------- the report's document
# (key in the report document, key in the result's rows (µs values become integer ns), label, unit, meaning)
DOCUMENT_COLUMNS = (
    ("rank", "rank", "Rank", "", "the rank"),
    ("straggler", "straggler", "Straggler", "", "whether the others wait for it: cost_share_pct >= the threshold (5), "
                                                "over two steps or more"),
    ("behind_steps", "behind_steps", "Behind in", "", "the steps in which the others waited for it (ProfilerStep#N)"),
    ("cost_share_pct", "cost_share_pct", "Cost share", "percent", "what the others waited for it in those steps "
                                                                  "(cost_ns) as a share of the run's step time"),
    ("wait_ns", "wait_us", "Wait", "ns", "its time in collectives per step (absent without collectives)"),
    ("others_wait_ns", "others_wait_us", "Others' wait", "ns", "the other ranks' median time in collectives per step"),
    ("cost_ns", "cost_us", "Cost", "ns", "what the others waited for it in those steps, added up"),
    ("steps", "steps", "Steps", "", "ProfilerSteps compared with the other ranks'"),
    ("mean_step_ns", "mean_step_us", "Mean step", "ns", "its mean ProfilerStep time"),
    ("vs_median_pct", "vs_median_pct", "vs median", "percent", "its mean step time against the other ranks' median"),
    ("start_lag_ns", "start_lag_us", "Start lag", "ns", "how late it starts its steps after the earliest rank, on "
                                                       "average (epoch clocks)"),
    ("explanation", "explanation", "Why", "", "in words: what it waits against the others, and what it costs them"),
)
