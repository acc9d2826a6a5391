"""Reading files a command was handed (traces, summaries, captures, configs, a store's files) with bounds.

Every input is untrusted: ``/dev/zero``, a FIFO that never ends, a 100 GB file, a gzip bomb. The rules,
written once here and used by every reader (``trace.read.source`` for traces of every format, the store
reader, ``diff``'s summaries, configs, PTI captures):

* **Only regular files are read** (``open_regular``): a FIFO, a character or block device or a socket named
  as an input - or reached through a symbolic link - is refused before it is opened (a FIFO would block the
  read for ever, ``/dev/zero`` never ends), and checked again on the descriptor opened.
* **One input limit**: at most ``max_input_bytes()`` (``XPUPROF_MAX_INPUT_BYTES``, 8 GiB by default) per file,
  counted on what the reader takes in - the file as stored and, for a compressed input, what it decompresses
  to - with one clear error naming the file and the limit.
* **The first bytes first**: a caller may check the first bytes (``head``) before anything more is read, so
  a stream of zeros is refused at once rather than after gigabytes.
"""
from __future__ import annotations

import logging
import os
import stat
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


KIND_NAMES = {stat.S_IFDIR: "directory", stat.S_IFIFO: "FIFO", stat.S_IFCHR: "character device",
              stat.S_IFBLK: "block device", stat.S_IFSOCK: "socket"}


def not_regular(path, what: str, mode: int) -> InputError:
    kind = KIND_NAMES.get(stat.S_IFMT(mode), "special file")
    return InputError(f"{path}: {what} is a {kind}, not a regular file (xpuprof reads inputs from regular files "
                      "only; copy it into one)")


def open_regular(path, what: str = "input") -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` opened for reading, and its ``fstat``, when it is a regular file (a symbolic
    link to one is followed). Anything else is refused before it is opened - a FIFO's open would block until
    a writer came, a device's may act - and checked again on the descriptor (no swap in between):
    ``IsADirectoryError`` for a directory, ``InputError`` for the other kinds, ``OSError`` as the system
    says for a path that cannot be opened."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "Is a directory", str(path))
    if not stat.S_ISREG(mode):
        raise not_regular(path, what, mode)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since the stat above
            raise not_regular(path, what, st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_input(path, what: str = "input", *, head: Callable[[bytes], None] | None = None,
               limit: int | None = None) -> bytes:
    """The bytes of ``path`` (a regular file: ``open_regular``), at most ``limit`` (default
    ``max_input_bytes()``).

    ``head(first_bytes)`` may raise to refuse the input after its first chunk. ``OSError`` for a
    path that cannot be opened (the caller words it); ``InputError`` when the input is over the limit or
    not a regular file."""
    limit = max_input_bytes() if limit is None else limit
    fd, st = open_regular(path, what)
    with open(fd, "rb", buffering=0) as f:
        if st.st_size > limit:
            raise too_large(path, what, limit, f" ({st.st_size:,} bytes)")
        first = f.read(min(_CHUNK, limit + 1))
        if head is not None:
            head(first)
        if len(first) == st.st_size:
            return first  # the usual case: one read
        buf = bytearray(first)
        while len(buf) <= limit:  # a file that grows while it is read stops at the limit too
            chunk = f.read(min(_CHUNK, limit + 1 - len(buf)) or 1)
            if not chunk:
                return bytes(buf)
            buf += chunk
        raise too_large(path, what, limit)


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


__all__ = ["DEFAULT_MAX_INPUT_BYTES", "ENV_MAX_INPUT", "InputError", "KIND_NAMES", "check_json_start", "max_input_bytes",
           "not_regular", "open_regular", "read_input", "too_large"]

