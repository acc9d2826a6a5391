"""Bulk batches as Kineto JSON rows rendered by the C part ``xpuprof._native.rowfmt`` (the compact
layout), and the choice of layout (``make_writer``).

Each chunk of rows is described as a list of column segments (``_Segments``) and rendered in one C
loop, compact and variable width (~160 B/event), with the GIL released; chunks go into pooled
buffers (``BufferPool``) the file writer hands back once written. With ``defer`` a chunk comes as a
``DeferredChunk``, the render still to run (the file writer's workers run it). Without the C part the
fixed-width numpy layout of ``rows`` renders the same events.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ...clock import BASE_TIME_NS
from ..builder.columns import CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch
from ..builder.strings import StringTable
from ..table.rowtext import (BufferPool, DeferredChunk, PooledChunk, Segments, TokenTable, add_arg, add_number,
                             fast_arg)
from ..table.rowtext import chunk_of as _chunk
from ..table.rowtext import mask_of as _mask
from ..table.rowtext import rowfmt as _rowfmt
from .rows import Fallback, FixedWidthWriter, _key, _row_args_blob, sanitize_tids
from .value_text import is_constant

COMPACT_ROW_BYTES = 200  # rough size of a compact row, for chunk sizing
_PHASES = (b'"f""s"', np.array([0, 3, 6], dtype=np.int64))
# Chunk buffers for every export of the process: a fresh buffer costs its page faults (see BufferPool). At
# most 4 are kept, 32 MiB in all (15 MB after a two-thread export of 1 M host ranges, 30 MB of 1 M XPU
# records): what the main thread's malloc arena kept of a one-thread export's buffers anyway.
SHARED_POOL = BufferPool()
_Segments, _TokenTable, _add_number = Segments, TokenTable, add_number

__all__ = ["BufferPool", "CompactWriter", "DeferredChunk", "PooledChunk", "make_writer"]


_ROW_ARGS = object()  # the entry of per-row pre-encoded args in CompactWriter.slices


def _repeats_a_key(b: SliceBatch) -> bool:
    """Whether any row's own args may name a key the writer also writes for it (its External id, a named
    arg): searched in the whole blob at once (a string value that only looks like one counts too)."""
    blob = b.row_args.blob.tobytes()
    return any(_key(k)[:-1] in blob for k in ("External id", *b.args))


def _whole_objects(row_args) -> tuple:
    """Each row's encoded args object, braces included: (blob, starts, lens); lens 0 = none."""
    if isinstance(row_args, RowArgs):
        return row_args.blob, row_args.starts, row_args.lens
    lens = np.fromiter(map(len, (a or b"" for a in row_args)), np.int64, len(row_args))
    return np.frombuffer(b"".join(a for a in row_args if a), np.uint8), np.cumsum(lens) - lens, lens


class CompactWriter(FixedWidthWriter):
    """Compact rows rendered by ``xpuprof._native.rowfmt``: the fixed layout's events, and slices whose per-row
    args are long or sit beside named args, and instants, which the fixed layout leaves to the generic path.

    Chunks come as ``PooledChunk``s: the consumer must ``release()`` each once written. With
    ``defer``, each comes as a ``DeferredChunk`` instead: the Python side only describes the chunk, and
    the consumer runs the C loop on its own threads (it holds no GIL), so several chunks render at once.
    """

    def __init__(self, strings: "StringTable | list[str]", vendor_categories: bool, defer: bool = False) -> None:
        super().__init__(strings, vendor_categories)
        self.pool = SHARED_POOL
        self.defer = defer

    @staticmethod
    def can_write(batch) -> bool:
        """The fixed layout's batches, instants, and slices whose per-row args come as one blob (``RowArgs``:
        torch's ops, their shapes, types and stacks compacted to orjson's form by ``host.torch_args``) of any
        length beside named args: C copies each row's members after the named ones, as the generic path orders
        them, unless a row repeats a named key (the generic path merges it). Per-row args as a list of texts
        stay with the fixed layout's rule: the generic path encodes them again."""
        if isinstance(batch, SliceBatch) and isinstance(batch.row_args, RowArgs):
            return all(fast_arg(c) for c in batch.args.values()) and not _repeats_a_key(batch)
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
            # An object whose first entry some rows lack needs the C side's bookkeeping (the first entry
            # written drops its comma; an object left empty is dropped). When the first entry is in every
            # row, the object is plain literal text around the values and a later optional entry is just a
            # masked segment with its comma (fewer, merged segments: a device row's constant args merge).
            optional = bool(entries) and entries[0][2] is not None
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

    _arg = staticmethod(add_arg)

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
            segs.add(_rowfmt.TOKENS, scope_tokens[0], scope_tokens[1], _chunk(scope_ids, sel, np.int64),
                     prefix=b',"s":')
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

