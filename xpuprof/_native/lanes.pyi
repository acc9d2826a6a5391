"""The layout pass's walks of one track (lanes.c; the rule and pure-Python copies in trace/layout/lanes.py).
Slices in walk order (start ascending, the longer first on a tie), int64 ns, containment closed."""
from typing_extensions import Buffer

def stack_lanes(start: Buffer, end: Buffer, lane_out: Buffer, /) -> int:
    """Each slice onto a lane where it nests (lane_out: int32 per slice); returns the lanes used."""

def keep_track(start: Buffer, end: Buffer, keep_out: Buffer, /) -> int:
    """Which slices stay on the track (keep_out: uint8 per slice); returns how many stay."""

def spilled(start: Buffer, end: Buffer, out: Buffer, /) -> int:
    """The slices a viewer's one-stack walk cannot place (out: uint8 per slice); returns their count."""

def nest_check(track: Buffer, start: Buffer, end: Buffer, order_out: Buffer, offsets_out: Buffer,
               nests_out: Buffer, /) -> None:
    """Every track at once: walk order per track (order_out int64, offsets_out int64 t + 1) and which nest
    (nests_out uint8 per track)."""
