"""One validating pass over a Chrome-trace JSON document that keeps what reports read, as columns (tracescan.c).
None where the document is not what the scanner models: the caller then reads it with orjson, whose error is
the exact one."""
from typing_extensions import Buffer

# (members, n, ph, name_id, cat_id, num_kind, num, span, complex, strings, args_span): the columns as bytes
# (see tracescan.c), members the other top-level keys' (key_start, key_end, value_start, value_end).
_Scan = tuple[bytes, int, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]

def scan(buffer: Buffer, /) -> _Scan | None: ...
def scan_run(buffer: Buffer, pos: int, first: bool, /) -> tuple[_Scan, int, bool] | None:
    """The events of the traceEvents array from pos on that buffer holds whole: (columns, resume, closed)."""

def members(buffer: Buffer, spans: Buffer, int_keys: tuple[bytes, ...], drop_keys: tuple[bytes, ...],
            /) -> tuple[bytes, bytes, list[bytes | None], bytes]:
    """(ints, present, others, complex) of the objects at the int64 (start, end) spans."""
