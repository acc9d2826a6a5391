"""torch's per-op args text (shapes, types, strides, concrete inputs, ...) as one compact blob.

The C scanner hands each op's other args over as the JSON text torch wrote (``{"Input Dims": [[8, 3], []],
...}``: spaces after colons and commas). The trace writes them as orjson writes them (``[[8,3],[]]``), which
used to mean a parse and an encode per op at export (the generic writer path: 40-60 ms of each
ResNet-18 training cycle). ``tracescan.args(..., compact=True)`` drops the whitespace outside strings as it
copies each row into one ``RowArgs`` blob that the C row renderer copies as it is. Text is left to C only
where that is orjson's own output byte for byte: a row holding a number with a fraction or an exponent, a
``-0``, an escape, a control or a non-ASCII byte is parsed and encoded by orjson instead (rare in torch's args).
"""
from __future__ import annotations

import numpy as np
import orjson

from ..trace.builder.columns import RowArgs


def rows_blob(rows: list) -> RowArgs:
    """Encoded objects (bytes or None per row) as one ``RowArgs``, unchanged."""
    lens = np.fromiter(map(len, (r or b"" for r in rows)), np.int64, len(rows))
    return RowArgs(b"".join(r for r in rows if r), np.cumsum(lens) - lens, lens)


def scanned_args(tracescan, raw: bytes, spans: np.ndarray, int_keys: tuple, drop: tuple):
    """(ints, present, the other members as RowArgs in orjson's compact form, complex flags) of the args objects
    at ``spans``: the members' text stays in one blob (no bytes object per op: 5 ms of a ResNet-18 cycle's
    10 k ops), compacted in C as it is copied (a numpy pass over the blob after the copy cost 7 ms).
    The rows C flags as not in orjson's form (an escape, a fraction, ...) are parsed and encoded by orjson."""
    ints, present, _, _, offsets, blob, flags = tracescan.args(raw, spans, int_keys, (),
                                                               tuple(k.encode() for k in drop), True)
    offsets, flags = np.frombuffer(offsets, np.int64), np.frombuffer(flags, np.uint8)
    others = RowArgs(blob, offsets[:-1], np.diff(offsets))
    redo = (flags & 2) != 0
    if redo.any():
        others = _canonical(others, redo)
    return ints, present, others, flags & 1


def _canonical(rows: RowArgs, redo: np.ndarray) -> RowArgs:
    """``rows`` with those ``redo`` marks parsed and encoded by orjson (the scanner checked they are JSON); the
    others as they are."""
    return rows_blob([orjson.dumps(orjson.loads(row)) if redo[i] and row else row for i, row in enumerate(rows)])


def select(row_args, rows: np.ndarray):
    """Rows ``rows`` of a per-op args column (a ``RowArgs`` or a list): a ``RowArgs`` over the same blob,
    None when none of those rows has args."""
    if row_args is None:
        return None
    if not isinstance(row_args, RowArgs):
        row_args = rows_blob(row_args)
    lens = row_args.lens[rows]
    return RowArgs(row_args.blob, row_args.starts[rows], lens) if (lens > 2).any() else None
