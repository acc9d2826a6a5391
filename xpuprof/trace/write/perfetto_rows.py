"""A TraceTable's rows as the Perfetto encoder's inputs (``_native/pfenc.c``): numpy columns per segment, no
Python object per event.

- ``StringPool``: the encoder's one string table (a builder's strings, or a read table's dictionary) with the
  strings added here (arg keys, other dictionaries' strings) after them; sid = index.
- ``EventRows``: every slice and instant as encoder segments ``(kind, lo, hi, ts, dur, name, cat, scope,
  items)`` over one row space, with each row's (pid, tid) key; a builder batch's columns as they are (its arg
  columns typed, its per-row args objects as JSON text), a read table's flat columns with their typed args
  and the JSON text of the others.
- ``FlowRows`` and ``CounterRows``: the flows and counters of the table, likewise.

A pid or tid is an int64 key: the int itself, or ``LABEL_BASE + i`` for the i-th row label ("Spans"), or
``NONE_KEY`` for an event that named none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import orjson

from ..builder.columns import ArgColumn, CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch
from ..store_schema import FLOAT_ARGS, INT_ARGS
from ..table.columns import NO_VALUE, CounterColumns, FlowColumns, InstantColumns, SliceColumns
from ..table.flatten import where_ids
from ..table.model import BatchSegment, TraceTable
from ..table.rowtext import is_constant

LABEL_BASE = -(1 << 62)  # keys below this are row labels
NONE_KEY = LABEL_BASE - 1 - (1 << 40)  # an event without a pid/tid
# Args that name the queue a device row ran on: written once on its track when every slice of one category
# there holds the same value (the rest stay on each event).
QUEUE_KEYS = frozenset({"device", "context", "sycl queue", "l0 queue", "stream", "queue", "hsa_queue"})
_TYPED_KEY = {col: key for key, col in {**INT_ARGS, **FLOAT_ARGS}.items()}
SLICES, INSTANTS = 0, 1


def pfenc():
    """The C encoder, or an error saying it is not built (no slower path: a per-event Python encoder would
    cost what this format exists to avoid). The one import of it."""
    from ... import _native

    try:
        return _native.load("pfenc", "writing a Perfetto protobuf trace (write a .json trace instead)")
    except _native.NativeUnavailable as exc:
        raise RuntimeError(str(exc)) from exc


_pfenc = pfenc


def col(values, dtype=None) -> np.ndarray:
    """A column as the encoder takes it: contiguous, or one value for every row (length 1)."""
    values = np.asarray(values)
    if is_constant(values) or (values.ndim == 2 and len(values) > 1 and values.strides[0] == 0):
        values = values[:1]
    return np.ascontiguousarray(values, dtype=dtype)


def mask(present) -> np.ndarray | None | bool:
    """None: every row has it; False: no row has it; else the bool column."""
    if present is None:
        return None
    present = np.asarray(present, bool)
    if is_constant(present) or len(present) == 0:
        return None if (len(present) == 0 or present[0]) else False
    if present.all():
        return None
    return np.ascontiguousarray(present) if present.any() else False


class StringPool:
    """The encoder's strings: ``base`` (a builder's StringTable or a list) then the strings added here."""

    def __init__(self, base) -> None:
        self.base = base
        self.n_base = len(base)
        self.extra: list[str] = []
        self._index: dict[str, int] = {}

    def sid(self, text: str) -> int:
        got = self._index.get(text)
        if got is None:
            got = self._index[text] = self.n_base + len(self.extra)
            self.extra.append(text)
        return got

    def remap(self, strings: Sequence[str]) -> np.ndarray:
        """sids for a dictionary's strings (ids into ``strings`` -> sids; -1 stays -1 through ``ids``)."""
        if strings is self.base:
            return np.arange(len(strings), dtype=np.int64)
        return np.fromiter((self.sid(s) for s in strings), np.int64, len(strings))

    def ids(self, codes: np.ndarray, strings: Sequence[str]) -> np.ndarray:
        codes = np.asarray(codes)
        if strings is self.base:
            return col(codes, np.int32)
        table = self.remap(strings)
        if not len(table):
            return col(np.full(len(codes), -1), np.int32)
        return col(np.where(codes >= 0, table[np.clip(codes, 0, len(table) - 1)], -1), np.int32)

    def text(self, sid: int) -> str:
        if sid >= self.n_base:
            return self.extra[sid - self.n_base]
        lookup = getattr(self.base, "lookup", None)
        return lookup(sid) if lookup is not None else self.base[sid]

    def utf8(self) -> tuple[bytes, np.ndarray]:
        """Every string as UTF-8 in one blob and n + 1 int64 offsets."""
        if hasattr(self.base, "_segments"):  # a builder's StringTable: its bulk segments taken as they are
            parts = _table_parts(self.base)
        else:
            parts = [s.encode("utf-8", "replace") for s in self.base]
        parts += [s.encode("utf-8", "replace") for s in self.extra]
        lens = np.fromiter(map(len, parts), np.int64, len(parts))
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return b"".join(parts), offsets


