"""Columns of a document's events held in memory (torch's own trace, which the host stage reads from the
bytes torch hands over): ``scan_bytes`` runs the one C scanner (``xpuprof._native.tracescan``, the scanner
behind ``kineto.read_trace``) over the whole buffer.

It keeps ph, name, cat, ts, dur, pid and tid per event as columns, the distinct name and category strings
once each, and every event's byte range so a caller can read the few events it needs whole
(``event(i)``). It returns None whenever the general reader must decide instead: the C part is not built,
the JSON is invalid (the general reader then gives the exact error), or the document is shaped in a way
the scanner does not model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from .kineto_stream import ABSENT, DOUBLE, DUR, FIELDS, ID, INT, PID, TID, TS, decode_strings, native  # noqa: F401
from .source import read_document

_decode_strings = decode_strings  # the names these had
_native = native


@dataclass
class ScannedEvents:
    raw: bytes  # the document (decompressed); spans index into it
    header: dict  # the top-level keys other than traceEvents
    ph: np.ndarray  # uint8: the one-character "ph", 0 when absent
    name: np.ndarray  # int32 index into strings, -1 when absent
    cat: np.ndarray  # int32 index into strings, -1 when absent
    kind: np.ndarray  # uint8 (n, 5): ts, dur, pid, tid, id: ABSENT, INT or DOUBLE
    num: np.ndarray  # 8 bytes (n, 5): view as int64 or float64 by kind
    span: np.ndarray  # int64 (n, 2): the event's bytes
    complex: np.ndarray  # bool: a field the columns do not hold exactly; read the event itself
    strings: list[str]  # distinct decoded strings (names and categories)
    args_span: np.ndarray  # int64 (n, 2): the "args" object's bytes, (-1, -1) when absent

    def __len__(self) -> int:
        return len(self.ph)

    def event(self, i: int) -> dict:
        s, e = self.span[i].tolist()
        return orjson.loads(self.raw[s:e])

    def ints(self, field: int) -> np.ndarray:
        return self.num[:, field].view(np.int64)

    def floats(self, field: int) -> np.ndarray:
        return self.num[:, field].view(np.float64)

    def numbers(self, field: int) -> np.ndarray:
        """The field as float64 whichever way each event spelled it (absent: 0)."""
        kind = self.kind[:, field]
        return np.where(kind == INT, self.ints(field).astype(np.float64),
                        np.where(kind == DOUBLE, self.floats(field), 0.0))


def scan_bytes(raw: bytes) -> ScannedEvents | None:
    """The document's event columns, or None (the general reader decides: see the module docstring)."""
    ts = native()
    if ts is None:
        return None
    status, start, members = ts.header(raw, True)
    if status != 1:
        return None
    (n, ph, name, cat, kind, num, span, cx, strings, args_span, _aux, _exact, consumed, _state, status,
     _error_at) = ts.events(raw, start, 0, True)
    if status != 1:
        return None
    header = {}
    for ks, ke, vs, ve in np.frombuffer(members, np.int64).reshape(-1, 4).tolist():
        header[orjson.loads(raw[ks:ke])] = orjson.loads(raw[vs:ve])
    tail = raw[consumed:].strip()
    bare = raw.lstrip()[:1] == b"["
    if tail != (b"" if bare else b"}"):
        if bare or not tail.startswith(b","):
            return None
        try:
            more = orjson.loads(b"{" + tail[1:])
        except orjson.JSONDecodeError:
            return None
        if "traceEvents" in more:
            return None
        header.update(more)
    texts, remap = decode_strings(raw, np.frombuffer(strings, np.int64).reshape(-1, 2))

    def ids(buf):
        a = np.frombuffer(buf, np.int32)
        return np.where(a >= 0, remap[np.maximum(a, 0)] if len(remap) else a, -1).astype(np.int32)

    return ScannedEvents(raw, header, np.frombuffer(ph, np.uint8), ids(name), ids(cat),
                         np.frombuffer(kind, np.uint8).reshape(n, FIELDS),
                         np.frombuffer(num, np.uint8).reshape(n, 8 * FIELDS).view(np.uint64),
                         np.frombuffer(span, np.int64).reshape(n, 2), np.frombuffer(cx, np.uint8).astype(bool), texts,
                         np.frombuffer(args_span, np.int64).reshape(n, 2))


def scan(path) -> ScannedEvents | None:
    """The trace file's event columns, or None when the general reader (``load``) must read it."""
    return scan_bytes(read_document(Path(path)))
