"""Writing an output file without harming what stands at its path.

Atomic replace is for regular files only. Every output (traces, merged views, reports,
``summary.jsonl``) goes through ``output_file``:
- a regular file, or nothing: written atomically. Each writer creates its own temporary file beside
  the target (``<name>.<pid>-<random>.tmp``, ``O_CREAT|O_EXCL|O_NOFOLLOW`` through a descriptor of the
  target's directory: never an existing file, never through a planted symlink), then renames it over
  the target. Concurrent writers to one path therefore end with one complete file from one of them.
  A file that existed keeps its permission bits (and, when running as root, its owner and group). A
  failure leaves the old file untouched and removes the temporary file;
- a symlink owned by the running user or root: followed to its target, which is then written
  atomically (the link stays a link). A link owned by another user is refused: it could have been
  planted in a shared directory to make the writer replace a file of the attacker's choosing;
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
import errno
import fcntl
import os
import re
import secrets
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
    """How a path is written: ``ATOMIC`` (a private temporary sibling renamed over ``path``), ``DIRECT``
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


def _trusted_link_owner(uid: int) -> bool:
    return uid in (0, os.geteuid()) if hasattr(os, "geteuid") else True


def _followed_link(path: Path) -> Path:
    """``path`` with the symlinks at its last component followed, each hop owned by this user or root
    (else ``OutputError``); ``path`` itself when it is not a link."""
    p = os.path.abspath(path)
    for hop in range(_MAX_LINKS):
        try:
            st = os.lstat(p)
        except OSError:  # not there (or unreadable): written (or refused) as it stands
            st = None
        if st is None or not stat.S_ISLNK(st.st_mode):
            return Path(os.path.realpath(p)) if hop else Path(path)
        if not _trusted_link_owner(st.st_uid):
            raise OutputError(f"cannot write output to {path}: {p} is a symbolic link owned by another user "
                              f"(uid {st.st_uid}); xpuprof follows only links owned by you or root, since another "
                              f"user's link could point the write at any file; remove it or name another path")
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    raise OutputError(f"cannot write output to {path}: too many levels of symbolic links")


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
    path = _followed_link(path)
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

    Regular targets: a descriptor of a private temporary sibling, renamed over the target (removed on
    any failure).
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
    with _AtomicReplace(target.path) as fd:
        yield fd


class _AtomicReplace:
    """A private temporary file beside ``path``, renamed over it on success, removed on failure.

    The directory is opened once and every step goes through its descriptor, so the temporary file
    and the rename stay in the directory that was checked even if its path is swapped meanwhile."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dir_fd = -1
        self.fd = -1
        self.tmp_name = ""

    def __enter__(self) -> int:
        path = self.path
        try:
            self.dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                old = os.stat(path.name, dir_fd=self.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            # A new file gets 0666 less the umask (as open() would); over an existing one, the temporary
            # file starts private and takes the old file's permission bits (and owner, as root) before
            # the rename, so re-exporting never widens who can read a trace.
            mode = 0o666 if old is None else 0o600
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            for _ in range(100):
                name = f"{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp"
                # named before the open: a signal's exception may land between the open and any next step,
                # and the name is this writer's own (random; an existing one is never reused)
                self.tmp_name = name
                try:
                    self.fd = os.open(name, flags, mode, dir_fd=self.dir_fd)
                except FileExistsError:  # another writer's (or a planted) name: never reused
                    self.tmp_name = ""
                    continue
                break
            else:
                raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(path))
            if old is not None and stat.S_ISREG(old.st_mode):
                _keep_owner_and_mode(self.fd, old)
        except OSError as exc:
            self._discard()
            if isinstance(exc, OutputError):
                raise
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None  # the output's name, not the temp's
        except BaseException:  # a second SIGINT/SIGTERM (xpuprof run), KeyboardInterrupt: nothing left behind
            self._discard()
            raise
        return self.fd

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._discard()
            return False
        try:
            try:
                now = os.stat(self.path.name, dir_fd=self.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is not None and not (stat.S_ISREG(now.st_mode) or stat.S_ISLNK(now.st_mode)):
                raise OutputError(f"cannot write output to {self.path}: it became {_kind(now.st_mode)} while it "
                                  f"was written; left as it is")
            os.replace(self.tmp_name, self.path.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self.tmp_name = ""
        except OSError as exc:
            self._discard()
            if isinstance(exc, OutputError):
                raise
            raise type(exc)(exc.errno, exc.strerror, str(self.path)) from None
        except BaseException:  # an interrupt between the last byte and the rename: the target stays as it was
            self._discard()
            raise
        self._discard()
        return False

    def _discard(self) -> None:
        if self.tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp_name, dir_fd=self.dir_fd)
            self.tmp_name = ""
        for attr in ("fd", "dir_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, attr, -1)


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """Give the temporary file the replaced file's permission bits, and its owner and group when this
    process may (root; or a group it belongs to). Set-id bits are not carried over."""
    if hasattr(os, "fchown") and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid if os.geteuid() == 0 else -1, old.st_gid)
        except PermissionError:  # not root and not in that group: the file becomes ours, mode kept
            pass
    os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)


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
    return f"cannot write {where}: {exc.strerror or exc}"


def names_stdout(path) -> bool:
    """Whether writing ``path`` writes this process's standard output (``-o /dev/stdout``): a command's
    own messages then go to stderr, so the output stream holds only the output."""
    try:
        target = output_target(path)
        return target.how == DESCRIPTOR and os.path.samestat(os.fstat(target.fd), os.fstat(1))
    except OSError:
        return False
