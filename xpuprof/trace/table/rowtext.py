"""Columns rendered as JSON text in C (``xpuprof._native.rowfmt``): the one formatter of values.

A chunk of rows is described as a list of column segments (``Segments``) and rendered in one C loop with
the GIL released. The Chrome JSON writer renders whole events this way (``trace.write.rows_native``); the
trace table renders a builder batch's args objects the same way (``trace.table.flatten``), so the store
holds exactly the text the JSON file holds. Numbers come out as orjson writes them (ints exact, floats
shortest round-trip, non-finite as quoted strings in the generic path's place), strings as orjson
escapes them.

``rowfmt`` is None when xpuprof was built without a C compiler; callers fall back to their generic
(dict) paths then.
"""
from __future__ import annotations

import re
import threading
from typing import Callable, NamedTuple

import numpy as np
import orjson

from ..builder.columns import RowArgs

from ... import _native

rowfmt = _native.optional("rowfmt")  # None: built without a C compiler

MAX_CHUNK_ROWS = 65536
Tokens = Callable[[np.ndarray], "tuple[bytes, np.ndarray]"]  # used ids -> (JSON tokens blob, offsets)
EXTERNAL_ID_KEY = re.compile(rb'"External id"')


def is_constant(col: np.ndarray) -> bool:
    """A broadcast (stride-0) column: one value for every row."""
    return col.ndim == 1 and len(col) > 0 and col.strides[0] == 0


def key_token(name: str) -> bytes:
    """A JSON object key with its colon: ``"name":``."""
    return orjson.dumps(name) + b":"


def chunk_of(col: np.ndarray, sel: slice, dtype=None) -> np.ndarray:
    """The chunk's values, contiguous; a broadcast (constant) column stays one value."""
    v = col[:1] if is_constant(col) else col[sel]
    return np.ascontiguousarray(v, dtype=dtype)


def mask_of(present: np.ndarray | None):
    """None when every row has the value, False when none has, else the bool column."""
    if present is None or present.all():
        return None
    return np.ascontiguousarray(present) if present.any() else False


def fast_arg(col) -> bool:
    """Whether an arg column renders in C (numbers, vectors, interned strings, hex handles)."""
    if col.kind == "obj" or not isinstance(col.values, np.ndarray):
        return False
    if col.present is not None and not isinstance(col.present, np.ndarray):
        return False
    if col.kind == "vec":
        return col.values.ndim == 2 and col.values.dtype.kind in "biuf"
    if col.kind == "num":
        return col.values.ndim == 1 and col.values.dtype.kind in "biuf"
    return col.kind in ("str", "hex") and col.values.ndim == 1 and col.values.dtype.kind in "iu"


def row_args_blob(row_args) -> tuple[bytes | np.ndarray, np.ndarray, np.ndarray]:
    """Pre-encoded per-row args objects' inner text (without braces): (blob, starts, lens); lens 0 = none."""
    if isinstance(row_args, RowArgs):
        return row_args.inner()
    inner = [a[1:-1] if a else b"" for a in row_args]
    lens = np.fromiter(map(len, inner), dtype=np.int64, count=len(inner))
    return b"".join(inner), np.cumsum(lens) - lens, lens


def mentions_external_id(row_args) -> bool:
    """Whether a pre-encoded row may hold "External id" (which the writers also add): the generic path
    merges those (one object per row)."""
    if isinstance(row_args, RowArgs):
        return EXTERNAL_ID_KEY.search(row_args.blob) is not None
    return any(a is not None and b'"External id"' in a for a in row_args)


def row_args_part(row_args, sel: slice):
    """Rows ``sel`` of a batch's pre-encoded args: a list's slice, or a RowArgs over the same blob."""
    if isinstance(row_args, RowArgs):
        return RowArgs(row_args.blob, row_args.starts[sel], row_args.lens[sel])
    return row_args[sel]


class Segments:
    """One chunk's row description for ``rowfmt.render``; adjacent literal text is merged."""

    def __init__(self) -> None:
        self.segs: list[tuple] = []
        self._lit = b""

    def lit(self, text: bytes) -> None:
        self._lit += text

    def add(self, kind: int, a=None, b=None, c=None, *, prefix: bytes = b"", mask=None, flags: int = 0,
            base: int = 0) -> None:
        if flags or mask is not None:  # its prefix is conditional: it cannot carry the pending text
            self._flush()
        else:
            prefix, self._lit = self._lit + prefix, b""
        self.segs.append((kind, flags, prefix, a, b, c, mask, base))

    def _flush(self) -> None:
        if self._lit:
            self.segs.append((rowfmt.LIT, 0, self._lit, None, None, None, None, 0))
            self._lit = b""

    def render(self, n: int, pool: "BufferPool | None" = None):
        self._flush()
        if pool is None:
            return rowfmt.render(n, self.segs)
        buf = pool.take()
        used = rowfmt.render(n, self.segs, buf)
        if used < 0:  # grow (with headroom, so the pool settles on one size)
            buf = bytearray(-used + (-used >> 2))
            used = rowfmt.render(n, self.segs, buf)
        return PooledChunk(buf, used, pool)


