"""The rows ``xpuprof report`` summarizes, from a TraceTable: ``EventTable.from_table``, the one function.

``EventTable`` holds one row per slice of the chosen categories (device work by default, host ranges and
ops when a trace has none; chosen per trace): name (``ProfilerStep#N`` as one group), category, start,
duration, rank, the time since its trace's first slice (for time windows), the thread it ran on (for
nesting) and its per-kernel metric values, joined from the ``metrics: <kernel>`` slices every backend
writes through ``TraceBuilder.add_per_kernel_metrics`` (``join_metrics``: the one metric join). Whatever
read the table - the Kineto JSON reader, the store reader, a frozen builder - the rows are the same.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import orjson

from ..activity import category_spellings
from ..trace.store_schema import FLOAT_ARGS, INT_ARGS

from .report_terms import (DEVICE_CATEGORIES, HOST_CATEGORIES, METRICS_PREFIX, NON_METRIC_ARGS,  # noqa: F401
                           STEP_GROUP, TIME_LIMIT_NS, ReportError, device_work)

_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
_ARG_KEY = {col: key for key, col in {**INT_ARGS, **FLOAT_ARGS}.items()}  # typed column -> the args key


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
    # int64 code of the row's (pid, tid) within its trace, for nesting; None for device work only
    # (kernels, copies and fills do not nest), where nothing needs it.
    thread: np.ndarray | None = None
    self_ns: np.ndarray | None = None  # int64: dur minus the rows directly nested inside (``nesting``)

    def __len__(self) -> int:
        return len(self.ts_ns)

    @classmethod
    def empty(cls) -> "EventTable":
        return cls(np.array([], object), np.array([], object), *(np.array([], np.int64) for _ in range(4)))

    @classmethod
    def from_table(cls, table, categories: Sequence[str] | None = None) -> "EventTable":
        """The slices of every trace of a TraceTable, of the given categories (None: device categories, or
        host ones for a trace that has none), with their metrics joined."""
        return cls.concat([_trace_rows(table, i, categories) for i in range(len(table.traces))])

    @classmethod
    def of_trace(cls, table, trace: int, categories: Sequence[str] | None = None) -> "EventTable":
        """The rows of one trace of a TraceTable (``from_table`` is these of every trace, concatenated)."""
        return _trace_rows(table, trace, categories)

    @classmethod
    def concat(cls, tables: Sequence["EventTable"]) -> "EventTable":
        tables = [t for t in tables if len(t)]
        if not tables:
            return cls.empty()
        names = list(dict.fromkeys(m for t in tables for m in t.metrics))
        units: dict[str, str] = {}
        for t in tables:
            units.update(t.units)
        thread = None
        if any(t.thread is not None for t in tables):  # codes made distinct across tables (traces)
            parts, offset = [], 0
            for t in tables:
                codes = t.thread if t.thread is not None else np.zeros(len(t), np.int64)
                parts.append(codes + offset)
                offset += int(codes.max()) + 1 if len(codes) else 0
            thread = np.concatenate(parts)
        return cls(
            *(np.concatenate([getattr(t, f) for t in tables]) for f in ("name", "cat", "ts_ns", "dur_ns", "rank", "rel_ns")),
            metrics={m: np.concatenate([t.metrics.get(m, np.full(len(t), np.nan)) for t in tables]) for m in names},
            units=units, thread=thread,
            self_ns=np.concatenate([t.self_ns for t in tables]) if all(t.self_ns is not None for t in tables) else None,
        )

    def take(self, mask: np.ndarray) -> "EventTable":
        return EventTable(self.name[mask], self.cat[mask], self.ts_ns[mask], self.dur_ns[mask], self.rank[mask],
                          self.rel_ns[mask], {k: v[mask] for k, v in self.metrics.items()}, dict(self.units),
                          None if self.thread is None else self.thread[mask],
                          None if self.self_ns is None else self.self_ns[mask])

    def with_self_times(self) -> "EventTable":
        """``self_ns`` filled: each row's duration minus the rows nested directly inside it on its thread
        (device work does not nest: its self time is its duration)."""
        from .nesting import self_times

        self_ns = self.dur_ns.copy()
        if self.thread is not None and len(self):
            host = ~self._device_rows()
            if host.all():
                self_ns = self_times(self.thread, self.ts_ns, self.dur_ns)
            elif host.any():
                self_ns[host] = self_times(self.thread[host], self.ts_ns[host], self.dur_ns[host])
        self.self_ns = self_ns
        return self

    def categories(self) -> list[str]:
        """The distinct categories of the rows, in first-seen order."""
        return list(dict.fromkeys(self.cat.tolist()))

    def _device_rows(self) -> np.ndarray:
        """Rows of device work, decided once per distinct category (not once per row's object)."""
        from .averages import unique_inverse

        uniq, codes = unique_inverse(self.cat)
        return np.array([c in DEVICE_WORK for c in uniq.tolist()], bool)[codes]

    @property
    def inclusive_ns(self) -> int:
        """The rows' durations added up (nested rows counted inside their parents too)."""
        return int(self.dur_ns.sum()) if len(self) else 0

    @property
    def holds_device_work(self) -> bool:
        return any(c in DEVICE_WORK for c in self.categories())

    def filter(self, *, name: str | None = None, start_ms: float | None = None, end_ms: float | None = None,
               ranks: Iterable[int] | None = None) -> "EventTable":
        """Rows whose name matches the regex (search), that start inside [start_ms, end_ms) of their trace."""
        mask = np.ones(len(self), bool)
        if name:
            try:
                rx = re.compile(name)
            except re.error as exc:
                raise ReportError(f"--name {name!r} is not a valid regular expression: {exc}") from None
            from .averages import unique_inverse

            if len(self):  # the regex once per distinct name
                uniq, codes = unique_inverse(self.name)
                mask &= np.array([rx.search(n) is not None for n in uniq.tolist()], bool)[codes]
        if start_ms is not None:
            mask &= self.rel_ns >= int(start_ms * 1e6)
        if end_ms is not None:
            mask &= self.rel_ns < int(end_ms * 1e6)
        if ranks is not None:
            mask &= np.isin(self.rank, list(ranks))
        return self.take(mask)


DEVICE_WORK = device_work()  # rows that never nest
_DEVICE_WORK = DEVICE_WORK


def group_name(name: str) -> str:
    return STEP_GROUP if _STEP_NAME.match(name) else name


_group_name = group_name


def wanted_categories(categories: Sequence[str]) -> set[str]:
    """The categories asked for, each with its other spellings (``runtime`` is also ``cuda_runtime``,
    ``xpu_runtime``, ...: traces carry the vendor's names by default, the generic ones on request)."""
    return {c for name in categories for c in category_spellings(name)}


_wanted_categories = wanted_categories


def thread_codes(pid: np.ndarray, pid_label: np.ndarray, tid: np.ndarray, tid_label: np.ndarray) -> np.ndarray:
    """Dense int64 codes of (pid, tid) per row, a row label counting as its own value; equal pairs, equal codes."""
    from ..trace.builder.keyindex import factorize_pairs

    if not len(pid):
        return np.zeros(0, np.int64)
    pid_label, tid_label = np.asarray(pid_label), np.asarray(tid_label)
    if _uniform(pid_label) and _uniform(tid_label):  # no row label tells rows apart (every pid and tid an int)
        return factorize_pairs(np.asarray(pid, np.int64), np.asarray(tid, np.int64)).codes.astype(np.int64)
    p = factorize_pairs(np.asarray(pid, np.int64), np.asarray(pid_label, np.int64)).codes.astype(np.int64)
    t = factorize_pairs(np.asarray(tid, np.int64), np.asarray(tid_label, np.int64)).codes.astype(np.int64)
    return factorize_pairs(p, t).codes.astype(np.int64)


def _uniform(a: np.ndarray) -> bool:
    return a.strides[0] == 0 or bool((a == a[0]).all())


def _trace_rows(table, trace: int, categories: Sequence[str] | None) -> EventTable:
    """The rows of one trace of the table (its own category choice and time origin)."""
    info = table.traces[trace]
    s = table.columns("slices", trace, keep=False)
    if not len(s):
        return EventTable.empty()
    strings = list(s.strings) if not isinstance(s.strings, list) else s.strings
    texts = np.array([*strings, ""], dtype=object)  # [-1]: no name or category (read as "")
    is_metric_text = np.array([t.startswith(METRICS_PREFIX) for t in strings] + [False], bool)
    is_metric = is_metric_text[s.name]
    present = {texts[c] if c >= 0 else None for c in np.unique(s.cat[~is_metric]).tolist()}
    if categories:
        cats = wanted_categories(categories)
    else:
        cats = (present & set(DEVICE_CATEGORIES)) or (present & set(HOST_CATEGORIES))
    wanted = np.array([t in cats for t in strings] + [False], bool)
    rows = np.flatnonzero(~is_metric & wanted[s.cat])
    order = np.asarray(s.order)[rows]
    if len(rows) > 1 and not (order[1:] > order[:-1]).all():  # file order, whichever reader made the segments
        rows = rows[np.argsort(order, kind="stable")]
    ts = np.asarray(s.ts, np.int64)
    start = int(ts.min())
    grouped = np.array([group_name(t) for t in strings] + [""], dtype=object)
    rank = np.asarray(s.rank, np.int64)[rows] if (info.named or info.merged_ranks) else np.full(len(rows), -1, np.int64)
    dur = np.asarray(s.dur, np.int64)[rows]
    out = EventTable(name=grouped[s.name[rows]], cat=texts[s.cat[rows]], ts_ns=ts[rows], dur_ns=dur, rank=rank,
                     rel_ns=ts[rows] - start)
    codes = None
    if not cats <= DEVICE_WORK or is_metric.any():
        codes = thread_codes(s.pid, s.pid_label, s.tid, s.tid_label)
        if not cats <= DEVICE_WORK:
            out.thread = codes[rows]
    if is_metric.any() and len(rows):
        join_metrics(out, s, rows, np.flatnonzero(is_metric), codes)
    return out


def join_metrics(out: EventTable, s, rows: np.ndarray, metric_rows: np.ndarray, codes: np.ndarray) -> None:
    """Per-kernel metrics onto the kernel rows (the one metric join): a ``metrics: <kernel>`` slice starts 1 ns
    before its kernel on the same row (a neighbouring ns also counts: traces written with float µs lose
    one); its numeric args other than ids are the kernel's metrics, ``"<metric>::<unit>"``. A later metric
    slice of the same kernel overrides an earlier one, as reading the file in order does."""
    from ..trace.builder.keyindex import factorize_pairs

    strings = s.strings
    ids: dict[str, int] = {}
    for i in range(len(strings)):
        ids.setdefault(strings[i], i)
    kernel_name = np.full(len(strings) + 1, -2, np.int64)  # metric slice name id -> its kernel's name id
    for sid in np.unique(s.name[metric_rows]).tolist():
        kernel_name[sid] = ids.get(strings[sid][len(METRICS_PREFIX):], -3)
    k_key = factorize_pairs(codes[rows], np.asarray(s.name[rows], np.int64)).codes.astype(np.int64)
    m_order = metric_rows[np.argsort(np.asarray(s.order)[metric_rows], kind="stable")]
    m_key_raw = (codes[m_order], kernel_name[s.name[m_order]])
    # one code space for (thread, name) of kernels and metric slices
    both = factorize_pairs(np.concatenate([codes[rows], m_key_raw[0]]),
                           np.concatenate([np.asarray(s.name[rows], np.int64), m_key_raw[1]])).codes.astype(np.int64)
    k_key, m_key = both[:len(rows)], both[len(rows):]
    k_ts = np.asarray(s.ts, np.int64)[rows]
    m_ts = np.asarray(s.ts, np.int64)[m_order] + 1
    found = np.full(len(m_order), -1, np.int64)
    for d in (0, -1, 1):  # the exact ns first, then its neighbours
        todo = found < 0
        if not todo.any():
            break
        pairs = factorize_pairs(np.concatenate([k_key, m_key[todo]]), np.concatenate([k_ts, m_ts[todo] + d]))
        pc = pairs.codes.astype(np.int64)
        lookup = np.full(int(pc.max()) + 1, -1, np.int64)
        lookup[pc[:len(rows)]] = np.arange(len(rows))  # a repeated key: the last kernel, as a dict keeps it
        hit = lookup[pc[len(rows):]]
        idx = np.flatnonzero(todo)
        found[idx] = hit
    cols: dict[str, np.ndarray] = {}
    for j in np.flatnonzero(found >= 0).tolist():
        i = int(found[j])
        for arg, value in _args_of(s, int(m_order[j])).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or arg in NON_METRIC_ARGS:
                continue
            metric, _, unit = arg.partition("::")
            col = cols.get(metric)
            if col is None:
                col = cols[metric] = np.full(len(rows), np.nan)
                out.units[metric] = unit
            col[i] = float(value)
    out.metrics = cols


def _args_of(s, row: int) -> dict:
    """One slice's args object: its typed columns (under their keys) and the rest."""
    args: dict = {}
    for group in (s.ints, s.floats):
        for col, (values, present) in group.items():
            if present[row]:
                args[_ARG_KEY[col]] = values[row].item()
    raw = s.args[row]
    if raw:
        args.update(orjson.loads(raw))
    return args
