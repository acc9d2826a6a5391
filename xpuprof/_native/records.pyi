"""The records stage of the vendor pipelines in C (records.c): locate records in vendor buffers, gather them,
decode their fields straight into typed columns. Offsets are uint64, plans and counts int64, as bytes."""
from collections.abc import Sequence

from typing_extensions import Buffer

_Window = tuple[int, int, int] | None  # (lo, hi, clock offset); None or lo > hi keeps every record

def walk(buffer: Buffer, next_record_address: int, /) -> tuple[bytes, int]:
    """(offsets, status): records located by the vendor's iterator; status 1 = end of buffer."""

def walk_sizes(buffer: Buffer, sizes: Buffer, /) -> tuple[bytes, int]:
    """(offsets, stop): records located with a uint32 kind -> size table; stop -1 or where it stopped."""

def gather_into(buffer: Buffer, offsets: Buffer, size: int, out: Buffer, out_offset: int, /) -> None: ...
def gather_fields(buffer: Buffer, offsets: Buffer, spans: Buffer, out: Buffer, out_offset: int, out_size: int,
                  /) -> None: ...
def plan_count(buffer: Buffer, offsets: Buffer, plan: Buffer, window: _Window, /) -> tuple[bytes, dict[int, int]]:
    """(int64 [kept, dropped, misordered] per plan slot, {kind the plan lacks (-1: past the table): records})."""

def plan_fill(buffer: Buffer, offsets: Buffer, plan: Buffer, outs: Sequence[Buffer], pos: Buffer, window: _Window,
              /) -> None: ...
