"""``xpuprof report``'s numbers, computed once from a TraceTable whichever reader made it (Kineto JSON
files, a trace store, a frozen builder): filter by name regex and time window, and aggregate per name:
calls, inclusive and self time, per-kernel metric columns (``name_stats``: the one per-name rule), with
the telemetry tracks, the kernel resources and the submission intervals the traces carry.

The rows (``event_table``) are device work (kernels, copies, fills) by default, host ranges and ops when a
trace has none; host rows nest, so their self time (``nesting``) is what adds up. Knows no vendor and no
file format: ``build_report`` takes paths only to hand them to the one reader (``trace.read.inputs``).
The renderers of a report (table, CSV, JSON document, HTML) are in ``report_render``.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from typing import TYPE_CHECKING

from .report_terms import (DEVICE_CATEGORIES, HOST_CATEGORIES, METRICS_PREFIX, NON_METRIC_ARGS,  # noqa: F401
                           STEP_GROUP, TIME_LIMIT_NS, ReportError)

if TYPE_CHECKING:
    from .event_table import EventTable

# numpy and the rows' module load where rows are read (a report from a store's summaries needs neither)


def __getattr__(name: str):
    if name == "EventTable":  # the name callers import from here
        from .event_table import EventTable

        return EventTable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



# ----------------------------------------------------------------------------- per-name stats
@dataclass
class NameStat:
    """One row of the report: the rows of one name (of one rank with ``by_rank``)."""

    name: str
    calls: int
    total_ns: int  # inclusive: nested rows counted inside their parents
    pct: float  # self time as a share of every row's self time (the shares add up to 100)
    avg_ns: float
    min_ns: int
    max_ns: int
    rank: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # mean per kernel instance
    metric_min: dict[str, float] = field(default_factory=dict)
    metric_max: dict[str, float] = field(default_factory=dict)
    self_ns: int | None = None  # total minus the rows nested directly inside (device work: = total)

    def to_dict(self) -> dict:
        d = {"name": self.name, "calls": self.calls, "total_ns": self.total_ns, "pct": round(self.pct, 4),
             "avg_ns": round(self.avg_ns, 3), "min_ns": self.min_ns, "max_ns": self.max_ns, "metrics": self.metrics}
        if self.self_ns is not None:
            d["self_ns"] = self.self_ns
        if self.metric_min:
            d["metric_min"], d["metric_max"] = self.metric_min, self.metric_max
        if self.rank is not None:
            d["rank"] = self.rank
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "NameStat":
        """A row as ``to_dict`` wrote it; ``TypeError``/``ValueError``/``KeyError`` naming the field for
        anything else (a missing field, a string, a non-finite number, an unknown shape)."""
        if not isinstance(d, dict):
            raise TypeError(f"a row must be an object, not {type(d).__name__}")

        def number(key: str, default=None) -> float:
            v = d[key] if default is None else d.get(key, default)
            if type(v) not in (int, float) or not math.isfinite(v):
                raise ValueError(f"{key} must be a finite number, not {v!r}"[:200])
            return v

        def table(key: str) -> dict[str, float]:
            m = d.get(key) or {}
            if not isinstance(m, dict):
                raise TypeError(f"{key} must be an object of metric values, not {type(m).__name__}")
            out = {}
            for k, v in m.items():
                if type(v) not in (int, float) or not math.isfinite(v):
                    raise ValueError(f"{key}[{k!r}] must be a finite number, not {v!r}"[:200])
                out[str(k)] = float(v)
            return out

        name, rank = d["name"], d.get("rank")
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, not {type(name).__name__}")
        if rank is not None and type(rank) is not int:
            raise TypeError(f"rank must be an integer, not {type(rank).__name__}")
        self_ns = int(number("self_ns")) if d.get("self_ns") is not None else None
        return cls(name, int(number("calls")), int(number("total_ns")), float(number("pct", 0.0)),
                   float(number("avg_ns")), int(number("min_ns", 0)), int(number("max_ns", 0)), rank,
                   table("metrics"), table("metric_min"), table("metric_max"), self_ns)


KernelStat = NameStat  # the name it had while the report held kernels only


def name_stats(table: EventTable, *, by_rank: bool = False, sort_by: str = "total",
               top: int | None = None) -> list[NameStat]:
    """One row per name (per (rank, name) with ``by_rank``) of the rows of one trace or of several traces
    together: ``stats_of`` over the rows' ``partials``."""
    if not len(table):
        return []
    if table.self_ns is None:
        table.with_self_times()
    return stats_of([partials(table)], table.units, by_rank=by_rank, sort_by=sort_by, top=top)


