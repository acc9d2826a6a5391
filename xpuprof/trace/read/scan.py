"""Columns of a trace's events without a Python object per event (``xpuprof report``'s reader).

``scan(path)`` runs the C scanner (``xpuprof._native.tracescan``) over the file's bytes: one strict
JSON pass that keeps ph, name, cat, ts, dur, pid and tid per event as columns, the distinct name
and category strings once each, and every event's byte range so a caller can read the few events
it needs whole (``event(i)``). It returns None whenever the general reader must decide instead:
the C part is not built, the JSON is invalid (the general reader then gives the exact error), or
the document is shaped in a way the scanner does not model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from .load import TraceLoadError, read_trace_bytes

TS, DUR, PID, TID, ID = range(5)
FIELDS = 5  # numeric fields the scanner keeps per event
ABSENT, INT, DOUBLE = 0, 1, 2

_UNSET = object()
_native_module = _UNSET


def _native():
    global _native_module
    if _native_module is _UNSET:
        try:
            from ..._native import tracescan
        except ImportError:
            tracescan = None
        _native_module = tracescan
    return _native_module


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


def read_bytes(path: Path) -> bytes:
    """The file's JSON bytes (gzip undone, bounded); ``TraceLoadError`` for what cannot be read."""
    return read_trace_bytes(path)


def _decode_strings(raw: bytes, ranges: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Distinct raw string bodies -> distinct decoded strings, and the raw id -> decoded id table
    (two spellings of one string, e.g. with and without a \\u escape, become one)."""
    seen: dict[str, int] = {}
    out: list[str] = []
    remap = np.empty(len(ranges), np.int32)
    for i, (s, e) in enumerate(ranges.tolist()):
        body = raw[s:e]
        text = orjson.loads(b'"' + body + b'"') if b"\\" in body else body.decode("utf-8")
        got = seen.get(text)
        if got is None:
            got = seen[text] = len(out)
            out.append(text)
        remap[i] = got
    return out, remap


def scan_bytes(raw: bytes) -> ScannedEvents | None:
    native = _native()
    if native is None:
        return None
    got = native.scan(raw)
    if got is None:
        return None
    members, n, ph, name, cat, kind, num, span, cx, strings, args_span = got
    header = {}
    for ks, ke, vs, ve in np.frombuffer(members, np.int64).reshape(-1, 4).tolist():
        header[orjson.loads(raw[ks:ke])] = orjson.loads(raw[vs:ve])
    texts, remap = _decode_strings(raw, np.frombuffer(strings, np.int64).reshape(-1, 2))

    def ids(buf):
        a = np.frombuffer(buf, np.int32)
        return np.where(a >= 0, remap[np.maximum(a, 0)] if len(remap) else a, -1).astype(np.int32)

    return ScannedEvents(raw, header, np.frombuffer(ph, np.uint8), ids(name), ids(cat),
                         np.frombuffer(kind, np.uint8).reshape(n, FIELDS),
                         np.frombuffer(num, np.uint8).reshape(n, 8 * FIELDS).view(np.uint64),
                         np.frombuffer(span, np.int64).reshape(n, 2), np.frombuffer(cx, np.uint8).astype(bool), texts,
                         np.frombuffer(args_span, np.int64).reshape(n, 2))


def scan(path) -> ScannedEvents | None:
    """The trace's event columns, or None when the general reader (``load``) must read it."""
    path = Path(path)
    if not path.exists():
        raise TraceLoadError(f"trace file not found: {path}")
    return scan_bytes(read_bytes(path))
