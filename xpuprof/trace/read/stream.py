"""A trace's event columns read piece by piece, so memory is bounded by the piece, not the file.

``scan_stream(path, read_whole)`` gives ``scan()``'s columns without ever holding the document's
bytes whole: the file is read (gzip undone) in blocks, ``tracescan.scan_run`` scans the event objects each block
holds whole (the rest waits for the next block); the blocks' strings are merged into one table. The bytes of each block are dropped once scanned, so the events a caller must read whole
(``read_whole`` picks them per block, from the block's columns) are read then and kept as dicts.
The top-level keys are scanned from the bytes before and after the traceEvents array.

It returns None whenever the whole-document reader (``scan.scan``, then ``load``) must decide, so
every refusal and error reads as theirs: the C part is not built, the path is not a regular file or
is over the input limit (``inputs``), a read or gzip error, a block that is not what the scanner
models, or an unusual shape (the bare-array form, "traceEvents" spelled twice, nested or escaped). Valid pieces with valid separators make a
valid document, so the columns never depend on which of the two scans ran.
"""
from __future__ import annotations

import gzip
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import orjson

from ...inputs import max_input_bytes
from .scan import FIELDS, ScannedEvents, _decode_strings, _native

BLOCK = 16 << 20  # bytes read at a time; a block's columns are about a third of its bytes
_KEY = b'"traceEvents"'
_WS = b" \t\r\n"


@dataclass
class StreamedEvents(ScannedEvents):
    """``ScannedEvents`` without the document's bytes (``raw`` and the spans are None): the events
    read whole are those ``read_whole`` picked, by event index."""

    whole: dict[int, dict] = field(default_factory=dict)

    def event(self, i: int) -> dict:
        try:
            return self.whole[i]
        except KeyError:
            raise KeyError(f"event {i} was not read whole by scan_stream's read_whole") from None


class _Fallback(Exception):
    """The whole-document reader must decide (and word any error): see ``scan_stream``."""


class _Blocks:
    """The document's bytes in blocks (gzip undone). Anything unusual (a read or gzip error, more
    bytes than the input limit) raises ``_Fallback``: the whole-document reader then gives its own
    answer or error for the same file."""

    def __init__(self, path: Path):
        self.path, self.total, self.limit = path, 0, max_input_bytes()
        self.raw = self.f = open(path, "rb")
        try:
            gz = self.raw.read(2) == b"\x1f\x8b"
            self.raw.seek(0)
            if gz:
                try:
                    from isal import igzip as gzmod
                except ImportError:
                    gzmod = gzip
                self.f = gzmod.open(self.raw, "rb")
        except Exception:
            self.raw.close()
            raise

    def read(self) -> bytes:
        try:
            got = self.f.read(BLOCK)
        except Exception:  # noqa: BLE001 - corrupt, truncated or trailing data: the whole reader words it
            raise _Fallback from None
        self.total += len(got)
        if self.total > self.limit:
            raise _Fallback
        return got

    def close(self) -> None:
        try:
            self.f.close()
        finally:
            self.raw.close()


def _array_start(head: bytes) -> int | None:
    """Just after the '[' of the one top-level "traceEvents" key, or None (the whole scan decides)."""
    at = head.find(_KEY)
    if at < 0 or head.find(_KEY, at + 1) >= 0:
        return None
    p = at + len(_KEY)
    while p < len(head) and head[p] in _WS:
        p += 1
    if p >= len(head) or head[p] != ord(":"):
        return None
    p += 1
    while p < len(head) and head[p] in _WS:
        p += 1
    if p >= len(head) or head[p] != ord("["):
        return None
    return p + 1


def scan_stream(path, read_whole: Callable[[ScannedEvents], np.ndarray]) -> StreamedEvents | None:
    """The trace's event columns read in blocks, or None when ``scan.scan`` must read it whole.
    ``read_whole(block)`` returns the mask of the block's events to keep as dicts (the block's
    ``strings`` hold every string seen so far, its ids index them)."""
    native = _native()
    path = Path(path)
    if native is None or not hasattr(native, "scan_run"):
        return None
    try:  # regular files within the input limit; the whole reader answers for the rest
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_input_bytes():
            return None
        blocks = _Blocks(path)
    except OSError:
        return None
    try:
        return _scan_blocks(native, blocks, read_whole)
    except _Fallback:
        return None
    finally:
        blocks.close()


