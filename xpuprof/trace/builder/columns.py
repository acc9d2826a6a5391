"""The column storage of a trace: batches of numpy columns and the helpers that make them.

Each bulk call of ``TraceBuilder`` becomes one *batch* (``SliceBatch``, ``InstantBatch``,
``CounterBatch``, ``FlowBatch``) of numpy columns; args are ``ArgColumn``s. A column holding one
value in every row is stored once (``stored_once``, a stride-0 view). Also the JSON encoding of
host args (``encode_json``), which never fails on what a user passes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import orjson

from ...activity import ActivityType, category_name
from .strings import StringTable, json_safe

Row = "int | str"


# ----------------------------------------------------------------------------- arg columns
@dataclass
class ArgColumn:
    """One arg across a batch.

    ``kind``: "num" (int/float/bool ndarray, 1-D), "vec" (2-D numeric ndarray -> JSON list per
    row), "str" (int32 string ids), "hex" (uint64 ndarray written as "0x%016x" strings),
    "obj" (list of JSON-able values). ``present`` (bool ndarray) marks rows that carry the arg.
    """

    kind: str
    values: Any
    present: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.values)

    def take(self, order: np.ndarray) -> "ArgColumn":
        vals = [self.values[i] for i in order] if self.kind == "obj" else self.values[order]
        pres = None if self.present is None else self.present[order]
        return ArgColumn(self.kind, vals, pres)


def hex_column(values, present=None) -> ArgColumn:
    """An arg written as a "0x%016x" string (handles, contexts, queues), stored as uint64."""
    arr = np.asarray(values).astype(np.uint64, copy=False)
    return ArgColumn("hex", arr, None if present is None else np.asarray(present, dtype=bool))


def _to_arg_column(values, n: int, strings: StringTable) -> ArgColumn:
    if isinstance(values, ArgColumn):
        col = values
    elif isinstance(values, np.ndarray):
        if values.dtype.kind in "biuf":
            col = ArgColumn("num" if values.ndim == 1 else "vec", values)
        elif values.dtype.kind in "USO":
            if all(isinstance(v, (str, bytes)) for v in values.tolist()):
                col = ArgColumn("str", strings.intern_many(values))
            else:
                col = ArgColumn("obj", list(values.tolist()))
        else:
            raise TypeError(f"unsupported arg column dtype {values.dtype}")
    else:
        seq = list(values)
        if seq and all(isinstance(v, (str, bytes)) for v in seq):
            col = ArgColumn("str", strings.intern_many(seq))
        elif seq and all(isinstance(v, (bool, int, float, np.integer, np.floating)) for v in seq):
            col = ArgColumn("num", np.asarray(seq))
        else:
            col = ArgColumn("obj", seq)
    if len(col) != n:
        raise ValueError(f"arg column has {len(col)} rows, expected {n}")
    if col.present is not None and len(col.present) != n:
        raise ValueError("arg column mask length differs from the batch length")
    return _stored_once_arg(col)


def _own(values):
    """A column that does not pin another array: a strided view of one field of a structured
    record array would keep every record (all their fields) alive as long as the trace."""
    if isinstance(values, np.ndarray) and values.ndim in (1, 2) and len(values) and values.strides[0] != 0 \
            and values.base is not None and not values.flags.c_contiguous:
        return np.ascontiguousarray(values)
    return values


def stored_once(values, dtype=None):
    """A numeric column whose rows all hold one value, as a read-only stride-0 view of that value
    (the writer renders it once); anything else unchanged. Device rows carry many such columns
    (one device, context, grid, copy size ...): each would cost 8 B per row otherwise. ``dtype``: the
    column's type, given to the values after the check (a record field of one value is never copied whole)."""
    if not isinstance(values, np.ndarray) or values.ndim not in (1, 2) or len(values) < 2 \
            or values.dtype.kind not in "biuf" or values.strides[0] == 0:
        return values if dtype is None else np.asarray(values).astype(dtype)
    first = values[:1]
    if not (values == first).all() or \
            values.dtype.kind == "f" and np.signbit(values).any() != np.signbit(values).all():
        # (0.0 and -0.0 compare equal but are written differently)
        return values if dtype is None else values.astype(dtype)
    return np.broadcast_to(first.astype(dtype or first.dtype), values.shape)


def _stored_once_arg(col: ArgColumn) -> ArgColumn:
    if col.kind == "obj":
        return col
    present = col.present
    if isinstance(present, np.ndarray) and present.dtype == bool and len(present) and present.all():
        present = None  # every row carries it: no mask to store or test
    values = _own(stored_once(col.values))
    present = _own(present)
    if values is col.values and present is col.present:
        return col
    return ArgColumn(col.kind, values, present)


def _constant(value, n: int, dtype) -> np.ndarray:
    """One value for every row, stored once (a read-only stride-0 view)."""
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))


