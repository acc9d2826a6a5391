"""Bulk batches as Kineto JSON rows rendered by the C part ``xpuprof._native.rowfmt`` (the compact
layout), and the choice of layout (``make_writer``).

Each chunk of rows is described as a list of column segments (``_Segments``) and rendered in one C
loop, compact and variable width (~160 B/event), with the GIL released; chunks go into pooled
buffers (``BufferPool``) the file writer hands back once written. With ``defer`` a chunk comes as a
``DeferredChunk``, the render still to run (the file writer's workers run it). Without the C part the
fixed-width numpy layout of ``rows`` renders the same events.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterator, NamedTuple

import numpy as np
import orjson

from ...clock import BASE_TIME_NS
from ..builder.columns import CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch
from ..builder.strings import StringTable
from .rows import MAX_CHUNK_ROWS, Fallback, FixedWidthWriter, Tokens, _fast_arg, _key, _row_args_blob, sanitize_tids
from .value_text import is_constant

try:
    from ..._native import rowfmt as _rowfmt
except ImportError:  # built without a C compiler: the fixed-width numpy layout renders instead
    _rowfmt = None

COMPACT_ROW_BYTES = 200  # rough size of a compact row, for chunk sizing
_PHASES = (b'"f""s"', np.array([0, 3, 6], dtype=np.int64))


class _Segments:
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
            self.segs.append((_rowfmt.LIT, 0, self._lit, None, None, None, None, 0))
            self._lit = b""

    def render(self, n: int, pool: "BufferPool | None" = None):
        self._flush()
        if pool is None:
            return _rowfmt.render(n, self.segs)
        buf = pool.take()
        used = _rowfmt.render(n, self.segs, buf)
        if used < 0:  # grow (with headroom, so the pool settles on one size)
            buf = bytearray(-used + (-used >> 2))
            used = _rowfmt.render(n, self.segs, buf)
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
    """A few output buffers reused chunk after chunk (thread-safe: the writer thread gives back)."""

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def take(self) -> bytearray:
        with self._lock:
            return self._free.pop() if self._free else bytearray(0)

    def give(self, buf: bytearray) -> None:
        with self._lock:
            self._free.append(buf)


def _repeats_a_key(b: SliceBatch) -> bool:
    """Whether any row's own args may name a key the writer also writes for it (its External id, a named
    arg): searched in the whole blob at once (a string value that only looks like one counts too)."""
    blob = b.row_args.blob.tobytes() if isinstance(b.row_args, RowArgs) else b"".join(a for a in b.row_args if a)
    return any(_key(k)[:-1] in blob for k in ("External id", *b.args))


def _whole_objects(row_args) -> tuple:
    """Each row's encoded args object, braces included: (blob, starts, lens); lens 0 = none."""
    if isinstance(row_args, RowArgs):
        return row_args.blob, row_args.starts, row_args.lens
    lens = np.fromiter(map(len, (a or b"" for a in row_args)), np.int64, len(row_args))
    return np.frombuffer(b"".join(a for a in row_args if a), np.uint8), np.cumsum(lens) - lens, lens


def _chunk(col: np.ndarray, sel: slice, dtype=None) -> np.ndarray:
    """The chunk's values, contiguous; a broadcast (constant) column stays one value."""
    v = col[:1] if is_constant(col) else col[sel]
    return np.ascontiguousarray(v, dtype=dtype)


def _mask(present: np.ndarray | None):
    """None when every row has the value, False when none has, else the bool column."""
    if present is None or present.all():
        return None
    return np.ascontiguousarray(present) if present.any() else False


class _TokenTable:
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

    def add(self, segs: _Segments, sel: slice, prefix: bytes = b"", mask=None, flags: int = 0) -> None:
        if self.constant:
            if mask is None and not flags:
                segs.lit(prefix + self.token)
            else:
                segs.add(_rowfmt.LIT, prefix=prefix + self.token, mask=mask, flags=flags)
        elif self.per_chunk:
            used, local = np.unique(self.ids[sel], return_inverse=True)
            blob, offsets = self.tokens_of(used.astype(np.int64))
            segs.add(_rowfmt.TOKENS, blob, offsets, local.astype(np.int64), prefix=prefix, mask=mask, flags=flags)
        else:
            segs.add(_rowfmt.TOKENS, self.blob, self.offsets, self.local[sel].astype(np.int64), prefix=prefix,
                     mask=mask, flags=flags)


