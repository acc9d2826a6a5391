"""Traces, one stage each: ``builder`` (TraceBuilder, its columns, interned strings, key indexes, intervals),
``table`` (TraceTable, the one model every reader makes and every writer and analysis reads), ``read``
(the Kineto JSON reader, the store reader, the directory rule) and ``write`` (the Chrome JSON writer, the
store writer).

The names below load their stage on first use: importing one stage (the builder while recording)
does not import the writer or the reader, which keeps ``import xpuprof`` light."""
from __future__ import annotations

import importlib

_STAGE_OF = {
    "TraceBuilder": ".builder.builder",
    "TraceTable": ".table.model",
    "read_trace": ".read.kineto",
    "ArgColumn": ".builder.columns",
    "encode_json": ".builder.columns",
    "hex_column": ".builder.columns",
    "TraceLoadError": ".read.load",
    "events": ".read.load",
    "load": ".read.load",
    "write_chrome_trace": ".write.chrome",
}

__all__ = ["ArgColumn", "TraceBuilder", "TraceLoadError", "TraceTable", "encode_json", "events", "hex_column", "load",
           "read_trace", "write_chrome_trace"]


def __getattr__(name: str):
    stage = _STAGE_OF.get(name)
    if stage is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(stage, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
