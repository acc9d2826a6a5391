"""The flat columns of a trace table: slices, counters, flows and instants as numpy columns, strings
dictionary-encoded (docs/architecture.md, "The trace table").

Every kind shares the columns that say where and when a row is: ``rank`` (int32), ``order`` (int64: the
event's index in its rank's Kineto JSON file, the store's ``idx``), ``ts`` (int64 epoch ns), ``pid`` and
``tid`` (int64; or a row label: ``pid_label``/``tid_label`` int32 ids into ``labels``; -1 for an int row,
``NO_VALUE`` (-2) for an event without one), and
``name``/``cat`` (int32 ids into ``strings``, -1 for none). A column holding one value in every row may be
a stride-0 view (stored once).

Slices add ``dur`` (int64 ns; ``dur_present`` False where the event had none), the typed args the
analyses read (``store_schema.INT_ARGS``/``FLOAT_ARGS``: ``ints``/``floats`` by column name, each a
(values, present) pair) and every other arg as one JSON object per row (``args``, the text the Chrome
writer writes: ``RowText``). Counters are one row per (event, metric): ``metric`` (a string id) and
``value``. Flows add ``flow_id`` (``id_label`` for a string id), ``phase`` and ``bp`` (one ASCII letter
as uint8, 0 for none); instants ``scope`` and ``args``.

Nothing here needs pyarrow; ``trace.table.arrow`` converts the columns to Arrow without copying the
numeric ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Sequence

import numpy as np

from ..store_schema import FLOAT_ARGS, INT_ARGS

INT_COLUMNS = tuple(INT_ARGS.values())
FLOAT_COLUMNS = tuple(FLOAT_ARGS.values())
KINDS = ("slices", "counters", "flows", "instants")
NO_VALUE = -2  # a pid/tid/flow id label column's code for an event that has none (neither an int nor a label)


# ----------------------------------------------------------------------------- per-row JSON text
class RowText:
    """One JSON object per row in one blob: row ``i`` is ``blob[offsets[i]:offsets[i + 1]]`` (empty: none).
    The store's ``args`` column as it is (Arrow string offsets and data), no Python object per row."""

    __slots__ = ("offsets", "blob")

    def __init__(self, offsets: np.ndarray, blob: bytes) -> None:
        self.offsets = np.asarray(offsets, np.int64)
        self.blob = bytes(blob) if not isinstance(blob, bytes) else blob

    @classmethod
    def empty(cls, n: int) -> "RowText":
        return cls(constant(0, n + 1, np.int64), b"")  # no row has text: the offsets stored once

    @classmethod
    def from_rows(cls, rows: Sequence[bytes | None]) -> "RowText":
        lens = np.fromiter((0 if r is None else len(r) for r in rows), np.int64, len(rows))
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return cls(offsets, b"".join(r for r in rows if r))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes | None:
        s, e = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.blob[s:e] if e > s else None

    def present(self) -> np.ndarray:
        return self.offsets[1:] > self.offsets[:-1]

    def take(self, rows: np.ndarray) -> "RowText":
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        if not len(self.blob) or not (self.offsets[-1] > self.offsets[0]):
            return RowText.empty(len(rows))
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        return RowText.from_rows([self.blob[s:e] if e > s else None for s, e in zip(starts.tolist(), ends.tolist())])

    @staticmethod
    def concat(parts: Sequence["RowText"]) -> "RowText":
        if not any(len(p.blob) for p in parts):
            return RowText.empty(sum(len(p) for p in parts))
        offsets, blobs, base = [np.zeros(1, np.int64)], [], 0
        for p in parts:
            offsets.append(p.offsets[1:] - p.offsets[0] + base)
            blobs.append(p.blob[int(p.offsets[0]):int(p.offsets[-1])])
            base += int(p.offsets[-1] - p.offsets[0])
        return RowText(np.concatenate(offsets), b"".join(blobs))

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + len(self.blob)


