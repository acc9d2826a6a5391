"""A Kineto/Chrome JSON document (``.json`` or ``.json.gz``; torch's, ours, any Kineto's) read in chunks of
events: the two implementations behind the one reader (``kineto.read_trace``), chosen here, never by a caller.

* With the C part (``xpuprof._native.tracescan``) the document is parsed with its strict grammar in
  pieces, so memory stays bounded by the chunk whatever the file's size: per event ph, name, cat, ts,
  dur, pid, tid, id, the "s"/"bp" letter and the byte ranges of the event and of its args, as columns
  (``EventChunk``); the top-level keys before and after ``traceEvents`` are read whole.
* Without it the document is parsed whole by orjson and its events handed on in chunks of parsed
  objects (``EventChunk.objects``): the same rows, without the memory bound.

The file is opened, bounded and checked by ``source.TraceInput`` (the input limit, the first bytes).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson

from .source import FORMATS, TraceInput, TraceLoadError

log = logging.getLogger("xpuprof")

CHUNK_BYTES = 16 << 20  # read (and decompressed) per step: a chunk is about three times this, held at once
# What one piece of a document may take. A longer one - a 1 GiB name, an event or key that never ends - is
# one error after at most this many bytes, never a read of the whole file into memory: what is held at once
# stays under about four times the bound. Kineto's events and keys are kilobytes.
MAX_HEADER_BYTES = 64 << 20  # the top-level keys before traceEvents
MAX_EVENT_BYTES = 64 << 20  # one event; a longer one (or an unterminated one) is an error
MAX_TAIL_BYTES = 64 << 20  # the top-level keys after traceEvents
DICT_CHUNK_EVENTS = 65536
TS, DUR, PID, TID, ID = range(5)
FIELDS = 5  # numeric fields the scanner keeps per event
ABSENT, INT, DOUBLE = 0, 1, 2

TraceStreamError = TraceLoadError  # the name this reader's errors had

_UNSET = object()
_native_module = _UNSET


def native():
    """``xpuprof._native.tracescan``, or None when xpuprof was built without a C compiler."""
    global _native_module
    if _native_module is _UNSET:
        from ... import _native as c_parts

        _native_module = c_parts.optional("tracescan")
    return _native_module


@dataclass
class EventChunk:
    """Events ``first_idx ..`` of the traceEvents array as columns: ph (uint8, 0 absent, 0xff another
    value), name/cat (int32 ids into ``strings``, -1 absent), kind/num (per field TS, DUR, PID, TID, ID:
    ABSENT, INT or DOUBLE and the value's 8 bytes), span (each event's bytes in ``buf``), complex (read the
    event whole), args_span (its args object's bytes, -1 none), aux (the "s"/"bp" letter), exact (ts and dur
    in ns from the numbers' text). ``objects``: the events already parsed (the path without the C part),
    in which case the columns are empty."""

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
        event = orjson.loads(self.buf[s:e])
        if isinstance(event, dict) and (type(event.get("pid")) is float or type(event.get("tid")) is float):
            import json  # orjson reads an integer past 64 bits as a float: the pid's label keeps its digits

            event = json.loads(self.buf[s:e])
        return event


def decode_strings(raw: bytes, ranges: np.ndarray) -> tuple[list[str], np.ndarray]:
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


def make_chunk(buf, idx: int, n: int, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact) -> EventChunk:
    """An EventChunk from ``tracescan.events``'s columns (string ids made ids of distinct decoded strings)."""
    texts, remap = decode_strings(buf, np.frombuffer(strings, np.int64).reshape(-1, 2))

    def ids(raw):
        a = np.frombuffer(raw, np.int32)
        return np.where(a >= 0, remap[np.maximum(a, 0)] if len(remap) else a, -1).astype(np.int32)

    return EventChunk(idx, buf, n, np.frombuffer(ph, np.uint8), ids(name), ids(cat),
                      np.frombuffer(kind, np.uint8).reshape(n, FIELDS),
                      np.frombuffer(num, np.uint8).reshape(n, 8 * FIELDS).view(np.uint64),
                      np.frombuffer(span, np.int64).reshape(n, 2), np.frombuffer(cx, np.uint8).astype(bool),
                      np.frombuffer(args_span, np.int64).reshape(n, 2), np.frombuffer(aux, np.uint8),
                      np.frombuffer(exact, np.int64).reshape(n, 2), texts)


def _escaped_key(buf: bytes, members: bytes, start: int) -> tuple[int, bytes]:
    """The events' start when a top-level key that spells "traceEvents" with escapes holds an array (the C
    scanner compares keys as written), and the other members; (-1, members) when none does."""
    rows = np.frombuffer(members, np.int64).reshape(-1, 4)
    for j, (ks, ke, vs, ve) in enumerate(rows.tolist()):
        if b"\\" in buf[ks:ke] and orjson.loads(buf[ks:ke]) == "traceEvents" and buf[vs:vs + 1] == b"[":
            return vs + 1, np.delete(rows, j, axis=0).tobytes()
    return -1, members


class ExactFloat(float):
    """A JSON number read as a float that keeps its text (``text``), so its µs convert to ns exactly as the
    C scanner converts them (``kineto_rows.exact_ns``)."""

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


def _inexact_times(data) -> bool:
    """Whether a parsed document holds a float ts or dur a double may not hold to the ns (|µs| >= 2**43
    with a fraction): then the orjson path reads it again keeping the numbers' text."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return False
    for e in events:
        if isinstance(e, dict):
            for key in ("ts", "dur"):
                v = e.get(key)
                if type(v) is float and abs(v) >= 2.0 ** 43 and not v.is_integer():
                    return True
    return False


def _floats(v):
    if type(v) is ExactFloat:
        return float(v)
    if isinstance(v, dict):
        return {k: _floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_floats(x) for x in v]
    return v


def _plain_floats(data):
    """Every ExactFloat a plain float again, but the events' ts and dur (what ``exact_ns`` reads)."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if isinstance(data, dict):
        data = {k: (v if k == "traceEvents" else _floats(v)) for k, v in data.items()}
    if isinstance(events, list):
        events = [{k: (x if k in ("ts", "dur") else _floats(x)) for k, x in e.items()} if isinstance(e, dict)
                  else _floats(e) for e in events]
        if isinstance(data, dict):
            data["traceEvents"] = events
        else:
            data = events
    return data


class NotKinetoJson(Exception):
    """The file a stream that accepts other formats opened is in one of them (``args[0]``: which)."""


@dataclass
class KinetoStream:
    """``for chunk in KinetoStream(path).chunks()``; after the loop, ``header`` holds every top-level
    key other than traceEvents and ``events_read`` the number of events."""

    path: Path
    chunk_bytes: int | None = None  # CHUNK_BYTES
    header: dict = field(default_factory=dict)
    events_read: int = 0
    keys_before_events: int = 0  # how many of ``header``'s keys come before traceEvents in the document
    limit: int | None = None  # XPUPROF_MAX_INPUT_BYTES by default (source.TraceInput)
    document: Any = None  # a document already parsed (a dict, or a list of events): read instead of ``path``
    accept: tuple = ("json",)  # source.FORMATS: a Perfetto protobuf file raises NotKinetoJson (inputs.read_file)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.chunk_bytes = self.chunk_bytes or CHUNK_BYTES

    def _fail(self, what: str) -> TraceLoadError:
        return TraceLoadError(f"{self.path}: {what}")

    def chunks(self) -> Iterator[EventChunk]:
        if self.document is not None:
            yield from self._parsed(self.document)
            return
        ts = native()
        with TraceInput(self.path, limit=self.limit, accept=self.accept) as src:
            if src.format != "json":
                raise NotKinetoJson(src.format)
            if ts is None:
                yield from self._whole(src)
            else:
                yield from self._stream(src, ts)

    # ------------------------------------------------------------------ with the C part
    def _stream(self, src: TraceInput, ts) -> Iterator[EventChunk]:
        # What is not parsed yet is carried into the next step and parsed again from its start, so each step
        # reads at least as much as it carries: a long event or header costs twice its bytes, not its square.
        buf = b""
        offset = 0  # file offset of buf[0] (in the decompressed document)
        final = False
        while True:  # the top level, up to traceEvents
            data = src.read(max(self.chunk_bytes, len(buf)))
            final = not data
            buf += data
            del data
            status, start, members = ts.header(buf, final)
            if status == -3:  # "traceEvents" spelled with escapes ("tr\u0061ceEvents"): the same key
                start, members = _escaped_key(buf, members, start)
                status = 1 if start >= 0 else status
            if status == 1:
                break
            if status == 0 and len(buf) <= MAX_HEADER_BYTES:
                continue
            raise self._fail({0: f"no traceEvents array in its first {MAX_HEADER_BYTES >> 20} MiB (the most the keys "
                                 "before it may take)",
                              -1: "is not valid JSON (or is truncated) before its traceEvents array",
                              -2: "its traceEvents is not an array; not a Chrome trace",
                              -3: "has no traceEvents array; not a Chrome trace"}[status])
        self._members(buf, members)
        self.keys_before_events = len(self.header)
        bare = buf.lstrip()[:1] == b"["
        pos, state, idx = start, 0, 0
        while True:
            (n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact, consumed, state, status,
             error_at) = ts.events(buf, pos, state, final)
            if n:
                chunk = make_chunk(buf, idx, n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact)
                del ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact
                yield chunk
                del chunk  # the consumer is done with it: its columns go before the next read
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
                raise self._fail(f"traceEvents[{idx}] (byte {offset + consumed}) is longer than "
                                 f"{MAX_EVENT_BYTES >> 20} MiB, the most one event may take (or it never ends)")
            offset += consumed
            del buf  # the rest is copied out: the chunk's bytes go before the next are read
            data = src.read(max(self.chunk_bytes, len(rest)))
            final = not data
            buf, pos = rest + data, 0
            del rest, data
        tail = [buf[consumed:]]
        size = len(tail[0])
        del buf
        while size <= MAX_TAIL_BYTES:  # the top-level keys after traceEvents
            data = src.read(self.chunk_bytes)
            if not data:
                break
            tail.append(data)
            size += len(data)
        if size > MAX_TAIL_BYTES:
            raise self._fail(f"more than {MAX_TAIL_BYTES >> 20} MiB follow its traceEvents array (the most the keys "
                             "after it may take)")
        self._tail(b"".join(tail), bare)

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

    # ------------------------------------------------------------------ without it
    def _whole(self, src: TraceInput) -> Iterator[EventChunk]:
        log.warning("xpuprof: the C part xpuprof._native.tracescan is not built; %s is read whole (memory grows "
                    "with its size)", self.path)
        raw = src.read(-1)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise self._fail(f"is not valid JSON: {exc}") from None
        if _inexact_times(data):  # µs past 2**43 with decimals: a double cannot keep every ns
            import json

            data = _plain_floats(json.loads(raw, parse_float=ExactFloat))
        del raw
        yield from self._parsed(data)

    def _parsed(self, data) -> Iterator[EventChunk]:
        """A parsed document's events, in chunks of event objects (the rules' one-object-at-a-time path)."""
        if isinstance(data, list):
            data = {"traceEvents": data}
        if not isinstance(data, dict) or "traceEvents" not in data:
            raise self._fail("has no traceEvents array; not a Chrome trace")
        self.keys_before_events = list(data).index("traceEvents")
        events = data["traceEvents"]  # not popped: a parsed document may be the caller's (read_document)
        if not isinstance(events, list):
            raise self._fail("its traceEvents is not an array; not a Chrome trace")
        self.header.update((k, v) for k, v in data.items() if k != "traceEvents")
        empty8 = np.zeros(0, np.uint8)
        for lo in range(0, len(events), DICT_CHUNK_EVENTS):
            part = events[lo:lo + DICT_CHUNK_EVENTS]
            bad = next((i for i, e in enumerate(part) if not isinstance(e, dict)), None)
            if bad is not None:
                raise self._fail(f"traceEvents[{lo + bad}] is not an event object; not a Chrome trace")
            yield EventChunk(lo, b"", 0, empty8, np.zeros(0, np.int32), np.zeros(0, np.int32),
                             np.zeros((0, FIELDS), np.uint8), np.zeros((0, FIELDS), np.uint64),
                             np.zeros((0, 2), np.int64), np.zeros(0, bool), np.zeros((0, 2), np.int64), empty8,
                             np.zeros((0, 2), np.int64), [], objects=part)
        self.events_read = len(events)


def holds_trace_events(path) -> bool | None:
    """Whether the JSON document at ``path`` is a trace - its top level holds a ``traceEvents`` array - read
    by the rules of every trace read (``source.TraceInput``: a ``TraceLoadError`` for a file that breaks
    them, e.g. one that is no JSON at all) up to that array, at most ``MAX_HEADER_BYTES``: True, False (the
    document ends without one, or is not valid JSON), None when it cannot tell (no C scanner, or more than
    the bound of other keys first). For a command that takes traces and other JSON documents alike
    (``diff``: run summaries, report JSON) and must not read a trace whole to find out."""
    ts = native()
    if ts is None:
        return None
    with TraceInput(Path(path), accept=FORMATS) as src:
        if src.format != "json":
            return True  # a Perfetto protobuf trace, whatever its name
        buf = b""
        while len(buf) <= MAX_HEADER_BYTES:
            data = src.read(max(CHUNK_BYTES, len(buf)))
            buf += data
            status, start, members = ts.header(buf, not data)
            if status == -3:
                status = 1 if _escaped_key(buf, members, start)[0] >= 0 else status
            if status != 0 or not data:
                return status == 1
        return None