# A partial: (rank, name) -> [calls, total_ns, self_ns, min_ns, max_ns, {metric: [count, sum, min, max]}] of some
# rows (rank -1: none). One trace's partial is what a store keeps per rank (``report_summary``); the report of
# any number of traces is ``stats_of`` their partials, so a report over a store's summaries and one over the
# traces' rows are one computation.
Partial = dict


def partials(table: EventTable) -> Partial:
    """The rows' sums and extremes per (rank, name): one grouping pass, ``np.bincount`` / ``ufunc.at``."""
    import numpy as np

    from .averages import unique_inverse

    if not len(table):
        return {}
    if table.self_ns is None:
        table.with_self_times()
    names, name_codes = unique_inverse(table.name)
    from ..trace.builder.keyindex import factorize_pairs

    pairs = factorize_pairs(np.asarray(table.rank, np.int64), name_codes)
    codes = pairs.codes.astype(np.int64)
    key_rank = np.asarray(table.rank, np.int64)[pairs.first].tolist()
    key_name = names[name_codes[pairs.first]].tolist()
    k = len(key_name)
    dur = table.dur_ns.astype(np.int64)
    calls = np.bincount(codes, minlength=k).tolist()
    total = _int_sums(codes, dur, k)
    own = _int_sums(codes, np.asarray(table.self_ns, np.int64), k)
    lo = np.full(k, np.iinfo(np.int64).max, np.int64)
    hi = np.full(k, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, codes, dur)
    np.maximum.at(hi, codes, dur)
    lo, hi = lo.tolist(), hi.tolist()
    per_metric = {m: [v.tolist() for v in _metric_stats(codes, col, k)] for m, col in table.metrics.items()}
    return {(key_rank[i], str(key_name[i])): [calls[i], total[i], own[i], lo[i], hi[i],
                                             {m: [v[0][i], v[1][i], v[2][i], v[3][i]] for m, v in per_metric.items()
                                              if v[0][i]}]
            for i in range(k)}


def _int_sums(codes, values, k: int) -> list[int]:
    """Exact int64 sums per code (``np.bincount`` sums in float64, which rounds beyond 2**53 ns)."""
    import numpy as np

    out = np.zeros(k, np.int64)
    np.add.at(out, codes, values)
    return out.tolist()


