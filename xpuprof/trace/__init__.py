"""Trace storage (TraceBuilder), the Kineto-compatible writer and the reader, one stage each:
``build`` (TraceBuilder, its columns, interned strings, key indexes, intervals), ``write`` (the
Chrome JSON writer) and ``read`` (load, scan)."""
from .build.builder import TraceBuilder
from .build.columns import ArgColumn, encode_json, hex_column
from .read.load import TraceLoadError, events, load
from .write.chrome import write_chrome_trace

__all__ = ["ArgColumn", "TraceBuilder", "TraceLoadError", "encode_json", "events", "hex_column", "load",
           "write_chrome_trace"]
