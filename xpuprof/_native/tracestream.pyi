"""A Chrome-trace JSON document read in chunks of any size with tracescan's grammar (tracestream.c)."""
from typing_extensions import Buffer

def header(buffer: Buffer, final: bool, /) -> tuple[int, int, bytes]:
    """(status, events_start, members): 1 found, 0 more bytes needed, -1 invalid, -2 not an array, -3 none."""

def events(buffer: Buffer, start: int, state: int, final: bool, /) -> tuple[object, ...]:
    """The complete events from start as columns, then (consumed, state, status, error_at) (see tracestream.c)."""

def args(buffer: Buffer, spans: Buffer, int_keys: tuple[bytes, ...], float_keys: tuple[bytes, ...],
         drop_keys: tuple[bytes, ...], /) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]:
    """(ints, int_present, floats, float_present, offsets, blob, complex) of the objects at spans."""
