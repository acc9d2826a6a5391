"""Where a slice's args live in the trace table, and how they get there.

Flat columns (``SliceColumns``) hold the args the analyses read as typed columns (``store_schema.INT_ARGS``:
``External id``, ``correlation``, ``stream``, ``device``, ``bytes``, the two wait ids; ``FLOAT_ARGS``: the
memory bandwidth), and every other member of the args object as JSON text, one object per row, exactly as
the Kineto JSON file holds it (``RowText``: the store's ``args`` column). A key the typed columns take whose
value is not of their type (a string ``stream``) stays in the text.

From a Kineto JSON file the C part ``tracescan.args`` splits each args object's text (no Python object
per row); from a TraceBuilder batch the typed arg columns are taken as they are and only the others are
rendered, by the Chrome writer's own C formatter (``rowtext``), so the text is the file's. What neither C
path can take exactly (an escaped key, an ``obj`` arg column, a row's pre-encoded args that repeat a key
the writer adds) goes through the one Python rule: ``args_objects`` builds each row's object as the
Chrome writer writes it and ``split_args_dict`` splits it.
"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np
import orjson

from ..builder.columns import ArgColumn, RowArgs, SliceBatch
from ..store_schema import FLOAT_ARGS, INT_ARGS
from . import rowtext
from .columns import FLOAT_COLUMNS, INT_COLUMNS, RowText

INT_KEYS = tuple(k.encode() for k in INT_ARGS)
FLOAT_KEYS = tuple(k.encode() for k in FLOAT_ARGS)

_UNSET = object()
_scanner = _UNSET


def tracescan():
    """The C part (the one JSON scanner, ``xpuprof._native.tracescan``), or None when xpuprof was built
    without a C compiler."""
    global _scanner
    if _scanner is _UNSET:
        from ... import _native

        _scanner = _native.optional("tracescan")
    return _scanner


# ----------------------------------------------------------------------------- one row's object (the rule)
def plain(value):
    """A number as the JSON value Kineto writes (non-finite floats quoted)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _indices(sel, n: int) -> list[int]:
    if isinstance(sel, slice):
        return list(range(*sel.indices(n)))
    return np.asarray(sel).tolist()


def column_values(col: ArgColumn, strings: Sequence[str], sel) -> tuple[list, list | None]:
    """An arg column's rows ``sel`` as the JSON values the writer writes, and its present flags."""
    vals = col.values[sel] if col.kind != "obj" else [col.values[i] for i in _indices(sel, len(col))]
    if col.kind == "str":
        out = [strings[i] for i in vals.tolist()]
    elif col.kind == "hex":
        out = [f"0x{v:016x}" for v in vals.astype(np.uint64).tolist()]
    elif col.kind == "obj":
        out = list(vals)
    elif col.kind == "vec":
        out = [[plain(x) for x in row] for row in vals.tolist()]
    else:
        out = [plain(v) for v in vals.tolist()] if vals.dtype.kind == "f" else vals.tolist()
    present = None if col.present is None else col.present[sel].tolist()
    return out, present


def args_objects(b: SliceBatch, strings: Sequence[str], sel) -> list[dict | None]:
    """Each row's args object as the Chrome writer writes it: "External id" first (when not 0), then the
    arg columns present on the row, then the row's pre-encoded args merged in; None for a row without args."""
    ext = b.external_id[sel].tolist()
    arg_cols = [(k, *column_values(c, strings, sel)) for k, c in b.args.items()]
    row_args = [b.row_args[i] for i in _indices(sel, len(b))] if b.row_args is not None else None
    out: list[dict | None] = []
    for i in range(len(ext)):
        args = {}
        if ext[i]:
            args["External id"] = ext[i]
        for k, vals, present in arg_cols:
            if present is None or present[i]:
                args[k] = vals[i]
        if row_args is not None and row_args[i] is not None:
            args.update(orjson.loads(row_args[i]))
        out.append(args or None)
    return out


def typed_value(value, as_int: bool):
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
            got = typed_value(v, True)
            if got is not None:
                ints[col] = got
                continue
        col = FLOAT_ARGS.get(k)
        if col is not None and col not in floats:
            got = typed_value(v, False)
            if got is not None:
                floats[col] = got
                continue
        rest[k] = v
    return ints, floats, (orjson.dumps(rest) if rest else None)


