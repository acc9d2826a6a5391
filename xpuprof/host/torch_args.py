"""torch's per-op args text (shapes, types, strides, concrete inputs, ...) as one compact blob.

The C scanner hands each op's other args over as the JSON text torch wrote (``{"Input Dims": [[8, 3], []],
...}``: spaces after colons and commas). The trace writes them as orjson writes them (``[[8,3],[]]``), which
used to mean a parse and an encode per op at export (the generic writer path: 40-60 ms of each
ResNet-18 training cycle). Here the whole column is compacted at once with numpy (whitespace outside strings
removed) into a ``RowArgs`` blob that the C row renderer copies as it is. Text is compacted only where that
is orjson's own output byte for byte: a row holding a number with a fraction or an exponent, a ``-0``, an
escape, a control or a non-ASCII byte is parsed and encoded by orjson instead (rare in torch's args).
"""
from __future__ import annotations

import numpy as np
import orjson

from ..trace.builder.columns import RowArgs

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_WHITESPACE = np.frombuffer(b" \t\n\r", np.uint8)
_DIGITS = np.frombuffer(b"0123456789", np.uint8)


def rows_blob(rows: list) -> RowArgs:
    """Encoded objects (bytes or None per row) as one ``RowArgs``, unchanged."""
    lens = np.fromiter(map(len, (r or b"" for r in rows)), np.int64, len(rows))
    return RowArgs(b"".join(r for r in rows if r), np.cumsum(lens) - lens, lens)


def scanned_args(tracescan, raw: bytes, spans: np.ndarray, int_keys: tuple, drop: tuple):
    """(ints, present, the other members as RowArgs, complex flags) of the args objects at ``spans``: the
    members' text stays in one blob (no bytes object per op: 5 ms of a ResNet-18 cycle's 10 k ops)."""
    ints, present, _, _, offsets, blob, complex_rows = tracescan.args(raw, spans, int_keys, (),
                                                                      tuple(k.encode() for k in drop))
    offsets = np.frombuffer(offsets, np.int64)
    return ints, present, RowArgs(blob, offsets[:-1], np.diff(offsets)), np.frombuffer(complex_rows, np.uint8)


def compact_rows(rows: list | RowArgs) -> RowArgs:
    """torch's args objects (bytes or None per op, or a RowArgs whose rows lie one after another in its blob)
    as one blob in orjson's compact form (see the module).

    Works on positions, not on a mask of the whole text: a byte is inside a string when an odd number of
    (unescaped) quotes lie at or before it, asked only of the few bytes that matter (whitespace, number
    forms, ``e`` after a digit, ``-`` before ``0``)."""
    raw = rows if isinstance(rows, RowArgs) else rows_blob(rows)
    blob, lens = raw.blob, raw.lens
    if not len(blob):
        return raw
    nonempty = np.flatnonzero(lens)
    starts = raw.starts[nonempty]
    quotes = np.flatnonzero(blob == _QUOTE)
    odd_rows = [np.flatnonzero(blob == _BACKSLASH), np.flatnonzero(blob >= 0x80)]
    if len(odd_rows[0]):  # a quote after an odd run of backslashes is inside its string
        at = np.arange(len(blob))
        last_plain = np.maximum.accumulate(np.where(blob == _BACKSLASH, -1, at))
        run = quotes - 1 - last_plain[np.maximum(quotes - 1, 0)]
        quotes = quotes[(quotes == 0) | ((run & 1) == 0)]
    per_row = np.diff(np.append(np.searchsorted(quotes, starts), len(quotes)))
    if (per_row & 1).any():  # a row that does not close its strings: left as torch wrote it
        return _canonical(rows, np.ones(len(rows), bool))

    def outside(pos: np.ndarray) -> np.ndarray:
        return pos[(np.searchsorted(quotes, pos, side="right") & 1) == 0]

    low = np.flatnonzero(blob <= 0x20)  # whitespace and control bytes
    is_ws = np.isin(blob[low], _WHITESPACE)
    drop = outside(low[is_ws])
    odd_rows.append(low[~is_ws])  # a control byte: orjson escapes it
    # orjson may write these numbers differently: 1.50 -> 1.5, 1E5 -> 100000.0, 1e+5, 1e5, -0 -> 0
    odd_rows.append(outside(np.flatnonzero((blob == ord(".")) | (blob == ord("E")) | (blob == ord("+")))))
    e_at = np.flatnonzero(blob[1:] == ord("e")) + 1
    odd_rows.append(outside(e_at[np.isin(blob[e_at - 1], _DIGITS)]))
    minus = np.flatnonzero(blob[:-1] == ord("-"))
    odd_rows.append(outside(minus[blob[minus + 1] == ord("0")]))
    row_of = lambda pos: np.searchsorted(starts, pos, side="right") - 1  # noqa: E731 (blob position -> row)
    new_lens = np.zeros(len(rows), np.int64)
    new_lens[nonempty] = lens[nonempty] - np.bincount(row_of(drop), minlength=len(nonempty))
    out = np.delete(blob, drop)
    odd_at = np.concatenate(odd_rows)
    if len(odd_at):
        redo = np.zeros(len(rows), bool)
        redo[nonempty[row_of(odd_at)]] = True
        return _canonical(rows, redo, out, new_lens)
    return RowArgs(out, np.cumsum(new_lens) - new_lens, new_lens)


def _canonical(rows: list, redo: np.ndarray, compact: np.ndarray | None = None,
               compact_lens: np.ndarray | None = None) -> RowArgs:
    """The rows ``redo`` marks parsed and encoded by orjson (kept as written when they do not parse); the
    others taken from the compacted blob."""
    out: list = []
    at = 0
    for i, row in enumerate(rows):
        width = 0 if compact_lens is None else int(compact_lens[i])
        if redo[i] and row:
            try:
                out.append(orjson.dumps(orjson.loads(row)))
            except orjson.JSONDecodeError:
                out.append(bytes(row))
        elif row:
            out.append(compact[at:at + width].tobytes())
        else:
            out.append(None)
        at += width
    return rows_blob(out)


def select(row_args, rows: np.ndarray):
    """Rows ``rows`` of a per-op args column (a ``RowArgs`` or a list): a ``RowArgs`` over the same blob,
    None when none of those rows has args."""
    if row_args is None:
        return None
    if not isinstance(row_args, RowArgs):
        row_args = rows_blob(row_args)
    lens = row_args.lens[rows]
    return RowArgs(row_args.blob, row_args.starts[rows], lens) if (lens > 2).any() else None
