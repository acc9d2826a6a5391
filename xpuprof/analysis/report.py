"""Kernel tables from trace files: load (one or many, across ranks), filter by name regex and
time window, and aggregate per kernel name with per-kernel metric columns.

Reads traces through ``xpuprof.trace.read.load``; knows no vendor. Per-kernel metrics are the
``metrics: <kernel>`` slices every backend writes through ``TraceBuilder.add_per_kernel_metrics``
(args ``"<metric>::<unit>"``); they are joined back onto their kernel rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..activity import category_spellings
from ..trace.read.load import TraceLoadError, load
from ..trace.read.scan import ABSENT, DOUBLE, DUR, INT, PID, TID, TS, ScannedEvents, scan

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("user_annotation", "cpu_op", "gpu_user_annotation")
METRICS_PREFIX = "metrics: "
NON_METRIC_ARGS = frozenset({"kernel_id", "External id"})  # ids Kineto puts on "metrics: <kernel>" slices
TRACE_GLOBS = ("*.pt.trace.json", "*.pt.trace.json.gz")
_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.")
_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
STEP_GROUP = "ProfilerStep#*"  # step annotations are summarized as one row
# ``xpuprof merge`` gives rank r's rows pids (r + 1) * stride + i, and the file a "mergedRanks" key.
MERGED_RANK_PID_STRIDE = 1_000_000_000


class ReportError(ValueError):
    """Bad report input (no traces found, a bad regex, an empty window); the message says which."""


# ----------------------------------------------------------------------------- loading
@dataclass
class TraceFile:
    path: Path
    data: dict
    rank: int | None

    @property
    def base_ns(self) -> int:
        return int(self.data.get("baseTimeNanoseconds") or 0)

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
    traces = []
    for p in expand_paths(paths):
        try:
            data = load(p)
        except TraceLoadError as exc:
            raise ReportError(str(exc)) from None
        traces.append(TraceFile(p, data, rank_of(data, p)))
    return traces


# ----------------------------------------------------------------------------- event table
@dataclass
class EventTable:
    """Slices (one row each) as columns; ``metrics`` holds NaN where a row has no value."""

    name: np.ndarray  # object (str)
    cat: np.ndarray  # object (str)
    ts_ns: np.ndarray  # int64, absolute epoch ns
    dur_ns: np.ndarray  # int64
    rank: np.ndarray  # int64, -1 = no rank
    rel_ns: np.ndarray  # int64, ns since the start of the row's trace (for time windows)
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ts_ns)

    @classmethod
    def empty(cls) -> "EventTable":
        return cls(np.array([], object), np.array([], object), *(np.array([], np.int64) for _ in range(4)))

    @classmethod
    def from_trace(cls, trace: TraceFile, categories: Sequence[str] | None = None) -> "EventTable":
        """Slices of the given categories (None: device categories, or host ones when a trace has none)."""
        events = trace.data["traceEvents"]
        slices = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
        if not slices:
            return cls.empty()
        base = trace.base_ns
        start_ns = base + int(round(min(e["ts"] for e in slices) * 1000))
        metric_rows = [e for e in slices if str(e.get("name", "")).startswith(METRICS_PREFIX)]
        kernels = [e for e in slices if not str(e.get("name", "")).startswith(METRICS_PREFIX)]
        cats = _choose_categories(kernels, categories)
        rows = [e for e in kernels if e.get("cat") in cats]
        n = len(rows)
        ts = np.fromiter((base + int(round(e["ts"] * 1000)) for e in rows), np.int64, n)
        table = cls(
            name=np.array([_group_name(str(e.get("name", ""))) for e in rows], dtype=object),
            cat=np.array([str(e.get("cat", "")) for e in rows], dtype=object),
            ts_ns=ts,
            dur_ns=np.fromiter((int(round(float(e.get("dur", 0)) * 1000)) for e in rows), np.int64, n),
            rank=trace.row_ranks([e.get("pid") for e in rows]),
            rel_ns=ts - start_ns,
        )
        table._join_metrics(rows, metric_rows, base)
        return table

    @classmethod
    def from_scan(cls, trace: TraceFile, sc: ScannedEvents, categories: Sequence[str] | None = None
                  ) -> "EventTable | None":
        """``from_trace``'s rows from event columns (``trace.read.scan``), exactly. Events the columns do
        not hold exactly (a string pid, say) are read whole and go through ``from_trace``'s own
        expressions. None when ``from_trace`` must decide (it would raise, or ints would outgrow int64)."""
        base = trace.base_ns
        ph_x = sc.ph == ord("X")
        simple = np.flatnonzero(ph_x & ~sc.complex & (sc.kind[:, TS] != ABSENT))
        # Events read whole: unusual fields on a slice, or a "ph" the columns may not hold.
        odd = []
        for i in np.flatnonzero(sc.complex & (ph_x | (sc.ph == 0xFF) | (sc.ph == 0))).tolist():
            e = sc.event(i)
            if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)):
                if not (e.get("cat") is None or isinstance(e.get("cat"), str)):
                    return None  # from_trace decides (an unhashable category raises there)
                odd.append((i, e))
        if not len(simple) and not odd:
            return cls.empty()
        strings = list(sc.strings)
        extra: dict[str, int] = {}

        def string_id(text: str) -> int:
            got = extra.get(text)
            if got is None:
                got = extra[text] = len(strings)
                strings.append(text)
            return got

        kinds = sc.kind[simple]
        ts_int = kinds[:, TS] == INT
        ts_i, ts_f = sc.ints(TS)[simple], sc.floats(TS)[simple]
        limit = (2**62 - abs(base)) // 1000  # ts * 1000 + base stays inside int64
        if (np.abs(ts_i[ts_int]) > limit).any() or not (np.abs(ts_f[~ts_int]) < limit).all():
            return None
        dur_kind = kinds[:, DUR]
        dur_f = np.where(dur_kind == INT, sc.ints(DUR)[simple].astype(np.float64),
                         np.where(dur_kind == DOUBLE, sc.floats(DUR)[simple], 0.0))
        if not np.isfinite(dur_f).all():
            return None
        # Per slice, in file order: the simple ones first, then the odd ones, then sorted by event.
        firsts = [int(ts_i[ts_int].min())] if ts_int.any() else []
        firsts += [float(ts_f[~ts_int].min())] if (~ts_int).any() else []
        firsts += [e["ts"] for _, e in odd]
        start_ns = base + int(round(min(firsts) * 1000))
        absent_name = string_id("")  # str(e.get("name", "")) of an event without a name
        o_name = np.array([string_id(str(e.get("name", ""))) for _, e in odd], np.int64)
        o_cat = np.array([-1 if e.get("cat") is None else string_id(e["cat"]) for _, e in odd], np.int64)
        o_ts = [base + int(round(e["ts"] * 1000)) for _, e in odd]
        o_dur = [int(round(float(e.get("dur", 0)) * 1000)) for _, e in odd]
        if any(abs(v) >= 2**62 for v in o_ts + o_dur):
            return None  # from_trace decides
        o_ts, o_dur = np.array(o_ts, np.int64), np.array(o_dur, np.int64)
        simple_names = np.where(sc.name[simple] >= 0, sc.name[simple], absent_name)
        simple_ts = np.where(ts_int, ts_i * 1000, np.rint(ts_f * 1000).astype(np.int64)) + base
        del ts_i, ts_f
        simple_dur = np.rint(dur_f * 1000).astype(np.int64)
        del dur_f
        if odd:  # the odd slices inserted at their places in file order (usually one or two)
            odd_idx = np.array([i for i, _ in odd], np.int64)
            at = np.searchsorted(simple, odd_idx)
            names = np.insert(simple_names, at, o_name)
            cat_ids = np.insert(sc.cat[simple], at, o_cat)
            ts_all = np.insert(simple_ts, at, o_ts)
            dur_all = np.insert(simple_dur, at, o_dur)
            is_odd = np.insert(np.zeros(len(simple), bool), at, True)
            row_event = np.insert(simple, at, odd_idx)
            raw_name_ids = np.insert(sc.name[simple], at, 0)
        else:
            names, cat_ids, ts_all, dur_all = simple_names, sc.cat[simple], simple_ts, simple_dur
            is_odd, row_event, raw_name_ids = np.zeros(len(simple), bool), simple, sc.name[simple]
        del simple_names, simple_ts, simple_dur

        text = np.array(strings, dtype=object)
        is_metric = np.array([t.startswith(METRICS_PREFIX) for t in strings], bool)[names]
        kern = ~is_metric
        present = {None if c < 0 else strings[c] for c in np.unique(cat_ids[kern]).tolist()}
        cats = _wanted_categories(categories) if categories else ((present & set(DEVICE_CATEGORIES))
                                                   or (present & set(HOST_CATEGORIES)))
        wanted = np.array([c in cats for c in strings] + [None in cats], bool)  # [-1]: no category
        rows = kern & wanted[cat_ids]
        ts = ts_all[rows]
        odd_at = {i: e for i, e in odd}

        def values(field: int, key: str) -> list:
            """The field's value per row as from_trace's e.get(key) gives it."""
            ev = row_event[rows]
            k = sc.kind[ev, field].tolist()
            iv, fv = sc.ints(field)[ev].tolist(), sc.floats(field)[ev].tolist()
            return [odd_at[e].get(key) if o else a if kk == INT else b if kk == DOUBLE else None
                    for e, o, kk, a, b in zip(ev.tolist(), is_odd[rows].tolist(), k, iv, fv)]

        if trace.merged_ranks:
            rank = trace.row_ranks(values(PID, "pid"))
        else:
            rank = np.full(len(ts), -1 if trace.rank is None else trace.rank, np.int64)
        grouped = np.array([_group_name(t) for t in strings], dtype=object)
        cat_text = np.array([*strings, ""], dtype=object)  # str(e.get("cat", "")): "" when absent
        table = cls(name=grouped[names[rows]], cat=cat_text[cat_ids[rows]], ts_ns=ts, dur_ns=dur_all[rows],
                    rank=rank, rel_ns=ts - start_ns)
        metric_rows = np.flatnonzero(is_metric)
        if len(metric_rows) and rows.any():
            raw_names = [odd_at[e].get("name") if o else (sc.strings[n] if n >= 0 else None) for e, o, n in
                         zip(row_event[rows].tolist(), is_odd[rows].tolist(), raw_name_ids[rows].tolist())]
            row_keys = [{"pid": p, "tid": t, "name": n} for p, t, n in
                        zip(values(PID, "pid"), values(TID, "tid"), raw_names)]
            metric_events = [odd_at[e] if o else sc.event(e) for e, o in
                             zip(row_event[metric_rows].tolist(), is_odd[metric_rows].tolist())]
            table._join_metrics(row_keys, metric_events, base)
        del text
        return table

    @classmethod
    def from_builder(cls, builder, rank: int | None = None) -> "EventTable | None":
        """The rows ``from_trace`` would read back from this builder's written trace (default categories),
        without reading the file (``xpuprof run`` summarizes each trace it has just written). None when
        the builder holds per-kernel metric slices: those are joined from the written trace instead."""
        builder.flush()
        strings = builder.strings.strings
        if any(s.startswith(METRICS_PREFIX) for s in strings):
            return None

        def pick(cats: Sequence[str]):
            ids = [builder.strings.intern(c) for c in cats]
            parts = [(b, np.isin(b.cat, ids)) for b in builder.slices]
            return [(b, m) for b, m in parts if m.any()]

        parts = pick(DEVICE_CATEGORIES) or pick(HOST_CATEGORIES)
        if not parts:
            return cls.empty()
        text = np.array(builder.strings.strings, dtype=object)
        grouped = np.array([_group_name(s) for s in text.tolist()], dtype=object)  # once per distinct string
        ts = np.concatenate([np.asarray(b.ts[m], np.int64) for b, m in parts])
        return cls(name=grouped[np.concatenate([b.name[m] for b, m in parts])],
                   cat=text[np.concatenate([b.cat[m] for b, m in parts])], ts_ns=ts,
                   dur_ns=np.concatenate([np.asarray(b.dur[m], np.int64) for b, m in parts]),
                   rank=np.full(len(ts), -1 if rank is None else rank, np.int64), rel_ns=ts - ts.min())

    def _join_metrics(self, rows: list[dict], metric_rows: list[dict], base: int) -> None:
        if not metric_rows or not rows:
            return
        # A metrics slice starts 1 ns before its kernel on the same row, named "metrics: <kernel>".
        index = {(e.get("pid"), e.get("tid"), str(e.get("name")), int(self.ts_ns[i])): i for i, e in enumerate(rows)}
        cols: dict[str, np.ndarray] = {}
        for m in metric_rows:
            pid, tid, kname = m.get("pid"), m.get("tid"), str(m["name"])[len(METRICS_PREFIX):]
            start = base + int(round(m["ts"] * 1000)) + 1
            # µs floats with 3 decimals lose ±1 ns at epoch magnitudes: accept the neighbours.
            i = next((index[k] for k in ((pid, tid, kname, start + d) for d in (0, -1, 1)) if k in index), None)
            if i is None:
                continue
            for arg, value in (m.get("args") or {}).items():
                if not isinstance(value, (int, float)) or isinstance(value, bool) or arg in NON_METRIC_ARGS:
                    continue
                metric, _, unit = arg.partition("::")
                col = cols.get(metric)
                if col is None:
                    col = cols[metric] = np.full(len(rows), np.nan)
                    self.units[metric] = unit
                col[i] = float(value)
        self.metrics = cols

    @classmethod
    def concat(cls, tables: Sequence["EventTable"]) -> "EventTable":
        tables = [t for t in tables if len(t)]
        if not tables:
            return cls.empty()
        names = list(dict.fromkeys(m for t in tables for m in t.metrics))
        units: dict[str, str] = {}
        for t in tables:
            units.update(t.units)
        return cls(
            *(np.concatenate([getattr(t, f) for t in tables]) for f in ("name", "cat", "ts_ns", "dur_ns", "rank", "rel_ns")),
            metrics={m: np.concatenate([t.metrics.get(m, np.full(len(t), np.nan)) for t in tables]) for m in names},
            units=units,
        )

    def take(self, mask: np.ndarray) -> "EventTable":
        return EventTable(self.name[mask], self.cat[mask], self.ts_ns[mask], self.dur_ns[mask], self.rank[mask],
                          self.rel_ns[mask], {k: v[mask] for k, v in self.metrics.items()}, dict(self.units))

    def filter(self, *, name: str | None = None, start_ms: float | None = None, end_ms: float | None = None,
               ranks: Iterable[int] | None = None) -> "EventTable":
        """Rows whose name matches the regex (search), that start inside [start_ms, end_ms) of their trace."""
        mask = np.ones(len(self), bool)
        if name:
            try:
                rx = re.compile(name)
            except re.error as exc:
                raise ReportError(f"--name {name!r} is not a valid regular expression: {exc}") from None
            mask &= np.fromiter((rx.search(n) is not None for n in self.name), bool, len(self))
        if start_ms is not None:
            mask &= self.rel_ns >= int(start_ms * 1e6)
        if end_ms is not None:
            mask &= self.rel_ns < int(end_ms * 1e6)
        if ranks is not None:
            mask &= np.isin(self.rank, list(ranks))
        return self.take(mask)


def _group_name(name: str) -> str:
    return STEP_GROUP if _STEP_NAME.match(name) else name


def _wanted_categories(categories: Sequence[str]) -> set[str]:
    """The categories asked for, each with its other spellings (``runtime`` is also ``cuda_runtime``,
    ``xpu_runtime``, ...: traces carry the vendor's names by default, the generic ones on request)."""
    return {c for name in categories for c in category_spellings(name)}


def _choose_categories(slices: list[dict], categories: Sequence[str] | None) -> set[str]:
    if categories:
        return _wanted_categories(categories)
    present = {e.get("cat") for e in slices}
    device = present & set(DEVICE_CATEGORIES)
    return device or (present & set(HOST_CATEGORIES))


# ----------------------------------------------------------------------------- kernel stats
@dataclass
class KernelStat:
    name: str
    calls: int
    total_ns: int
    pct: float
    avg_ns: float
    min_ns: int
    max_ns: int
    rank: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # mean per kernel instance
    metric_min: dict[str, float] = field(default_factory=dict)
    metric_max: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"name": self.name, "calls": self.calls, "total_ns": self.total_ns, "pct": round(self.pct, 4),
             "avg_ns": round(self.avg_ns, 3), "min_ns": self.min_ns, "max_ns": self.max_ns, "metrics": self.metrics}
        if self.metric_min:
            d["metric_min"], d["metric_max"] = self.metric_min, self.metric_max
        if self.rank is not None:
            d["rank"] = self.rank
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "KernelStat":
        return cls(str(d["name"]), int(d["calls"]), int(d["total_ns"]), float(d.get("pct", 0.0)),
                   float(d["avg_ns"]), int(d.get("min_ns", 0)), int(d.get("max_ns", 0)), d.get("rank"),
                   {k: float(v) for k, v in (d.get("metrics") or {}).items()},
                   {k: float(v) for k, v in (d.get("metric_min") or {}).items()},
                   {k: float(v) for k, v in (d.get("metric_max") or {}).items()})


