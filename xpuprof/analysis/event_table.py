"""Slices of trace files as columns: the rows ``xpuprof report`` summarizes.

``EventTable`` holds one row per slice of the chosen categories (device work by default, host
ranges and ops when a trace has none): name, category, start, duration, rank, the thread it ran on
(for nesting) and per-kernel metric values joined from ``metrics: <kernel>`` slices. Built from a
loaded trace, from the C scanner's event columns (the same rows, exactly) or from a TraceBuilder.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from ..activity import category_spellings
if TYPE_CHECKING:  # pragma: no cover
    from ..trace.read.scan import ScannedEvents  # the JSON scanner loads where a scanned trace is read
    from .report import TraceFile

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("user_annotation", "cpu_op", "gpu_user_annotation")
METRICS_PREFIX = "metrics: "
NON_METRIC_ARGS = frozenset({"kernel_id", "External id"})  # ids Kineto puts on "metrics: <kernel>" slices
TIME_LIMIT_NS = 2**62  # times (ns, base included) the int64 columns hold with room for sums and differences
_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
STEP_GROUP = "ProfilerStep#*"  # step annotations are summarized as one row


class ReportError(ValueError):
    """Bad report input (no traces found, a bad regex, an empty window); the message says which."""


def thread_codes(pairs: Iterable[tuple]) -> np.ndarray:
    """One int64 code per (pid, tid) pair, equal pairs equal codes (Python equality: 1 == 1.0)."""
    index: dict = {}
    return np.fromiter((index.setdefault(p, len(index)) for p in pairs), np.int64)


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
    def from_trace(cls, trace: TraceFile, categories: Sequence[str] | None = None) -> "EventTable":
        """Slices of the given categories (None: device categories, or host ones when a trace has none)."""
        events = trace.data["traceEvents"]
        slices = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
        if not slices:
            return cls.empty()
        base = trace.base_ns
        _check_times(trace, slices, base)
        start_ns = base + int(round(min(e["ts"] for e in slices) * 1000))
        metric_rows = [e for e in slices if str(e.get("name", "")).startswith(METRICS_PREFIX)]
        kernels = [e for e in slices if not str(e.get("name", "")).startswith(METRICS_PREFIX)]
        cats = _choose_categories(kernels, categories)
        rows = [e for e in kernels if isinstance(e.get("cat"), str) and e["cat"] in cats]
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
        if not cats <= _DEVICE_WORK:
            table.thread = thread_codes((_key(e.get("pid")), _key(e.get("tid"))) for e in rows)
        table._join_metrics(rows, metric_rows, base)
        return table

    @classmethod
    def from_scan(cls, trace: TraceFile, sc: ScannedEvents, categories: Sequence[str] | None = None,
                  *, release: bool = False) -> "EventTable | None":
        """``from_trace``'s rows from event columns (``trace.read.scan``), exactly. Events the columns do
        not hold exactly (a string pid, say) are read whole and go through ``from_trace``'s own
        expressions. None when ``from_trace`` must decide (it would raise, or ints would outgrow int64).

        ``release``: drop the document's bytes (``sc.raw``) once the events read whole are read, before
        the columns are worked on (the bytes are most of the memory a big trace takes)."""
        from ..trace.read.scan import ABSENT, DOUBLE, DUR, INT, PID, TID, TS

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
        is_metric_text = np.array([t.startswith(METRICS_PREFIX) for t in sc.strings] + [False], bool)
        whole = {i: sc.event(i) for i in simple[is_metric_text[sc.name[simple]]].tolist()}  # metrics: <kernel>
        if release:
            sc.raw = None
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
        if not (np.abs(dur_f) < limit).all():  # NaN, inf, or past int64 ns: from_trace names it
            return None
        # Per slice, in file order: the simple ones first, then the odd ones, then sorted by event.
        firsts = [int(ts_i[ts_int].min())] if ts_int.any() else []
        firsts += [float(ts_f[~ts_int].min())] if (~ts_int).any() else []
        firsts += [e["ts"] for _, e in odd]
        start_ns = base + int(round(min(firsts) * 1000))
        absent_name = string_id("")  # str(e.get("name", "")) of an event without a name
        o_name = np.array([string_id(str(e.get("name", ""))) for _, e in odd], np.int64)
        o_cat = np.array([-1 if e.get("cat") is None else string_id(e["cat"]) for _, e in odd], np.int64)
        try:
            o_ts = [base + int(round(e["ts"] * 1000)) for _, e in odd]
            o_dur = [int(round(float(e.get("dur", 0)) * 1000)) for _, e in odd]
        except (TypeError, ValueError, OverflowError):
            return None  # from_trace names the event
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
        if not cats <= _DEVICE_WORK:
            ev = row_event[rows]
            kinds = sc.kind[ev][:, [PID, TID]]
            if not is_odd[rows].any() and (kinds == INT).all():  # every row's pid and tid an int: no object per row
                table.thread = _pair_codes(sc.ints(PID)[ev], sc.ints(TID)[ev])
            else:
                table.thread = thread_codes(zip(map(_key, values(PID, "pid")), map(_key, values(TID, "tid"))))
        metric_rows = np.flatnonzero(is_metric)
        if len(metric_rows) and rows.any():
            raw_names = [odd_at[e].get("name") if o else (sc.strings[n] if n >= 0 else None) for e, o, n in
                         zip(row_event[rows].tolist(), is_odd[rows].tolist(), raw_name_ids[rows].tolist())]
            row_keys = [{"pid": p, "tid": t, "name": n} for p, t, n in
                        zip(values(PID, "pid"), values(TID, "tid"), raw_names)]
            metric_events = [odd_at[e] if o else whole[e] for e, o in
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
        table = cls(name=grouped[np.concatenate([b.name[m] for b, m in parts])],
                    cat=text[np.concatenate([b.cat[m] for b, m in parts])], ts_ns=ts,
                    dur_ns=np.concatenate([np.asarray(b.dur[m], np.int64) for b, m in parts]),
                    rank=np.full(len(ts), -1 if rank is None else rank, np.int64), rel_ns=ts - ts.min())
        if set(table.cat.tolist()) - _DEVICE_WORK:
            table.thread = _pair_codes(np.concatenate([np.asarray(b.pid[m], np.int64) for b, m in parts]),
                                       np.concatenate([np.asarray(b.tid[m], np.int64) for b, m in parts]))
        return table

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
        from .summary import unique_inverse

        uniq, codes = unique_inverse(self.cat)
        return np.array([c in _DEVICE_WORK for c in uniq.tolist()], bool)[codes]

    @property
    def inclusive_ns(self) -> int:
        """The rows' durations added up (nested rows counted inside their parents too)."""
        return int(self.dur_ns.sum()) if len(self) else 0

    @property
    def holds_device_work(self) -> bool:
        return any(c in _DEVICE_WORK for c in self.categories())

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