def _table_parts(table) -> list[bytes]:
    """A StringTable's strings in id order as UTF-8: interned ones encoded, segment ones sliced from their blob."""
    out: list[bytes] = []
    listed = iter(table._list)
    for seg in table._segments:
        while len(out) < seg.first:
            out.append(next(listed).encode("utf-8", "replace"))
        blob = seg.blob.tobytes() if isinstance(seg.blob, np.ndarray) else bytes(seg.blob)
        ends = np.asarray(seg.ends, np.int64).tolist()
        out += [blob[ends[i]:ends[i + 1]] for i in range(seg.count)]
    out += [s.encode("utf-8", "replace") for s in listed]
    return out


class Keys:
    """pid/tid values and row labels as int64 keys (see the module docstring), and back."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self._label_ids: dict[str, int] = {}

    def label(self, text: str) -> int:
        got = self._label_ids.get(text)
        if got is None:
            got = self._label_ids[text] = len(self.labels)
            self.labels.append(text)
        return LABEL_BASE + got

    def of_batch(self, values: np.ndarray, tid: bool) -> np.ndarray:
        labels: list[str] = []
        ints, ids = where_ids(values, labels, tid=tid)
        if not labels:
            return col(ints, np.int64)
        keys = np.array([self.label(t) - LABEL_BASE for t in labels], np.int64)
        ids = np.asarray(ids)
        return col(np.where(ids >= 0, LABEL_BASE + keys[np.clip(ids, 0, None)], ints), np.int64)

    def of_flat(self, values: np.ndarray, label_ids: np.ndarray, labels: Sequence[str]) -> np.ndarray:
        label_ids = np.asarray(label_ids)
        if not (label_ids >= 0).any() and not (label_ids == NO_VALUE).any():
            return col(values, np.int64)
        table = np.array([self.label(t) for t in labels] or [0], np.int64)
        out = np.where(label_ids >= 0, table[np.clip(label_ids, 0, None)], np.asarray(values, np.int64))
        return col(np.where(label_ids == NO_VALUE, NONE_KEY, out), np.int64)

    def value(self, key: int):
        """The pid/tid a key stands for: an int, a label, or None."""
        key = int(key)
        if key == NONE_KEY:
            return None
        if key < LABEL_BASE + (1 << 40) and key >= LABEL_BASE:
            return self.labels[key - LABEL_BASE]
        return key


@dataclass
class EventRows:
    """The slices and instants of a table as encoder segments over one row space."""

    segments: list[tuple] = field(default_factory=list)
    pid: list[np.ndarray] = field(default_factory=list)  # per segment: keys (length 1: every row)
    tid: list[np.ndarray] = field(default_factory=list)
    rows: int = 0

    def add(self, kind: int, n: int, ts, dur, name, cat, scope, items, pid, tid) -> None:
        if not n:
            return
        self.segments.append((kind, self.rows, self.rows + n, col(ts, np.int64),
                              None if dur is None else col(dur, np.int64), name, cat,
                              None if scope is None else col(scope, np.uint8), items))
        self.pid.append(pid)
        self.tid.append(tid)
        self.rows += n


def _item(kind, key_sid, values=None, present=None, starts=None, lens=None, blob=None, hoist=False):
    return (kind, key_sid, bool(hoist), values, present, starts, lens, blob)


def arg_column_item(pool: StringPool, key: str, c: ArgColumn, enc) -> tuple | None:
    """One builder arg column as an encoder item (None: no row holds it)."""
    present = mask(c.present)
    if present is False:
        return None
    hoist = key in QUEUE_KEYS
    sid = pool.sid(key)
    if c.kind == "obj" or not isinstance(c.values, np.ndarray):
        texts = [orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=str)
                 for v in c.values]
        lens = np.fromiter(map(len, texts), np.int64, len(texts))
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if len(texts) else lens
        return _item(enc.JSON_VALUE, sid, None, present, col(starts), col(lens), b"".join(texts))
    v = c.values
    if c.kind == "str":
        return _item(enc.STR, sid, col(v, np.int32), present, hoist=hoist)
    if c.kind == "hex":
        return _item(enc.HEX, sid, col(v, np.uint64), present, hoist=hoist)
    if c.kind == "vec" or v.ndim == 2:
        return _item(enc.VEC, sid, col(v, np.float64 if v.dtype.kind == "f" else None), present)
    kind = {"b": enc.BOOL, "i": enc.INT, "u": enc.UINT, "f": enc.F64}.get(v.dtype.kind)
    if kind is None:
        return None
    return _item(kind, sid, col(v, np.float64 if kind == enc.F64 else None), present, hoist=hoist)


def row_args_item(enc, row_args) -> tuple | None:
    """Per-row args objects (JSON text; ``{}`` or nothing = none) as an item of their members."""
    if isinstance(row_args, RowArgs):
        lens = np.where(row_args.lens > 2, row_args.lens, 0)
        return _item(enc.JSON_OBJECT, -1, None, None, col(row_args.starts, np.int64), col(lens, np.int64),
                     np.ascontiguousarray(row_args.blob))
    rows = [a if a and a != b"{}" else b"" for a in row_args]
    if not any(rows):
        return None
    lens = np.fromiter(map(len, rows), np.int64, len(rows))
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return _item(enc.JSON_OBJECT, -1, None, None, col(starts), col(lens), b"".join(rows))


def text_item(enc, text) -> tuple | None:
    """A ``RowText`` column (one JSON object per row) as an item of their members."""
    offsets = np.asarray(text.offsets, np.int64)
    lens = np.diff(offsets)
    if not len(lens) or not lens.any():
        return None
    return _item(enc.JSON_OBJECT, -1, None, None, col(offsets[:-1]), col(lens), text.blob)


def batch_slice_items(pool: StringPool, b: SliceBatch, enc) -> list[tuple]:
    """A slice batch's args in the Chrome writer's order: External id (when not 0), the arg columns, the
    per-row args objects."""
    items = []
    ext = b.external_id
    if not (is_constant(ext) and int(ext[0]) == 0):
        present = mask(np.asarray(ext) != 0)
        if present is not False:
            items.append(_item(enc.INT, pool.sid("External id"), col(ext, np.int64), present))
    for key, c in b.args.items():
        got = arg_column_item(pool, key, c, enc)
        if got is not None:
            items.append(got)
    if b.row_args is not None:
        got = row_args_item(enc, b.row_args)
        if got is not None:
            items.append(got)
    return items


def flat_slice_items(pool: StringPool, c: SliceColumns, enc) -> list[tuple]:
    """A read table's slice args: the typed columns under their keys, then the other members' JSON text."""
    items = []
    for group, kind in ((c.ints, enc.INT), (c.floats, enc.F64)):
        for column, (values, present) in group.items():
            p = mask(present)
            if p is False:
                continue
            key = _TYPED_KEY[column]
            items.append(_item(kind, pool.sid(key), col(values, np.float64 if kind == enc.F64 else np.int64), p,
                               hoist=key in QUEUE_KEYS))
    got = text_item(enc, c.args)
    if got is not None:
        items.append(got)
    return items


def event_rows(table: TraceTable, pool: StringPool, keys: Keys, vendor: bool) -> EventRows:
    """Every slice and instant of a one-trace table (a builder's batches as they are; a read table's flat
    columns, one set per kind)."""
    enc = _pfenc()
    out = EventRows()
    if table.builder is not None:
        for seg in table.segments:
            if isinstance(seg, BatchSegment) and seg.kind in ("slices", "instants"):
                _add_batch(out, pool, keys, seg.batch, vendor, enc)
            elif not isinstance(seg, BatchSegment) and seg.kind in ("slices", "instants"):
                _add_flat(out, pool, keys, seg.flat(), enc)  # the trace spans and the closing instant
        return out
    for kind in ("slices", "instants"):
        _add_flat(out, pool, keys, table.columns(kind, keep=False), enc)
    return out


def _add_batch(out: EventRows, pool: StringPool, keys: Keys, b, vendor: bool, enc) -> None:
    n = len(b)
    cat = np.asarray(b.vendor_cat if vendor else b.cat)
    pid, tid = keys.of_batch(b.pid, tid=False), keys.of_batch(b.tid, tid=True)
    if isinstance(b, SliceBatch):
        out.add(SLICES, n, b.ts, b.dur, col(b.name, np.int32), col(cat, np.int32), None,
                batch_slice_items(pool, b, enc), pid, tid)
    elif isinstance(b, InstantBatch):
        items = []
        if b.row_args is not None:
            got = row_args_item(enc, b.row_args)
            if got is not None:
                items.append(got)
        out.add(INSTANTS, n, b.ts, None, col(b.name, np.int32), col(np.where(cat == 0, -1, cat), np.int32),
                b.scope, items, pid, tid)


def _add_flat(out: EventRows, pool: StringPool, keys: Keys, c, enc) -> None:
    n = len(c)
    if not n:
        return
    pid, tid = keys.of_flat(c.pid, c.pid_label, c.labels), keys.of_flat(c.tid, c.tid_label, c.labels)
    name, cat = pool.ids(c.name, c.strings), pool.ids(c.cat, c.strings)
    if isinstance(c, SliceColumns):
        dur = c.dur if c.dur_present is None else np.where(np.asarray(c.dur_present, bool), c.dur, 0)
        out.add(SLICES, n, c.ts, dur, name, cat, None, flat_slice_items(pool, c, enc), pid, tid)
    elif isinstance(c, InstantColumns):
        got = text_item(enc, c.args)
        out.add(INSTANTS, n, c.ts, None, name, cat, c.scope, [got] if got is not None else [], pid, tid)


# ----------------------------------------------------------------------------- flows
@dataclass
class FlowRows:
    ts: list = field(default_factory=list)
    pid: list = field(default_factory=list)
    tid: list = field(default_factory=list)
    flow_id: list = field(default_factory=list)  # int64 ids; a row label's id in ``keys``' labels otherwise
    id_is_label: list = field(default_factory=list)
    cat: list = field(default_factory=list)  # category text per row (object arrays of few values)
    direction: list = field(default_factory=list)  # 0 out ('s'), 1 step ('t'), 2 in ('f')
    next_slice: list = field(default_factory=list)  # binds to the next slice ('f' without "bp": "e")

    def __len__(self) -> int:
        return sum(len(t) for t in self.ts)


def flow_rows(table: TraceTable, keys: Keys) -> FlowRows:
    out = FlowRows()
    if table.builder is not None:
        strings = table.builder.strings.strings
        for seg in table.segments_of("flows"):
            b: FlowBatch = seg.batch
            n = len(b)
            start = np.asarray(b.is_start, bool)
            cat_ids = np.asarray(b.cat)
            distinct = np.unique(cat_ids[:1] if is_constant(cat_ids) else cat_ids)
            text = {int(i): strings[int(i)] for i in distinct}
            out.ts.append(np.asarray(b.ts, np.int64))
            out.pid.append(np.broadcast_to(keys.of_batch(b.pid, tid=False), (n,)))
            out.tid.append(np.broadcast_to(keys.of_batch(b.tid, tid=True), (n,)))
            out.flow_id.append(np.asarray(b.flow_id, np.int64))
            out.id_is_label.append(np.zeros(n, bool))
            out.cat.append((np.broadcast_to(cat_ids, (n,)), text))
            out.direction.append(np.where(start, 0, 2).astype(np.uint8))
            out.next_slice.append(np.zeros(n, np.uint8))
        return out
    c: FlowColumns = table.columns("flows", keep=False)
    n = len(c)
    if not n:
        return out
    phase = np.asarray(c.phase)
    out.ts.append(np.asarray(c.ts, np.int64))
    out.pid.append(np.broadcast_to(keys.of_flat(c.pid, c.pid_label, c.labels), (n,)))
    out.tid.append(np.broadcast_to(keys.of_flat(c.tid, c.tid_label, c.labels), (n,)))
    id_label = np.asarray(c.id_label)
    is_label = id_label >= 0
    ids = np.asarray(c.flow_id, np.int64).copy()
    if is_label.any():
        label_keys = np.array([keys.label(t) - LABEL_BASE for t in c.labels] or [0], np.int64)
        ids[is_label] = label_keys[id_label[is_label]]
    out.flow_id.append(ids)
    out.id_is_label.append(is_label)
    cat_ids = np.asarray(c.cat)
    out.cat.append((cat_ids, {int(i): (c.strings[int(i)] if i >= 0 else "") for i in np.unique(cat_ids)}))
    out.direction.append(np.select([phase == ord("s"), phase == ord("t")], [0, 1], 2).astype(np.uint8))
    out.next_slice.append(((phase == ord("f")) & (np.asarray(c.bp) != ord("e"))).astype(np.uint8))
    return out


# ----------------------------------------------------------------------------- counters
@dataclass
class CounterRows:
    """Counter events: per event its ts, (pid, tid) keys, name and category text ids, and its metrics
    (CSR: ``offsets`` into ``metric``/``value``)."""

    ts: list = field(default_factory=list)
    pid: list = field(default_factory=list)
    tid: list = field(default_factory=list)
    name: list = field(default_factory=list)  # sids
    cat: list = field(default_factory=list)
    counts: list = field(default_factory=list)  # metrics per event
    metric: list = field(default_factory=list)  # sids, event-major
    value: list = field(default_factory=list)


def counter_rows(table: TraceTable, pool: StringPool, keys: Keys, vendor: bool) -> CounterRows:
    out = CounterRows()
    if table.builder is not None:
        for seg in table.segments_of("counters"):
            _counter_batch(out, pool, keys, seg.batch, vendor)
        return out
    c: CounterColumns = table.columns("counters", keep=False)
    if not len(c):
        return out
    order = np.asarray(c.order, np.int64)
    first = np.ones(len(c), bool)
    first[1:] = order[1:] != order[:-1]
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(c)))
    out.ts.append(np.asarray(c.ts, np.int64)[starts])
    out.pid.append(np.broadcast_to(keys.of_flat(c.pid, c.pid_label, c.labels), (len(c),))[starts])
    out.tid.append(np.broadcast_to(keys.of_flat(c.tid, c.tid_label, c.labels), (len(c),))[starts])
    out.name.append(np.broadcast_to(pool.ids(c.name, c.strings), (len(c),))[starts].astype(np.int64))
    out.cat.append(np.broadcast_to(pool.ids(c.cat, c.strings), (len(c),))[starts].astype(np.int64))
    out.counts.append(counts.astype(np.int64))
    out.metric.append(np.broadcast_to(pool.ids(c.metric, c.strings), (len(c),)).astype(np.int64))
    out.value.append(np.asarray(c.value, np.float64))
    return out


def _counter_batch(out: CounterRows, pool: StringPool, keys: Keys, b: CounterBatch, vendor: bool) -> None:
    n = len(b)
    if not n:
        return
    cat = np.broadcast_to(np.asarray(b.vendor_cat if vendor else b.cat, np.int64), (n,))
    out.ts.append(np.asarray(b.ts, np.int64))
    out.pid.append(np.broadcast_to(keys.of_batch(b.pid, tid=False), (n,)))
    out.tid.append(np.broadcast_to(keys.of_batch(b.tid, tid=True), (n,)))
    out.name.append(np.broadcast_to(np.asarray(b.name, np.int64), (n,)))
    out.cat.append(cat)
    if b.row_values is not None:  # the scalar path: one dict per row (the Chrome writer's generic path too)
        rows = [list(v.items()) for v in b.row_values]
        out.counts.append(np.fromiter(map(len, rows), np.int64, n))
        out.metric.append(np.array([pool.sid(k) for r in rows for k, _ in r], np.int64))
        out.value.append(np.array([float(v) for r in rows for _, v in r], np.float64))
        return
    names = list(b.values)
    k = len(names)
    out.counts.append(np.full(n, k, np.int64))
    out.metric.append(np.tile(np.array([pool.sid(m) for m in names], np.int64), n))
    out.value.append(np.stack([np.broadcast_to(np.asarray(b.values[m], np.float64), (n,)) for m in names], axis=1)
                     .ravel() if k else np.zeros(0, np.float64))