# ----------------------------------------------------------------------------- the column sets
@dataclass
class Columns:
    """The columns every kind has (see the module docstring)."""

    strings: Sequence[str]
    rank: np.ndarray
    order: np.ndarray
    ts: np.ndarray
    pid: np.ndarray
    pid_label: np.ndarray
    tid: np.ndarray
    tid_label: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    labels: list[str] = field(default_factory=list)

    KIND = ""
    _STRING_IDS = ("name", "cat")  # int32 ids into ``strings``
    _LABEL_IDS = ("pid_label", "tid_label")  # int32 ids into ``labels``
    _TEXT = ()  # RowText columns

    def __len__(self) -> int:
        return len(self.ts)

    # ------------------------------------------------------------------ rows as Python values (tests, few rows)
    def text(self, column: str) -> list[str | None]:
        """A string column decoded (None where absent)."""
        ids = np.asarray(getattr(self, column)).tolist()
        table = self.labels if column in self._LABEL_IDS else self.strings
        return [None if i < 0 else table[i] for i in ids]

    def where(self, column: str) -> list:
        """``pid`` or ``tid`` per row: the int, the row's label, or None for an event without one."""
        codes = np.asarray(getattr(self, f"{column}_label")).tolist()
        labels = self.text(f"{column}_label")
        return [None if code == NO_VALUE else lb if lb is not None else v
                for v, lb, code in zip(np.asarray(getattr(self, column)).tolist(), labels, codes)]

    def numeric_columns(self) -> dict[str, np.ndarray]:
        """The columns that are plain numpy arrays (no ids, no text), by name."""
        skip = {"strings", "labels", *self._STRING_IDS, *self._LABEL_IDS, *self._TEXT}
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in skip and isinstance(v, np.ndarray):
                out[f.name] = v
        return out

    # ------------------------------------------------------------------ reshaping
    def take(self, rows: np.ndarray):
        """The rows ``rows`` selects (indices or a bool mask), same dictionaries."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        changes: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("strings", "labels"):
                continue
            if isinstance(v, RowText):
                changes[f.name] = v.take(rows)
            elif isinstance(v, np.ndarray):
                changes[f.name] = v[rows]
            elif isinstance(v, dict):
                changes[f.name] = {k: (a[rows], p[rows]) for k, (a, p) in v.items()}
        return replace(self, **changes)

    @classmethod
    def concat(cls, parts: Sequence["Columns"]):
        """One column set of the parts' rows, in order; their dictionaries merged into one."""
        parts = [p for p in parts if p is not None]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        out: dict[str, Any] = {}
        for dictionary, columns in (("strings", cls._STRING_IDS), ("labels", cls._LABEL_IDS)):
            out.update(_merged_ids(parts, dictionary, columns))
        for f in fields(cls):
            if f.name in out:
                continue
            vals = [getattr(p, f.name) for p in parts]
            if isinstance(vals[0], RowText):
                out[f.name] = RowText.concat(vals)
            elif isinstance(vals[0], dict):
                keys = list(dict.fromkeys(k for v in vals for k in v))
                out[f.name] = {k: _concat_present(vals, k, [len(p) for p in parts]) for k in keys}
            elif any(v is None for v in vals):  # an optional mask (None: every row has the value)
                out[f.name] = None if all(v is None for v in vals) else np.concatenate(
                    [np.ones(len(p), bool) if v is None else v for p, v in zip(parts, vals)])
            else:
                out[f.name] = np.concatenate(vals)
        return cls(**out)

    @classmethod
    def empty(cls):
        kw: dict[str, Any] = {"strings": [], "labels": []}
        for f in fields(cls):
            if f.name in kw:
                continue
            kw[f.name] = _EMPTY.get(f.name, lambda: np.zeros(0, np.int64))()
        return cls(**kw)

    @property
    def nbytes(self) -> int:
        total = 0
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                total += v[:1].nbytes if v.ndim and len(v) > 1 and v.strides[0] == 0 else v.nbytes
            elif isinstance(v, RowText):
                total += v.nbytes
            elif isinstance(v, dict):
                total += sum(a.nbytes + p.nbytes for a, p in v.values())
        return total