def _add_number(segs: _Segments, values: np.ndarray, prefix: bytes, mask=None, flags: int = 0) -> None:
    """A numeric column: bool -> true/false, ints exact, floats shortest round-trip (orjson)."""
    kind = values.dtype.kind
    if kind == "b":
        segs.add(_rowfmt.BOOL, np.ascontiguousarray(values).view(np.uint8), prefix=prefix, mask=mask, flags=flags)
    elif kind == "u" and values.dtype.itemsize == 8:
        segs.add(_rowfmt.UINT, np.ascontiguousarray(values), prefix=prefix, mask=mask, flags=flags)
    elif kind in "iu":
        segs.add(_rowfmt.INT, np.ascontiguousarray(values, dtype=np.int64), prefix=prefix, mask=mask, flags=flags)
    elif kind == "f":
        # float64 first: a float32 prints as the float64 it widens to, like the generic path.
        v = np.ascontiguousarray(values, dtype=np.float64)
        if len(v) == 1:  # a constant column: its one token
            x = float(v[0])
            tok = orjson.dumps(x if np.isfinite(x) else str(x))
            segs.add(_rowfmt.LIT, prefix=prefix + tok, mask=mask, flags=flags)
            return
        fixed = _rowfmt.fixed3(v)  # µs from whole ns (most device args): orjson's text, written in C
        if fixed is not None:
            segs.add(_rowfmt.FIXED3, np.frombuffer(fixed, np.int64), prefix=prefix, mask=mask, flags=flags)
            return
        text = orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY)  # non-finite rows: C writes "nan"/"inf"
        segs.add(_rowfmt.FLOAT, text, v, prefix=prefix, mask=mask, flags=flags)
    else:
        raise TypeError(f"not a numeric column: {values.dtype}")


_ROW_ARGS = object()  # the entry of per-row pre-encoded args in CompactWriter.slices


