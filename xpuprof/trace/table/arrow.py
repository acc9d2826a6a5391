"""Flat columns to Arrow and back, numeric columns without a copy (pyarrow imported here only).

``to_arrow`` gives the store's columns (``store_schema.COLUMNS``, less the partition's rank): int64 and
float64 columns wrap the numpy buffers as they are (a stride-0 constant is expanded: Arrow has no such
array), string ids become dictionary<int32, string> columns holding only the strings used, row labels
their own dictionary columns, per-row JSON text a string column straight from its blob and offsets.
``from_arrow`` reads those columns back (``trace.read.store_table``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..store_schema import COLUMNS
from .columns import (FLOAT_COLUMNS, INT_COLUMNS, Columns, CounterColumns, FlowColumns, InstantColumns, RowText,
                      SliceColumns)

_LETTERS = ("phase", "bp", "scope")


# ----------------------------------------------------------------------------- numpy -> Arrow
def _validity(present):
    import pyarrow as pa

    if present is None:
        return None
    present = np.asarray(present, bool)
    if present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little").tobytes())


def _own(values: np.ndarray, dtype) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim and len(values) > 1 and values.strides[0] == 0:  # a constant: Arrow wants every row
        return np.full(len(values), values[0], dtype)
    return np.ascontiguousarray(values, dtype=dtype)


def int_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = _own(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [_validity(present), pa.py_buffer(v)])


def int32_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = _own(values, np.int32)
    return pa.Array.from_buffers(pa.int32(), len(v), [_validity(present), pa.py_buffer(v)])


def float_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = _own(values, np.float64)
    return pa.Array.from_buffers(pa.float64(), len(v), [_validity(present), pa.py_buffer(v)])


def string_column(offsets: np.ndarray, blob: bytes, null: np.ndarray | None = None):
    """A string column straight from one blob and n + 1 offsets; empty rows are null."""
    import pyarrow as pa

    offsets = np.asarray(offsets, np.int64)
    n = len(offsets) - 1
    if null is None:
        null = offsets[1:] == offsets[:-1]
    validity = None
    if null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little").tobytes())
    if len(blob) >= (1 << 31) - 1:
        raise ValueError("one chunk of args text exceeds 2 GiB; write smaller chunks")
    return pa.StringArray.from_buffers(n, pa.py_buffer((offsets - offsets[0]).astype(np.int32).tobytes()),
                                       pa.py_buffer(blob[int(offsets[0]):int(offsets[-1])] if n else b""),
                                       validity)


def strings(values: Sequence[str | None]):
    """A string column from Python strings or None."""
    encoded = [b"" if v is None else v.encode("utf-8", "replace") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    null = np.fromiter((v is None for v in values), bool, len(values))
    return string_column(offsets, b"".join(encoded), null)


def ints(values: Sequence[int | None]):
    """An int64 column from Python ints or None (few rows: metadata, odd events)."""
    present = np.fromiter((v is not None for v in values), bool, len(values))
    return int_column(np.fromiter((0 if v is None else v for v in values), np.int64, len(values)), present)


def string_lists(rows: Sequence[Sequence[str]]):
    """A list<string> column."""
    import pyarrow as pa

    flat = [s for row in rows for s in row]
    offsets = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, rows), np.int32, len(rows)), out=offsets[1:])
    return pa.ListArray.from_arrays(int32_column(offsets), strings(flat))


def text_dict_column(values: Sequence[str | None]):
    """Dictionary<int32, string> from Python strings or None (few rows: metadata, odd events)."""
    codes: dict[str, int] = {}
    idx = np.fromiter((-1 if v is None else codes.setdefault(v, len(codes)) for v in values), np.int64, len(values))
    return dict_column(idx, list(codes) or [""])


def dict_column(ids: np.ndarray, strings_: Sequence[str], null: np.ndarray | None = None):
    """Dictionary<int32, string> from ids into ``strings_`` (-1 or ``null``: no value), holding only the
    strings the rows use."""
    import pyarrow as pa

    ids = np.asarray(ids)
    if null is None:
        null = ids < 0
    elif null is not None:
        null = np.asarray(null, bool) | (ids < 0)
    if len(ids) == 0:
        return pa.DictionaryArray.from_arrays(int32_column(np.zeros(0, np.int32)), strings([]))
    if ids.strides and ids.strides[0] == 0:  # one value for every row
        used = np.array([max(int(ids[0]), 0)])
        local = np.zeros(len(ids), np.int32)
    else:
        safe = np.maximum(ids, 0)
        used = np.flatnonzero(np.bincount(safe, minlength=1))
        remap = np.zeros(int(used[-1]) + 1 if len(used) else 1, np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        local = remap[safe]
    dictionary = strings([strings_[i] if 0 <= i < len(strings_) else "" for i in used.tolist()])
    return pa.DictionaryArray.from_arrays(int32_column(local, None if not null.any() else ~null), dictionary)


def letters_column(codes: np.ndarray):
    """A one-letter column from byte codes (0: none)."""
    codes = np.asarray(codes, np.uint8)
    letters = [chr(x) for x in np.unique(codes).tolist() if x]
    if not letters:
        return None
    lookup = np.zeros(256, np.int32)
    lookup[[ord(x) for x in letters]] = np.arange(len(letters), dtype=np.int32)
    return dict_column(np.where(codes == 0, -1, lookup[codes]), letters)


def to_arrow_columns(c: Columns) -> dict[str, Any]:
    """The store table's columns (by store column name; None: every row null) of a flat column set; the
    ``idx`` column is the rows' ``order``."""
    out: dict[str, Any] = {"idx": int_column(c.order), "ts": None}
    for key in ("pid", "tid"):
        codes = np.asarray(getattr(c, f"{key}_label"))
        is_int = codes == -1
        out[key] = int_column(getattr(c, key), is_int) if is_int.any() else None
        out[f"{key}_label"] = dict_column(codes, c.labels) if (codes >= 0).any() else None
    out["name"] = dict_column(c.name, c.strings)
    out["cat"] = dict_column(c.cat, c.strings)
    if isinstance(c, SliceColumns):
        out["dur"] = int_column(c.dur, c.dur_present)
        for col in INT_COLUMNS:
            got = c.ints.get(col)
            out[col] = None if got is None or not np.asarray(got[1]).any() else int_column(*got)
        for col in FLOAT_COLUMNS:
            got = c.floats.get(col)
            out[col] = None if got is None or not np.asarray(got[1]).any() else float_column(*got)
        out["args"] = string_column(c.args.offsets, c.args.blob) if len(c.args.blob) else None
    elif isinstance(c, CounterColumns):
        out["metric"] = dict_column(c.metric, c.strings)
        out["value"] = float_column(c.value)
    elif isinstance(c, FlowColumns):
        codes = np.asarray(c.id_label)
        id_int = codes == -1
        out["id"] = int_column(c.flow_id, id_int) if id_int.any() else None
        out["id_label"] = dict_column(codes, c.labels) if (codes >= 0).any() else None
        out["phase"] = letters_column(c.phase)
        out["bp"] = letters_column(c.bp)
    elif isinstance(c, InstantColumns):
        out["scope"] = letters_column(c.scope)
        out["args"] = string_column(c.args.offsets, c.args.blob) if len(c.args.blob) else None
    return out