class DeferredChunk(NamedTuple):
    """A chunk described but not rendered yet: ``render(*args)`` gives its ``PooledChunk`` (in C, without
    the GIL, on whichever thread runs it)."""
    render: Callable
    args: tuple


class PooledChunk:
    """Rendered rows in a pooled buffer; the file writer hands the buffer back once written."""

    __slots__ = ("buf", "size", "pool")

    def __init__(self, buf: bytearray, size: int, pool: "BufferPool") -> None:
        self.buf, self.size, self.pool = buf, size, pool

    def __len__(self) -> int:
        return self.size

    def view(self) -> memoryview:
        return memoryview(self.buf)[:self.size]

    def release(self) -> None:
        self.pool.give(self.buf)


class BufferPool:
    """A few output buffers reused chunk after chunk, and write after write (thread-safe: the writer's
    threads give back).

    The trace writer keeps one pool for the process (``rows_native``): a buffer's first use faults its pages
    in, ~2.5 µs of kernel time per 4 KiB here, and buffers a render thread allocated went back to the kernel
    when its malloc arena trimmed them, so every export faulted them in again (XPU 1 M rows, two threads:
    10,600 faults, +40 ms of system time against one thread's writer, whose buffer the main arena kept).
    At most ``keep`` free buffers of ``keep_bytes`` in all are kept; more are dropped as they come back."""

    def __init__(self, keep: int = 4, keep_bytes: int = 32 << 20) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()
        self._keep, self._keep_bytes = keep, keep_bytes

    def take(self) -> bytearray:
        with self._lock:
            return self._free.pop() if self._free else bytearray(0)

    def give(self, buf: bytearray) -> None:
        with self._lock:
            if len(self._free) < self._keep and sum(map(len, self._free)) + len(buf) <= self._keep_bytes:
                self._free.append(buf)

    def kept_bytes(self) -> int:
        with self._lock:
            return sum(map(len, self._free))


class TokenTable:
    """Interned string ids of one batch column as a blob of encoded tokens plus local ids.

    A column whose rows mostly name strings of their own (a range per distinct name) is encoded chunk by
    chunk instead: each chunk's tokens are made when it is described, so the whole column's tokens never
    exist at once (they cost what the names cost again)."""

    def __init__(self, ids: np.ndarray, tokens_of: Tokens) -> None:
        self.constant = is_constant(ids)
        self.tokens_of = tokens_of
        if self.constant:
            self.token = tokens_of(np.asarray(ids[:1], np.int64))[0]
            return
        ids = np.asarray(ids)
        every = getattr(tokens_of, "every_token", None)
        whole = every() if every is not None else None
        if whole is not None:  # a small string table: its ids index its tokens, no pass over the rows here
            self.per_chunk = False
            self.blob, self.offsets = whole
            self.local = ids
            return
        counts = np.bincount(ids, minlength=1)
        n_used = int(np.count_nonzero(counts))
        self.per_chunk = n_used > MAX_CHUNK_ROWS and n_used * 4 > len(ids)
        if self.per_chunk:
            self.ids = ids
            return
        used = np.flatnonzero(counts)
        del counts
        # int32 local ids (a batch's distinct strings fit): 4 B a row, not 8
        remap = np.zeros(int(used[-1]) + 1 if len(used) else 1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        self.local = remap[ids]
        del remap
        self.blob, self.offsets = tokens_of(used)

    def add(self, segs: Segments, sel: slice, prefix: bytes = b"", mask=None, flags: int = 0) -> None:
        if self.constant:
            if mask is None and not flags:
                segs.lit(prefix + self.token)
            else:
                segs.add(rowfmt.LIT, prefix=prefix + self.token, mask=mask, flags=flags)
        elif self.per_chunk:
            used, local = np.unique(self.ids[sel], return_inverse=True)
            blob, offsets = self.tokens_of(used.astype(np.int64))
            segs.add(rowfmt.TOKENS, blob, offsets, local.astype(np.int64), prefix=prefix, mask=mask, flags=flags)
        else:
            segs.add(rowfmt.TOKENS, self.blob, self.offsets, self.local[sel].astype(np.int64), prefix=prefix,
                     mask=mask, flags=flags)


def add_number(segs: Segments, values: np.ndarray, prefix: bytes, mask=None, flags: int = 0) -> None:
    """A numeric column: bool -> true/false, ints exact, floats shortest round-trip (orjson)."""
    kind = values.dtype.kind
    if kind == "b":
        segs.add(rowfmt.BOOL, np.ascontiguousarray(values).view(np.uint8), prefix=prefix, mask=mask, flags=flags)
    elif kind == "u" and values.dtype.itemsize == 8:
        segs.add(rowfmt.UINT, np.ascontiguousarray(values), prefix=prefix, mask=mask, flags=flags)
    elif kind in "iu":
        segs.add(rowfmt.INT, np.ascontiguousarray(values, dtype=np.int64), prefix=prefix, mask=mask, flags=flags)
    elif kind == "f":
        # float64 first: a float32 prints as the float64 it widens to, like the generic path.
        v = np.ascontiguousarray(values, dtype=np.float64)
        if len(v) == 1:  # a constant column: its one token
            x = float(v[0])
            tok = orjson.dumps(x if np.isfinite(x) else str(x))
            segs.add(rowfmt.LIT, prefix=prefix + tok, mask=mask, flags=flags)
            return
        fixed = rowfmt.fixed3(v)  # µs from whole ns (most device args): orjson's text, written in C
        if fixed is not None:
            segs.add(rowfmt.FIXED3, np.frombuffer(fixed, np.int64), prefix=prefix, mask=mask, flags=flags)
            return
        text = orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY)  # non-finite rows: C writes "nan"/"inf"
        segs.add(rowfmt.FLOAT, text, v, prefix=prefix, mask=mask, flags=flags)
    else:
        raise TypeError(f"not a numeric column: {values.dtype}")


