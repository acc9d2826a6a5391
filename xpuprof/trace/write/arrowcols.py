"""Arrow columns for the store from numpy columns and from JSON args, shared by the store writer
(TraceBuilder batches) and the Kineto JSON converter, so both give a trace the same rows.

Args: the typed columns the analyses read (``store_schema.INT_ARGS``/``FLOAT_ARGS``) are split off an
args object's JSON text by the C part ``tracestream.args``; the other members stay JSON text. A row
the C part cannot split exactly (an escaped key, a typed key holding a string) is split here from
its parsed object by the same rules.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import orjson

from ..store_schema import FLOAT_ARGS, INT_ARGS

INT_KEYS = tuple(k.encode() for k in INT_ARGS)
FLOAT_KEYS = tuple(k.encode() for k in FLOAT_ARGS)
INT64_MIN = np.iinfo(np.int64).min

_UNSET = object()
_stream = _UNSET


def tracestream():
    """The C part, or None when xpuprof was built without a C compiler."""
    global _stream
    if _stream is _UNSET:
        try:
            from ..._native import tracestream as mod
        except ImportError:
            mod = None
        _stream = mod
    return _stream


# Arrays are built from buffers, never with pa.array(): pyarrow's array() imports pandas to look at its
# input (1.4 s here), which a writer or a report never needs.
def _validity(present) -> object:
    """The validity bitmap of a bool mask (None when every row is valid)."""
    import pyarrow as pa

    if present is None:
        return None
    present = np.asarray(present, bool)
    if present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little").tobytes())


def int_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [_validity(present), pa.py_buffer(v)])


def int32_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(v), [_validity(present), pa.py_buffer(v)])


def float_column(values: np.ndarray, present: np.ndarray | None = None):
    import pyarrow as pa

    v = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(v), [_validity(present), pa.py_buffer(v)])


def ints(values: Sequence[int | None]):
    """An int64 column from Python ints or None (few rows: metadata, odd events)."""
    present = np.fromiter((v is not None for v in values), bool, len(values))
    return int_column(np.fromiter((0 if v is None else v for v in values), np.int64, len(values)), present)


def strings(values: Sequence[str | None]):
    """A string column from Python strings or None."""
    encoded = [b"" if v is None else v.encode("utf-8", "replace") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    null = np.fromiter((v is None for v in values), bool, len(values))
    return string_column(offsets, b"".join(encoded), null)


def string_lists(rows: Sequence[Sequence[str]]):
    """A list<string> column."""
    import pyarrow as pa

    flat = [s for row in rows for s in row]
    offsets = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, rows), np.int32, len(rows)), out=offsets[1:])
    return pa.ListArray.from_arrays(int32_column(offsets), strings(flat))


def dict_column(ids: np.ndarray, strings_: Sequence[str], null: np.ndarray | None = None):
    """Dictionary<int32, string> from ids into ``strings_``, holding only the strings the rows use."""
    import pyarrow as pa

    ids = np.asarray(ids)
    if len(ids) == 0:
        return pa.DictionaryArray.from_arrays(int32_column(np.zeros(0, np.int32)), strings([]))
    if ids.strides and ids.strides[0] == 0:  # one value for every row
        used = np.array([int(ids[0])])
        local = np.zeros(len(ids), np.int32)
    else:
        used = np.flatnonzero(np.bincount(ids, minlength=1))
        remap = np.zeros(int(used[-1]) + 1 if len(used) else 1, np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        local = remap[ids]
    dictionary = strings([strings_[i] for i in used.tolist()])
    return pa.DictionaryArray.from_arrays(int32_column(local, None if null is None else ~np.asarray(null, bool)),
                                          dictionary)


def text_dict_column(values: Sequence[str | None]):
    """Dictionary<int32, string> from Python strings or None (few rows: metadata, odd events)."""
    codes: dict[str, int] = {}
    idx = np.fromiter((-1 if v is None else codes.setdefault(v, len(codes)) for v in values), np.int64, len(values))
    null = idx < 0
    return dict_column(np.maximum(idx, 0), list(codes) or [""], null=null if null.any() else None)


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
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(blob),
                                       validity)


def where_columns(values: np.ndarray, *, tid: bool = False):
    """pid/tid: (int64 column, label column): ints in the first, any other value (a string row label)
    as text in the second. tids are sanitized as the JSON writer writes them (Kineto's sanitizeTid)."""
    import pyarrow as pa

    values = np.asarray(values)
    n = len(values)
    if values.dtype == object and n > 1 and values.strides[0] == 0:  # one label for every row
        is_int, v = _where_value(values[0], tid)
        if is_int:
            return int_column(np.full(n, v, np.int64)), None
        return pa.nulls(n, pa.int64()), dict_column(np.zeros(n, np.int64), [v])
    if values.dtype != object:
        v = values.astype(np.int64, copy=False)
        if tid and len(v) and v.min() < 0:
            v = np.where(v == INT64_MIN, 0, np.abs(v))
        return int_column(v), None
    ints = np.zeros(n, np.int64)
    is_int = np.zeros(n, bool)
    labels: list[str | None] = [None] * n
    codes: dict = {}
    for i, x in enumerate(values.tolist()):  # object rows are row labels ("Spans"): few distinct values
        got = codes.get(x)
        if got is None:
            got = codes[x] = _where_value(x, tid)
        if got[0]:
            ints[i], is_int[i] = got[1], True
        else:
            labels[i] = got[1]
    label_col = None if is_int.all() else text_dict_column(labels)
    return int_column(ints, is_int), label_col


def _where_value(x, tid: bool) -> tuple[bool, Any]:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        x = int(x)
        if tid:
            x = 0 if x == INT64_MIN else abs(x)
        return True, x
    return False, x if isinstance(x, str) else orjson.dumps(x).decode()


# ----------------------------------------------------------------------------- args
def _typed_value(value, as_int: bool):
    """A typed column's value from a parsed JSON value, or None (then it stays in the JSON text).
    Integral strings count as ints, as HTA reads "stream"."""
    if isinstance(value, bool) or value is None:
        return None
    if as_int:
        if isinstance(value, int):
            return value if -(1 << 63) <= value < (1 << 63) else None
        if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
            return int(value)
        if isinstance(value, str):
            try:
                v = int(value.strip())
            except ValueError:
                return None
            return v if -(1 << 63) <= v < (1 << 63) else None
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def split_args_dict(args: dict | None) -> tuple[dict[str, int], dict[str, float], bytes | None]:
    """(typed int values by column, typed float values by column, the other members as JSON or None)."""
    if not isinstance(args, dict) or not args:
        return {}, {}, None
    ints, floats, rest = {}, {}, {}
    for k, v in args.items():
        col = INT_ARGS.get(k)
        if col is not None and col not in ints:
            got = _typed_value(v, True)
            if got is not None:
                ints[col] = got
                continue
        col = FLOAT_ARGS.get(k)
        if col is not None and col not in floats:
            got = _typed_value(v, False)
            if got is not None:
                floats[col] = got
                continue
        rest[k] = v
    return ints, floats, (orjson.dumps(rest) if rest else None)


class ArgColumns:
    """The typed args columns and the rest, for n rows, filled from JSON text or parsed objects."""

    def __init__(self, n: int) -> None:
        self.n = n
        # one row per column (column-major: each column contiguous for Arrow)
        self.ints = np.zeros((len(INT_ARGS), n), np.int64)
        self.int_present = np.zeros((len(INT_ARGS), n), bool)
        self.floats = np.zeros((len(FLOAT_ARGS), n), np.float64)
        self.float_present = np.zeros((len(FLOAT_ARGS), n), bool)
        self.rest_offsets = np.zeros(n + 1, np.int64)
        self.rest_blob = b""

    @classmethod
    def from_text(cls, buf, spans: np.ndarray) -> "ArgColumns":
        """Rows from the JSON objects at ``spans`` (int64 [n, 2] byte ranges of ``buf``; -1: none)."""
        n = len(spans)
        out = cls(n)
        mod = tracestream()
        spans = np.ascontiguousarray(spans, np.int64).reshape(n, 2)
        if mod is None:
            raw = bytes(buf)
            out._fill_from_dicts([orjson.loads(raw[s:e]) if s >= 0 else None for s, e in spans.tolist()])
            return out
        iv, ip, fv, fp, off, blob, cx = mod.args(buf, spans, INT_KEYS, FLOAT_KEYS, ())
        out.ints = np.frombuffer(iv, np.int64).reshape(n, len(INT_ARGS)).T.copy()
        out.int_present = np.frombuffer(ip, np.uint8).reshape(n, len(INT_ARGS)).T.astype(bool)
        out.floats = np.frombuffer(fv, np.float64).reshape(n, len(FLOAT_ARGS)).T.copy()
        out.float_present = np.frombuffer(fp, np.uint8).reshape(n, len(FLOAT_ARGS)).T.astype(bool)
        out.rest_offsets = np.frombuffer(off, np.int64)
        out.rest_blob = blob
        odd = np.flatnonzero(np.frombuffer(cx, np.uint8))
        if len(odd):
            raw = memoryview(buf)
            out.replace_rows(odd, [orjson.loads(bytes(raw[s:e])) for s, e in spans[odd].tolist()])
        return out

    @classmethod
    def from_dicts(cls, objects: Sequence[dict | None]) -> "ArgColumns":
        out = cls(len(objects))
        out._fill_from_dicts(objects)
        return out

    def _fill_from_dicts(self, objects: Sequence[dict | None]) -> None:
        self.replace_rows(np.arange(len(objects)), objects)

    def replace_rows(self, rows: np.ndarray, objects: Sequence[dict | None]) -> None:
        """Rows ``rows`` from parsed args objects (odd rows; every row for the pure-Python path)."""
        int_cols, float_cols = list(INT_ARGS.values()), list(FLOAT_ARGS.values())
        rests: dict[int, bytes] = {}
        for r, obj in zip(rows.tolist(), objects):
            ints, floats, rest = split_args_dict(obj)
            self.int_present[:, r] = False
            self.float_present[:, r] = False
            for j, c in enumerate(int_cols):
                if c in ints:
                    self.ints[j, r], self.int_present[j, r] = ints[c], True
            for j, c in enumerate(float_cols):
                if c in floats:
                    self.floats[j, r], self.float_present[j, r] = floats[c], True
            rests[r] = rest or b""
        lens = np.diff(self.rest_offsets)
        pieces = []
        blob = memoryview(self.rest_blob)
        prev = 0
        for r in sorted(rests):  # rebuild the blob with the replaced rows' text
            pieces.append(blob[self.rest_offsets[prev]:self.rest_offsets[r]])
            pieces.append(rests[r])
            lens[r] = len(rests[r])
            prev = r + 1
        pieces.append(blob[self.rest_offsets[prev]:])
        self.rest_blob = b"".join(pieces)
        self.rest_offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)

    def set_int(self, column: str, values: np.ndarray, present: np.ndarray | None) -> None:
        j = list(INT_ARGS.values()).index(column)
        self.ints[j] = values
        self.int_present[j] = True if present is None else present

    def set_float(self, column: str, values: np.ndarray, present: np.ndarray | None) -> None:
        j = list(FLOAT_ARGS.values()).index(column)
        self.floats[j] = values
        self.float_present[j] = True if present is None else present

    def arrow(self) -> dict[str, Any]:
        """The typed columns and ``args`` as Arrow arrays (by column name; None: every row null)."""
        out: dict[str, Any] = {}
        for j, c in enumerate(INT_ARGS.values()):
            present = self.int_present[j]
            out[c] = int_column(self.ints[j], present) if present.any() else None
        for j, c in enumerate(FLOAT_ARGS.values()):
            present = self.float_present[j]
            out[c] = float_column(self.floats[j], present) if present.any() else None
        out["args"] = string_column(self.rest_offsets, self.rest_blob) if len(self.rest_blob) else None
        return out
