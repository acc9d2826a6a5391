"""Vectorized JSON value rendering: numpy columns -> (rows, width) uint8 matrices of JSON text.

Every renderer returns a space-padded fixed-width matrix, one row per value (whitespace around a
JSON value is legal), so a whole event row can be assembled with column-slice copies and no
Python object per event. Digits come from table gathers (4 digits per lookup).
"""
from __future__ import annotations

import numpy as np
import orjson

SPACE = 32
MINUS = ord("-")
_D4 = np.frombuffer(b"".join(b"%04d" % i for i in range(10000)), dtype=np.uint32)  # "0000".."9999"
_D4_SPACED = np.frombuffer(b"".join(b"%4d" % i for i in range(10000)), dtype=np.uint32)  # "   0".."9999"
_D3 = np.frombuffer(b"".join(b"%03d" % i for i in range(1000)), dtype=np.uint8).reshape(1000, 3)
_POW10 = np.array([10 ** k for k in range(1, 20)], dtype=np.uint64)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)
_BOOL = np.frombuffer(b"falsetrue ", dtype=np.uint8).reshape(2, 5)
INT64_MIN = np.iinfo(np.int64).min


def literal(text: bytes) -> np.ndarray:
    """A one-row matrix (broadcasts over every row)."""
    return np.frombuffer(text, dtype=np.uint8).reshape(1, len(text))


def ndigits(a: np.ndarray) -> np.ndarray:
    """Decimal digit count of each uint64 (0 has one digit)."""
    return np.searchsorted(_POW10, a, side="right") + 1