class CompactWriter(FixedWidthWriter):
    """Compact rows rendered by ``xpuprof._native.rowfmt``: the fixed layout's events, and slices whose per-row
    args are long or sit beside named args, which the fixed layout leaves to the generic path.

    Chunks come as ``PooledChunk``s: the consumer must ``release()`` each once written. With
    ``defer``, each comes as a ``DeferredChunk`` instead: the Python side only describes the chunk, and
    the consumer runs the C loop on its own threads (it holds no GIL), so several chunks render at once.
    """

    def __init__(self, strings: "StringTable | list[str]", vendor_categories: bool, defer: bool = False) -> None:
        super().__init__(strings, vendor_categories)
        self.pool = BufferPool()
        self.defer = defer

    @staticmethod
    def can_write(batch) -> bool:
        """The fixed layout's batches, and slices with per-row args of any length beside named args (torch's
        ops: shapes, types and stacks, with their ids): C copies each row's members after the named ones,
        as the generic path orders them, unless a row repeats a named key (the generic path merges it)."""
        if isinstance(batch, SliceBatch) and batch.row_args is not None:
            return all(_fast_arg(c) for c in batch.args.values()) and not _repeats_a_key(batch)
        return isinstance(batch, InstantBatch) or FixedWidthWriter.can_write(batch)

    def _render(self, segs: _Segments, sel: slice):
        if not self.defer:
            return segs.render(sel.stop - sel.start, self.pool)
        return DeferredChunk(segs.render, (sel.stop - sel.start, self.pool))

    def _id_seg(self, segs: _Segments, col: np.ndarray, sel: slice, prefix: bytes, tid: bool) -> None:
        v = _chunk(col, sel)
        if v.dtype == object:
            tokens: dict = {}
            codes = np.fromiter((tokens.setdefault(x, len(tokens)) for x in v.tolist()), dtype=np.int64,
                                count=len(v))
            encoded = [self._row_token(x, tid) for x in tokens]
            if len(encoded) == 1:
                segs.lit(prefix + encoded[0])
                return
            offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
            segs.add(_rowfmt.TOKENS, b"".join(encoded), offsets, codes, prefix=prefix)
            return
        if v.dtype.kind == "u" and v.dtype.itemsize == 8:  # non-negative already: sanitizeTid keeps it
            if len(v) == 1:
                segs.lit(prefix + str(int(v[0])).encode())
            else:
                segs.add(_rowfmt.UINT, v, prefix=prefix)
            return
        v = v.astype(np.int64, copy=False)
        if tid and len(v) and v.min() < 0:  # sanitizeTid only changes negative ids
            v = sanitize_tids(v)
        if len(v) == 1:
            segs.lit(prefix + str(int(v[0])).encode())
        else:
            segs.add(_rowfmt.INT, v, prefix=prefix)

    def _common(self, segs: _Segments, b, sel: slice, head: bytes, cat: _TokenTable, name: _TokenTable) -> None:
        segs.lit(head)
        cat.add(segs, sel, b',"cat":')
        name.add(segs, sel, b',"name":')
        self._id_seg(segs, b.pid, sel, b',"pid":', tid=False)
        self._id_seg(segs, b.tid, sel, b',"tid":', tid=True)
        segs.add(_rowfmt.MICROS, _chunk(b.ts, sel, np.int64), prefix=b',"ts":', base=BASE_TIME_NS)

    # ------------------------------------------------------------------ slices
    def slices(self, b: SliceBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _TokenTable(b.vendor_cat if self.vendor_categories else b.cat, self.tokens)
        name = _TokenTable(b.name, self.tokens)
        str_args = {k: _TokenTable(c.values, self.tokens) for k, c in b.args.items() if c.kind == "str"}
        keys = {k: b"," + _key(k) for k in b.args}
        ext_col = b.external_id
        no_ext = is_constant(ext_col) and int(ext_col[0]) == 0
        row_args = None
        row_bytes = COMPACT_ROW_BYTES + 16 * len(b.args)
        if b.row_args is not None:  # each row's pre-encoded members, copied from their blob
            row_args = _row_args_blob(b.row_args)
            row_bytes += int(row_args[2].sum()) // max(n, 1)
        step = self._chunk_rows(row_bytes)
        for lo in range(0, n, step):
            sel = slice(lo, min(lo + step, n))
            segs = _Segments()
            self._common(segs, b, sel, b'{"ph":"X"', cat, name)
            segs.add(_rowfmt.MICROS, _chunk(b.dur, sel, np.int64), prefix=b',"dur":', base=0)
            entries = []  # (column or None for External id, values, mask)
            if not no_ext:
                ext = _chunk(ext_col, sel, np.int64)
                mask = _mask(ext != 0)
                if mask is not False:
                    entries.append((None, ext, mask))
            for k, col in b.args.items():
                mask = _mask(None if col.present is None else col.present[sel])
                if mask is not False:
                    entries.append((k, col, mask))
            if row_args is not None:
                mask = _mask(row_args[2][sel] > 0)
                if mask is not False:
                    entries.append((_ROW_ARGS, row_args, mask))
            # Optional entries need the C side's object bookkeeping; when every row has every
            # entry the object is plain literal text around the values (fewer, merged segments).
            optional = any(mask is not None for _, _, mask in entries)
            entry = _rowfmt.ENTRY if optional else 0
            if entries:
                segs.add(_rowfmt.LIT, prefix=b',"args":{', flags=_rowfmt.OPEN) if optional else segs.lit(b',"args":{')
            for j, (k, col, mask) in enumerate(entries):
                key = b',"External id":' if k is None else b"," if k is _ROW_ARGS else keys[k]
                if not optional and j == 0:
                    key = key[1:]
                if k is None:
                    segs.add(_rowfmt.INT, col, prefix=key, mask=mask, flags=entry)
                elif k is _ROW_ARGS:
                    segs.add(_rowfmt.SPANS, col[0], col[1][sel], col[2][sel], prefix=b"," if optional or j else b"",
                             mask=mask, flags=entry)
                else:
                    self._arg(segs, col, sel, key, mask, str_args.get(k), entry)
            if entries:
                segs.add(_rowfmt.LIT, prefix=b"}", flags=_rowfmt.CLOSE) if optional else segs.lit(b"}")
            segs.lit(b"},\n")
            yield self._render(segs, sel)

    @staticmethod
    def _arg(segs: _Segments, col, sel: slice, key: bytes, mask, table: _TokenTable | None, entry: int) -> None:
        if col.kind == "str":
            table.add(segs, sel, key, mask=mask, flags=entry)
        elif col.kind == "hex":
            segs.add(_rowfmt.HEX, _chunk(col.values, sel, np.uint64), prefix=key, mask=mask, flags=entry)
        elif col.kind == "vec":
            vals = col.values[sel]
            k = vals.shape[1]
            if k == 0:
                segs.add(_rowfmt.LIT, prefix=key + b"[]", mask=mask, flags=entry)
                return
            for j in range(k):
                _add_number(segs, vals[:, j], key + b"[" if j == 0 else b",", mask=mask, flags=entry if j == 0 else 0)
            segs.add(_rowfmt.LIT, prefix=b"]", mask=mask)
        else:
            _add_number(segs, _chunk(col.values, sel), key, mask=mask, flags=entry)

    # ------------------------------------------------------------------ instants
    def instants(self, b: InstantBatch, fallback: Fallback) -> Iterator:
        """``{"ph":"i","cat":..,"s":..,"name":..,"pid":..,"tid":..,"ts":..,"args":{..}}``: the generic path's
        keys in its order (no cat for category 0, args only for rows that have some), each row's args object
        copied as it was encoded (torch's [memory] events, Level Zero allocations)."""
        n = len(b)
        cats = b.vendor_cat if self.vendor_categories else b.cat
        cat = _TokenTable(cats, self.tokens)
        name = _TokenTable(b.name, self.tokens)
        scope_ids = np.searchsorted(np.array([ord("g"), ord("p"), ord("t")]), b.scope)  # g, p, t -> 0, 1, 2
        scope_tokens = (b'"g""p""t"', np.array([0, 3, 6, 9], dtype=np.int64))
        args = _whole_objects(b.row_args) if b.row_args is not None else None
        step = self._chunk_rows(COMPACT_ROW_BYTES + (int(args[2].sum()) // max(n, 1) if args is not None else 0))
        for lo in range(0, n, step):
            sel = slice(lo, min(lo + step, n))
            segs = _Segments()
            segs.lit(b'{"ph":"i"')
            has_cat = _mask(_chunk(cats, sel) != 0)
            if has_cat is not False:
                cat.add(segs, sel, b',"cat":', mask=has_cat)
            scope = _chunk(scope_ids, sel, np.int64)
            segs.add(_rowfmt.TOKENS, scope_tokens[0], scope_tokens[1], scope, prefix=b',"s":')
            name.add(segs, sel, b',"name":')
            self._id_seg(segs, b.pid, sel, b',"pid":', tid=False)
            self._id_seg(segs, b.tid, sel, b',"tid":', tid=True)
            segs.add(_rowfmt.MICROS, _chunk(b.ts, sel, np.int64), prefix=b',"ts":', base=BASE_TIME_NS)
            if args is not None:
                has_args = _mask(args[2][sel] > 2)  # nothing, or "{}": no args key (as the generic path)
                if has_args is not False:
                    segs.add(_rowfmt.SPANS, args[0], args[1][sel], args[2][sel], prefix=b',"args":',
                             mask=has_args)
            segs.lit(b"},\n")
            yield self._render(segs, sel)

    # ------------------------------------------------------------------ counters
    def counters(self, b: CounterBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _TokenTable(b.vendor_cat if self.vendor_categories else b.cat, self.tokens)
        name = _TokenTable(b.name, self.tokens)
        keys = [(_key(k), v) for k, v in b.values.items()]
        step = self._chunk_rows(COMPACT_ROW_BYTES)
        for lo in range(0, n, step):
            sel = slice(lo, min(lo + step, n))
            segs = _Segments()
            self._common(segs, b, sel, b'{"ph":"C"', cat, name)
            segs.lit(b',"args":{')
            for j, (key, values) in enumerate(keys):
                _add_number(segs, _chunk(values, sel, np.float64), b"," + key if j else key)
            segs.lit(b"}},\n")
            yield self._render(segs, sel)

    # ------------------------------------------------------------------ flows
    def flows(self, b: FlowBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _TokenTable(b.cat, self.tokens)
        step = self._chunk_rows(COMPACT_ROW_BYTES)
        for lo in range(0, n, step):
            sel = slice(lo, min(lo + step, n))
            start = _chunk(b.is_start, sel, bool)
            segs = _Segments()
            segs.lit(b'{"ph":')
            if len(start) == 1 or start.all() or not start.any():
                segs.lit(b'"s"' if start[0] else b'"f"')
            else:
                segs.add(_rowfmt.TOKENS, _PHASES[0], _PHASES[1], start.astype(np.int64))
            self._id_seg(segs, b.flow_id, sel, b',"id":', tid=False)
            self._id_seg(segs, b.pid, sel, b',"pid":', tid=False)
            self._id_seg(segs, b.tid, sel, b',"tid":', tid=True)
            segs.add(_rowfmt.MICROS, _chunk(b.ts, sel, np.int64), prefix=b',"ts":', base=BASE_TIME_NS)
            cat.add(segs, sel, b',"cat":')
            cat.add(segs, sel, b',"name":')
            bp = _mask(~start)  # "bp": "e" only on "f" rows
            if bp is None:
                segs.lit(b',"bp":"e"')
            elif bp is not False:
                segs.add(_rowfmt.LIT, prefix=b',"bp":"e"', mask=bp)
            segs.lit(b"},\n")
            yield self._render(segs, sel)


LAYOUT: str | None = None  # None: the fastest available; tests pin "compact" or "fixed"


def make_writer(strings: "StringTable | list[str]", vendor_categories: bool, layout: str | None = None,
                defer: bool = False) -> FixedWidthWriter:
    """The fastest available writer: ``compact`` (C) when built, else ``fixed`` (numpy).

    ``defer``: the compact layout hands its chunks over unrendered (see ``CompactWriter``).
    """
    layout = layout or LAYOUT or ("compact" if _rowfmt is not None else "fixed")
    if layout == "compact":
        if _rowfmt is None:
            raise RuntimeError("compact trace layout needs the C part xpuprof._native.rowfmt, which is not built "
                               "(rebuild with `python setup.py build_ext --inplace`); valid layouts: fixed")
        return CompactWriter(strings, vendor_categories, defer)
    if layout == "fixed":
        return FixedWidthWriter(strings, vendor_categories)
    raise ValueError(f"unknown trace layout {layout!r}; valid: compact, fixed")


ColumnarWriter = FixedWidthWriter  # the pure-numpy layout under its former name