def _row_column(values, n: int) -> np.ndarray:
    """pid/tid column: int64 when numeric, object when any row is a string label."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        return _constant(int(values), n, np.int64)
    if isinstance(values, (str, bytes)):
        arr = np.empty(1, dtype=object)
        arr[0] = json_safe(values)
        return np.broadcast_to(arr, (n,))
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        out = arr.astype(np.int64, copy=False)
    elif arr.dtype.kind == "O" or arr.dtype.kind in "US":
        out = np.array([json_safe(v) if isinstance(v, (str, bytes)) else int(v) for v in arr.tolist()], dtype=object)
    else:
        out = arr.astype(np.int64)
    if len(out) != n:
        raise ValueError(f"pid/tid column has {len(out)} rows, expected {n}")
    return _own(stored_once(out))


def _i64(values, n: int, what: str) -> np.ndarray:
    if np.isscalar(values):
        return _constant(int(values), n, np.int64)
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        arr = np.nan_to_num(arr).astype(np.int64)
    out = arr.astype(np.int64, copy=False)
    if len(out) != n:
        raise ValueError(f"{what} has {len(out)} rows, expected {n}")
    return _own(out)


def _held(arr: np.ndarray) -> int:
    return arr[0].nbytes if arr.ndim in (1, 2) and len(arr) and arr.strides[0] == 0 else arr.nbytes


def _external_id_column(external_id, n: int) -> np.ndarray:
    """The External id column of a bulk call (0 in every row when None)."""
    return _constant(0, n, np.int64) if external_id is None else stored_once(_i64(external_id, n, "external_id"))


def batch_nbytes(batch) -> int:
    """Bytes held by one batch's columns; shared constants count once."""
    total = 0
    for v in vars(batch).values():
        if isinstance(v, np.ndarray):
            total += _held(v)
        elif isinstance(v, dict):
            for col in v.values():
                if isinstance(col, ArgColumn):
                    total += _held(col.values) if isinstance(col.values, np.ndarray) else 0
                    total += 0 if col.present is None else _held(col.present)
                elif isinstance(col, np.ndarray):
                    total += _held(col)
        elif isinstance(v, RowArgs):
            total += v.nbytes
    return total


class RowArgs:
    """Per-row args objects as JSON text in one blob (the host recorder's args area): row ``i`` is
    ``blob[starts[i]:starts[i] + lens[i]]``, a whole object, ``{}`` or nothing (length 0) meaning no
    args. Indexing and iterating give a row's bytes or None, like the list form of ``row_args``; the
    writer reads the columns as they are (no Python object per row)."""

    __slots__ = ("blob", "starts", "lens")

    def __init__(self, blob, starts: np.ndarray, lens: np.ndarray) -> None:
        self.blob = np.frombuffer(blob, dtype=np.uint8) if not isinstance(blob, np.ndarray) else blob
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lens = np.asarray(lens, dtype=np.int64)
        if self.starts.shape != self.lens.shape:
            raise ValueError(f"row args: {len(self.starts)} starts for {len(self.lens)} lengths")

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes | None:
        n = int(self.lens[i])
        if n <= 2:  # nothing, or "{}"
            return None
        start = int(self.starts[i])
        return self.blob[start:start + n].tobytes()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def inner(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each object's members without its braces: (blob, starts, lens), lens 0 = none."""
        some = self.lens > 2
        return self.blob, self.starts + some, np.where(some, self.lens - 2, 0)

    @property
    def nbytes(self) -> int:
        return self.blob.nbytes + self.starts.nbytes + self.lens.nbytes


# ----------------------------------------------------------------------------- batches
@dataclass
class SliceBatch:
    """Complete ("X") events."""

    ts: np.ndarray
    dur: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: np.ndarray  # int32 string ids
    cat: np.ndarray  # int32 ids of the generic category
    vendor_cat: np.ndarray  # int32 ids of the vendor category
    external_id: np.ndarray  # int64, 0 = none ("External id" is written first in args)
    args: dict[str, ArgColumn] = field(default_factory=dict)
    row_args: list | RowArgs | None = None  # per-row pre-encoded JSON objects (bytes or None), host events

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class InstantBatch:
    ts: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    vendor_cat: np.ndarray
    scope: np.ndarray  # 't' / 'g' / 'p' as uint8 codes
    row_args: list | None = None

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class CounterBatch:
    """"C" events: each row carries every metric in ``values`` (float64 columns)."""

    ts: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    vendor_cat: np.ndarray
    values: dict[str, np.ndarray]
    row_values: list | None = None  # scalar path: per-row dict of metric -> float

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class FlowBatch:
    """Flow arrows: "s" (start) and "f" (finish, binding "e") events."""

    flow_id: np.ndarray
    ts: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    cat: np.ndarray  # int32 ids: "ac2g", "fwdbwd", ...
    is_start: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class Span:
    name: str
    start_ns: int
    end_ns: int
    op_count: int = 0
    iteration: int = 0
    prefix: str = ""


def _category_ids(strings: StringTable, cat, vendor: str) -> tuple[int, int]:
    if isinstance(cat, ActivityType):
        return strings.intern(category_name(cat)), strings.intern(category_name(cat, vendor, vendor_spelling=True))
    text = str(cat)
    try:
        at = ActivityType.parse(text)
    except ValueError:
        sid = strings.intern(text)
        return sid, sid
    return strings.intern(category_name(at)), strings.intern(category_name(at, vendor, vendor_spelling=True))


_SCOPES = {"t": ord("t"), "g": ord("g"), "p": ord("p")}


def _encode_args(args: Mapping | None) -> bytes | None:
    if not args:
        return None
    return encode_json(args)


def _default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return _float(float(obj))
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (bytes, bytearray)):
        return json_safe(bytes(obj))
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return json_safe(obj)


def _float(x: float):
    # Kineto writes non-finite doubles as quoted strings ("inf"); JSON has no Infinity/NaN.
    return x if math.isfinite(x) else str(x)


def _clean(value):
    """Recursively make a value encodable (surrogates, non-str keys, non-finite floats)."""
    if isinstance(value, str):
        return json_safe(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, Mapping):
        return {json_safe(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    return _default(value) if not isinstance(value, (int, bool, type(None))) else value


def encode_json(value) -> bytes:
    """orjson with every escape hatch closed: always returns valid JSON bytes, exact-size (orjson's
    own result keeps a 4 KiB working buffer: ~4 KB per stored range whose args are small)."""
    try:
        text = orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    except (TypeError, ValueError, orjson.JSONEncodeError):
        text = orjson.dumps(_clean(value), default=_default, option=orjson.OPT_NON_STR_KEYS)
    return bytes(memoryview(text))