def stats_of(parts: Sequence[Partial], units: dict[str, str], *, by_rank: bool = False, sort_by: str = "total",
             top: int | None = None) -> list[NameStat]:
    """The report's rows from partials (of each trace, in any order): counts, sums and extremes added up per
    name (per (rank, name) with ``by_rank``); a metric's mean is its sum over its count. Partials are added in
    the order of their ranks, so the same traces given in any order give the same floating-point sums."""
    merged: dict[tuple, list] = {}
    for part in sorted(parts, key=lambda p: min((r for r, _ in p), default=-1)):
        for (rank, name), (calls, total, own, lo, hi, metrics) in part.items():
            key = (rank if by_rank else -1, name)
            got = merged.get(key)
            if got is None:
                merged[key] = [calls, total, own, lo, hi, {m: list(v) for m, v in metrics.items()}]
                continue
            got[0] += calls
            got[1] += total
            got[2] += own
            got[3], got[4] = min(got[3], lo), max(got[4], hi)
            for m, (n, s, mlo, mhi) in metrics.items():
                have = got[5].get(m)
                if have is None:
                    got[5][m] = [n, s, mlo, mhi]
                else:
                    have[0] += n
                    have[1] += s
                    have[2], have[3] = min(have[2], mlo), max(have[3], mhi)
    grand = float(sum(v[2] for v in merged.values())) or 1.0
    rows = []
    for (rank, name), (calls, total, own, lo, hi, metrics) in merged.items():
        rows.append(NameStat(name, int(calls), int(total), 100.0 * own / grand, total / calls, int(lo), int(hi),
                             None if rank < 0 else int(rank), {m: float(v[1] / v[0]) for m, v in metrics.items()},
                             {m: float(v[2]) for m, v in metrics.items()},
                             {m: float(v[3]) for m, v in metrics.items()}, int(own)))
    metrics = dict.fromkeys([*units, *(m for r in rows for m in r.metrics)])
    labels = {m: f"{m}::{units[m]}" if units.get(m) else m for m in metrics}
    rows.sort(key=_order(sort_by, labels))
    return rows[:top] if top else rows


def _metric_stats(codes, col, k: int):
    """(count, sum, min, max) per key over the rows that have a value."""
    import numpy as np

    ok = np.isfinite(col)
    c, v = codes[ok], col[ok]
    n = np.bincount(c, minlength=k)
    total = np.bincount(c, weights=v, minlength=k)
    lo, hi = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(lo, c, v)
    np.maximum.at(hi, c, v)
    return n, total, lo, hi


_METRIC_STATS = ("mean", "min", "max")


def _order(sort_by: str, labels: dict[str, str]):
    """The sort key of ``--sort``: a base column, or a metric column "<metric>[::<unit>][ mean|min|max]"
    (rows without the metric last)."""
    # ties broken by name, then rank (--by-rank): the same order however the rows were grouped
    order = {"total": lambda r: (-r.total_ns, r.name, r.rank or 0), "self": lambda r: (-(r.self_ns or 0), r.name, r.rank or 0),
             "calls": lambda r: (-r.calls, r.name, r.rank or 0), "avg": lambda r: (-r.avg_ns, r.name, r.rank or 0),
             "max": lambda r: (-r.max_ns, r.name, r.rank or 0), "name": lambda r: (r.name, r.rank or 0)}
    if sort_by in order:
        return order[sort_by]
    low = str(sort_by).strip().lower()
    for metric, label in labels.items():
        short = label.split("::", 1)[0].lower()
        for stat in _METRIC_STATS:
            if low in (f"{label.lower()} {stat}", f"{short} {stat}", f"{label.lower()}.{stat}", f"{short}.{stat}"):
                break
        else:
            if low not in (label.lower(), short):
                continue
            stat = "mean"
        column = {"mean": "metrics", "min": "metric_min", "max": "metric_max"}[stat]
        return lambda r: (metric not in r.metrics, -getattr(r, column).get(metric, 0.0), r.name, r.rank or 0)
    valid = list(order) + [c for label in labels.values() for c in (label, *(f"{label} {s}" for s in _METRIC_STATS))]
    from ..suggest import did_you_mean

    shorts = [v.split("::", 1)[0] for v in valid]
    raise ReportError(f"unknown sort key {sort_by!r}{did_you_mean(sort_by, dict.fromkeys(shorts + valid)) or ';'} "
                      f"valid: {', '.join(valid)}")


kernel_stats = name_stats


# What a report holds, by category: the words its title and the tables use.
_NOUNS = {"kernel": "kernels", "gpu_memcpy": "copies", "gpu_memset": "fills", "user_annotation": "host ranges",
          "cpu_op": "operators", "gpu_user_annotation": "device ranges", "runtime": "runtime calls",
          "driver": "driver calls", "python_function": "Python functions", "cuda_sync": "synchronizations",
          "xpu_sync": "synchronizations"}


