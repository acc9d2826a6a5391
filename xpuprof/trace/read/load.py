"""A trace file (.json or .json.gz, ours or Kineto's; or a Perfetto .pftrace, read into a table and rendered as
the Kineto JSON it holds) as one dict: what the analyses that still walk events as objects read (``xpuprof
report --by op``, ``merge``); every other reader takes the trace table (``inputs.read_file``).

A JSON document is read by the one reader's stream (``kineto_stream``), so it passes every rule the others
pass - regular files only, the input limit, its first bytes, the bound on one event and on the keys around
the events - before anything is held whole: a trace whose one string is 1 GiB is one error after 64 MiB of
it, not a 1 GiB read and a 2 GiB parse. The events of each chunk become objects with one orjson call.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from .kineto_stream import KinetoStream, native
from .source import TraceLoadError, read_document, trace_format

__all__ = ["TraceLoadError", "events", "load", "read_trace_bytes"]


def read_trace_bytes(path) -> bytes:
    """The trace's JSON bytes (gzip undone), bounded and checked (``source``): ``TraceLoadError`` for a file
    that is missing, unreadable, over the input limit, not JSON-shaped or a corrupt gzip stream."""
    return read_document(path)


def load(path) -> dict:
    """The whole trace object: ``traceEvents`` plus the top-level keys, in the document's order."""
    path = Path(path)
    if trace_format(path) == "perfetto":
        from ..write.chrome import table_json
        from .perfetto import read_perfetto

        return orjson.loads(table_json(read_perfetto(path)))
    if native() is None:
        return _load_whole(path)
    stream = KinetoStream(path)
    events: list = []
    for chunk in stream.chunks():
        first, last = int(chunk.span[0, 0]), int(chunk.span[-1, 1])
        events += orjson.loads(b"[" + chunk.buf[first:last] + b"]")  # the events and the commas between them
        del chunk
    keys = list(stream.header)
    data = {k: stream.header[k] for k in keys[:stream.keys_before_events]}
    data["traceEvents"] = events
    data.update((k, stream.header[k]) for k in keys[stream.keys_before_events:])
    return data


def _load_whole(path: Path) -> dict:
    """Without the C scanner: the document parsed whole (bounded by the input limit only)."""
    raw = read_trace_bytes(path)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TraceLoadError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, list):  # the bare-array form of the Chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceLoadError(f"{path} has no traceEvents array; not a Chrome trace")
    bad = next((i for i, ev in enumerate(data["traceEvents"]) if not isinstance(ev, dict)), None)
    if bad is not None:
        raise TraceLoadError(f"{path}: traceEvents[{bad}] is not an event object (got "
                             f"{type(data['traceEvents'][bad]).__name__}); not a Chrome trace")
    return data


def events(path) -> list[dict]:
    return load(path)["traceEvents"]
