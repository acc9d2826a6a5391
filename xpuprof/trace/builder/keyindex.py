"""Linear factorizing of key columns (pointers, correlation ids, packed small keys).

``factorize(keys)`` gives the distinct keys, each row's code and each key's first row, in one
pass: a C hash table of the distinct values (``xpuprof._native.keyindex``), or a dense table when
the keys span a small range (correlation ids are counters). ``np.unique`` sorts the whole column
instead, which made device processing superlinear. Without the C part, keys that span a large
range fall back to ``np.unique`` (same results, sorted order).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

_UNSET = object()
_native_module = _UNSET


def _native():
    global _native_module
    if _native_module is _UNSET:
        from ... import _native as c_parts

        _native_module = c_parts.optional("keyindex")
    return _native_module


class Factorized(NamedTuple):
    uniq: np.ndarray  # distinct keys (uint64 or the input's integer dtype)
    codes: np.ndarray  # int32 or intp: row -> index into uniq
    first: np.ndarray  # intp: index into uniq -> first row holding that key

    def first_mask(self, n: int) -> np.ndarray:
        """Boolean mask of the rows that are their key's first occurrence."""
        mask = np.zeros(n, bool)
        mask[self.first] = True
        return mask


def _as_u64(keys) -> np.ndarray:
    a = np.asarray(keys)
    if a.dtype.kind == "b":
        a = a.astype(np.uint8)
    if a.dtype.kind not in "iu":
        raise TypeError(f"factorize needs integer keys, got dtype {a.dtype}")
    return np.ascontiguousarray(a.astype(np.uint64, copy=False) if a.dtype != np.uint64 else a)


def first_rows(offsets: np.ndarray, span: int) -> np.ndarray:
    """For offsets in [0, span): a table of ``span`` int64 entries, each the first row holding that
    offset, ``len(offsets)`` where no row does. One pass (C); ``minimum.at`` without the C part
    (numpy leaves the order of repeated fancy-index writes unspecified)."""
    n = len(offsets)
    first_at = np.full(span, n, np.int64)
    native = _native()
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if native is not None and hasattr(native, "first_rows"):
        native.first_rows(off, first_at)
    else:
        np.minimum.at(first_at, off, np.arange(n, dtype=np.int64))
    return first_at


def _dense(keys: np.ndarray, lo: int, span: int) -> Factorized:
    """Keys in [lo, lo + span): a lookup table instead of a hash (sorted uniq)."""
    n = len(keys)
    # int32 rows and offsets where they fit (the usual case): half the temporaries of intp.
    small = np.int32 if max(n, span) < 1 << 31 else np.intp
    off = (keys - np.uint64(lo)).astype(np.int64)
    first_at = first_rows(off, span)
    off = off.astype(small)
    present = first_at < n
    lut = np.cumsum(present, dtype=small) - 1
    uniq = (np.flatnonzero(present).astype(np.uint64) + np.uint64(lo))
    return Factorized(uniq, lut[off], first_at[present].astype(np.intp))


def factorize(keys) -> Factorized:
    """Distinct keys, each row's code, each key's first row; linear in the number of rows."""
    k = _as_u64(keys)
    n = len(k)
    if n == 0:
        return Factorized(np.zeros(0, np.uint64), np.zeros(0, np.intp), np.zeros(0, np.intp))
    lo, hi = int(k.min()), int(k.max())
    span = hi - lo + 1
    if span <= max(2 * n, 1 << 16):
        return _dense(k, lo, span)
    native = _native()
    if native is not None:
        codes = np.empty(n, np.int32)
        uniq, first = native.factorize(k, codes)
        return Factorized(np.frombuffer(uniq, np.uint64), codes,
                          np.frombuffer(first, np.int64).astype(np.intp))
    uniq, first, inverse = np.unique(k, return_index=True, return_inverse=True)
    return Factorized(uniq, inverse.reshape(-1).astype(np.intp), first.astype(np.intp))


def pack_pairs(high: np.ndarray, low: np.ndarray) -> np.ndarray | None:
    """(high, low) integer pairs as one uint64 key each when both fit in 32 bits (else None)."""
    h = np.asarray(high).astype(np.int64, copy=False)
    lw = np.asarray(low).astype(np.int64, copy=False)
    if len(h) and (int(h.min()) < -(1 << 31) or int(h.max()) >= 1 << 31 or int(lw.min()) < 0
                   or int(lw.max()) >= 1 << 32):
        return None
    return ((h + (1 << 31)).astype(np.uint64) << np.uint64(32)) | lw.astype(np.uint64)


def factorize_pairs(a: np.ndarray, b: np.ndarray) -> Factorized:
    """``factorize`` over (a, b) row pairs of any 64-bit integers: ``uniq`` holds pair codes;
    ``first`` gives each distinct pair's first row (read the pair back as ``a[first], b[first]``)."""
    fa, fb = factorize(a), factorize(b)
    return factorize(fa.codes.astype(np.uint64) * np.uint64(max(len(fb.uniq), 1)) + fb.codes.astype(np.uint64))


def distinct_rows(*columns) -> list[tuple]:
    """The distinct rows of equal-length integer columns as sorted tuples of Python ints, made once
    per distinct row (a set of per-row tuples builds one Python object per event)."""
    cols = [np.asarray(c) for c in columns]
    if not cols or not len(cols[0]):
        return []
    packed = pack_pairs(cols[0], cols[1]) if len(cols) == 2 else None
    if packed is not None:  # the usual (device, stream) pair: one key per row
        first = factorize(packed).first
    else:
        codes = cols[0]
        for col in cols[1:]:
            codes = factorize_pairs(codes, col).codes
        first = factorize(codes).first
    return sorted(zip(*(c[first].tolist() for c in cols)))
