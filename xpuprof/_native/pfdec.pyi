"""Perfetto protobuf traces as columns (pfdec.c): one pass over the packets, no GIL while reading."""
from collections.abc import Sequence
from typing import Any

from typing_extensions import Buffer

def decode(buffer: Buffer, hoisted: Sequence[tuple[int, str | None, bytes]], /) -> dict[str, Any]:
    """Columns of a trace as bytes (slices, instants, counters, flows, strings), its track descriptors, its
    Chrome metadata entries and counts of what was not read."""

def metadata(buffer: Buffer, /) -> list[tuple[str, tuple[str, object]]]:
    """The trace's Chrome metadata entries: (name, (kind, value))."""