# ----------------------------------------------------------------------------- the columns of n rows
class TypedArgs:
    """The typed args columns and the rest, for n rows, filled from JSON text or parsed objects."""

    def __init__(self, n: int) -> None:
        self.n = n
        # one row per column (column-major: each column contiguous)
        self.ints = np.zeros((len(INT_ARGS), n), np.int64)
        self.int_present = np.zeros((len(INT_ARGS), n), bool)
        self.floats = np.zeros((len(FLOAT_ARGS), n), np.float64)
        self.float_present = np.zeros((len(FLOAT_ARGS), n), bool)
        self.rest_offsets = np.zeros(n + 1, np.int64)
        self.rest_blob = b""

    @classmethod
    def from_text(cls, buf, spans: np.ndarray) -> "TypedArgs":
        """Rows from the JSON objects at ``spans`` (int64 [n, 2] byte ranges of ``buf``; -1: none)."""
        n = len(spans)
        out = cls(n)
        mod = tracescan()
        spans = np.ascontiguousarray(spans, np.int64).reshape(n, 2)
        if mod is None:
            raw = bytes(buf)
            out.replace_rows(np.arange(n), [orjson.loads(raw[s:e]) if s >= 0 else None for s, e in spans.tolist()])
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
    def from_dicts(cls, objects: Sequence[dict | None]) -> "TypedArgs":
        out = cls(len(objects))
        if any(obj is not None for obj in objects):  # rows without args: the empty columns as made
            out.replace_rows(np.arange(len(objects)), objects)
        return out

    def replace_rows(self, rows: np.ndarray, objects: Sequence[dict | None]) -> None:
        """Rows ``rows`` from parsed args objects (odd rows; every row for the pure-Python path)."""
        rests: dict[int, bytes] = {}
        for r, obj in zip(np.asarray(rows).tolist(), objects):
            ints, floats, rest = split_args_dict(obj)
            self.int_present[:, r] = False
            self.float_present[:, r] = False
            for j, c in enumerate(INT_COLUMNS):
                if c in ints:
                    self.ints[j, r], self.int_present[j, r] = ints[c], True
            for j, c in enumerate(FLOAT_COLUMNS):
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
        j = INT_COLUMNS.index(column)
        self.ints[j] = values
        self.int_present[j] = True if present is None else present

    def set_float(self, column: str, values: np.ndarray, present: np.ndarray | None) -> None:
        j = FLOAT_COLUMNS.index(column)
        self.floats[j] = values
        self.float_present[j] = True if present is None else present

    def columns(self) -> tuple[dict, dict, RowText]:
        """(ints, floats, rest) as ``SliceColumns`` holds them: only the typed columns some row has."""
        has_int, has_float = self.int_present.any(axis=1).tolist(), self.float_present.any(axis=1).tolist()
        ints = {c: (self.ints[j], self.int_present[j]) for j, c in enumerate(INT_COLUMNS) if has_int[j]}
        floats = {c: (self.floats[j], self.float_present[j]) for j, c in enumerate(FLOAT_COLUMNS) if has_float[j]}
        return ints, floats, RowText(self.rest_offsets, self.rest_blob)


# ----------------------------------------------------------------------------- a builder batch's args
def batch_args(b: SliceBatch, sel: slice, strings: Sequence[str], tokens: rowtext.StringTokens) -> TypedArgs:
    """Rows ``sel`` of a builder batch: the typed columns straight from their arg columns (and External id
    from its own column), the other args rendered by the writer's C formatter into the rows' JSON text -
    which is the ``args`` column as it is, unless it may hold a key the typed columns take (then the C
    splitter applies the typed rule); the generic rule (``args_objects``) for what C cannot render exactly."""
    n = sel.stop - sel.start
    row_args = None if b.row_args is None else rowtext.row_args_part(b.row_args, sel)
    if row_args is not None and (b.args or rowtext.mentions_external_id(row_args)):
        return _from_objects(b, sel, list(b.args), strings)  # the writer merges these one object per row
    direct = {k: c for k, c in b.args.items() if _direct(k, c, sel)}
    rest = [k for k in b.args if k not in direct]
    text = _args_text(b, sel, rest, tokens, external_id=False) if rest or row_args is not None else None
    if text is None and (rest or row_args is not None):
        return _from_objects(b, sel, list(b.args), strings)
    if text is None:
        out = TypedArgs(n)
    elif any(k in INT_ARGS or k in FLOAT_ARGS for k in rest) or (row_args is not None and _TYPED_KEY.search(
            row_args.blob if isinstance(row_args, RowArgs) else b"".join(a for a in row_args if a))):
        out = _from_rendered(text, split=True)
    else:
        out = _from_rendered(text, split=False)  # the rendered objects are the args column, as they are
    ext = np.asarray(b.external_id[sel], np.int64)
    out.set_int("external_id", ext, ext != 0)
    for k, c in direct.items():
        present = None if c.present is None else np.asarray(c.present[sel], bool)
        if k in INT_ARGS:
            out.set_int(INT_ARGS[k], np.asarray(c.values[sel]), present)
        else:
            out.set_float(FLOAT_ARGS[k], np.asarray(c.values[sel]), present)
    return out


_TYPED_KEY = re.compile(b"|".join(re.escape(orjson.dumps(k)) for k in (*INT_ARGS, *FLOAT_ARGS)))


