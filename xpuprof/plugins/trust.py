"""Whether a plugin file may be loaded: nobody but the running user (and root) can change it.

The rule is OpenSSH's StrictModes (``safe_path``): the file and every directory from it up to ``/``,
after resolving symlinks, must be owned by root or the running user and must not be writable by
group or others. A root-owned sticky directory (such as ``/tmp``) is accepted as a component when
the entry below it is owned by the running user (others may add entries there but not replace
ours). A symlink is judged by where it leads, and the directory holding the link is judged too
(whoever can write it can point the link elsewhere).

Anything that fails the rule could be another user's code run in the profiled process - often as
root on GPU nodes - so it is refused, one line each in the trace's ``plugin_load_errors``.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


def checks_ownership() -> bool:
    """Ownership means something here (POSIX); elsewhere only the mode bits are judged."""
    return hasattr(os, "geteuid")


def _trusted_owner(uid: int) -> bool:
    return not checks_ownership() or uid in (0, os.geteuid())


def _problem(path: str, st: os.stat_result, below_uid: int | None) -> str | None:
    """Why one component fails the rule, or None. ``below_uid``: owner of the entry below it."""
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    if not _trusted_owner(st.st_uid):
        return f"{kind} {path} is owned by another user (uid {st.st_uid})"
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not writable:
        return None
    if (checks_ownership() and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_uid == 0
            and below_uid == os.geteuid()):
        return None  # /tmp-like: others cannot replace or remove the entry below, which is ours
    who = "group and others" if writable == (stat.S_IWGRP | stat.S_IWOTH) else \
        "its group" if writable == stat.S_IWGRP else "every user"
    return f"{kind} {path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"


def _chain_problem(real: str, st: os.stat_result) -> str | None:
    """Check ``real`` (a resolved path, already stat'ed) and every directory above it up to ``/``."""
    why = _problem(real, st, None)
    if why:
        return why
    below_uid = st.st_uid
    current = real
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            return None
        try:
            pst = os.stat(parent)
        except OSError as exc:
            return f"cannot check directory {parent}: {exc.strerror or exc}"
        why = _problem(parent, pst, below_uid)
        if why:
            return why
        below_uid, current = pst.st_uid, parent


def untrusted(path: Path | str) -> str | None:
    """Why another user could change what ``path`` (a plugin file or directory) loads, or None.

    The resolved path and its directories up to ``/`` are checked; when ``path`` is a symlink, the
    directories holding the link are checked as well."""
    path = os.path.abspath(path)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror or exc}"
    why = _chain_problem(real, st)
    if why:
        return why if real == path else f"{why} (it is where the symlink {path} leads)"
    link_dir = os.path.dirname(path)
    if real != path and os.path.realpath(link_dir) != os.path.dirname(real):
        real_dir = os.path.realpath(link_dir)
        try:
            dst = os.stat(real_dir)
        except OSError as exc:
            return f"cannot check {real_dir}: {exc.strerror or exc}"
        why = _chain_problem(real_dir, dst)
        if why:
            return f"{why} (it holds the symlink {path})"
    return None
