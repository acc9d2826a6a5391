"""The one per-instruction step of reading PTI's EU stall samples (pcsample.c)."""
from typing_extensions import Buffer

def source_info(pointers: Buffer, /) -> tuple[bytes, bytes]:
    """(file pointers, lines) as uint64 bytes: PTI's source info behind each instruction's uint64 pointer."""
