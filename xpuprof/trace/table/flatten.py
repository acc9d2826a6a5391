"""A TraceBuilder's batches as the trace table's flat columns: the rows the Chrome writer writes, as a
reader of that file reads them back (same ts clamp at the base time, sanitized tids, the trace's
category spelling, the args objects' text), without writing the file.

Each batch is one segment of the table (``model.BatchSegment``); its flat columns are made here when
someone asks (the store writer, an analysis, the comparer), chunk by chunk for the store writer. The
trace spans (a "Trace" slice and an "Iteration Start" instant each), their metadata rows and the closing
"Record Window End" instant are made here too, in the file's order.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...clock import BASE_TIME_NS
from ..builder.columns import CounterBatch, FlowBatch, InstantBatch, SliceBatch
from .args import batch_args, row_args_text
from .columns import (CounterColumns, FlowColumns, InstantColumns, RowText, SliceColumns, constant)
from .rowtext import StringTokens, is_constant

SPANS_PID = "Spans"
SPANS_SORT_INDEX = 0x20000000
INT64_MIN = np.iinfo(np.int64).min
_NO_LABEL = np.int32(-1)


def clamp_ts(ts: np.ndarray) -> np.ndarray:
    """Epoch ns as the file holds them: never before the trace's base time (Kineto's fmtTs clamps at 0)."""
    ts = np.asarray(ts, np.int64)
    if is_constant(ts):
        return np.broadcast_to(np.maximum(ts[:1], np.int64(BASE_TIME_NS)), ts.shape)
    return np.maximum(ts, np.int64(BASE_TIME_NS))


def sanitize_tid(t):
    """Kineto's sanitizeTid on one value: absolute value, INT64_MIN -> 0 (labels stay)."""
    if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
        t = int(t)
        return 0 if t == INT64_MIN else abs(t)
    return t