DEVICE_WORK = frozenset(c for name in DEVICE_CATEGORIES for c in category_spellings(name))  # rows that never nest
_DEVICE_WORK = DEVICE_WORK


def _key(value):
    """A pid or tid as a dictionary key (an unhashable JSON value by its text)."""
    return value if isinstance(value, (int, float, str, type(None))) else repr(value)


def _pair_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Dense int64 codes of (pid, tid) int pairs; equal pairs, equal codes (hashed, not sorted)."""
    from ..trace.builder.keyindex import factorize_pairs

    if not len(pid):
        return np.zeros(0, np.int64)
    return factorize_pairs(pid, tid).codes.astype(np.int64)


def _group_name(name: str) -> str:
    return STEP_GROUP if _STEP_NAME.match(name) else name


def _wanted_categories(categories: Sequence[str]) -> set[str]:
    """The categories asked for, each with its other spellings (``runtime`` is also ``cuda_runtime``,
    ``xpu_runtime``, ...: traces carry the vendor's names by default, the generic ones on request)."""
    return {c for name in categories for c in category_spellings(name)}


def _check_times(trace: "TraceFile", slices: list[dict], base: int) -> None:
    """Every slice's ts and dur a finite number of µs that fits the int64 ns columns (with the base
    added); else one ``ReportError`` naming the file, the event and the value."""
    limit_us = (TIME_LIMIT_NS - abs(base)) / 1000
    for e in slices:
        for key in ("ts", "dur"):
            v = e.get(key, 0)
            try:  # as the table reads them: ts a JSON number, dur anything float() takes ("1.25" too)
                ok = abs(float(v)) < limit_us  # NaN fails this too
            except (TypeError, ValueError, OverflowError):
                ok = False
            if not ok:
                raise ReportError(f"{trace.path}: event {str(e.get('name', ''))[:80]!r} has {key} {v!r}, which is "
                                  f"not a time a trace can hold (a finite number of microseconds below "
                                  f"{limit_us:.3g} in magnitude)")


def _choose_categories(slices: list[dict], categories: Sequence[str] | None) -> set[str]:
    if categories:
        return _wanted_categories(categories)
    present = {e.get("cat") for e in slices if isinstance(e.get("cat"), str)}  # a list or object is no category
    device = present & set(DEVICE_CATEGORIES)
    return device or (present & set(HOST_CATEGORIES))