def _canonical(category: str) -> str:
    from ..activity import ActivityType

    try:
        return ActivityType.parse(category).value
    except ValueError:
        return category


_NOUN_ORDER = {c: i for i, c in enumerate(_NOUNS)}


def category_order(category: str) -> tuple[int, str]:
    """Sort key of categories: the order of ``_NOUNS`` (kernels first), then by name."""
    return _NOUN_ORDER.get(_canonical(category), len(_NOUN_ORDER)), str(category)


def describe_categories(categories) -> str:
    """'Kernels and copies', 'Host ranges', ...: what rows of these categories are."""

    words = []
    for cat in sorted(categories, key=category_order):
        word = _NOUNS.get(_canonical(cat), str(cat))
        if word not in words:
            words.append(word)
    if not words:
        return "Rows"
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return text[:1].upper() + text[1:]


@dataclass
class Report:
    """What ``xpuprof report`` prints: the rows per name plus what they came from."""

    stats: list[NameStat]
    table: EventTable  # the filtered rows (for plots)
    sources: list[str]
    ranks: list[int]
    total_ns: int  # the time the rows cover: the sum of self times (nested rows are not counted twice)
    telemetry: list = field(default_factory=list)  # analysis.telemetry.TelemetrySeries
    filters: dict = field(default_factory=dict)  # what was asked for (the JSON document names it)
    resources: list = field(default_factory=list)  # analysis.resources rows (XPU traces)
    intervals: dict = field(default_factory=dict)  # (rank, name) -> analysis.intervals columns (XPU traces)
    ranks_view: object = None  # a store's per-rank view for the HTML report (cluster.stragglers' result)
    trace_table: object = None  # the TraceTable the report was made of (the HTML's timeline reads its steps)

    def interval_of(self, stat: "NameStat") -> dict:
        return self.intervals.get((stat.rank, stat.name)) or {}

    @property
    def metric_names(self) -> list[str]:
        return list(dict.fromkeys(m for s in self.stats for m in s.metrics))

    @functools.cached_property
    def categories(self) -> list[str]:
        """The categories of the rows, kernels before copies and fills, host ranges before operators (the
        title's order), whatever order the traces or a store hold them in."""
        return sorted(self.table.categories(), key=category_order) if len(self.table) else []

    @functools.cached_property
    def nests(self) -> bool:
        """Whether the rows can nest (host ranges, ops): then self and inclusive time differ."""
        return bool(self.categories) and not self.table.holds_device_work

    @functools.cached_property
    def title(self) -> str:
        return describe_categories(self.categories) if self.categories else "Kernels"

    @functools.cached_property
    def inclusive_ns(self) -> int:
        return self.table.inclusive_ns


def build_report(inputs, *, categories: Sequence[str] | None = None, name: str | None = None,
                 start_ms: float | None = None, end_ms: float | None = None, by_rank: bool = False,
                 sort_by: str = "total", top: int | None = None, say=None) -> Report:
    """The report of a TraceTable, or of the trace files, directories and stores ``inputs`` names (read by
    ``trace.read.inputs.read_inputs``; ``say``: where its lines on skipped files go). ``report_summary.
    build_report`` is this one, added up from a store's summaries when they answer."""
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ReportError(f"--end ({end_ms} ms) must be after --start ({start_ms} ms)")
    table = inputs if hasattr(inputs, "traces") else read_report_inputs(inputs, say=say)
    return report_of(table, categories=categories, name=name, start_ms=start_ms, end_ms=end_ms, by_rank=by_rank,
                     sort_by=sort_by, top=top)


REPORT_KINDS = ("slices", "counters")  # what a report reads of a trace


def _metric_slice(name: str) -> bool:
    """The only slices whose args a report reads: the per-kernel metric slices."""
    return name.startswith(METRICS_PREFIX)