def _scan_blocks(native, blocks: _Blocks, read_whole) -> StreamedEvents | None:
    head = b""
    while True:  # the bytes up to the array's '[' (the keys before it)
        more = blocks.read()
        head += more
        start = _array_start(head)
        if start is not None or not more:
            break
    if start is None:
        return None
    prefix, buf, pos, first = head[:start], head, start, True
    del head
    strings: list[str] = []
    ids: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ph", "name", "cat", "kind", "num", "complex")}
    whole: dict[int, dict] = {}
    count = 0
    eof = False
    while True:
        got = native.scan_run(buf, pos, first)
        if got is None:
            return None
        cols, resume, closed = got
        if cols[1]:
            count = _add_run(buf, cols, strings, ids, parts, whole, count, read_whole)
            first = False
        del cols, got
        if closed:
            tail = buf[resume:]
            break
        if eof:
            return None  # the file ends inside the array
        more = blocks.read()
        eof = not more
        buf, pos = buf[resume:] + more, 0
        del more
    while True:
        more = blocks.read()
        if not more:
            break
        tail += more
    if _KEY in tail:
        return None
    got = native.scan(prefix + b"]" + tail)
    if got is None or got[1] != 0:
        return None
    doc = prefix + b"]" + tail
    header = {}
    for ks, ke, vs, ve in np.frombuffer(got[0], np.int64).reshape(-1, 4).tolist():
        header[orjson.loads(doc[ks:ke])] = orjson.loads(doc[vs:ve])
    cols = {k: (np.concatenate(v) if v else np.zeros(0, np.uint8)) for k, v in parts.items()}
    parts.clear()
    n = count
    return StreamedEvents(None, header, cols["ph"].astype(np.uint8, copy=False),
                          cols["name"].astype(np.int32, copy=False), cols["cat"].astype(np.int32, copy=False),
                          cols["kind"].astype(np.uint8, copy=False).reshape(n, FIELDS),
                          cols["num"].view(np.uint64).reshape(n, FIELDS), None,
                          cols["complex"].astype(bool, copy=False), strings, None, whole)


def _add_run(buf: bytes, got, strings: list[str], ids: dict[str, int], parts, whole, count: int, read_whole) -> int:
    """One run's columns appended, its string ids made global, its events read whole picked and read."""
    _, n, ph, name, cat, kind, num, span, cx, raw_strings, _ = got
    texts, remap = _decode_strings(buf, np.frombuffer(raw_strings, np.int64).reshape(-1, 2))
    to_global = np.empty(len(texts) + 1, np.int32)
    for i, t in enumerate(texts):
        g = ids.get(t)
        if g is None:
            g = ids[t] = len(strings)
            strings.append(t)
        to_global[i] = g
    to_global[-1] = -1

    def global_ids(b):
        a = np.frombuffer(b, np.int32)
        return to_global[np.where(a >= 0, remap[np.maximum(a, 0)] if len(remap) else -1, -1)]

    block = ScannedEvents(buf, {}, np.frombuffer(ph, np.uint8), global_ids(name), global_ids(cat),
                          np.frombuffer(kind, np.uint8).reshape(n, FIELDS),
                          np.frombuffer(num, np.uint8).reshape(n, 8 * FIELDS).view(np.uint64),
                          np.frombuffer(span, np.int64).reshape(n, 2), np.frombuffer(cx, np.uint8).astype(bool),
                          strings, None)
    for i in np.flatnonzero(read_whole(block)).tolist():
        whole[count + i] = block.event(i)
    parts["ph"].append(block.ph)
    parts["name"].append(block.name)
    parts["cat"].append(block.cat)
    parts["kind"].append(block.kind.reshape(-1))
    parts["num"].append(np.frombuffer(num, np.uint8))
    parts["complex"].append(block.complex)
    return count + n
