"""``xpuprof report``'s numbers: load trace files (one or many, across ranks), filter by name regex
and time window, and aggregate per name: calls, inclusive and self time, per-kernel metric columns.

Reads traces through ``xpuprof.trace.read``; knows no vendor. The rows are device work (kernels,
copies, fills) by default, host ranges and ops when a trace has none (``event_table``); host rows
nest, so their self time (``nesting``) is what adds up. Per-kernel metrics are the ``metrics:
<kernel>`` slices every backend writes through ``TraceBuilder.add_per_kernel_metrics`` (args
``"<metric>::<unit>"``), joined back onto their kernel rows.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:  # the JSON readers load where a trace file is read (a store's report needs none)
    from ..trace.read.scan import ScannedEvents
from .event_table import (DEVICE_CATEGORIES, HOST_CATEGORIES, METRICS_PREFIX, NON_METRIC_ARGS,  # noqa: F401
                          STEP_GROUP, TIME_LIMIT_NS, EventTable, ReportError)

TRACE_GLOBS = ("*.pt.trace.json", "*.pt.trace.json.gz")
_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.")
# ``xpuprof merge`` gives rank r's rows pids (r + 1) * stride + i, and the file a "mergedRanks" key.
MERGED_RANK_PID_STRIDE = 1_000_000_000


# ----------------------------------------------------------------------------- loading
@dataclass
class TraceFile:
    path: Path
    data: dict
    rank: int | None

    @property
    def base_ns(self) -> int:
        base = self.data.get("baseTimeNanoseconds") or 0
        if type(base) not in (int, float) or not abs(base) < TIME_LIMIT_NS:
            raise ReportError(f"{self.path}: baseTimeNanoseconds {base!r} is not a time (an integer of "
                              f"nanoseconds below {TIME_LIMIT_NS:.3g} in magnitude)")
        return int(base)

    @property
    def merged_ranks(self) -> list[int]:
        """The ranks a merged view (``xpuprof merge``) holds; [] for a one-rank trace."""
        merged = self.data.get("mergedRanks")
        ranks = merged.get("ranks") if isinstance(merged, dict) else None
        return [r for r in ranks if isinstance(r, int)] if isinstance(ranks, list) else []

    def telemetry_part(self) -> tuple[list, float]:
        """(events, first timestamp) for ``telemetry.telemetry_series_of``."""
        events = self.data.get("traceEvents") or []
        return events, min((float(e["ts"]) for e in events if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))),
                           default=0.0)

    def row_ranks(self, pids) -> np.ndarray:
        """Each row's rank: from the pid in a merged view, else the trace's own rank (-1 = none)."""
        n = len(pids)
        if self.merged_ranks:
            p = np.fromiter((pid if isinstance(pid, int) else 0 for pid in pids), np.int64, n)
            return np.where(p >= MERGED_RANK_PID_STRIDE, p // MERGED_RANK_PID_STRIDE - 1, -1)
        return np.full(n, -1 if self.rank is None else self.rank, np.int64)


@dataclass
class ScannedTraceFile(TraceFile):
    """A trace read as event columns: ``data`` holds the top-level keys but no traceEvents."""

    scanned: ScannedEvents | None = None
    _telemetry: tuple[list, float] | None = None

    def keep_telemetry_only(self) -> None:
        self._telemetry = self.telemetry_part()
        self.scanned = None

    def telemetry_part(self) -> tuple[list, float]:
        from ..trace.read.scan import DOUBLE, INT, TS
        from .telemetry import TELEMETRY_CATEGORIES

        if self._telemetry is not None:
            return self._telemetry
        sc = self.scanned
        numeric = np.isin(sc.kind[:, TS], (INT, DOUBLE)) & ~sc.complex
        t0 = [float(v) for v in (sc.ints(TS)[numeric & (sc.kind[:, TS] == INT)].min(initial=np.iinfo(np.int64).max),
                                 sc.floats(TS)[numeric & (sc.kind[:, TS] == DOUBLE)].min(initial=np.inf))]
        cat_ok = np.array([c in TELEMETRY_CATEGORIES for c in sc.strings] + [False], bool)[sc.cat]
        wanted = ((sc.ph == ord("C")) & cat_ok) | sc.complex  # complex: read whole, the general rules apply
        events = [sc.event(i) for i in np.flatnonzero(wanted).tolist()]
        t0 += [float(e["ts"]) for e in events if isinstance(e.get("ts"), (int, float))]
        first = min(t0)
        if not numeric.any() and not any(isinstance(e.get("ts"), (int, float)) for e in events):
            first = 0.0
        return events, first


def rank_of(data: dict, path: Path | str = "") -> int | None:
    """``distributedInfo.rank``, else ``.rank<r>.`` in the file name, else None."""
    info = data.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories become their ``*.pt.trace.json[.gz]`` files (sorted)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted({f for g in TRACE_GLOBS for f in p.rglob(g)})
            if not found:
                raise ReportError(f"{p}: directory holds no *.pt.trace.json or *.pt.trace.json.gz files")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise ReportError(f"{p}: no such trace file or directory")
    if not out:
        raise ReportError("no trace files given")
    return out


def load_traces(paths: Iterable[str | Path]) -> list[TraceFile]:
    from ..trace.read.load import TraceLoadError, load

    traces = []
    for p in expand_paths(paths):
        try:
            data = load(p)
        except TraceLoadError as exc:
            raise ReportError(str(exc)) from None
        traces.append(TraceFile(p, data, rank_of(data, p)))
    return traces


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
    """One row per name (per (rank, name) with ``by_rank``): one grouping pass over the rows, sums and
    extremes by ``np.bincount`` / ``ufunc.at``, one Python object per name."""
    from .summary import unique_inverse

    if not len(table):
        return []
    if table.self_ns is None:
        table.with_self_times()
    if by_rank:  # (rank, name) pairs: names first, then their codes paired with the rank
        names, name_codes = unique_inverse(table.name)
        from ..trace.builder.keyindex import factorize_pairs

        pairs = factorize_pairs(table.rank, name_codes)
        codes = pairs.codes.astype(np.int64)
        key_rank = table.rank[pairs.first]
        key_name = names[name_codes[pairs.first]]
    else:
        key_name, codes = unique_inverse(table.name)
        key_rank = np.full(len(key_name), -1, np.int64)
    k = len(key_name)
    dur = table.dur_ns.astype(np.int64)
    calls = np.bincount(codes, minlength=k)
    total = np.bincount(codes, weights=dur, minlength=k)
    own = np.bincount(codes, weights=table.self_ns, minlength=k)
    lo = np.full(k, np.iinfo(np.int64).max, np.int64)
    hi = np.full(k, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, codes, dur)
    np.maximum.at(hi, codes, dur)
    per_metric = {m: _metric_stats(codes, col, k) for m, col in table.metrics.items()}
    grand = float(table.self_ns.sum()) or 1.0
    rows = []
    for i, name in enumerate(key_name.tolist()):
        mean = {m: float(v[0][i]) for m, v in per_metric.items() if v[3][i]}
        rows.append(NameStat(str(name), int(calls[i]), int(total[i]), 100.0 * own[i] / grand, total[i] / calls[i],
                             int(lo[i]), int(hi[i]), None if key_rank[i] < 0 else int(key_rank[i]), mean,
                             {m: float(v[1][i]) for m, v in per_metric.items() if v[3][i]},
                             {m: float(v[2][i]) for m, v in per_metric.items() if v[3][i]}, int(own[i])))
    rows.sort(key=_order(sort_by, {m: f"{m}::{table.units[m]}" if table.units.get(m) else m for m in table.metrics}))
    return rows[:top] if top else rows


def _metric_stats(codes: np.ndarray, col: np.ndarray, k: int):
    """(mean, min, max, present) per key over the rows that have a value."""
    ok = np.isfinite(col)
    c, v = codes[ok], col[ok]
    n = np.bincount(c, minlength=k)
    mean = np.bincount(c, weights=v, minlength=k) / np.maximum(n, 1)
    lo, hi = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(lo, c, v)
    np.maximum.at(hi, c, v)
    return mean, lo, hi, n > 0


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

    def to_dict(self) -> dict:
        """The versioned JSON document (``docs/report-schema.md``)."""
        from .report_schema import report_document

        return report_document(self)


def build_report(paths: Iterable[str | Path], *, categories: Sequence[str] | None = None, name: str | None = None,
                 start_ms: float | None = None, end_ms: float | None = None, by_rank: bool = False,
                 sort_by: str = "total", top: int | None = None) -> Report:
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ReportError(f"--end ({end_ms} ms) must be after --start ({start_ms} ms)")
    traces, tables = [], []
    for path in expand_paths(paths):
        trace, table = _read_for_report(path, categories)
        traces.append(trace)
        tables.append(table)
    # Self times before filtering: a row's own time does not depend on which other names are shown.
    table = EventTable.concat(tables).with_self_times()
    table = table.filter(name=name, start_ms=start_ms, end_ms=end_ms)
    stats = name_stats(table, by_rank=by_rank, sort_by=sort_by, top=top)
    ranks = sorted({r for t in traces for r in (t.merged_ranks or ([t.rank] if t.rank is not None else []))})
    from .telemetry import collector_units, telemetry_series_of

    telemetry = telemetry_series_of(t.telemetry_part() for t in traces)
    units = collector_units(t.data for t in traces)
    for series in telemetry:
        series.unit = units.get((series.track, series.metric), "")
    filters = {"categories": list(categories) if categories else None, "name": name, "start_ms": start_ms,
               "end_ms": end_ms, "by_rank": by_rank, "sort": sort_by, "top": top}
    from .intervals import METADATA_KEY as INTERVALS_KEY, combine
    from .resources import METADATA_KEY as RESOURCES_KEY, resource_rows

    resources = resource_rows((t.data.get(RESOURCES_KEY) for t in traces), [s.name for s in stats])
    windowed = start_ms is not None or end_ms is not None  # the interval sums cover whole traces
    intervals = {} if windowed else combine(((t.rank, t.data.get(INTERVALS_KEY)) for t in traces), by_rank)
    return Report(stats, table, [str(t.path) for t in traces], ranks, int(table.self_ns.sum()) if len(table) else 0,
                  telemetry, filters, resources, intervals)


def _read_whole(sc: ScannedEvents) -> np.ndarray:
    """The events the report reads whole rather than from columns: those the columns do not hold
    exactly, telemetry counters and per-kernel metric slices (ScannedTraceFile.telemetry_part,
    EventTable.from_scan)."""
    from .telemetry import TELEMETRY_CATEGORIES

    cat_ok = np.array([c in TELEMETRY_CATEGORIES for c in sc.strings] + [False], bool)[sc.cat]
    metric = np.array([t.startswith(METRICS_PREFIX) for t in sc.strings] + [False], bool)[sc.name]
    return sc.complex | ((sc.ph == ord("C")) & cat_ok) | ((sc.ph == ord("X")) & metric)


def _read_for_report(path: Path, categories: Sequence[str] | None) -> tuple["TraceFile", EventTable]:
    """The trace's slices as an EventTable: from event columns when the scanner can read the file
    exactly (no dict per event), else from the loaded events."""
    from ..trace.read.load import TraceLoadError, load
    from ..trace.read.scan import scan
    from ..trace.read.stream import scan_stream

    try:
        sc = scan_stream(path, _read_whole)  # memory bounded by a block, not the file
        if sc is None:
            sc = scan(path)
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    if sc is not None:
        trace = ScannedTraceFile(path, sc.header, rank_of(sc.header, path), sc)
        trace.keep_telemetry_only()  # read now: the table is built after the document's bytes go
        table = EventTable.from_scan(trace, sc, categories, release=True)
        if table is not None:
            return trace, table
    del sc
    try:
        data = load(path)
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    trace = TraceFile(path, data, rank_of(data, path))
    return trace, EventTable.from_trace(trace, categories)