def where_ids(values: np.ndarray, labels: list[str], *, tid: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A pid/tid column as (int64 values, int32 label ids into ``labels``, -1 for an int row); ``labels``
    grows with the labels found. tids sanitized as the writer writes them."""
    values = np.asarray(values)
    n = len(values)
    if values.dtype != object:
        v = values.astype(np.int64, copy=False)
        if tid and len(v) and (v[:1] if is_constant(v) else v).min() < 0:
            v = np.where(v == INT64_MIN, 0, np.abs(v))
        return v, constant(-1, n, np.int32)
    if n > 1 and values.strides[0] == 0:  # one value (a label) for every row
        iv, lid = _where_one(values[0], labels, tid)
        return constant(iv, n, np.int64), constant(lid, n, np.int32)
    ints = np.zeros(n, np.int64)
    ids = np.full(n, -1, np.int32)
    codes: dict = {}
    for i, x in enumerate(values.tolist()):  # object rows are row labels ("Spans"): few distinct values
        got = codes.get(x)
        if got is None:
            got = codes[x] = _where_one(x, labels, tid)
        ints[i], ids[i] = got
    return ints, ids


def _where_one(x, labels: list[str], tid: bool) -> tuple[int, int]:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(sanitize_tid(x) if tid else x), -1
    import orjson

    text = x if isinstance(x, str) else orjson.dumps(x).decode()
    if text not in labels:
        labels.append(text)
    return 0, labels.index(text)


class Flattener:
    """Turns one builder's batches into flat columns. ``rank``: the rank column's value; ``vendor``: the
    categories spelled as the trace spells them (the writer's ``vendor_categories``)."""

    def __init__(self, builder, rank: int, vendor: bool) -> None:
        self.b = builder
        self.rank = rank
        self.vendor = vendor
        self.strings = builder.strings.strings
        self.tokens = StringTokens(builder.strings)

    def _common(self, b, sel: slice, order: np.ndarray) -> dict[str, Any]:
        n = sel.stop - sel.start
        labels: list[str] = []
        pid, pid_label = where_ids(b.pid[sel], labels)
        tid, tid_label = where_ids(b.tid[sel], labels, tid=True)
        return {"strings": self.strings, "labels": labels, "rank": constant(self.rank, n, np.int32),
                "order": order, "ts": clamp_ts(b.ts[sel]), "pid": pid, "pid_label": pid_label, "tid": tid,
                "tid_label": tid_label}

    def _cat(self, b, sel: slice, null_empty: bool = False) -> np.ndarray:
        ids = np.asarray((b.vendor_cat if self.vendor else b.cat)[sel], np.int32)
        return np.where(ids == 0, _NO_LABEL, ids) if null_empty else ids

    def slices(self, b: SliceBatch, sel: slice, order: np.ndarray) -> SliceColumns:
        cols = self._common(b, sel, order)
        ints, floats, rest = batch_args(b, sel, self.strings, self.tokens).columns()
        return SliceColumns(**cols, name=np.asarray(b.name[sel], np.int32), cat=self._cat(b, sel),
                            dur=np.maximum(np.asarray(b.dur[sel], np.int64), 0), ints=ints, floats=floats, args=rest)

    def instants(self, b: InstantBatch, sel: slice, order: np.ndarray) -> InstantColumns:
        cols = self._common(b, sel, order)
        n = sel.stop - sel.start
        args = row_args_text(b.row_args, sel) if b.row_args is not None else RowText.empty(n)
        return InstantColumns(**cols, name=np.asarray(b.name[sel], np.int32), cat=self._cat(b, sel, null_empty=True),
                              scope=np.asarray(b.scope[sel], np.uint8), args=args)

    def counters(self, b: CounterBatch, sel: slice, order: np.ndarray) -> CounterColumns:
        """One row per (event, metric), each event's metrics together, in the order the file has them."""
        n = sel.stop - sel.start
        if b.row_values is not None:  # the scalar path: one dict per row
            rows = [(i, k, float(v)) for i, vals in enumerate(b.row_values[sel]) for k, v in vals.items()]
            which = np.array([r[0] for r in rows], np.int64)
            metric_names = list(dict.fromkeys(r[1] for r in rows))
            index = {m: j for j, m in enumerate(metric_names)}
            metric = np.array([index[r[1]] for r in rows], np.int32)
            value = np.array([r[2] for r in rows], np.float64)
        else:
            metric_names = list(b.values)
            which = np.repeat(np.arange(n), len(metric_names))  # event-major: each event's metrics together
            metric = np.tile(np.arange(len(metric_names), dtype=np.int32), n)
            value = (np.stack([np.asarray(b.values[k][sel], np.float64) for k in metric_names], axis=1).ravel()
                     if metric_names else np.zeros(0, np.float64))
        # metric names are not interned in the builder: they follow its strings in this set's dictionary
        strings = _Extended(self.strings, metric_names)
        cols = self._common(b, sel, order)
        for key in ("rank", "order", "ts", "pid", "pid_label", "tid", "tid_label"):
            cols[key] = np.asarray(cols[key])[which]
        cols["strings"] = strings
        return CounterColumns(**cols, name=np.asarray(b.name[sel], np.int32)[which],
                              cat=np.asarray(self._cat(b, sel))[which], metric=metric + np.int32(strings.base_len),
                              value=value)

    def flows(self, b: FlowBatch, sel: slice, order: np.ndarray) -> FlowColumns:
        cols = self._common(b, sel, order)
        n = sel.stop - sel.start
        start = np.asarray(b.is_start[sel], bool)
        cat = np.asarray(b.cat[sel], np.int32)
        return FlowColumns(**cols, name=cat, cat=cat, flow_id=np.asarray(b.flow_id[sel], np.int64),
                           id_label=constant(-1, n, np.int32), phase=np.where(start, ord("s"), ord("f")).astype(np.uint8),
                           bp=np.where(start, 0, ord("e")).astype(np.uint8))

    # ------------------------------------------------------------------ what the writer adds
    def spans_and_end(self, first_order: int) -> tuple[SliceColumns, InstantColumns, list[dict]]:
        """The trace spans' slices, their instants and metadata rows, and the closing instant."""
        b = self.b
        strings: list[str] = []
        labels: list[str] = []

        def sid(text: str, table: list[str]) -> int:
            if text not in table:
                table.append(text)
            return table.index(text)

        x_rows, i_rows, meta = [], [], []
        for k, sp in enumerate(b.spans):
            ts = int(clamp_ts(np.array([sp.start_ns]))[0])
            dur = 0 if sp.end_ns == 0 else sp.end_ns - sp.start_ns
            at = first_order + 3 * k
            x_rows.append((at, ts, dur, sid(f"{sp.prefix}{sp.name} ({sp.iteration})", strings), sid(sp.name, labels),
                           sp.op_count))
            meta.append({"ph": "M", "name": "process_sort_index", "ts": (ts - BASE_TIME_NS) / 1000.0, "pid": SPANS_PID,
                         "tid": 0, "args": {"sort_index": SPANS_SORT_INDEX}})
            i_rows.append((at + 2, ts, sid(f"Iteration Start: {sp.name}", strings), sid("Traces", labels),
                           sid(f"Trace {sp.name}", labels)))
        end_ns = b.window_end_ns or b.window_start_ns
        i_rows.append((first_order + 3 * len(b.spans), int(clamp_ts(np.array([end_ns]))[0]),
                       sid("Record Window End", strings), sid("", labels), sid("", labels)))
        n = len(x_rows)
        spans_pid = sid(SPANS_PID, labels)
        trace_cat = sid("Trace", strings) if n else 0
        slices = SliceColumns(
            strings=strings, labels=labels, rank=constant(self.rank, n, np.int32),
            order=np.array([r[0] for r in x_rows], np.int64), ts=np.array([r[1] for r in x_rows], np.int64),
            pid=np.zeros(n, np.int64), pid_label=np.full(n, spans_pid, np.int32), tid=np.zeros(n, np.int64),
            tid_label=np.array([r[4] for r in x_rows], np.int32), name=np.array([r[3] for r in x_rows], np.int32),
            cat=np.full(n, trace_cat, np.int32), dur=np.array([r[2] for r in x_rows], np.int64),
            args=RowText.from_rows([b'{"Op count":%d}' % r[5] for r in x_rows]))
        m = len(i_rows)
        instants = InstantColumns(
            strings=strings, labels=labels, rank=constant(self.rank, m, np.int32),
            order=np.array([r[0] for r in i_rows], np.int64), ts=np.array([r[1] for r in i_rows], np.int64),
            pid=np.zeros(m, np.int64), pid_label=np.array([r[3] for r in i_rows], np.int32), tid=np.zeros(m, np.int64),
            tid_label=np.array([r[4] for r in i_rows], np.int32), name=np.array([r[2] for r in i_rows], np.int32),
            cat=np.full(m, -1, np.int32), scope=np.full(m, ord("g"), np.uint8), args=RowText.empty(m))
        return slices, instants, meta


class _Extended:
    """A builder's strings followed by a few more (a counter batch's metric names), read-only."""

    __slots__ = ("base", "base_len", "more")

    def __init__(self, base, more: list[str]) -> None:
        self.base, self.base_len, self.more = base, len(base), more

    def __len__(self) -> int:
        return self.base_len + len(self.more)

    def __getitem__(self, i: int) -> str:
        return self.base[i] if i < self.base_len else self.more[i - self.base_len]


def meta_events(builder, fmt_ns=None) -> list[dict]:
    """The process and thread metadata rows ("M") the writer writes first, at the window's start; ``fmt_ns``
    turns ns after the base time into the file's value (default: float µs, as a reader parses it)."""
    fmt = fmt_ns or (lambda ns: [v / 1000.0 for v in ns])
    (ts,) = fmt([max(int(builder.window_start_ns) - BASE_TIME_NS, 0)])
    out = []
    for pid, name in builder.process_names.items():
        out.append({"ph": "M", "name": "process_name", "ts": ts, "pid": pid, "tid": 0, "args": {"name": name}})
        if pid in builder.process_labels:
            out.append({"ph": "M", "name": "process_labels", "ts": ts, "pid": pid, "tid": 0,
                        "args": {"labels": builder.process_labels[pid]}})
        out.append({"ph": "M", "name": "process_sort_index", "ts": ts, "pid": pid, "tid": 0,
                    "args": {"sort_index": builder.process_sort.get(pid, pid if isinstance(pid, int) else 0)}})
    for (pid, tid), name in builder.thread_names.items():
        row_tid = sanitize_tid(tid)
        out.append({"ph": "M", "name": "thread_name", "ts": ts, "pid": pid, "tid": row_tid, "args": {"name": name}})
        sort = builder.thread_sort.get((pid, tid), tid if isinstance(tid, int) else 0)
        out.append({"ph": "M", "name": "thread_sort_index", "ts": ts, "pid": pid, "tid": row_tid,
                    "args": {"sort_index": sort}})
    return out
