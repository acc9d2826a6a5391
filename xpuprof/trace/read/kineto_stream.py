"""A Kineto/Chrome JSON trace (``.json`` or ``.json.gz``; torch's, ours, any Kineto's) read in chunks.

Memory stays bounded by the chunk size whatever the file's size: the C part
``xpuprof._native.tracestream`` parses the document with tracescan's strict grammar in pieces,
keeping per event ph, name, cat, ts, dur, pid, tid, id, the "s"/"bp" letter and the byte ranges of
the event and of its args, as columns; the top-level keys before and after ``traceEvents`` are read
whole. ``EventChunk`` hands one piece's columns on, with the bytes their ranges point into.

Without the C part the file is parsed whole (orjson) and its events are handed on in chunks of
parsed objects: the same rows, without the memory bound.
"""
from __future__ import annotations

import gzip
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

from ...inputs import max_input_bytes, too_large
from . import scan as _scan

log = logging.getLogger("xpuprof")

CHUNK_BYTES = 32 << 20  # read (and decompressed) per step
MAX_HEADER_BYTES = 256 << 20  # the top-level keys before traceEvents
MAX_EVENT_BYTES = 256 << 20  # one event; a longer one (or an unterminated one) is an error
MAX_TAIL_BYTES = 256 << 20  # the top-level keys after traceEvents
DICT_CHUNK_EVENTS = 65536


class TraceStreamError(ValueError):
    """A file that is not a readable Chrome trace; the message names the file and what is wrong."""


@dataclass
class EventChunk:
    """Events ``first_idx ..`` of the traceEvents array. Columns as ``trace.read.scan.ScannedEvents``
    (ph, name/cat ids into ``strings``, kind/num, span, complex, args_span) plus ``aux``; ``buf``
    holds the bytes the spans index. ``objects``: the events already parsed (the path without the
    C part), in which case the columns are empty."""

    first_idx: int
    buf: bytes
    n: int
    ph: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    kind: np.ndarray
    num: np.ndarray
    span: np.ndarray
    complex: np.ndarray
    args_span: np.ndarray
    aux: np.ndarray
    exact: np.ndarray  # int64 [n, 2]: ts and dur in ns, exact from the numbers' text (3 decimals or fewer)
    strings: list[str]
    objects: list[dict] | None = None

    def ints(self, f: int) -> np.ndarray:
        return self.num[:, f].view(np.int64)

    def floats(self, f: int) -> np.ndarray:
        return self.num[:, f].view(np.float64)

    def event(self, i: int) -> dict:
        s, e = self.span[i].tolist()
        return orjson.loads(self.buf[s:e])


