"""The summary table: kernels, copies, runtime calls and host ranges grouped by name.

One section per category (kernel first, host ranges last) with calls, total, self (where ranges of
the category nest on a thread), % (the name's share of the category's self time, so the shares add
to 100 and a range holding another is not counted twice), avg, min, max; kernels also get mean/min/max columns for every per-kernel
metric found (``metrics: <kernel>`` slices, or ``"<metric>::<unit>"`` args on the kernels).
Built from a ``TraceBuilder`` (``profile.key_averages()``) or from loaded trace events
(``xpuprof report``), vectorized with numpy either way.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import orjson

from ..activity import category_spellings
from ..trace.builder.keyindex import factorize

METRICS_PREFIX = "metrics: "
NON_METRIC_ARGS = frozenset({"External id", "kernel_id"})  # ids Kineto puts on "metrics: <kernel>" slices
STEP_PREFIX = "ProfilerStep#"
STEP_ROW = "ProfilerStep#*"
KERNEL_CATEGORY = "kernel"
SKIP_CATEGORIES = frozenset({"Trace"})

# Section order: device work, then runtime/driver calls, then host ranges; others after, by name.
CATEGORY_ORDER = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "xpu_sync", "gpu_user_annotation",
                  "runtime", "cuda_runtime", "xpu_runtime", "driver", "cuda_driver", "xpu_driver",
                  "user_annotation", "cpu_op", "python_function")

BASE_COLUMNS = ("name", "calls", "total", "percent", "avg", "min", "max")
_SORT_ALIASES = {
    "count": "calls", "%": "percent", "pct": "percent", "total_time": "total", "mean": "avg", "average": "avg",
    "cpu_time_total": "total", "self_cpu_time_total": "total", "cuda_time_total": "total",
    "xpu_time_total": "total", "device_time_total": "total", "self_cuda_time_total": "total",
    "self_xpu_time_total": "total", "self_device_time_total": "total",
    "cpu_time": "avg", "cuda_time": "avg", "xpu_time": "avg", "device_time": "avg",
}
_STATS = ("mean", "min", "max")


@dataclass
class SummaryRow:
    category: str
    name: str
    calls: int
    total_ns: float
    percent: float
    avg_ns: float
    min_ns: float
    max_ns: float
    self_ns: float = 0.0  # total minus the same category's ranges nested directly inside (device work: = total)
    # metric label ("<metric>::<unit>" or "<metric>") -> (mean, min, max)
    metrics: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    def value(self, column: str) -> Any:
        """The value a sort key names (a base column or "<metric>[ mean|min|max]")."""
        if column == "name":
            return self.name
        if column in ("calls", "percent"):
            return getattr(self, column)
        if column in ("total", "avg", "min", "max", "self"):
            return getattr(self, f"{column}_ns")
        label, stat = column
        got = self.metrics.get(label)
        return None if got is None else got[_STATS.index(stat)]

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "name": self.name, "calls": self.calls, "total_ns": self.total_ns,
                "self_ns": self.self_ns, "percent": self.percent, "avg_ns": self.avg_ns, "min_ns": self.min_ns, "max_ns": self.max_ns,
                "metrics": {k: dict(zip(_STATS, v)) for k, v in self.metrics.items()}}


def unique_inverse(values) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for an object column of a few distinct hashable
    values: one dict pass and a sort of the distinct values, not a sort of every row's object."""
    lst = values.tolist() if isinstance(values, np.ndarray) else list(values)
    index = dict.fromkeys(lst)  # distinct values in first-seen order, at C speed
    distinct = list(index)
    for i, v in enumerate(distinct):
        index[v] = i
    codes = np.fromiter(map(index.__getitem__, lst), np.int64, len(lst))
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    rank = np.empty(len(distinct), np.int64)
    rank[order] = np.arange(len(distinct))
    uniq = np.empty(len(distinct), dtype=object)
    uniq[:] = [distinct[i] for i in order]
    return uniq, rank[codes]


