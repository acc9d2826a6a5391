"""Reading files a command was handed (traces, summaries, captures, configs) with bounds.

Every input is untrusted: ``/dev/zero``, a FIFO that never ends, a 100 GB file, a gzip bomb. Reads
stop at ``max_input_bytes()`` (``XPUPROF_MAX_INPUT_BYTES``, 8 GiB by default) - the file as stored
and, for gzip, what it decompresses to - with one clear error naming the file and the limit. A
caller may check the first bytes (``head``) before anything more is read, so a stream of zeros is
refused at once rather than after gigabytes.
"""
from __future__ import annotations

import logging
import os
import stat
import zlib
from typing import Callable

from . import diagnostics

log = logging.getLogger("xpuprof")

ENV_MAX_INPUT = "XPUPROF_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 8 << 30
_CHUNK = 1 << 20


class InputError(ValueError):
    """An input file that cannot be read as asked (too large, unreadable); the message names it."""


def max_input_bytes() -> int:
    """``XPUPROF_MAX_INPUT_BYTES`` (a positive integer; ``K``/``M``/``G`` suffixes in powers of 1024), or
    8 GiB; a value that is not one is said once and the default used."""
    raw = os.environ.get(ENV_MAX_INPUT, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(raw[-1:].upper(), 1)
    digits = raw[:-1] if scale > 1 else raw
    if digits.isascii() and digits.isdigit() and int(digits) > 0:
        return int(digits) * scale
    diagnostics.warn_once(log, ("bad-setting", ENV_MAX_INPUT, raw),
                          "xpuprof: %s=%r is not a size in bytes (a positive integer, optionally with K, M or G); "
                          "using the default %d GiB", ENV_MAX_INPUT, raw, DEFAULT_MAX_INPUT_BYTES >> 30)
    return DEFAULT_MAX_INPUT_BYTES


def too_large(path, what: str, limit: int, detail: str = "") -> InputError:
    return InputError(f"{path}: {what} is larger than the {_size(limit)} input limit{detail}; set "
                      f"{ENV_MAX_INPUT} to read larger files")


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def read_input(path, what: str = "input", *, head: Callable[[bytes], None] | None = None,
               limit: int | None = None) -> bytes:
    """The bytes of ``path`` (a file, FIFO or device), at most ``limit`` (default ``max_input_bytes()``).

    ``head(first_bytes)`` may raise to refuse the input after its first chunk. ``OSError`` for a
    path that cannot be opened (the caller words it); ``InputError`` when the input is over the limit."""
    limit = max_input_bytes() if limit is None else limit
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with open(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise too_large(path, what, limit, f" ({st.st_size:,} bytes)")
        first = f.read(min(_CHUNK, limit + 1))
        if head is not None:
            head(first)
        if stat.S_ISREG(st.st_mode) and len(first) == st.st_size:
            return first  # the usual case: one read
        buf = bytearray(first)
        while len(buf) <= limit:
            chunk = f.read(min(_CHUNK, limit + 1 - len(buf)) or 1)
            if not chunk:
                return bytes(buf)
            buf += chunk
        raise too_large(path, what, limit)


def gunzip(raw: bytes, path, what: str = "input", *, limit: int | None = None) -> bytes:
    """``raw`` (one or more gzip members) decompressed, at most ``limit`` bytes (a gzip bomb is refused).
    Raises ``zlib.error``/``EOFError`` for a corrupt or truncated stream, ``InputError`` past the limit."""
    limit = max_input_bytes() if limit is None else limit
    try:
        from isal import isal_zlib as z  # python-isal: several times faster than zlib
    except ImportError:
        z = zlib
    out = bytearray()
    data = memoryview(raw)
    while len(data):
        d = z.decompressobj(31)
        pending = bytes(data)
        while True:
            piece = d.decompress(pending, limit + 1 - len(out))
            out += piece
            if len(out) > limit:
                raise too_large(path, f"{what} (decompressed)", limit)
            if d.eof:
                break
            pending = d.unconsumed_tail
            if not pending and not piece:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        data = memoryview(d.unused_data)
        if len(data) and bytes(data[:2]) != b"\x1f\x8b":
            break  # trailing garbage after the last member: ignored, as gzip does
    return bytes(out)


def read_maybe_gzip(path, what: str = "trace file", *, head: Callable[[bytes], None] | None = None) -> bytes:
    """``read_input`` plus gzip undone when the file starts with the gzip magic; ``head`` sees the
    (decompressed) document's first bytes."""
    raw = read_input(path, what, head=head)  # a stream of garbage is refused after its first chunk
    if raw[:2] == b"\x1f\x8b":
        raw = gunzip(raw, path, what)
        if head is not None:
            head(raw[:_CHUNK])
    return raw


def check_json_start(path, what: str) -> Callable[[bytes], None]:
    """A ``head`` check: the document must open with ``{`` or ``[`` (after a BOM and whitespace)."""

    def check(first: bytes) -> None:
        if first[:2] == b"\x1f\x8b":
            return  # gzip: checked again once decompressed
        body = first[3:] if first.startswith(b"\xef\xbb\xbf") else first
        body = body.lstrip(b" \t\r\n")
        if not body:
            if not first:
                raise InputError(f"{path}: {what} is empty")
            return
        if body[:1] not in (b"{", b"["):
            raise InputError(f"{path}: not a JSON {what} (it starts with byte 0x{body[0]:02x}, not '{{' or '[')")

    return check


__all__ = ["DEFAULT_MAX_INPUT_BYTES", "ENV_MAX_INPUT", "InputError", "check_json_start", "gunzip", "too_large",
           "max_input_bytes", "read_input", "read_maybe_gzip"]

