"""Read a trace file (.json or .json.gz, ours or Kineto's) back for tests and analysis."""
from __future__ import annotations

import gzip
from pathlib import Path

import orjson


class TraceLoadError(ValueError):
    """A trace file that is missing or not a Chrome trace."""


def load(path) -> dict:
    """The whole trace object: ``traceEvents`` plus the top-level keys."""
    path = Path(path)
    if not path.exists():
        raise TraceLoadError(f"trace file not found: {path}")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            try:
                from isal import igzip
                raw = igzip.decompress(raw)
            except ImportError:
                raw = gzip.decompress(raw)
        except Exception as exc:  # truncated or corrupt stream: EOFError, BadGzipFile, zlib/isal errors
            raise TraceLoadError(f"{path} is not a readable gzip file (truncated or corrupt?): "
                                 f"{type(exc).__name__}: {exc}") from None
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
