"""Where ``libpti_view.so`` may be, found without loading anything: ``import xpuprof`` looks here
(see ``early_load``), so this module imports neither numpy, ctypes nor ``importlib.metadata`` (whose
import alone costs more than the rest of the lookup).

The intel-pti wheel's files are listed in its ``RECORD`` relative to the site-packages directory holding
its ``.dist-info`` (the library lands in ``<prefix>/lib``): the first ``intel_pti-*.dist-info`` found
along ``sys.path`` is the distribution ``importlib.metadata.distribution("intel-pti")`` would return.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PTI_LIBRARY_ENV = "XPUPROF_PTI_LIBRARY"  # explicit path to a libpti_view.so (or an ABI-compatible double)
VIEW_LIBRARY = "libpti_view.so"
_DIST_PREFIX = "intel_pti-"  # the wheel's normalized project name, as its .dist-info directory spells it


def _record_libraries(dist_info: Path) -> list[Path]:
    """The view library files a distribution's RECORD lists, resolved."""
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        rel = line.split(",", 1)[0].strip('"')  # a CSV row; the library's own path holds no comma
        if rel.rsplit("/", 1)[-1].startswith(VIEW_LIBRARY):
            found.append((dist_info.parent / rel).resolve())
    return found


def wheel_candidates() -> list[Path]:
    """The intel-pti wheel's view library (from its RECORD), then ``<prefix>/lib`` of this Python."""
    found: list[Path] = []
    for entry in sys.path:
        where = Path(entry or ".")
        try:
            names = os.listdir(where)
        except OSError:  # not a directory (a zip), or unreadable
            continue
        dists = sorted(n for n in names if n.lower().startswith(_DIST_PREFIX) and n.endswith(".dist-info"))
        if dists:
            found += _record_libraries(where / dists[0])
            break
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix]):
        found.append(Path(prefix) / "lib" / VIEW_LIBRARY)
    return found


def oneapi_candidates() -> list[Path]:
    roots = [os.environ.get("ONEAPI_ROOT", ""), "/opt/intel/oneapi"]
    out = []
    for root in filter(None, roots):
        out += [Path(root) / "pti" / "latest" / "lib" / VIEW_LIBRARY, Path(root) / "lib" / VIEW_LIBRARY]
    return out


def installed_view_library() -> Path | None:
    """The view library without slow searches (no ldconfig): explicit path, the wheel, oneAPI."""
    explicit = os.environ.get(PTI_LIBRARY_ENV)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    for p in wheel_candidates() + oneapi_candidates():
        if p.is_file():
            return p
    return None


def preload(path: Path) -> None:
    """Load the view library at ``path`` now (RTLD_LOCAL: XPTI dlopens it by path; no symbol
    interposition). ctypes is imported here, not at module import, to keep ``import xpuprof`` light."""
    import ctypes

    ctypes.CDLL(str(path))