@dataclass
class SliceColumns(Columns):
    dur: np.ndarray = None  # type: ignore[assignment]
    dur_present: np.ndarray | None = None  # None: every row has its dur
    ints: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    floats: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    args: RowText = None  # type: ignore[assignment]

    KIND = "slices"
    _TEXT = ("args",)


@dataclass
class CounterColumns(Columns):
    metric: np.ndarray = None  # type: ignore[assignment]
    value: np.ndarray = None  # type: ignore[assignment]

    KIND = "counters"
    _STRING_IDS = ("name", "cat", "metric")


@dataclass
class FlowColumns(Columns):
    flow_id: np.ndarray = None  # type: ignore[assignment]
    id_label: np.ndarray = None  # type: ignore[assignment]
    phase: np.ndarray = None  # type: ignore[assignment]
    bp: np.ndarray = None  # type: ignore[assignment]

    KIND = "flows"
    _LABEL_IDS = ("pid_label", "tid_label", "id_label")


@dataclass
class InstantColumns(Columns):
    scope: np.ndarray = None  # type: ignore[assignment]
    args: RowText = None  # type: ignore[assignment]

    KIND = "instants"
    _TEXT = ("args",)


COLUMN_SETS = {"slices": SliceColumns, "counters": CounterColumns, "flows": FlowColumns, "instants": InstantColumns}

_EMPTY = {
    "rank": lambda: np.zeros(0, np.int32), "pid_label": lambda: np.zeros(0, np.int32),
    "tid_label": lambda: np.zeros(0, np.int32), "name": lambda: np.zeros(0, np.int32),
    "cat": lambda: np.zeros(0, np.int32), "metric": lambda: np.zeros(0, np.int32),
    "id_label": lambda: np.zeros(0, np.int32), "value": lambda: np.zeros(0, np.float64),
    "phase": lambda: np.zeros(0, np.uint8), "bp": lambda: np.zeros(0, np.uint8), "scope": lambda: np.zeros(0, np.uint8),
    "dur_present": lambda: None, "ints": dict, "floats": dict, "args": lambda: RowText.empty(0),
}


def _merged_ids(parts: Sequence[Columns], dictionary: str, columns: Sequence[str]) -> dict[str, Any]:
    """One dictionary (``strings`` or ``labels``) for the parts and their id columns rewritten into it, in a few
    passes over all rows, not a few per part (1,000 small traces' rows): the strings the rows use, in the
    order the parts and their ids give (the order a part-by-part merge gives); negative ids (none) kept."""
    texts = [t for p in parts for t in getattr(p, dictionary)]
    starts = np.cumsum([0] + [len(getattr(p, dictionary)) for p in parts[:-1]])
    shift = np.repeat(starts, [len(p) for p in parts])
    wide = {}
    for c in columns:
        v = np.concatenate([np.asarray(getattr(p, c)) for p in parts]).astype(np.int64)
        wide[c] = np.where(v >= 0, v + shift, v)  # an id into ``texts``
    used = np.unique(np.concatenate([v[v >= 0] for v in wide.values()])) if wide else np.zeros(0, np.int64)
    into: dict[str, int] = {}
    mapping = np.full(len(texts), -1, np.int32)
    for i in used.tolist():
        mapping[i] = into.setdefault(texts[i], len(into))
    out: dict[str, Any] = {dictionary: list(into)}
    for c, v in wide.items():
        out[c] = np.where(v >= 0, mapping[np.clip(v, 0, max(len(texts) - 1, 0))] if len(texts) else -1, v).astype(np.int32)
    return out


def _concat_present(vals: list[dict], key: str, lens: list[int]):
    arrays, present = [], []
    for v, n in zip(vals, lens):
        got = v.get(key)
        if got is None:
            arrays.append(np.zeros(n, np.int64 if key in INT_COLUMNS else np.float64))
            present.append(np.zeros(n, bool))
        else:
            arrays.append(np.asarray(got[0]))
            present.append(np.asarray(got[1], bool))
    return np.concatenate(arrays), np.concatenate(present)


def constant(value, n: int, dtype) -> np.ndarray:
    """One value for every row, stored once (a read-only stride-0 view)."""
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))