def kernel_stats(table: EventTable, *, by_rank: bool = False, sort_by: str = "total",
                 top: int | None = None) -> list[KernelStat]:
    """One row per kernel name (per (rank, name) with ``by_rank``), grouped by ``analysis.summary``."""
    from .summary import Summary

    if not len(table):
        return []
    # Group on the kernel category so per-kernel metrics attach; the real category is not a key here.
    keys = table.name if not by_rank else np.array([f"{r}\x00{n}" for r, n in zip(table.rank, table.name)], object)
    labels = {m: f"{m}::{table.units[m]}" if table.units.get(m) else m for m in table.metrics}
    samples = {}
    for m, col in table.metrics.items():
        ok = np.isfinite(col)
        samples[labels[m]] = (keys[ok], col[ok])
    summary = Summary(np.full(len(table), "kernel", dtype=object), keys, table.dur_ns.astype(np.float64), samples)
    grand = float(table.dur_ns.sum()) or 1.0
    rows = []
    for r in summary.rows("kernel", "name"):
        rank, name = (int(r.name.split("\x00", 1)[0]), r.name.split("\x00", 1)[1]) if by_rank else (None, r.name)
        rows.append(KernelStat(name, r.calls, int(r.total_ns), 100.0 * r.total_ns / grand, r.avg_ns, int(r.min_ns),
                               int(r.max_ns), None if rank is None or rank < 0 else rank,
                               {m: float(r.metrics[labels[m]][0]) for m in table.metrics if labels[m] in r.metrics},
                               {m: float(r.metrics[labels[m]][1]) for m in table.metrics if labels[m] in r.metrics},
                               {m: float(r.metrics[labels[m]][2]) for m in table.metrics if labels[m] in r.metrics}))
    return order_stats(rows, summary, labels, sort_by, top)