def add_arg(segs: Segments, col, sel: slice, key: bytes, mask, table: TokenTable | None, entry: int) -> None:
    """One arg column (``builder.columns.ArgColumn`` that ``fast_arg`` takes) of the rows ``sel``, after
    ``key`` (its key token, with the comma when it is not the object's first entry)."""
    if col.kind == "str":
        table.add(segs, sel, key, mask=mask, flags=entry)
    elif col.kind == "hex":
        segs.add(rowfmt.HEX, chunk_of(col.values, sel, np.uint64), prefix=key, mask=mask, flags=entry)
    elif col.kind == "vec":
        vals = col.values[sel]
        k = vals.shape[1]
        if k == 0:
            segs.add(rowfmt.LIT, prefix=key + b"[]", mask=mask, flags=entry)
            return
        for j in range(k):
            add_number(segs, vals[:, j], key + b"[" if j == 0 else b",", mask=mask, flags=entry if j == 0 else 0)
        segs.add(rowfmt.LIT, prefix=b"]", mask=mask)
    else:
        add_number(segs, chunk_of(col.values, sel), key, mask=mask, flags=entry)


class StringTokens:
    """JSON tokens of interned string ids, each string encoded once: what ``TokenTable`` takes."""

    def __init__(self, strings) -> None:
        from ..builder.strings import StringTable

        self.table = strings if isinstance(strings, StringTable) else None
        self.strings = strings.strings if self.table is not None else strings
        self._encoded: dict[int, bytes] = {}
        self._every: "tuple[bytes, np.ndarray] | bool | None" = None

    EVERY_TOKEN_MAX = 4096  # strings: up to this many, every column's tokens come from one blob of them all

    def every_token(self) -> "tuple[bytes, np.ndarray] | None":
        """The tokens of every string of a small table, indexed by string id (made once), or None: a large
        table (a column's own strings are found with a pass over its rows instead), or a string with no
        JSON token (those fail where a row uses them, as before)."""
        if len(self.strings) > self.EVERY_TOKEN_MAX:
            return None
        if self._every is None:
            try:
                self._every = self(np.arange(len(self.strings), dtype=np.int64))
            except (TypeError, ValueError):  # orjson's JSONEncodeError is a TypeError
                self._every = False
        return self._every or None

    def encode(self, sid: int) -> bytes:
        tok = self._encoded.get(sid)
        if tok is None:
            # An exact-size copy: orjson's result keeps a 4 KiB buffer, which held ~4 KB per cached string.
            tok = self._encoded[sid] = bytes(memoryview(orjson.dumps(self.strings[sid])))
        return tok

    def __call__(self, used: np.ndarray) -> tuple[bytes, np.ndarray]:
        """JSON tokens of the string ids ``used`` (distinct, ascending) as one blob and offsets; bulk
        strings (a recorder's names) are escaped together, the others cached one by one."""
        if self.table is not None:
            return self.table.json_tokens(used, self.encode)
        toks = [self.encode(int(i)) for i in np.asarray(used).tolist()]
        offsets = np.zeros(len(toks) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, toks), np.int64, len(toks)), out=offsets[1:])
        return b"".join(toks), offsets
