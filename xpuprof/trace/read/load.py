"""A trace file (.json or .json.gz, ours or Kineto's; or a Perfetto .pftrace, read into a table and rendered as
the Kineto JSON it holds) as one dict: what the analyses that still walk events as objects read (``xpuprof
report --by op``, ``merge``); every other reader takes the trace table (``inputs.read_file``)."""
from __future__ import annotations

from pathlib import Path

import orjson

from .source import TraceLoadError, read_document, trace_format


def read_trace_bytes(path) -> bytes:
    """The trace's JSON bytes (gzip undone), bounded and checked (``source``): ``TraceLoadError`` for a file
    that is missing, unreadable, over the input limit, not JSON-shaped or a corrupt gzip stream."""
    return read_document(path)


def load(path) -> dict:
    """The whole trace object: ``traceEvents`` plus the top-level keys."""
    path = Path(path)
    if trace_format(path) == "perfetto":
        from ..write.chrome import table_json
        from .perfetto import read_perfetto

        return orjson.loads(table_json(read_perfetto(path)))
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