def order_stats(rows: list[KernelStat], summary, labels: dict[str, str], sort_by: str,
                top: int | None) -> list[KernelStat]:
    """``rows`` sorted as ``--sort`` says (``summary``: a ``Summary`` with the metric labels) and cut to ``top``."""
    order = {"total": lambda r: (-r.total_ns, r.name), "calls": lambda r: (-r.calls, r.name),
             "avg": lambda r: (-r.avg_ns, r.name), "max": lambda r: (-r.max_ns, r.name),
             "name": lambda r: (r.name, r.rank or 0)}
    if sort_by not in order:
        # A metric column: "<metric>[::<unit>][ mean|min|max]" (rows without the metric last).
        try:
            key = summary._sort_key(sort_by)
        except ValueError:
            key = None
        if not isinstance(key, tuple):
            valid = list(order) + [c for c in summary.sort_columns() if c in labels.values() or " " in c]
            raise ReportError(f"unknown sort key {sort_by!r}; valid: {', '.join(valid)}")
        metric = {v: k for k, v in labels.items()}[key[0]]
        column = {"mean": "metrics", "min": "metric_min", "max": "metric_max"}[key[1]]
        order[sort_by] = lambda r: (metric not in r.metrics, -getattr(r, column).get(metric, 0.0), r.name)
    rows.sort(key=order[sort_by])
    return rows[:top] if top else rows