def to_arrow(c: Columns, *, base_time_ns: int = 0):
    """A pyarrow Table of the flat columns: the store's columns, ``ts`` as ns after ``base_time_ns``, plus
    the ``rank`` column."""
    import pyarrow as pa

    cols = to_arrow_columns(c)
    cols["ts"] = int_column(np.asarray(c.ts, np.int64) - np.int64(base_time_ns))
    names = ["rank"] + [name for name, _ in COLUMNS[c.KIND]]
    arrays = [int32_column(c.rank)] + [cols.get(name) for name in names[1:]]
    from ..store_schema import arrow_type

    types = [pa.int32()] + [arrow_type(kind) for _, kind in COLUMNS[c.KIND]]
    arrays = [pa.nulls(len(c), t) if a is None else a for a, t in zip(arrays, types)]
    return pa.Table.from_arrays(arrays, names=names)


# ----------------------------------------------------------------------------- Arrow -> numpy
_NUMPY = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32, "double": np.float64}


def to_numpy(arr, fill=None) -> np.ndarray:
    """An Arrow array's values as numpy, from its buffer (no pandas): nulls hold ``fill`` when given."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    dtype = _NUMPY.get(str(arr.type))
    if dtype is None:
        raise TypeError(f"not a numeric Arrow column: {arr.type}")
    if len(arr) == 0:
        return np.zeros(0, dtype)
    data = arr.buffers()[1]
    values = np.frombuffer(data, dtype=dtype)[arr.offset:arr.offset + len(arr)]
    if arr.null_count and fill is not None:
        values = np.where(valid(arr), values, fill).astype(dtype)
    return values


def valid(arr) -> np.ndarray:
    """The rows of an Arrow array that hold a value."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not arr.null_count:
        return np.ones(len(arr), bool)
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].astype(bool)


def dict_ids(arr) -> tuple[np.ndarray, list[str]]:
    """A dictionary (or string) column as (int32 ids, -1 for null; the dictionary's strings)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else (arr.chunk(0) if arr.num_chunks else
                                                               pa.array([], pa.dictionary(pa.int32(), pa.string())))
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    ids = to_numpy(arr.indices).astype(np.int32)
    if arr.null_count:
        ids = np.where(valid(arr), ids, -1).astype(np.int32)
    return ids, arr.dictionary.to_pylist()


def row_text(arr) -> RowText:
    """A string column as RowText (null: none)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else (arr.chunk(0) if arr.num_chunks else pa.array([], pa.string()))
    n = len(arr)
    if n == 0 or arr.null_count == n:
        return RowText.empty(n)
    if pa.types.is_large_string(arr.type):
        offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + n + 1]
    else:
        offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    blob = arr.buffers()[2].to_pybytes() if arr.buffers()[2] is not None else b""
    if arr.null_count:
        keep = valid(arr)
        lens = np.where(keep, np.diff(offsets), 0)
        if not keep.all():
            starts = offsets[:-1]
            rows = [blob[s:s + n_] if n_ else None for s, n_ in zip(starts.tolist(), lens.tolist())]
            return RowText.from_rows(rows)
    return RowText(offsets - offsets[0], blob[int(offsets[0]):int(offsets[-1])])
