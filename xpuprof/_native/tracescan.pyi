"""The one C reader of Chrome-trace (Kineto) JSON (tracescan.c): a strict grammar over a document read in
pieces, keeping per event only what the readers take, as columns (bytes; layouts in tracescan.c)."""
from typing_extensions import Buffer

# (n, ph, name, cat, kind, num, span, complex, strings, args_span, aux, exact, consumed, state, status, error_at)
_Events = tuple[int, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, int, int, int, int]

def simd(level: str | None = None, /) -> str:
    """The string-run level in use ('avx2', 'sse2' or 'scalar'; chosen at load: the best the processor runs);
    a level, or 'best', pins it (ValueError for one this processor does not run)."""

def fast(paths: int | None = None, /) -> int:
    """The fast paths in use, a bit each (1 keys, 2 ph, 4 strings, 8 numbers, 16 flat objects; all at load);
    paths pins them (0: the general path alone; ValueError beyond 31). Every path reads exactly what the
    general path reads."""

def header(buffer: Buffer, final: bool, /) -> tuple[int, int, bytes]:
    """(status, events_start, members): status 1 found the traceEvents array, 0 more bytes needed, -1 invalid
    JSON, -2 traceEvents is not an array, -3 the document ends without one."""

def events(buffer: Buffer, start: int, state: int, final: bool, /) -> _Events:
    """The complete events from start as columns, then where the next call starts, its state, the status
    (0 more may follow, 1 the array closed, -1 invalid JSON) and where the error is."""

def args(buffer: Buffer, spans: Buffer, int_keys: tuple[bytes, ...], float_keys: tuple[bytes, ...],
         drop_keys: tuple[bytes, ...], compact: bool = False, /) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]:
    """(ints, int_present, floats, float_present, offsets, blob, flags) of the objects at the int64 spans; flags
    bit 1: complex row; with ``compact`` the other members' text loses the whitespace outside strings and bit 2
    marks a row whose text is still not orjson's form (an escape, a fraction, an exponent, -0, ...)."""

def members(buffer: Buffer, spans: Buffer, int_keys: tuple[bytes, ...], drop_keys: tuple[bytes, ...],
            /) -> tuple[bytes, bytes, list[bytes | None], bytes]:
    """(ints, present, others, complex): args() for int keys only, the other members' text per row."""
