"""Writing a capture's trace where a request says, without writing through anything planted there.

A daemon request names its file, and anyone who can reach the daemon's port chooses that name, while
the process may run as root. So (the rules of Kineto's on-demand output, and ours on top):

* the file lies under the confinement directory (``/tmp/`` or ``KINETO_ONDEMAND_TRACE_DIR``, checked
  when the request is read); every directory below it is opened without following symbolic links,
  must be owned by this user or root, and a missing one is created (mode 0700);
* the trace is rendered into a private directory (0700, created exclusively) beside the target, given
  mode 0600, and renamed onto the final name: nothing at that name is ever opened, followed or
  truncated; a regular file of ours there is replaced (a repeated request), anything else (a link, a
  directory, another user's file) is left alone and the write refused with one line.

``xpuprof exec`` traces go to the user's own output directory: same staging, the user's umask.
"""
from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

from ..trace.write.files import format_of, write_trace


class TraceFileError(OSError):
    """The trace cannot be written at the requested place: one line saying why."""


def write_confined(prof, final: str, allowed_dir: str, *, mode: int = 0o600) -> Path:
    """Write ``prof``'s last trace to ``final`` (under ``allowed_dir``) by the rules above."""
    allowed = allowed_dir if allowed_dir.endswith("/") else allowed_dir + "/"
    if not final.startswith(allowed) or ".." in final:
        raise TraceFileError(errno.EPERM, f"{final}: on-demand traces must lie under {allowed} (no '..')")
    rel_dir, name = os.path.split(final[len(allowed):])
    if not name:
        raise TraceFileError(errno.EINVAL, f"{final}: names a directory, not a file")
    os.makedirs(allowed, exist_ok=True)  # the confinement directory is the process owner's own setting
    dfd = os.open(allowed, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in [p for p in rel_dir.split("/") if p]:
            child = _enter(dfd, part, final)
            os.close(dfd)
            dfd = child
        return _stage_and_rename(prof, dfd, name, final, mode)
    finally:
        os.close(dfd)


def write_in_dir(prof, directory, name: str) -> Path:
    """Write ``prof``'s last trace as ``directory/name`` (the directory is the user's own choice)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _stage_and_rename(prof, dfd, name, str(directory / name), None)
    finally:
        os.close(dfd)


def _enter(parent_fd: int, part: str, final: str) -> int:
    """Open directory ``part`` under ``parent_fd``, creating it when missing."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(part, flags, dir_fd=parent_fd)
        except FileNotFoundError:
            try:
                os.mkdir(part, 0o700, dir_fd=parent_fd)
            except FileExistsError:
                pass  # another rank created it first
            fd = os.open(part, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise TraceFileError(exc.errno, f"{final}: {part!r} on its path is a symbolic link or not a directory; "
                                 "on-demand traces are never written through links") from None
        raise TraceFileError(exc.errno, f"{final}: cannot open directory {part!r}: {exc.strerror}") from None
    owner = os.fstat(fd).st_uid
    if owner not in (0, os.geteuid()):
        os.close(fd)
        raise TraceFileError(errno.EPERM, f"{final}: directory {part!r} on its path belongs to uid {owner}, "
                             "not to this user or root")
    return fd


def _stage_and_rename(prof, dfd: int, name: str, final: str, mode: int | None) -> Path:
    if prof.builder is None:
        raise TraceFileError(errno.ENODATA, f"{final}: the capture produced no trace")
    here = os.readlink(f"/proc/self/fd/{dfd}")
    private = f".xpuprof-{uuid.uuid4().hex}"
    os.mkdir(private, 0o700, dir_fd=dfd)
    try:
        write_trace(prof.builder, f"{here}/{private}/{name}", vendor_categories=not prof.config.generic_categories,
                    trace_name=final, fmt=format_of(name))
        staged = f"{private}/{name}"
        if mode is not None:
            os.chmod(staged, mode, dir_fd=dfd, follow_symlinks=False)
        _check_replaceable(dfd, name, final)
        os.replace(staged, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        for leftover in (f"{private}/{name}", f"{private}/{name}.tmp"):
            try:
                os.unlink(leftover, dir_fd=dfd)
            except OSError:
                pass
        try:
            os.rmdir(private, dir_fd=dfd)
        except OSError:
            pass
    return Path(final)


def _check_replaceable(dfd: int, name: str, final: str) -> None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise TraceFileError(errno.EEXIST, f"{final} is a symbolic link; it is left alone (traces never replace "
                             "or follow links)")
    if not stat.S_ISREG(st.st_mode):
        raise TraceFileError(errno.EEXIST, f"{final} exists and is not a regular file; it is left alone")
    if st.st_uid != os.geteuid():
        raise TraceFileError(errno.EEXIST, f"{final} exists and belongs to uid {st.st_uid}; it is left alone")
