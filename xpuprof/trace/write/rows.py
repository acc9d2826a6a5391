"""Bulk slice, counter and flow batches as Kineto JSON rows, vectorized (no Python object per event).

Two layouts, same events:

* ``CompactWriter`` (``rows_native``, used when the C part ``xpuprof._native.rowfmt`` is built):
  each chunk of rows is described as a list of column segments and rendered in one C loop,
  compact and variable width (~160 B/event), with the GIL released;
* ``FixedWidthWriter`` (here; pure numpy, the fallback): described below.

Fixed width: each chunk of rows becomes one ``(rows, width)`` uint8 buffer: literal JSON fragments are
broadcast into their columns, values come from ``value_text`` matrices (space padded). Rows whose
optional args are absent get those columns blanked to spaces, so every row stays valid JSON
and parses to exactly what the generic dict path writes. Rows holding an over-long string are
handed to the generic path (``fallback``) instead of widening every row of the chunk.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import orjson

from ...clock import BASE_TIME_NS
from ..builder.columns import CounterBatch, FlowBatch, RowArgs, SliceBatch
from ..builder.strings import StringTable
from ..table.rowtext import EXTERNAL_ID_KEY as _EXTERNAL_ID_KEY
from ..table.rowtext import MAX_CHUNK_ROWS, StringTokens, Tokens
from ..table.rowtext import fast_arg as _fast_arg
from ..table.rowtext import key_token as _key
from ..table.rowtext import row_args_blob as _row_args_blob
from .value_text import (SPACE, float_matrix, hex_matrix, int_matrix, is_constant, micros_matrix, number_matrix,
                         ragged_matrix, vector_matrix)

MIN_CHUNK_ROWS = 2048
TARGET_CHUNK_BYTES = 4 << 20  # several chunks in flight render at once; 12 MiB write()s stalled here
LONG_STRING_BYTES = 2048  # encoded strings longer than this go through the generic path
TABLE_BYTES_LIMIT = 64 << 20
INT64_MIN = np.iinfo(np.int64).min

Fallback = Callable[[np.ndarray], bytes]


def sanitize_tids(tid: np.ndarray) -> np.ndarray:
    """Kineto's sanitizeTid: absolute value, INT64_MIN -> 0."""
    out = np.abs(tid)
    out[tid == INT64_MIN] = 0
    return out