def _used(uniq: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values still referenced by ``codes`` (order kept), and the codes renumbered."""
    used = np.zeros(len(uniq), bool)
    used[codes] = True
    return uniq[used], (np.cumsum(used) - 1)[codes]


def _group(keys: np.ndarray, values: np.ndarray):
    """Per distinct key (sorted): (keys, count, sum, min, max) of values; linear in the rows."""
    if keys.dtype == object:
        uniq, inv = unique_inverse(keys)
    else:
        f = factorize(keys)
        order = np.argsort(f.uniq, kind="stable")  # the distinct keys only
        rank = np.empty(len(order), np.intp)
        rank[order] = np.arange(len(order))
        uniq, inv = np.asarray(keys)[f.first[order]], rank[f.codes]
    values = np.asarray(values, dtype=np.float64)
    counts = np.bincount(inv, minlength=len(uniq))
    sums = np.bincount(inv, weights=values, minlength=len(uniq))
    mins = np.full(len(uniq), np.inf)
    maxs = np.full(len(uniq), -np.inf)
    np.minimum.at(mins, inv, values)
    np.maximum.at(maxs, inv, values)
    return uniq, counts, sums, mins, maxs


_DEVICE_WORK = frozenset(c for name in ("kernel", "gpu_memcpy", "gpu_memset") for c in category_spellings(name))


def _self_times(cats: np.ndarray, thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per row its duration minus the durations of the same category's rows directly inside it on its
    thread; device work does not nest (its self time is its duration)."""
    from .nesting import self_times

    own = dur.copy()
    if not len(dur):
        return own
    cat_u, cat_i = unique_inverse(cats)
    host = np.array([c not in _DEVICE_WORK for c in cat_u.tolist()], bool)[cat_i]
    if host.any():
        th = np.asarray(thread, np.int64)[host]
        key = cat_i[host].astype(np.int64) * (int(th.max()) + 1) + th  # nesting within one category
        own[host] = self_times(key, np.asarray(ts, np.int64)[host], dur[host].astype(np.int64))
    return own


def thread_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """A dense integer per distinct (pid, tid) row, whatever the values' types."""
    pid_u, pid_i = unique_inverse(np.asarray(pid, dtype=object))
    tid_u, tid_i = unique_inverse(np.asarray(tid, dtype=object))
    return pid_i.astype(np.int64) * max(len(tid_u), 1) + tid_i


class Summary:
    """Grouped slices; ``table()`` renders it, ``rows()``/``to_dicts()`` give the numbers."""

    def __init__(self, categories: Sequence[str], names: Sequence[str], dur_ns: np.ndarray,
                 metric_samples: Mapping[str, tuple[Sequence[str], np.ndarray]] | None = None, *,
                 ts_ns: np.ndarray | None = None, thread: np.ndarray | None = None) -> None:
        """``ts_ns`` and ``thread`` (an integer per row naming its (pid, tid) row) give self times; without
        them a row's self time is its duration."""
        self._rows: list[SummaryRow] = []
        self.metric_labels: list[str] = []
        cats = np.asarray(categories, dtype=object)
        nms = np.asarray(names, dtype=object)
        dur = np.asarray(dur_ns, dtype=np.float64)
        own = dur if ts_ns is None or thread is None else _self_times(cats, np.asarray(thread), np.asarray(ts_ns), dur)
        # Rows to skip are decided once per distinct category and name, not once per row.
        cat_u, cat_i = unique_inverse(cats)
        name_u, name_i = unique_inverse(nms)
        keep_cat = np.array([c not in SKIP_CATEGORIES for c in cat_u.tolist()], bool)
        keep_name = np.array([not str(n).startswith(METRICS_PREFIX) for n in name_u.tolist()], bool)
        keep = keep_cat[cat_i] & keep_name[name_i] if len(cats) else np.zeros(0, bool)
        if not keep.all():  # the distinct values of the rows kept, as np.unique over them gives
            cat_i, name_i, dur, own = cat_i[keep], name_i[keep], dur[keep], own[keep]
            cat_u, cat_i = _used(cat_u, cat_i)
            name_u, name_i = _used(name_u, name_i)
        if len(dur):
            # Group on (category, name) through one combined integer key.
            # One row for all profiler steps (torch's key_averages shows "ProfilerStep*" too).
            merged = np.array([STEP_ROW if str(n).startswith(STEP_PREFIX) else n for n in name_u.tolist()], dtype=object)
            name_u, remap = np.unique(merged, return_inverse=True)
            name_i = remap.reshape(-1)[name_i.reshape(-1)]
            key = cat_i.reshape(-1).astype(np.int64) * len(name_u) + name_i.reshape(-1)
            uniq, calls, sums, mins, maxs = _group(key, dur)
            selfs = np.bincount(np.searchsorted(uniq, key), weights=own, minlength=len(uniq))
            cat_tot = np.bincount(uniq // len(name_u), weights=selfs, minlength=len(cat_u))
            for k, c, s, o, lo, hi in zip(uniq.tolist(), calls.tolist(), sums.tolist(), selfs.tolist(), mins.tolist(),
                                          maxs.tolist()):
                ci, ni = divmod(k, len(name_u))
                tot = cat_tot[ci]
                self._rows.append(SummaryRow(str(cat_u[ci]), str(name_u[ni]), int(c), float(s),
                                             float(100.0 * o / tot) if tot else 0.0, float(s / c), float(lo), float(hi),
                                             float(o)))
        self._attach_metrics(metric_samples or {})

    def _attach_metrics(self, samples: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        by_kernel = {r.name: r for r in self._rows if r.category == KERNEL_CATEGORY}
        for label, (kernel_names, values) in samples.items():
            vals = np.asarray(values, dtype=np.float64)
            names = np.asarray(kernel_names, dtype=object)
            ok = np.isfinite(vals)
            if not ok.any():
                continue
            uniq, counts, sums, mins, maxs = _group(names[ok], vals[ok])
            for n, c, s, lo, hi in zip(uniq.tolist(), counts.tolist(), sums.tolist(), mins.tolist(), maxs.tolist()):
                row = by_kernel.get(n)
                if row is None:  # metrics for a kernel outside the trace's kernel slices
                    row = by_kernel[n] = SummaryRow(KERNEL_CATEGORY, n, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
                    self._rows.append(row)
                row.metrics[label] = (float(s / c), float(lo), float(hi))
            if label not in self.metric_labels:
                self.metric_labels.append(label)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_builder(cls, builder) -> "Summary":
        builder.flush()
        strings = np.array(builder.strings.strings, dtype=object)
        cats, names, durs, starts, pids, tids = [], [], [], [], [], []
        samples: dict[str, tuple[list, list]] = {}
        for b in builder.slices:
            bnames = strings[b.name]
            cats.append(strings[b.cat])
            names.append(bnames)
            durs.append(b.dur)
            starts.append(b.ts)
            pids.append(b.pid.astype(object))
            tids.append(b.tid.astype(object))
            is_metric_row = np.fromiter((str(n).startswith(METRICS_PREFIX) for n in bnames.tolist()), bool, len(b))
            kernel_names = np.array([n[len(METRICS_PREFIX):] if m else n
                                     for n, m in zip(bnames.tolist(), is_metric_row.tolist())], dtype=object)
            for key, col in b.args.items():
                if col.kind != "num" or key in NON_METRIC_ARGS:
                    continue
                rows = np.ones(len(b), bool) if col.present is None else col.present.copy()
                if "::" not in key:
                    rows &= is_metric_row
                if rows.any():
                    ks, vs = samples.setdefault(key, ([], []))
                    ks.append(kernel_names[rows])
                    vs.append(np.asarray(col.values, dtype=np.float64)[rows])
            if b.row_args is not None:
                for i, enc in enumerate(b.row_args):
                    if enc is not None and (is_metric_row[i] or b"::" in enc):
                        for key, v in orjson.loads(enc).items():
                            if isinstance(v, (int, float)) and not isinstance(v, bool) and (
                                    "::" in key or is_metric_row[i]) and key not in NON_METRIC_ARGS:
                                ks, vs = samples.setdefault(key, ([], []))
                                ks.append(np.array([kernel_names[i]], dtype=object))
                                vs.append(np.array([v], np.float64))
        if not cats:
            return cls([], [], np.zeros(0))
        merged = {k: (np.concatenate(ks), np.concatenate(vs)) for k, (ks, vs) in samples.items()}
        return cls(np.concatenate(cats), np.concatenate(names), np.concatenate(durs), merged,
                   ts_ns=np.concatenate(starts), thread=thread_codes(np.concatenate(pids), np.concatenate(tids)))

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> "Summary":
        """From Chrome trace events (``dur`` in µs), e.g. ``xpuprof.trace.read.load.events(path)``."""
        cats, names, durs, starts, pids, tids = [], [], [], [], [], []
        samples: dict[str, tuple[list, list]] = {}
        for ev in events:
            if ev.get("ph") != "X":
                continue
            name = str(ev.get("name", ""))
            cats.append(str(ev.get("cat", "")))
            names.append(name)
            durs.append(float(ev.get("dur") or 0.0) * 1000.0)
            starts.append(float(ev.get("ts") or 0.0) * 1000.0)
            pids.append(_hashable(ev.get("pid")))
            tids.append(_hashable(ev.get("tid")))
            args = ev.get("args")
            if not args:
                continue
            is_metric = name.startswith(METRICS_PREFIX)
            kernel = name[len(METRICS_PREFIX):] if is_metric else name
            for key, v in args.items():
                if key in NON_METRIC_ARGS or isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                if is_metric or "::" in key:
                    ks, vs = samples.setdefault(key, ([], []))
                    ks.append(kernel)
                    vs.append(float(v))
        merged = {k: (np.array(ks, dtype=object), np.array(vs, np.float64)) for k, (ks, vs) in samples.items()}
        return cls(cats, names, np.array(durs, np.float64), merged, ts_ns=np.round(np.array(starts, np.float64)),
                   thread=thread_codes(pids, tids) if cats else None)

    @classmethod
    def from_trace(cls, path) -> "Summary":
        from ..trace.read.load import events
        return cls.from_events(events(path))

    # ------------------------------------------------------------------ reading
    def categories(self) -> list[str]:
        present = {r.category for r in self._rows}
        ordered = [c for c in CATEGORY_ORDER if c in present]
        return ordered + sorted(present - set(ordered))

    def sort_columns(self) -> list[str]:
        cols = list(BASE_COLUMNS)
        for label in self.metric_labels:
            cols += [label] + [f"{label} {s}" for s in _STATS]
        return cols

    def _sort_key(self, sort_by: str):
        key = str(sort_by).strip()
        low = _SORT_ALIASES.get(key.lower(), key.lower())
        if low in BASE_COLUMNS:
            return low
        for label in self.metric_labels:
            short = label.split("::", 1)[0]
            for stat in _STATS:
                if low in (f"{label} {stat}".lower(), f"{short} {stat}".lower(), f"{label}.{stat}".lower(),
                           f"{short}.{stat}".lower()):
                    return (label, stat)
            if low in (label.lower(), short.lower()):
                return (label, "mean")
        raise ValueError(f"cannot sort by {sort_by!r}. Valid columns: {', '.join(self.sort_columns())}")

    def rows(self, category: str | None = None, sort_by: str = "total") -> list[SummaryRow]:
        key = self._sort_key(sort_by)
        rows = [r for r in self._rows if category is None or r.category == category]
        if key == "name":
            return sorted(rows, key=lambda r: r.name)
        present = [r for r in rows if r.value(key) is not None]
        missing = [r for r in rows if r.value(key) is None]
        return sorted(present, key=lambda r: (-r.value(key), r.name)) + sorted(missing, key=lambda r: r.name)

    def to_dicts(self, sort_by: str = "total") -> list[dict[str, Any]]:
        return [r.to_dict() for c in self.categories() for r in self.rows(c, sort_by)]

    def __len__(self) -> int:
        return len(self._rows)

    # ------------------------------------------------------------------ rendering
    def table(self, sort_by: str = "total", row_limit: int | None = None, categories: Iterable[str] | None = None,
              width: int | None = None) -> str:
        """Rendered text: one table per category, ``row_limit`` rows each (None or <= 0: all).

        ``width`` None: as wide as the widest table needs (never squeezes names or numbers).
        """
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        self._sort_key(sort_by)  # validate before rendering anything
        present = self.categories()
        # a category asked for by any of its spellings (runtime, cuda_runtime, xpu_runtime, ...)
        wanted = present if categories is None else list(dict.fromkeys(
            p for c in categories for p in present if p in category_spellings(c)))
        out = io.StringIO()
        console = Console(file=out, width=width or 1000, force_terminal=False, color_system=None, highlight=False)
        if not self._rows:
            console.print("(no slices recorded)")
        for cat in wanted:
            rows = self.rows(cat, sort_by)
            if not rows:
                continue
            shown = rows[:row_limit] if row_limit and row_limit > 0 else rows
            labels = [m for m in self.metric_labels if any(m in r.metrics for r in rows)]
            title = f"{cat}: {len(rows)} names, {sum(r.calls for r in rows)} calls"
            if len(shown) < len(rows):
                title += f" (top {len(shown)} by {sort_by})"
            table = Table(title=escape(title), title_justify="left", show_lines=False)
            table.add_column("Name", overflow="fold", max_width=80,
                             min_width=min(40, max(len(r.name) for r in shown)))
            nests = any(abs(r.total_ns - r.self_ns) > 0.5 for r in rows)
            for h in ("Calls", "Total") + (("Self",) if nests else ()) + ("%", "Avg", "Min", "Max"):
                table.add_column(h, justify="right", no_wrap=True)
            for m in labels:
                metric, _, unit = m.partition("::")
                head = f"{metric} ({unit})" if unit else metric
                for s in _STATS:
                    table.add_column(escape(f"{head}\n{s}"), justify="right", no_wrap=True)
            for r in shown:
                cells = [escape(r.name), str(r.calls), format_ns(r.total_ns)] + (
                    [format_ns(r.self_ns)] if nests else []) + [f"{r.percent:.1f}", format_ns(r.avg_ns),
                                                                format_ns(r.min_ns), format_ns(r.max_ns)]
                for m in labels:
                    got = r.metrics.get(m)
                    cells += [format_number(v) for v in got] if got else ["-"] * 3
                table.add_row(*cells)
            console.print(table)
        return out.getvalue()

    def __str__(self) -> str:
        return self.table()


def _hashable(value):
    """A pid or tid as a grouping key (an unhashable JSON value by its text)."""
    return value if isinstance(value, (int, float, str, type(None))) else repr(value)


def format_ns(ns: float) -> str:
    if ns is None or not math.isfinite(ns):
        return "-"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.3f} us"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"


def format_number(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.3f}" if abs(v) < 1e6 else f"{v:,.0f}"
