"""Writing an output file without harming what stands at its path.

Atomic replace (write ``<name>.tmp`` beside it, then rename) is for regular files only. Every
output (traces, merged views, reports, ``summary.jsonl``) goes through ``output_file``:
- a regular file, or nothing: written atomically; a failure leaves the old file untouched;
- a symlink: followed to its target, which is then written atomically (the link stays a link);
- a path naming one of this process's open descriptors (``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N``, ``/proc/self/fd/N``, ``/proc/<own pid>/fd/N``): written through a duplicate of that
  descriptor, never reopened or renamed over. The shell's ``>> log`` keeps appending (the duplicate
  shares the open file's offset and O_APPEND flag); a pipe or socket on stdout is written as such;
- a character device or a FIFO (``/dev/null``, ``/dev/full``, ``mkfifo``): opened and written
  directly, never replaced by a regular file;
- another process's descriptor (``/proc/<pid>/fd/N``): written directly when it is a pipe, FIFO or
  character device; refused when it is a file (it cannot be written through that process's
  descriptor, and reopening it would overwrite what that process wrote);
- a directory, socket path or block device: refused with one clear error before anything is written.

Callers open what ``output_file`` yields with ``open_output`` (a path, or a descriptor number).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Union

# /proc/<pid>/fd/N and /proc/<pid>/task/<tid>/fd/N, the forms /dev/stdout, /dev/fd/N, /proc/self/fd/N
# and /proc/thread-self/fd/N take once their directories are resolved.
_PROC_FD = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd/(\d+)")
_MAX_LINKS = 40  # the kernel's own symlink bound (ELOOP)

ATOMIC, DIRECT, DESCRIPTOR = "atomic", "direct", "descriptor"

# What output_file yields: a path to open, or a descriptor (a duplicate owned by output_file).
Destination = Union[Path, int]


class OutputError(OSError):
    """The output path names something xpuprof must not write over."""


@dataclass(frozen=True)
class OutputTarget:
    """How a path is written: ``ATOMIC`` (a ``.tmp`` sibling renamed over ``path``), ``DIRECT``
    (``path`` opened and written), or ``DESCRIPTOR`` (``fd`` of this process duplicated and written)."""

    path: Path
    how: str
    fd: int | None = None


def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a regular file" if stat.S_ISREG(mode)
            else "not a regular file")


def _named_descriptor(path: Path) -> tuple[int, int] | None:
    """(pid, fd) when ``path`` names an open descriptor through /proc (directly or by symlinks such as
    /dev/stdout -> /proc/self/fd/1), else None. Never follows the /proc link itself: for a pipe it
    points nowhere ("pipe:[123]"), for a file it is that file, which must not be reopened."""
    p = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        parent, name = os.path.split(p)
        parent = os.path.realpath(parent)  # /dev/fd -> /proc/<pid>/fd, /proc/self -> /proc/<pid>
        p = os.path.join(parent, name)
        m = _PROC_FD.fullmatch(p)
        if m:
            return int(m.group(1)), int(m.group(2))
        try:
            link = os.readlink(p)
        except OSError:  # not a link (or not there): not a descriptor
            return None
        p = os.path.join(parent, link)  # an absolute link replaces parent; the next pass resolves any ".."
    return None


def output_target(path) -> OutputTarget:
    """How ``path`` is written (see the module docstring); raises ``OutputError`` for what must not be."""
    path = Path(path)
    named = _named_descriptor(path)
    if named is not None:
        pid, fd = named
        if pid == os.getpid():
            try:
                mode = os.fstat(fd).st_mode
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            except OSError:
                raise OutputError(f"cannot write output to {path}: descriptor {fd} is not open in this process") \
                    from None
            if stat.S_ISDIR(mode):
                raise OutputError(f"cannot write output to {path}: descriptor {fd} is a directory")
            if flags & os.O_ACCMODE == os.O_RDONLY:
                raise OutputError(f"cannot write output to {path}: descriptor {fd} is open for reading only")
            return OutputTarget(path, DESCRIPTOR, fd)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise OutputError(f"cannot write output to {path}: {exc.strerror or exc}") from None
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            return OutputTarget(path, DIRECT)
        raise OutputError(f"cannot write output to {path}: it is another process's descriptor of {_kind(mode)}, "
                          "which xpuprof cannot write through without overwriting it; name the file itself")
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return OutputTarget(path, ATOMIC)
    if stat.S_ISREG(mode):
        return OutputTarget(path, ATOMIC)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputTarget(path, DIRECT)
    raise OutputError(f"cannot write output to {path}: it is {_kind(mode)}; name a file (or a character device, "
                      "a FIFO or /dev/stdout)")


def open_output(dest: Destination, buffering: int = -1) -> BinaryIO:
    """Open what ``output_file`` yielded for binary writing. A descriptor is written as it is (no
    truncation, its offset and O_APPEND kept) and stays owned by ``output_file``."""
    if isinstance(dest, int):
        return open(dest, "wb", buffering=buffering, closefd=False)
    return open(dest, "wb", buffering=buffering)


@contextlib.contextmanager
def output_file(path) -> Iterator[Destination]:
    """Yields what to open (with ``open_output``); on success it becomes ``path``'s content.

    Regular targets: a ``.tmp`` sibling renamed over the target (removed on any failure).
    Devices and FIFOs: the target itself. Open descriptors: a duplicate, closed afterwards.
    """
    target = output_target(path)
    if target.how == DESCRIPTOR:
        for stream in (sys.stdout, sys.stderr):  # what Python buffered for the descriptor goes first
            with contextlib.suppress(Exception):
                stream.flush()
        dup = os.dup(target.fd)
        try:
            yield dup
        finally:
            os.close(dup)
        return
    if target.how == DIRECT:
        yield target.path
        return
    target.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.path.with_name(target.path.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, target.path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_output_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` by the rules above; returns the path written."""
    with output_file(path) as dest:
        with open_output(dest) as f:
            f.write(data)
    return Path(path)


def write_error_line(path, exc: OSError) -> str:
    """One line for a failed output write: the refusal as said, or the file and the system's reason."""
    if isinstance(exc, OutputError):
        return str(exc)
    where = exc.filename if isinstance(exc.filename, str) else path
    if isinstance(where, str) and where.endswith(".tmp"):  # the atomic write's temporary file: name the output
        where = where[:-len(".tmp")]
    return f"cannot write {where}: {exc.strerror or exc}"


def names_stdout(path) -> bool:
    """Whether writing ``path`` writes this process's standard output (``-o /dev/stdout``): a command's
    own messages then go to stderr, so the output stream holds only the output."""
    try:
        target = output_target(path)
        return target.how == DESCRIPTOR and os.path.samestat(os.fstat(target.fd), os.fstat(1))
    except OSError:
        return False