class _StringColumn:
    """Interned string ids of one batch column, rendered through a table of the ids it uses."""

    def __init__(self, ids: np.ndarray, tokens_of: Tokens) -> None:
        self.constant = is_constant(ids)
        if self.constant:
            tok = tokens_of(np.asarray(ids[:1], np.int64))[0]
            self.const_row = np.frombuffer(tok, dtype=np.uint8).reshape(1, -1)
            self.const_long = len(tok) > LONG_STRING_BYTES
            self.width = len(tok)
            return
        ids = np.asarray(ids)
        used = np.flatnonzero(np.bincount(ids, minlength=1))
        remap = np.zeros(int(used[-1]) + 1 if len(used) else 1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        self.local = remap[ids]
        blob, offsets = tokens_of(used)
        self.lens = np.diff(offsets)
        self.long = self.lens > LONG_STRING_BYTES
        self.any_long = bool(self.long.any())
        short = self.lens[~self.long]
        self.width = int(short.max()) if len(short) else 1
        self.blob = np.frombuffer(blob, dtype=np.uint8)
        self.starts = offsets[:-1]
        self.table = None
        if len(used) * self.width <= TABLE_BYTES_LIMIT:
            clipped = np.minimum(self.lens, self.width)
            self.table = ragged_matrix(self.blob, self.starts, clipped, min_width=self.width)

    def long_rows(self, sel: slice) -> np.ndarray | None:
        if self.constant:
            return None
        return self.long[self.local[sel]] if self.any_long else None

    def matrix(self, sel) -> np.ndarray:
        if self.constant:
            return self.const_row
        lid = self.local[sel]
        if self.table is not None:
            width = int(self.lens[lid].max())
            table = self.table if width >= self.table.shape[1] else self.table[:, :width]
            return table[lid]
        return ragged_matrix(self.blob, self.starts[lid], self.lens[lid])


class _Rows:
    """Column layout of one chunk: literals and value matrices, then blanking for absent parts."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.width = 0
        self.parts: list[tuple[int, np.ndarray]] = []
        self.blanks: list[tuple[np.ndarray, int, int]] = []
        self._pending = bytearray()
        self._pending_at = 0

    def lit(self, text: bytes) -> int:
        if not self._pending:
            self._pending_at = self.width
        self._pending += text
        at = self.width
        self.width += len(text)
        return at

    def val(self, mat: np.ndarray) -> int:
        if mat.shape[0] == 1:  # a constant column is just more literal text
            return self.lit(mat.tobytes())
        self._flush()
        at = self.width
        self.parts.append((at, mat))
        self.width += mat.shape[1]
        return at

    def blank(self, rows: np.ndarray, start: int, stop: int) -> None:
        if rows.any():
            self.blanks.append((rows, start, stop))

    def _flush(self) -> None:
        if self._pending:
            self.parts.append((self._pending_at, np.frombuffer(bytes(self._pending), np.uint8).reshape(1, -1)))
            self._pending = bytearray()

    def build(self) -> np.ndarray:
        self._flush()
        out = np.empty((self.n, self.width), dtype=np.uint8)
        # All literal text in one template row, copied once per row; then only the value columns.
        template = np.full((1, self.width), SPACE, dtype=np.uint8)
        values = []
        for at, mat in self.parts:
            if mat.shape[0] == 1:
                template[0, at:at + mat.shape[1]] = mat[0]
            else:
                values.append((at, mat))
        out[:] = template
        for at, mat in values:
            out[:, at:at + mat.shape[1]] = mat
        for rows, start, stop in self.blanks:
            out[rows, start:stop] = SPACE
        return out


def _ts_matrix(ts: np.ndarray, sel) -> np.ndarray:
    col = ts[:1] if is_constant(ts) else ts[sel]
    return micros_matrix(np.maximum(col - np.int64(BASE_TIME_NS), 0))


# Per-row pre-encoded args objects are spliced in as space-padded text: rows longer than this go
# through the generic path (a padded matrix as wide as the longest row would waste memory).
ROW_ARGS_MAX_BYTES = 256


def _row_args_fit(b: SliceBatch) -> bool:
    """Every row's args are short, and none repeats a key the writer adds (the generic path merges)."""
    if b.args:
        return False
    if isinstance(b.row_args, RowArgs):  # one scan of the blob, no Python object per row
        return bool((b.row_args.lens <= ROW_ARGS_MAX_BYTES).all()) and \
            _EXTERNAL_ID_KEY.search(b.row_args.blob) is None
    return all(a is None or (len(a) <= ROW_ARGS_MAX_BYTES and b'"External id"' not in a) for a in b.row_args)


class FixedWidthWriter:
    """Renders bulk batches; ``can_write`` says which ones it handles exactly."""

    def __init__(self, strings: "StringTable | list[str]", vendor_categories: bool) -> None:
        self.tokens = StringTokens(strings)
        self.strings = self.tokens.strings
        self.vendor_categories = vendor_categories

    # ------------------------------------------------------------------ eligibility
    @staticmethod
    def can_write(batch) -> bool:
        if isinstance(batch, SliceBatch):
            if batch.row_args is not None and not _row_args_fit(batch):
                return False
            return all(_fast_arg(c) for c in batch.args.values())
        if isinstance(batch, CounterBatch):
            return batch.row_values is None
        return isinstance(batch, FlowBatch)

    # ------------------------------------------------------------------ shared pieces
    def _event_head(self, rows, opening: bytes, cat, name, b, sel) -> None:
        """The fields X and C rows share: ``{"ph":..,"cat":..,"name":..,"pid":..,"tid":..,"ts":..``."""
        rows.lit(opening)
        rows.val(cat.matrix(sel))
        rows.lit(b',"name":')
        rows.val(name.matrix(sel))
        rows.lit(b',"pid":')
        rows.val(self._row_id(b.pid, sel, tid=False))
        rows.lit(b',"tid":')
        rows.val(self._row_id(b.tid, sel, tid=True))
        rows.lit(b',"ts":')
        rows.val(_ts_matrix(b.ts, sel))

    def _row_id(self, col: np.ndarray, sel, tid: bool) -> np.ndarray:
        if is_constant(col):
            col = col[:1]
        else:
            col = col[sel]
        if col.dtype == object:
            tokens: dict = {}
            codes = np.fromiter((tokens.setdefault(v, len(tokens)) for v in col.tolist()), dtype=np.intp,
                                count=len(col))
            encoded = [self._row_token(v, tid) for v in tokens]
            lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
            table = ragged_matrix(np.frombuffer(b"".join(encoded), np.uint8), np.cumsum(lens) - lens, lens)
            return table[codes]
        col = col.astype(np.int64, copy=False)
        return int_matrix(sanitize_tids(col) if tid else col)

    @staticmethod
    def _row_token(value, tid: bool) -> bytes:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = int(value)
            if tid:
                value = 0 if value == INT64_MIN else abs(value)
            return str(value).encode()
        return orjson.dumps(value)

    def _chunk_rows(self, row_bytes: int) -> int:
        return int(np.clip(TARGET_CHUNK_BYTES // max(row_bytes, 1), MIN_CHUNK_ROWS, MAX_CHUNK_ROWS))

    def _split(self, lo: int, hi: int, columns: list[_StringColumn]):
        """The chunk's rows for the fast path, and those with over-long strings for the fallback."""
        sel = slice(lo, hi)
        long = None
        for col in columns:
            rows = col.long_rows(sel)
            if rows is not None:
                long = rows if long is None else long | rows
        if any(col.constant and col.const_long for col in columns):
            return None, np.arange(lo, hi)
        if long is None or not long.any():
            return sel, None
        return lo + np.flatnonzero(~long), lo + np.flatnonzero(long)

    @staticmethod
    def _emit(rows: _Rows, fallback_rows, fallback: Fallback) -> Iterator:
        if rows is not None:
            yield rows.build()
        if fallback_rows is not None and len(fallback_rows):
            yield fallback(fallback_rows)

    def _chunked(self, n: int, step: int, columns: list[_StringColumn], fallback: Fallback,
                 render: Callable[[slice | np.ndarray, int], _Rows]) -> Iterator:
        """A batch of ``n`` rows as JSON, ``step`` rows at a time: ``render(sel, m)`` writes the ``m`` rows ``sel``
        of a chunk; its rows whose strings are too long for that (``columns``) go to ``fallback`` after it."""
        for lo in range(0, n, step):
            sel, slow = self._split(lo, min(lo + step, n), columns)
            if sel is None:
                yield from self._emit(None, slow, fallback)
                continue
            m = (sel.stop - sel.start) if isinstance(sel, slice) else len(sel)
            yield from self._emit(render(sel, m), slow, fallback)

    # ------------------------------------------------------------------ slices
    def _arg_matrix(self, col, sel, strcol: _StringColumn | None) -> np.ndarray:
        if col.kind == "str":
            return strcol.matrix(sel)
        vals = col.values[sel]
        if col.kind == "hex":
            return hex_matrix(vals)
        if col.kind == "vec":
            return vector_matrix(vals)
        return number_matrix(vals)

    def slices(self, b: SliceBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _StringColumn(b.vendor_cat if self.vendor_categories else b.cat, self.tokens)
        name = _StringColumn(b.name, self.tokens)
        str_args = {k: _StringColumn(c.values, self.tokens) for k, c in b.args.items() if c.kind == "str"}
        columns = [cat, name, *str_args.values()]
        ext_col = b.external_id
        no_ext = is_constant(ext_col) and int(ext_col[0]) == 0
        est = 110 + sum(c.width for c in columns) + 24 * len(b.args)
        step = self._chunk_rows(est)
        keys = {k: _key(k) for k in b.args}
        row_args = _row_args_blob(b.row_args) if b.row_args is not None else None

        def render(sel, m: int) -> _Rows:
            rows = _Rows(m)
            self._event_head(rows, b'{"ph":"X","cat":', cat, name, b, sel)
            rows.lit(b',"dur":')
            dur = b.dur[:1] if is_constant(b.dur) else b.dur[sel]
            rows.val(micros_matrix(np.maximum(dur, 0)))
            entries: list[tuple[bytes, np.ndarray, np.ndarray | None]] = []
            if not no_ext:
                ext = ext_col[:1] if is_constant(ext_col) else ext_col[sel]
                present = ext != 0
                if present.all():
                    entries.append((b'"External id":', int_matrix(ext), None))
                elif present.any():
                    entries.append((b'"External id":', int_matrix(ext), present))
            for k, col in b.args.items():
                present = None if col.present is None else col.present[sel]
                if present is not None:
                    if not present.any():
                        continue
                    if present.all():
                        present = None
                entries.append((keys[k], self._arg_matrix(col, sel, str_args.get(k)), present))
            if row_args is not None:  # pre-encoded objects: their members, after "External id"
                blob, starts, lens = row_args
                present = lens[sel] > 0
                if present.any():
                    entries.append((b"", ragged_matrix(np.frombuffer(blob, np.uint8), starts[sel], lens[sel]),
                                    None if present.all() else present))
            if entries:
                self._args_object(rows, entries, m)
            rows.lit(b"},\n")
            return rows

        yield from self._chunked(n, step, columns, fallback, render)

    @staticmethod
    def _args_object(rows: _Rows, entries, m: int) -> None:
        open_at = rows.lit(b',"args":{')
        spans = []
        for j, (key, mat, present) in enumerate(entries):
            start = rows.lit(b"," + key if j else key)
            rows.val(mat)
            spans.append((start, rows.width, present))
        close_at = rows.lit(b"}")
        if all(p is None for _, _, p in spans):
            return
        masks = np.stack([np.ones(m, bool) if p is None else p for _, _, p in spans])
        any_present = masks.any(axis=0)
        first = masks.argmax(axis=0)
        for j, (start, stop, present) in enumerate(spans):
            if present is not None:
                rows.blank(~present, start, stop)
            if j:
                rows.blank((first == j) & any_present, start, start + 1)  # comma of the first present entry
        none = ~any_present
        rows.blank(none, open_at, open_at + len(b',"args":{'))
        rows.blank(none, close_at, close_at + 1)

    # ------------------------------------------------------------------ counters
    def counters(self, b: CounterBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _StringColumn(b.vendor_cat if self.vendor_categories else b.cat, self.tokens)
        name = _StringColumn(b.name, self.tokens)
        columns = [cat, name]
        step = self._chunk_rows(90 + cat.width + name.width + 24 * len(b.values))
        keys = [(_key(k), v) for k, v in b.values.items()]

        def render(sel, m: int) -> _Rows:
            rows = _Rows(m)
            self._event_head(rows, b'{"ph":"C","cat":', cat, name, b, sel)
            rows.lit(b',"args":{')
            for j, (key, values) in enumerate(keys):
                rows.lit(b"," + key if j else key)
                rows.val(float_matrix(values[sel]))
            rows.lit(b"}},\n")
            return rows

        yield from self._chunked(n, step, columns, fallback, render)

    # ------------------------------------------------------------------ flows
    def flows(self, b: FlowBatch, fallback: Fallback) -> Iterator:
        n = len(b)
        cat = _StringColumn(b.cat, self.tokens)
        step = self._chunk_rows(100 + 2 * cat.width)
        phases = np.frombuffer(b'"f""s"', np.uint8).reshape(2, 3)

        def render(sel, m: int) -> _Rows:
            start = b.is_start[:1] if is_constant(b.is_start) else b.is_start[sel]
            rows = _Rows(m)
            rows.lit(b'{"ph":')
            rows.val(phases[start.astype(np.intp)])
            rows.lit(b',"id":')
            rows.val(int_matrix(b.flow_id[:1] if is_constant(b.flow_id) else b.flow_id[sel]))
            rows.lit(b',"pid":')
            rows.val(self._row_id(b.pid, sel, tid=False))
            rows.lit(b',"tid":')
            rows.val(self._row_id(b.tid, sel, tid=True))
            rows.lit(b',"ts":')
            rows.val(_ts_matrix(b.ts, sel))
            rows.lit(b',"cat":')
            cat_mat = cat.matrix(sel)
            rows.val(cat_mat)
            rows.lit(b',"name":')
            rows.val(cat_mat)
            if not start.all():  # "bp": "e" only on "f" rows
                bp = rows.lit(b',"bp":"e"')
                if start.any():
                    rows.blank(start, bp, bp + 9)
            rows.lit(b"},\n")
            return rows

        yield from self._chunked(n, step, [cat], fallback, render)
