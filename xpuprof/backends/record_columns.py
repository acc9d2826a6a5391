"""The column decode every vendor's records stage can use: fixed-layout records of several kinds,
back to back in vendor buffers, straight into one typed column per field (C: ``_native.records``).

``ColumnPlan`` says, per record kind, which fields to take (with the record's numpy layout) and
which field starts/ends a record (for the capture window and the order check). ``decode_columns``
runs it over every buffer in two C passes: count (the kept records of each kind, so every column
is allocated once at its final size) and fill (each buffer's records into the columns, the buffer
released as soon as it is read). Integer fields are widened to int64 on the way (pointers and
handles, named ``unsigned``, to uint64); byte arrays stay bytes. No record is copied whole, no
column is converted afterwards.

``RecordColumns`` is what comes out for one kind: field -> column, readable like the structured
array the records would make (``cols["_start_timestamp"]``, ``cols[mask]``, ``len(cols)``).

Where the C part is not built, the same columns come from numpy (slower; the result is equal).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

FLAG_SIGNED, FLAG_BYTES = 1, 2

_UNSET = object()
_native_module = _UNSET


def _native():
    """The C records module, or None when it is not built."""
    global _native_module
    if _native_module is _UNSET:
        from .. import _native as c_parts

        records = c_parts.optional("records")
        _native_module = records
    return _native_module


class RecordColumns:
    """One record kind as columns: ``cols[field]`` is a column, ``cols[mask]`` the kept rows."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: Mapping[str, np.ndarray], n: int | None = None) -> None:
        self.columns = dict(columns)
        self.n = int(n if n is not None else (len(next(iter(self.columns.values()))) if self.columns else 0))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key):
        if isinstance(key, str):
            return self.columns[key]
        key = np.asarray(key)
        n = int(np.count_nonzero(key)) if key.dtype == bool else len(key)
        return RecordColumns({name: col[key] for name, col in self.columns.items()}, n)

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)


@dataclass(frozen=True)
class KindPlan:
    """One record kind: its layout, the fields taken, the fields that start and end a record."""

    kind: int
    layout: np.dtype  # the record's structured dtype (offsets, itemsize)
    fields: tuple[str, ...]
    start: str | None = None  # None: not windowed, no order check
    end: str | None = None


def column_dtype(sub: np.dtype, name: str, unsigned: frozenset[str]) -> tuple[np.dtype, int]:
    """(column dtype, plan flags) of one record field."""
    if sub.kind == "S" or sub.subdtype is not None:
        return sub, FLAG_BYTES
    if sub.kind not in "iu":
        raise TypeError(f"field {name}: only integer and byte fields can be decoded to columns, not {sub}")
    if name in unsigned:
        return np.dtype(np.uint64), 0
    return np.dtype(np.int64), FLAG_SIGNED if sub.kind == "i" else 0


class ColumnPlan:
    """The int64 plan ``_native.records`` reads, and the columns it fills (see the module docstring)."""

    def __init__(self, kinds: Iterable[KindPlan], unsigned: Iterable[str] = ()) -> None:
        self.kinds = list(kinds)
        self.unsigned = frozenset(unsigned)
        self.slot = {k.kind: i for i, k in enumerate(self.kinds)}
        self.columns: list[tuple[int, str, np.dtype]] = []  # (slot, field, column dtype), by column index
        words = [len(self.kinds)]
        for s, k in enumerate(self.kinds):
            start = k.layout.fields[k.start][1] if k.start else -1
            end = k.layout.fields[k.end][1] if k.end else -1
            words += [k.kind, k.layout.itemsize, start, end, len(k.fields)]
            for name in k.fields:
                sub, off = k.layout.fields[name][:2]
                dt, flags = column_dtype(sub, name, self.unsigned)
                width = sub.itemsize
                words += [off, width, len(self.columns), width if flags & FLAG_BYTES else dt.itemsize, flags]
                self.columns.append((s, name, dt))
        self.array = np.array(words, np.int64)

    def allocate(self, rows: Sequence[int]) -> list[np.ndarray]:
        """One empty column per plan column, ``rows[slot]`` rows each (pages are committed as they
        are written, so memory grows as buffers are released)."""
        return [np.empty(rows[s], dt) for s, _name, dt in self.columns]

    def assemble(self, outs: list[np.ndarray], rows: Sequence[int]) -> dict[int, RecordColumns]:
        by_slot: list[dict[str, np.ndarray]] = [{} for _ in self.kinds]
        for (s, name, _dt), col in zip(self.columns, outs):
            by_slot[s][name] = col
        return {k.kind: RecordColumns(by_slot[s], rows[s]) for s, k in enumerate(self.kinds) if rows[s]}

    def empty(self, kind: int) -> RecordColumns:
        s = self.slot[int(kind)]
        return RecordColumns({name: np.empty(0, dt) for slot, name, dt in self.columns if slot == s}, 0)


@dataclass
class ColumnDecode:
    """What ``decode_columns`` found: the columns by kind and the counts of what it did not keep."""

    by_kind: dict[int, RecordColumns] = field(default_factory=dict)
    unknown: dict[int, int] = field(default_factory=dict)  # kinds the plan lacks -> records
    out_of_window: dict[int, int] = field(default_factory=dict)  # kind -> records outside the window
    misordered: dict[int, int] = field(default_factory=dict)  # kind -> records ending before they start
    buffers: int = 0


