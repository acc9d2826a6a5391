"""rocprofiler-sdk buffer and tracing callbacks in C (rocbuf.c): no Python on rocprofiler's or HIP's threads."""
from collections.abc import Sequence
from typing import Final

from typing_extensions import Buffer

EVENT_OP_SIZE: Final[int]

def callback_addresses(layout: int, /) -> dict[str, int]:
    """'buffer', 'hip', 'code_object', 'dispatch_counting' C addresses; layout 0 = SDK 0.x records, 1 = SDK 1.x."""

def set_fixed_size(category: int, kind: int, size: int, /) -> None: ...
def set_hip_ops(kind: int, ops: Sequence[tuple[int, int, int, int]], /) -> None:
    """ops: (operation, code, event offset, stream offset) of the HIP calls whose args are kept; -1 = absent."""

def set_code_object(kind: int, operation: int, /) -> None: ...
def set_agent_configs(configs: Sequence[tuple[int, int]], /) -> None:
    """(agent handle, counter config handle) pairs for dispatch counting (at most 64)."""

def drain() -> list[bytes]: ...
def drain_event_ops() -> bytes:
    """Captured HIP call args as packed rows of EVENT_OP_SIZE bytes (corr u8, op u1, event u8, stream u8)."""

def drain_kernel_symbols() -> dict[int, str]: ...
def split(packed: Buffer, /) -> dict[tuple[int, int], tuple[int, bytes]]:
    """A packed buffer's records by (category, kind): (stride, fixed-stride rows)."""

def stats() -> dict[str, int]: ...
def reset() -> None: ...
