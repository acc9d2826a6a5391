"""Compact JSON event rows from numpy columns (rowfmt.c), for the trace writer: one loop per row, no GIL."""
from collections.abc import Sequence
from typing import Final

from typing_extensions import Buffer

# Segment kinds (see rowfmt.c): a prefix literal followed by one value taken from a column.
LIT: Final[int]
INT: Final[int]
UINT: Final[int]
MICROS: Final[int]
HEX: Final[int]
BOOL: Final[int]
TOKENS: Final[int]
FLOAT: Final[int]
SPANS: Final[int]
FIXED3: Final[int]
# Segment flags: an optional JSON object made of segments.
ENTRY: Final[int]
OPEN: Final[int]
CLOSE: Final[int]

# (kind, flags, prefix, a, b, c, mask or None, base)
_Segment = tuple[int, int, bytes, Buffer | None, Buffer | None, Buffer | None, Buffer | None, int]

def fixed3(values: Buffer, /) -> bytes | None:
    """int64 k per float64 value where each value is the float nearest k / 1000 (|value| < 2^43), else None."""

def json_tokens(blob: Buffer, ends: Buffer, ids: Buffer, /) -> tuple[bytes, bytes]:
    """(tokens, n + 1 int64 offsets): the JSON string token (orjson's escaping) of blob[ends[i]:ends[i + 1]]
    for each int64 id i."""

def render(n: int, segments: Sequence[_Segment], into: Buffer | None = None, /) -> bytes | int:
    """n rows as bytes; with a writable ``into``, the byte count written or minus the size it needs."""