@dataclass
class KinetoStream:
    """``for chunk in KinetoStream(path).chunks()``; after the loop, ``header`` holds every top-level
    key other than traceEvents."""

    path: Path
    chunk_bytes: int = CHUNK_BYTES
    header: dict = field(default_factory=dict)
    events_read: int = 0
    limit: int = 0  # XPUPROF_MAX_INPUT_BYTES: the file as stored and what it decompresses to
    _total: int = field(default=0, init=False, repr=False)  # bytes read so far

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.limit = self.limit or max_input_bytes()

    def _fail(self, what: str) -> TraceStreamError:
        return TraceStreamError(f"{self.path}: {what}")

    def _open(self):
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            raise self._fail("no such file") from None
        except IsADirectoryError:
            raise self._fail("is a directory") from None
        except OSError as exc:
            raise self._fail(f"cannot read: {exc.strerror or exc}") from None
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size > self.limit:
            f.close()
            raise TraceStreamError(str(too_large(self.path, "the file", self.limit, f" ({st.st_size:,} bytes)")))
        magic = f.read(2)
        f.seek(0)
        if magic != b"\x1f\x8b":
            return f
        try:
            from isal import igzip  # several times faster than zlib
            return igzip.IGzipFile(fileobj=f, mode="rb")
        except ImportError:
            return gzip.GzipFile(fileobj=f, mode="rb")

    def _read(self, f, n: int) -> bytes:
        """Up to ``n`` bytes (``-1``: the rest), counted against the input limit (decompressed, for gzip;
        a FIFO or a device has no size to check first)."""
        try:
            data = f.read(self.limit + 1 - self._total if n < 0 else n)
        except (EOFError, OSError, ValueError) as exc:  # truncated or corrupt gzip
            raise self._fail(f"is not a readable gzip file (truncated or corrupt?): {type(exc).__name__}: {exc}") \
                from None
        self._total += len(data)
        if self._total > self.limit:
            raise TraceStreamError(str(too_large(self.path, "what it holds (decompressed, for gzip)", self.limit)))
        return data

    def chunks(self) -> Iterator[EventChunk]:
        try:
            from ..._native import tracestream
        except ImportError:
            tracestream = None
        f = self._open()
        try:
            if tracestream is None:
                yield from self._whole(f)
            else:
                yield from self._stream(f, tracestream)
        finally:
            f.close()

    # ------------------------------------------------------------------ with the C part
    def _stream(self, f, ts) -> Iterator[EventChunk]:
        buf = b""
        offset = 0  # file offset of buf[0] (in the decompressed document)
        final = False
        while True:  # the top level, up to traceEvents
            data = self._read(f, self.chunk_bytes)
            final = not data
            buf += data
            status, start, members = ts.header(buf, final)
            if status == 1:
                break
            if status == 0 and len(buf) <= MAX_HEADER_BYTES:
                continue
            raise self._fail({0: f"no traceEvents array in its first {MAX_HEADER_BYTES >> 20} MiB",
                              -1: "is not valid JSON (or is truncated) before its traceEvents array",
                              -2: "its traceEvents is not an array; not a Chrome trace",
                              -3: "has no traceEvents array; not a Chrome trace"}[status])
        self._members(buf, members)
        bare = buf.lstrip()[:1] == b"["
        pos, state, idx = start, 0, 0
        while True:
            got = ts.events(buf, pos, state, final)
            (n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact, consumed, state, status,
             error_at) = got
            if n:
                yield self._chunk(buf, idx, n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact)
                idx += n
            if status == -1:
                where = offset + error_at
                if final and error_at >= len(buf):
                    raise self._fail(f"is truncated: the document ends inside its traceEvents array (after "
                                     f"{idx} events, byte {where})")
                if buf[error_at:error_at + 1] not in (b"{", b",", b"]") and state != 2:
                    raise self._fail(f"traceEvents[{idx}] (byte {where}) is not an event object; not a Chrome trace")
                raise self._fail(f"is not valid JSON: traceEvents[{idx}] (byte {where}) does not parse")
            if status == 1:
                self.events_read = idx
                break
            if final:
                raise self._fail(f"is truncated: the document ends inside its traceEvents array (after {idx} "
                                 f"events)")
            rest = buf[consumed:]
            if len(rest) > MAX_EVENT_BYTES:
                raise self._fail(f"event {idx} (byte {offset + consumed}) is not valid JSON or is longer than "
                                 f"{MAX_EVENT_BYTES >> 20} MiB")
            offset += consumed
            data = self._read(f, self.chunk_bytes)
            final = not data
            buf, pos = rest + data, 0
        tail = buf[consumed:]
        while True:  # the top-level keys after traceEvents
            data = self._read(f, self.chunk_bytes)
            if not data:
                break
            tail += data
            if len(tail) > MAX_TAIL_BYTES:
                raise self._fail(f"more than {MAX_TAIL_BYTES >> 20} MiB follow its traceEvents array")
        self._tail(tail, bare)

    def _members(self, buf: bytes, members: bytes) -> None:
        for ks, ke, vs, ve in np.frombuffer(members, np.int64).reshape(-1, 4).tolist():
            self.header[orjson.loads(buf[ks:ke])] = orjson.loads(buf[vs:ve])

    def _tail(self, tail: bytes, bare: bool) -> None:
        text = tail.strip()
        if text == (b"" if bare else b"}"):
            return
        if bare or not text.startswith(b","):
            raise self._fail("is not valid JSON after its traceEvents array")
        try:
            more = orjson.loads(b"{" + text[1:])
        except orjson.JSONDecodeError as exc:
            raise self._fail(f"is not valid JSON after its traceEvents array: {exc}") from None
        if "traceEvents" in more:
            raise self._fail("has two traceEvents keys; not a Chrome trace xpuprof can read")
        self.header.update(more)

    def _chunk(self, buf, idx, n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact) -> EventChunk:
        texts, remap = _scan._decode_strings(buf, np.frombuffer(strings, np.int64).reshape(-1, 2))

        def ids(raw):
            a = np.frombuffer(raw, np.int32)
            return np.where(a >= 0, remap[np.maximum(a, 0)] if len(remap) else a, -1).astype(np.int32)

        return EventChunk(idx, buf, n, np.frombuffer(ph, np.uint8), ids(name), ids(cat),
                          np.frombuffer(kind, np.uint8).reshape(n, _scan.FIELDS),
                          np.frombuffer(num, np.uint8).reshape(n, 8 * _scan.FIELDS).view(np.uint64),
                          np.frombuffer(span, np.int64).reshape(n, 2), np.frombuffer(cx, np.uint8).astype(bool),
                          np.frombuffer(args_span, np.int64).reshape(n, 2), np.frombuffer(aux, np.uint8),
                          np.frombuffer(exact, np.int64).reshape(n, 2), texts)

    # ------------------------------------------------------------------ without it
    def _whole(self, f) -> Iterator[EventChunk]:
        log.warning("xpuprof: the C part xpuprof._native.tracestream is not built; %s is read whole (memory "
                    "grows with its size)", self.path)
        raw = self._read(f, -1)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise self._fail(f"is not valid JSON: {exc}") from None
        del raw
        if isinstance(data, list):
            data = {"traceEvents": data}
        if not isinstance(data, dict) or "traceEvents" not in data:
            raise self._fail("has no traceEvents array; not a Chrome trace")
        events = data.pop("traceEvents")
        if not isinstance(events, list):
            raise self._fail("its traceEvents is not an array; not a Chrome trace")
        self.header.update(data)
        empty8 = np.zeros(0, np.uint8)
        for lo in range(0, len(events), DICT_CHUNK_EVENTS):
            part = events[lo:lo + DICT_CHUNK_EVENTS]
            bad = next((i for i, e in enumerate(part) if not isinstance(e, dict)), None)
            if bad is not None:
                raise self._fail(f"traceEvents[{lo + bad}] is not an event object; not a Chrome trace")
            yield EventChunk(lo, b"", 0, empty8, np.zeros(0, np.int32), np.zeros(0, np.int32),
                             np.zeros((0, _scan.FIELDS), np.uint8), np.zeros((0, _scan.FIELDS), np.uint64),
                             np.zeros((0, 2), np.int64), np.zeros(0, bool), np.zeros((0, 2), np.int64), empty8,
                             np.zeros((0, 2), np.int64), [], objects=part)
        self.events_read = len(events)