def _from_objects(b: SliceBatch, sel: slice, keys: list[str], strings) -> TypedArgs:
    objs: list[Any] = args_objects(b, strings, sel)
    if len(keys) != len(b.args):
        objs = [{k: v for k, v in o.items() if k in keys} if o else o for o in objs]
    return TypedArgs.from_dicts(objs)


def _from_rendered(text: bytes, *, split: bool) -> TypedArgs:
    """Rows rendered as ``{...}\n`` (``\n`` alone: no args): split by the C splitter, or taken as they are."""
    buf = np.frombuffer(text, np.uint8)
    ends = np.flatnonzero(buf == 10)  # one "\n" per row: JSON text never holds a raw newline
    starts = np.concatenate([[0], ends[:-1] + 1])
    if split:
        spans = np.stack([starts, ends], axis=1).astype(np.int64)
        spans[starts == ends] = -1
        return TypedArgs.from_text(text, spans)
    out = TypedArgs(len(ends))
    lens = ends - starts
    out.rest_offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    out.rest_blob = bytes(buf[buf != 10]) if len(ends) else b""
    return out


def _args_text(b: SliceBatch, sel: slice, keys: list[str], tokens, external_id: bool) -> bytes | None:
    """The rows' args objects (``keys`` of them, and External id when asked) rendered in C (``{...}\\n``
    per row, ``\\n`` for none); None when a column needs the generic path."""
    fmt = rowtext.rowfmt
    if fmt is None or not all(rowtext.fast_arg(b.args[k]) for k in keys):
        return None
    row_args = None if b.row_args is None else rowtext.row_args_part(b.row_args, sel)
    if row_args is not None and (b.args or rowtext.mentions_external_id(row_args)):
        return None  # the generic path merges these (one object per row)
    segs = rowtext.Segments()
    items = []
    if external_id:
        ext = np.ascontiguousarray(b.external_id[sel], np.int64)
        mask = rowtext.mask_of(ext != 0)
        if mask is not False:
            items.append((None, ext, mask))
    tables = {k: rowtext.TokenTable(b.args[k].values, tokens) for k in keys if b.args[k].kind == "str"}
    for k in keys:
        col = b.args[k]
        mask = rowtext.mask_of(None if col.present is None else col.present[sel])
        if mask is not False:
            items.append((k, col, mask))
    if row_args is not None:  # each row's members copied from one blob (the host recorder's args area)
        spans = rowtext.row_args_blob(row_args)
        mask = rowtext.mask_of(spans[2] > 0)
        if mask is not False:
            items.append(("", spans, mask))
    if items:
        optional = any(m is not None for _, _, m in items)
        entry = fmt.ENTRY if optional else 0
        if optional:
            segs.add(fmt.LIT, prefix=b"{", flags=fmt.OPEN)
        else:
            segs.lit(b"{")
        for j, (k, col, mask) in enumerate(items):
            first = not optional and j == 0
            if k is None:
                segs.add(fmt.INT, col, prefix=b'"External id":' if first else b',"External id":', mask=mask, flags=entry)
            elif k == "":
                segs.add(fmt.SPANS, col[0], col[1], col[2], prefix=b"" if first else b",", mask=mask, flags=entry)
            else:
                key = rowtext.key_token(k) if first else b"," + rowtext.key_token(k)
                rowtext.add_arg(segs, col, sel, key, mask, tables.get(k), entry)
        if optional:
            segs.add(fmt.LIT, prefix=b"}", flags=fmt.CLOSE)
        else:
            segs.lit(b"}")
    segs.lit(b"\n")
    return segs.render(sel.stop - sel.start)


def _direct(key: str, col, sel: slice) -> bool:
    """Whether a numeric column of a typed arg goes straight into its column: exactly what the JSON
    writer's text would give through the splitter (ints for int args; finite numbers for float args)."""
    if col.kind != "num" or not isinstance(col.values, np.ndarray) or col.values.ndim != 1:
        return False
    kind = col.values.dtype.kind
    if key in INT_ARGS:
        if kind == "i":
            return True
        return kind == "u" and (col.values.dtype.itemsize < 8 or not len(col.values[sel])
                                or int(col.values[sel].max()) < 1 << 63)
    if key in FLOAT_ARGS:
        return kind in "iuf" and bool(np.isfinite(col.values[sel]).all())
    return False


def row_args_text(row_args, sel: slice) -> RowText:
    """A batch's pre-encoded per-row objects (instants) as ``RowText`` (``{}`` counts as none)."""
    part = rowtext.row_args_part(row_args, sel)
    if isinstance(part, RowArgs):
        lens = np.where(part.lens > 2, part.lens, 0)
        return RowText.from_rows([part.blob[s:s + n].tobytes() if n else None
                                  for s, n in zip(part.starts.tolist(), lens.tolist())])
    return RowText.from_rows([None if a is None or a == b"{}" else a for a in part])
