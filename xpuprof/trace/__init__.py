"""Trace storage (TraceBuilder), the Kineto-compatible writer and the reader."""
from .builder import ArgColumn, TraceBuilder, encode_json, hex_column
from .chrome import write_chrome_trace
from .load import TraceLoadError, events, load

__all__ = ["ArgColumn", "TraceBuilder", "TraceLoadError", "encode_json", "events", "hex_column", "load",
           "write_chrome_trace"]
