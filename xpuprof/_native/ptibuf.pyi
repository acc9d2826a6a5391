"""Intel PTI buffer callbacks in C (ptibuf.c): PTI's threads hand buffers to C, never to Python."""
from typing import Final

DEFAULT_BUFFER_SIZE: Final[int]

def callback_addresses() -> tuple[int, int]:
    """(request, complete) C function addresses to pass to ptiViewSetCallbacks."""

def set_buffer_size(size: int, /) -> None:
    """Bytes per buffer handed to PTI (4096 to 16 GiB; default 4 MiB); ValueError outside."""

def buffer_size() -> int: ...
def drain() -> list[memoryview]:
    """Completed buffers as read-only memoryviews, oldest first, no copy (freed with their last view)."""

def stats() -> dict[str, int]:
    """requested, request_failures, empty, completed, drained, queue_failures, pending."""

def reset() -> None: ...