@dataclass
class Report:
    """What ``xpuprof report`` prints: the kernel rows plus what they came from."""

    stats: list[KernelStat]
    table: EventTable  # the filtered rows (for plots)
    sources: list[str]
    ranks: list[int]
    total_ns: int
    telemetry: list = field(default_factory=list)  # analysis.telemetry.TelemetrySeries
    ranks_view: object = None  # a store's per-rank view for the HTML report (cluster.stragglers' result)

    @property
    def metric_names(self) -> list[str]:
        return list(dict.fromkeys(m for s in self.stats for m in s.metrics))

    def to_dict(self) -> dict:
        return {"sources": self.sources, "ranks": self.ranks, "total_ns": self.total_ns,
                "units": {m: self.table.units.get(m, "") for m in self.metric_names},
                "kernels": [s.to_dict() for s in self.stats],
                "telemetry": [t.to_dict() for t in self.telemetry]}


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
    table = EventTable.concat(tables)
    table = table.filter(name=name, start_ms=start_ms, end_ms=end_ms)
    stats = kernel_stats(table, by_rank=by_rank, sort_by=sort_by, top=top)
    ranks = sorted({r for t in traces for r in (t.merged_ranks or ([t.rank] if t.rank is not None else []))})
    from .telemetry import telemetry_series_of

    return Report(stats, table, [str(t.path) for t in traces], ranks, int(table.dur_ns.sum()) if len(table) else 0,
                  telemetry_series_of(t.telemetry_part() for t in traces))


def _read_for_report(path: Path, categories: Sequence[str] | None) -> tuple["TraceFile", EventTable]:
    """The trace's slices as an EventTable: from event columns when the scanner can read the file
    exactly (no dict per event), else from the loaded events."""
    try:
        sc = scan(path)
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    if sc is not None:
        trace = ScannedTraceFile(path, sc.header, rank_of(sc.header, path), sc)
        table = EventTable.from_scan(trace, sc, categories)
        if table is not None:
            trace.keep_telemetry_only()  # the document's bytes and columns are no longer needed
            return trace, table
    del sc
    try:
        data = load(path)
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    trace = TraceFile(path, data, rank_of(data, path))
    return trace, EventTable.from_trace(trace, categories)
