"""Perfetto TracePacket/TrackEvent protobuf from trace table columns (pfenc.c), no GIL while encoding."""
from collections.abc import Sequence
from typing import Final

from typing_extensions import Buffer

# Arg item kinds (see pfenc.c): how an arg column becomes a debug annotation.
INT: Final[int]
UINT: Final[int]
F64: Final[int]
BOOL: Final[int]
STR: Final[int]
HEX: Final[int]
VEC: Final[int]
JSON_OBJECT: Final[int]
JSON_VALUE: Final[int]

# (kind, key sid, hoist, values, present, starts, lens, blob): columns of length 1 hold one value for every row
_Item = tuple[int, int, bool, Buffer | None, Buffer | None, Buffer | None, Buffer | None, Buffer | None]
# (kind 0 slices / 1 instants, lo, hi, ts, dur, name, cat, scope, items)
_Segment = tuple[int, int, int, Buffer, Buffer | None, Buffer, Buffer | None, Buffer | None, Sequence[_Item]]
_Flows = tuple[Buffer, Buffer, Buffer, Buffer, Buffer]  # ts, track code, Perfetto id, direction, binds to the next slice

def encode(blob: Buffer, offsets: Buffer, nrows: int, segments: Sequence[_Segment], codes: Buffer, tracks: Buffer,
           flows: _Flows | None, base_ts: int, clamp_ts: int, next_uuid: int, next_seq: int, /
           ) -> tuple[bytes, list[tuple[int, int, int, int]], list[tuple[int, int, int, int, object]], dict[str, int]]:
    """(packets, lanes (code, lane, uuid, seq), hoisted (code, category sid, key sid, kind, value), counts): the
    slices and instants of a trace as Perfetto TracePackets, one sequence per track and lane."""

def counters(ts: Buffer, group: Buffer, event_offsets: Buffer, uuids: Buffer, values: Buffer, group_seq: Buffer,
             group_offsets: Buffer, group_uuids: Buffer, base_ts: int, clamp_ts: int, /) -> bytes:
    """Counter events as TYPE_COUNTER packets, one sequence per counter series."""

def pair_codes(a: Buffer, b: Buffer, known: Buffer, /) -> tuple[bytes, bytes]:
    """(int32 codes, int64 pairs): a dense code per (a[i], b[i]) pair, the known pairs numbered first."""
