"""Writing an output file without harming what stands at its path.

Atomic replace (write ``<name>.tmp`` beside it, then rename) is for regular files only. Every
output (traces, merged views, ``summary.jsonl``) goes through ``output_file``:
- a regular file, or nothing: written atomically; a failure leaves the old file untouched;
- a symlink: followed to its target, which is then written atomically (the link stays a link);
- a character device or a FIFO (``/dev/stdout``, ``/dev/null``, a pipe): written directly, never
  replaced by a regular file;
- a directory, socket or block device: refused with one clear error before anything is written.
"""
from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator


class OutputError(OSError):
    """The output path names something xpuprof must not write over."""


def output_target(path) -> tuple[Path, bool]:
    """(the path to write, whether to write it atomically through a temporary file)."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path, True
    if stat.S_ISREG(mode):
        return path, True
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return path, False
    kind = ("a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a block device" if stat.S_ISBLK(mode) else "not a regular file")
    raise OutputError(f"cannot write output to {path}: it is {kind}; name a file (or a character device/FIFO "
                      "such as /dev/stdout)")


@contextlib.contextmanager
def output_file(path) -> Iterator[Path]:
    """Yields the path to open for writing; on success it becomes ``path``'s content.

    Regular targets: a ``.tmp`` sibling renamed over the target (removed on any failure).
    Devices and FIFOs: the target itself.
    """
    target, atomic = output_target(path)
    if not atomic:
        yield target
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_output_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` by the rules above; returns the path written."""
    with output_file(path) as dest:
        with open(dest, "wb") as f:
            f.write(data)
    return Path(path)
