"""Whether a socket directory (``KINETO_IPC_SOCKET_DIR``) can be turned against this process.

A process binds its endpoint there, sets the socket file's mode and removes it at exit; the process may
run as root. Whoever can rename or replace an entry on the way to that directory - or the socket file
in it - could make those operations land somewhere else (a symlink swapped in between bind and chmod
gave root's chmod to anyone, issue 40). So every entry on the path, as it resolves from ``/``, symlinks
included:

* belongs to root or this user (the owner of an entry can replace what it holds or where it leads), and
* lies in a directory owned by root or this user that no one else can write, unless that directory is
  sticky (``/tmp``: others may add entries there but not rename or remove ours);

and the socket directory itself belongs to root or this user and, when group or others may write it,
is sticky. A directory that fails is refused with one line naming the entry and why (and how to fix it).
Containers sharing one directory: make it sticky (``chmod 1777``), as ``/tmp`` is.
"""
from __future__ import annotations

import errno
import os
import stat

_MAX_LINKS = 40  # as the kernel's ELOOP limit


class SocketDirError(OSError):
    """The socket directory is unusable or unsafe: one line saying which entry and why."""


def _owner_ok(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _holder_problem(holder: str, st: os.stat_result, entry: str) -> str | None:
    """Why the directory ``holder`` lets another user replace ``entry``, or None."""
    if not _owner_ok(st.st_uid):
        return f"{holder} belongs to uid {st.st_uid}, who could replace {entry}"
    if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
        return (f"{holder} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}) and not sticky: anyone "
                f"could replace {entry}")
    return None


def problem(directory: str) -> str | None:
    """Why ``directory`` is not a safe socket directory for this process, or None."""
    path = os.path.abspath(directory)
    todo = [p for p in path.split("/") if p]
    current = "/"
    links = 0
    try:
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                current = os.path.dirname(current)
                continue
            entry = os.path.join(current, part)
            st = os.lstat(entry)
            why = _holder_problem(current, os.lstat(current), entry)
            if why:
                return why
            if not _owner_ok(st.st_uid):
                return f"{entry} belongs to uid {st.st_uid}, not to this user or root"
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    return f"{path}: too many symbolic links"
                target = os.readlink(entry)
                if target.startswith("/"):
                    current = "/"
                todo[:0] = [p for p in target.split("/") if p]
                continue
            current = entry
        st = os.stat(current)
    except OSError as exc:
        return f"cannot use {path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if not _owner_ok(st.st_uid):
        return f"{path} belongs to uid {st.st_uid}, not to this user or root"
    if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
        return (f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}) and not sticky: anyone could "
                f"replace the sockets in it (make it sticky: chmod +t {path})")
    return None


def open_checked(directory: str) -> int:
    """An ``O_DIRECTORY`` descriptor of ``directory`` once it passes ``problem``; ``SocketDirError`` otherwise.
    Entries in it are then created, checked and removed through the descriptor."""
    why = problem(directory)
    if why:
        raise SocketDirError(errno.EPERM, f"KINETO_IPC_SOCKET_DIR: {why}")
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise SocketDirError(exc.errno, f"KINETO_IPC_SOCKET_DIR: cannot open {directory}: {exc.strerror}") from None


def is_own_socket(dir_fd: int, name: str) -> bool:
    """``name`` in the directory is a socket file (never followed) of this user."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid()


def set_socket_mode(dir_fd: int, name: str, mode: int) -> None:
    """chmod the socket file ``name`` just bound, without following anything: the entry is opened
    ``O_PATH|O_NOFOLLOW`` (pinning that inode), checked to be a socket of this user, and changed through
    that descriptor. ``SocketDirError`` when something else stands there."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            raise SocketDirError(errno.EPERM, f"the socket file {name} was replaced before its mode could be set "
                                 "(by another user?); the endpoint is not used")
        os.chmod(f"/proc/self/fd/{fd}", mode)  # the magic link leads to this very inode, never elsewhere
    finally:
        os.close(fd)


def unlink_own_socket(dir_fd: int, name: str) -> bool:
    """Remove ``name`` from the directory when it is a socket of this user (never by a path resolved again)."""
    if not is_own_socket(dir_fd, name):
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