def uint_matrix(a: np.ndarray, lead: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Right-aligned decimal digits of a uint64 column, ``lead`` spare columns in front."""
    a = np.asarray(a).astype(np.uint64, copy=False)
    n = len(a)
    top = int(a.max()) if n else 0
    width = len(str(top))
    if top < 10000:  # one table gather, already space padded
        out = np.empty((n, lead + width), dtype=np.uint8)
        out[:, :lead] = SPACE
        out[:, lead:] = _D4_SPACED[a.astype(np.intp)].view(np.uint8).reshape(n, 4)[:, 4 - width:]
        return out, ndigits(a)
    groups = (width + 3) // 4
    quads = np.empty((n, groups), dtype=np.uint32)
    rest = a
    for g in range(groups - 1, 0, -1):
        high = rest // np.uint64(10000)  # `//` by a scalar is vectorized (libdivide); divmod is not
        quads[:, g] = _D4[(rest - high * np.uint64(10000)).astype(np.intp)]
        rest = high
    quads[:, 0] = _D4[rest.astype(np.intp)]
    digits = quads.view(np.uint8).reshape(n, 4 * groups)[:, 4 * groups - width:]
    nd = ndigits(a)
    out = np.empty((n, lead + width), dtype=np.uint8)
    out[:, :lead] = SPACE
    out[:, lead:] = np.where(np.arange(width) < (width - nd)[:, None], np.uint8(SPACE), digits)
    return out, nd


def int_matrix(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    if len(v) > 1 and v.dtype.kind in "iu" and v.min() == v.max():  # one value: render it once
        return int_matrix(v[:1])
    if v.dtype.kind == "u":
        return uint_matrix(v)[0]
    v = v.astype(np.int64, copy=False)
    neg = v < 0
    if not neg.any():
        return uint_matrix(v.view(np.uint64))[0]
    out, nd = uint_matrix(np.abs(v).view(np.uint64), lead=1)  # abs(INT64_MIN) reads as 2**63 unsigned
    rows = np.flatnonzero(neg)
    out[rows, out.shape[1] - 1 - nd[rows]] = MINUS
    return out


def micros_matrix(ns: np.ndarray) -> np.ndarray:
    """Non-negative int64 ns -> ``<ns // 1000>.<ns % 1000:03d>`` (µs, exactly 3 decimals)."""
    ns = np.asarray(ns, dtype=np.int64)
    q = ns // np.int64(1000)
    r = ns - q * np.int64(1000)
    whole, _ = uint_matrix(q.view(np.uint64))
    n, w = whole.shape
    out = np.empty((n, w + 4), dtype=np.uint8)
    out[:, :w] = whole
    out[:, w] = ord(".")
    out[:, w + 1:] = _D3[r.astype(np.intp)]
    return out


def ragged_matrix(blob: np.ndarray, starts: np.ndarray, lens: np.ndarray, min_width: int = 1) -> np.ndarray:
    """Rows ``blob[starts[i] : starts[i] + lens[i]]``, left-aligned and space-padded."""
    n = len(starts)
    width = max(int(lens.max()) if n else 0, min_width)
    if n == 0:
        return np.empty((0, width), dtype=np.uint8)
    if not len(blob):
        return np.full((n, width), SPACE, np.uint8)
    itype = np.int32 if len(blob) + width < (1 << 31) else np.int64  # halves index traffic
    cols = np.arange(width, dtype=itype)
    idx = starts.astype(itype)[:, None] + cols
    np.minimum(idx, itype(len(blob) - 1), out=idx)
    return np.where(cols >= lens.astype(itype)[:, None], np.uint8(SPACE), blob[idx])


def _nonfinite_token(x: float) -> bytes:
    return orjson.dumps(str(float(x)))  # "nan" / "inf" / "-inf", Kineto's quoted form


def float_matrix(x: np.ndarray) -> np.ndarray:
    """Shortest round-trip floats (orjson's formatting); non-finite values as quoted strings."""
    x = np.ascontiguousarray(x, dtype=np.float64)  # orjson serializes only C-contiguous arrays (a sliced column is not)
    n = len(x)
    finite = np.isfinite(x)
    all_finite = bool(finite.all())
    text = orjson.dumps(x if all_finite else np.where(finite, x, 0.0), option=orjson.OPT_SERIALIZE_NUMPY)
    body = np.frombuffer(text, dtype=np.uint8)[1:-1]
    commas = np.flatnonzero(body == 44)
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    if n:
        starts[0] = 0
        starts[1:] = commas + 1
        ends[:-1] = commas
        ends[-1] = len(body)
    out = ragged_matrix(body, starts, ends - starts, min_width=1 if all_finite else 6)
    if not all_finite:
        for row in np.flatnonzero(~finite).tolist():
            tok = _nonfinite_token(x[row])
            out[row, :] = SPACE
            out[row, :len(tok)] = np.frombuffer(tok, dtype=np.uint8)
    return out


def bool_matrix(b: np.ndarray) -> np.ndarray:
    return _BOOL[np.asarray(b, dtype=bool).astype(np.intp)]


def hex_matrix(v: np.ndarray) -> np.ndarray:
    """``"0x%016x"`` strings (quoted) from a uint64 column."""
    v = np.asarray(v).astype(np.uint64, copy=False)
    out = np.empty((len(v), 20), dtype=np.uint8)
    out[:, 0] = out[:, 19] = ord('"')
    out[:, 1] = ord("0")
    out[:, 2] = ord("x")
    out[:, 3:19] = _HEX[((v[:, None] >> _HEX_SHIFTS) & np.uint64(15)).astype(np.intp)]
    return out


def number_matrix(values: np.ndarray) -> np.ndarray:
    """Any 1-D numeric column: bool -> true/false, ints exact, floats shortest round-trip."""
    kind = values.dtype.kind
    if kind == "b":
        return bool_matrix(values)
    if kind in "iu":
        return int_matrix(values)
    if kind == "f":
        return float_matrix(values)
    raise TypeError(f"not a numeric column: {values.dtype}")


def vector_matrix(values: np.ndarray) -> np.ndarray:
    """A 2-D numeric column -> one JSON list per row."""
    n, k = values.shape
    if k == 0:
        return np.broadcast_to(literal(b"[]"), (n, 2))
    parts = [np.broadcast_to(literal(b"["), (n, 1))]
    for j in range(k):
        if j:
            parts.append(np.broadcast_to(literal(b","), (n, 1)))
        m = number_matrix(np.ascontiguousarray(values[:, j]))
        parts.append(np.broadcast_to(m, (n, m.shape[1])))  # a constant column renders as one row
    parts.append(np.broadcast_to(literal(b"]"), (n, 1)))
    return np.concatenate(parts, axis=1)


def is_constant(col: np.ndarray) -> bool:
    """A broadcast (stride-0) column: one value for every row."""
    return col.ndim == 1 and len(col) > 0 and col.strides[0] == 0
