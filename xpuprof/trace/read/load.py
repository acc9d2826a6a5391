"""Read a trace file (.json or .json.gz, ours or Kineto's) back for tests and analysis."""
from __future__ import annotations

from pathlib import Path

import orjson

from ...inputs import InputError, check_json_start, read_maybe_gzip


class TraceLoadError(ValueError):
    """A trace file that is missing or not a Chrome trace."""


def read_trace_bytes(path) -> bytes:
    """The trace's JSON bytes (gzip undone), bounded (``inputs``): ``TraceLoadError`` for a file that is
    missing, unreadable, over the input limit, not JSON-shaped or a corrupt gzip stream."""
    path = Path(path)
    if not path.exists():
        raise TraceLoadError(f"trace file not found: {path}")
    try:
        return read_maybe_gzip(path, "trace file", head=check_json_start(path, "trace file"))
    except InputError as exc:
        raise TraceLoadError(str(exc)) from None
    except OSError as exc:
        raise TraceLoadError(f"cannot read trace file {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # truncated or corrupt gzip stream: EOFError, zlib/isal errors
        raise TraceLoadError(f"{path} is not a readable gzip file (truncated or corrupt?): "
                             f"{type(exc).__name__}: {exc}") from None


def load(path) -> dict:
    """The whole trace object: ``traceEvents`` plus the top-level keys."""
    path = Path(path)
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
