"""Facts about this machine that are cheap to read and decide, in-process, that a vendor probe cannot succeed.

A vendor probe that loads a driver stack runs in a child interpreter (PTI aborts the process with a Level
Zero loader but no driver), which costs a Python start-up, the vendor's import and its initialization:
0.3-0.7 s each on a quiet 2-core machine, several seconds under load. Most machines lack most vendors, and
that is visible without loading anything: the vendor's Python package is not installed, the shared library
the dynamic linker would load is on none of its paths, or there is no device node a driver could open.
These checks only stat files and read ``/etc/ld.so.cache``; they run no subprocess (``ctypes.util.
find_library`` runs ``ldconfig``, ``gcc`` and ``ld``) and load nothing.

They may only rule a probe *out*: a library found here may still fail to load, and then the real probe
says why. So every lookup errs towards "found": prefix matches of a library name, every directory the
dynamic linker or a Python environment may add, a library already mapped into this process.
``XPUPROF_FULL_PROBE=1`` turns the rule-out off (every probe runs whole), for a machine where a fact here
is wrong.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Iterable, Mapping

FULL_PROBE_ENV = "XPUPROF_FULL_PROBE"
LD_CACHE = "/etc/ld.so.cache"
PROC_MAPS = "/proc/self/maps"
_TRUE = frozenset({"1", "true", "yes", "on"})

WHERE_LIBRARIES_ARE_LOOKED_FOR = ("Looked in LD_LIBRARY_PATH, the dynamic linker's cache (/etc/ld.so.cache), "
                                  "its default directories and this Python's lib folder")
# WSL2 exposes every GPU vendor's driver through one paravirtual node.
WSL_GPU_NODE = "/dev/dxg"


def full_probe_forced(environ: Mapping[str, str] | None = None) -> bool:
    """``XPUPROF_FULL_PROBE=1``: no probe is ruled out from these facts."""
    env = os.environ if environ is None else environ
    return str(env.get(FULL_PROBE_ENV, "")).strip().lower() in _TRUE


def _default_dirs() -> list[str]:
    """The dynamic linker's trusted directories (its built-in list, multiarch included), and the lib
    folders of this Python's prefixes (a conda or pyenv interpreter carries an RPATH to them)."""
    multiarch = getattr(sys.implementation, "_multiarch", "")  # x86_64-linux-gnu on Debian and most others
    dirs = ["/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib"]
    if multiarch:
        dirs += [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"]
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix)):
        dirs.append(os.path.join(prefix, "lib"))
    return dirs


def library_search_dirs(environ: Mapping[str, str] | None = None) -> list[str]:
    """Where a ``dlopen`` by name looks, in a process started with ``environ``: LD_LIBRARY_PATH first."""
    env = os.environ if environ is None else environ
    dirs = [d for d in str(env.get("LD_LIBRARY_PATH", "")).split(os.pathsep) if d]
    return list(dict.fromkeys(dirs + _default_dirs()))


def _in_file(path: str, needle: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return needle in f.read()
    except OSError:
        return False


def _stem(name: str) -> str:
    """``libcuda.so.1`` -> ``libcuda.so``: any version of the library matches (errs towards found)."""
    head, so, _ = name.partition(".so")
    return head + so


def find_library(names: Iterable[str], environ: Mapping[str, str] | None = None, *,
                 extra_dirs: Iterable[str] = ()) -> str | None:
    """Where the dynamic linker of a process started with ``environ`` could find one of ``names`` (such as
    ``libcuda.so.1``; any version of it counts), or None when it certainly could not. Looks in
    ``extra_dirs``, LD_LIBRARY_PATH, the trusted directories, the linker's cache (``/etc/ld.so.cache``: what
    ``ldconfig`` registered from ``/etc/ld.so.conf``) and the libraries already mapped into this process.
    Loads nothing."""
    stems = list(dict.fromkeys(_stem(n) for n in names if n))
    for d in [*extra_dirs, *library_search_dirs(environ)]:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        hits = sorted(e for e in entries if e.startswith(tuple(stems)))
        if hits:
            return os.path.join(d, hits[0])
    for stem in stems:
        # The cache's string table holds each soname and its full path; the maps hold resolved paths.
        if _in_file(LD_CACHE, b"/" + stem.encode()):
            return f"{stem} (registered in {LD_CACHE})"
        if _in_file(PROC_MAPS, b"/" + stem.encode()):
            return f"{stem} (already loaded in this process)"
    return None


def device_nodes(patterns: Iterable[str]) -> list[str]:
    """The device nodes matching ``patterns`` (globs under /dev) that exist."""
    import glob

    found: list[str] = []
    for pattern in patterns:
        found += sorted(glob.glob(pattern))
    return found


def module_installed(name: str) -> bool:
    """Whether the top-level Python package ``name`` can be imported (found on sys.path; nothing imported)."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