Window = tuple[int, int, int]  # (lo, hi, clock offset): kept when lo <= start + offset <= hi


def decode_columns(buffers: list, locate: Callable[[bytes], np.ndarray], plan: ColumnPlan, *,
                   window: Window | None = None, release: bool = False,
                   error: type[Exception] = ValueError) -> ColumnDecode:
    """Decode every buffer's records into the plan's columns (two C passes; numpy without C).
    ``locate(buffer)`` gives the records' uint64 offsets. ``release``: the caller hands ``buffers``
    over; each entry is set to None once read. ``error``: raised (with C's message) for a record
    that runs past its buffer's end."""
    native = _native()
    out = ColumnDecode(buffers=len(buffers))
    nslots = len(plan.kinds)
    kept = np.zeros(nslots, np.int64)
    dropped = np.zeros(nslots, np.int64)
    misordered = np.zeros(nslots, np.int64)
    located = []
    for buf in buffers:  # pass 1: locate and count; nothing is copied
        offsets = np.ascontiguousarray(locate(buf), np.uint64)
        try:
            if native is None:
                counts, unknown = _count_numpy(buf, offsets, plan, window)
            else:
                raw, unknown = native.plan_count(buf, offsets, plan.array, window)
                counts = np.frombuffer(raw, np.int64).reshape(nslots, 3)
        except ValueError as exc:  # a record that does not fit its buffer, with C's or numpy's words
            raise error(str(exc)) from None
        kept += counts[:, 0]
        dropped += counts[:, 1]
        misordered += counts[:, 2]
        for kind, n in unknown.items():
            out.unknown[int(kind)] = out.unknown.get(int(kind), 0) + int(n)
        located.append(offsets)
    rows = kept.tolist()
    outs = plan.allocate(rows)
    pos = np.zeros(nslots, np.int64)
    for i in range(len(buffers)):  # pass 2: every buffer's records into the columns
        if native is None:
            _fill_numpy(buffers[i], located[i], plan, outs, pos, window)
        else:
            native.plan_fill(buffers[i], located[i], plan.array, outs, pos, window)
        located[i] = None
        if release:
            buffers[i] = None
    out.by_kind = plan.assemble(outs, rows)
    for s, k in enumerate(plan.kinds):
        if dropped[s]:
            out.out_of_window[k.kind] = int(dropped[s])
        if misordered[s]:
            out.misordered[k.kind] = int(misordered[s])
    return out


# ----------------------------------------------------------------------------- numpy fallback
def _records_of(buf, offsets: np.ndarray, k: KindPlan) -> np.ndarray:
    raw = np.frombuffer(buf, np.uint8)
    size = k.layout.itemsize
    if len(offsets) and int(offsets.max()) + size > len(raw):
        raise ValueError(f"truncated PTI buffer: a {size}-byte record at offset {int(offsets.max())} runs past the "
                         f"buffer's end ({len(raw)} bytes)")
    idx = offsets.astype(np.intp)[:, None] + np.arange(size, dtype=np.intp)
    return np.ascontiguousarray(raw[idx]).view(k.layout).reshape(len(offsets))


def _kinds_at(buf, offsets: np.ndarray) -> np.ndarray:
    raw = np.frombuffer(buf, np.uint8)
    o = offsets.astype(np.intp)
    return (raw[o].astype(np.uint32) | raw[o + 1].astype(np.uint32) << 8
            | raw[o + 2].astype(np.uint32) << 16 | raw[o + 3].astype(np.uint32) << 24)


def _window_mask(recs: np.ndarray, k: KindPlan, window: Window | None) -> np.ndarray:
    if k.start is None or window is None or window[0] > window[1]:
        return np.ones(len(recs), bool)
    t = recs[k.start].astype(np.int64) + np.int64(window[2])
    return (t >= window[0]) & (t <= window[1])


def _count_numpy(buf, offsets, plan: ColumnPlan, window):
    kinds = _kinds_at(buf, offsets)
    counts = np.zeros((len(plan.kinds), 3), np.int64)
    for s, k in enumerate(plan.kinds):
        recs = _records_of(buf, offsets[kinds == k.kind], k)
        keep = _window_mask(recs, k, window)
        counts[s] = (int(keep.sum()), len(recs) - int(keep.sum()),
                     int((recs[k.end] < recs[k.start]).sum()) if k.start else 0)
    other = ~np.isin(kinds, [k.kind for k in plan.kinds])
    uniq, n = np.unique(kinds[other], return_counts=True)
    return counts, dict(zip(uniq.tolist(), n.tolist()))


def _fill_numpy(buf, offsets, plan: ColumnPlan, outs, pos, window) -> None:
    kinds = _kinds_at(buf, offsets)
    for s, k in enumerate(plan.kinds):
        recs = _records_of(buf, offsets[kinds == k.kind], k)
        recs = recs[_window_mask(recs, k, window)]
        at = int(pos[s])
        for (slot, name, dt), col in zip(plan.columns, outs):
            if slot == s:
                col[at:at + len(recs)] = recs[name].astype(dt) if dt.kind in "iu" else recs[name]
        pos[s] = at + len(recs)