def read_report_inputs(paths: Iterable[str | Path], say=None, *, kinds=REPORT_KINDS, slice_args=_metric_slice):
    """The traces the paths stand for, as one TraceTable (``ReportError`` for what cannot be read); by default
    what the report reads of them (push-down: slices, the metric slices' args, telemetry counters)."""
    from ..trace.read.inputs import InputsError, read_inputs
    from ..trace.read.source import TraceLoadError
    from ..trace.read.store import StoreError

    paths = list(paths)
    if not paths:
        raise ReportError("no trace files given")
    try:
        from .telemetry import TELEMETRY_CATEGORIES

        return read_inputs(paths, kinds=kinds, slice_args=slice_args, counters=TELEMETRY_CATEGORIES.__contains__,
                           say=say)
    except (InputsError, TraceLoadError, StoreError) as exc:
        raise ReportError(str(exc)) from None


def check_times(table) -> None:
    """Every trace's base time and event times are times a trace can hold; else one ``ReportError`` naming
    the file, the event and the value (the reader counted them; a report refuses such a trace)."""
    from ..trace.read.kineto import time_error

    for info in table.traces:
        bad = time_error(info)
        if bad:
            raise ReportError(f"{info.origin}: {bad}")
        merged = set(info.merged_ranks)
        if merged:
            also = sorted({o.rank for o in table.traces if o is not info and o.named} & merged)
            if also:
                raise ReportError(f"{info.origin} is a merged view (xpuprof merge) of ranks {sorted(merged)}, and "
                                  f"rank(s) {also} are read from their own traces too: give the merged view or the "
                                  "rank traces, not both")


def report_ranks(table) -> list[int]:
    """The ranks the traces name (a merged view's ranks included; a rank taken from a position is none)."""
    return sorted({r for info in table.traces
                   for r in (info.merged_ranks or ([info.rank] if info.named else []))})


def report_of(table, *, categories: Sequence[str] | None = None, name: str | None = None,
              start_ms: float | None = None, end_ms: float | None = None, by_rank: bool = False,
              sort_by: str = "total", top: int | None = None) -> Report:
    """The report of a TraceTable (see ``build_report``)."""
    from .intervals import METADATA_KEY as INTERVALS_KEY, combine
    from .resources import METADATA_KEY as RESOURCES_KEY, resource_rows
    from .telemetry import collector_units, telemetry_series

    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ReportError(f"--end ({end_ms} ms) must be after --start ({start_ms} ms)")
    from .event_table import EventTable

    check_times(table)
    # Each trace's rows, partial and filtered apart (a store keeps each rank's partial: see report_summary); self
    # times before filtering: a row's own time does not depend on which other names are shown.
    traces = [EventTable.of_trace(table, i, categories).with_self_times().filter(name=name, start_ms=start_ms,
                                                                                   end_ms=end_ms)
              for i in range(len(table.traces))]
    rows = EventTable.concat(traces)
    stats = stats_of([partials(t) for t in traces], rows.units, by_rank=by_rank, sort_by=sort_by, top=top)
    headers = [info.header for info in table.traces]
    telemetry = telemetry_series(table)
    units = collector_units(headers)
    for series in telemetry:
        series.unit = units.get((series.track, series.metric), "")
    filters = {"categories": list(categories) if categories else None, "name": name, "start_ms": start_ms,
               "end_ms": end_ms, "by_rank": by_rank, "sort": sort_by, "top": top}
    resources = resource_rows((h.get(RESOURCES_KEY) for h in headers), [s.name for s in stats])
    windowed = start_ms is not None or end_ms is not None  # the interval sums cover whole traces
    intervals = {} if windowed else combine(((info.rank if info.named else None, h.get(INTERVALS_KEY))
                                             for info, h in zip(table.traces, headers)), by_rank)
    return Report(stats, rows, [info.origin for info in table.traces], report_ranks(table),
                  int(rows.self_ns.sum()) if len(rows) else 0, telemetry, filters, resources, intervals,
                  trace_table=table)
