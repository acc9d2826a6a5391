"""Load PTI's view library before the SYCL runtime starts, and know when that was too late.

``libpti_view.so`` hooks SYCL/Unified Runtime calls through XPTI only when it is loaded before the
SYCL runtime initializes: its static initializer sets ``XPTI_SUBSCRIBERS``, ``XPTI_TRACE_ENABLE``,
``XPTI_FRAMEWORK_DISPATCHER`` and ``UR_ENABLE_LAYERS`` in the C environment, which libsycl reads
once. A program that imports dpnp/dpctl/torch (or opens a first SYCL queue) before PTI is loaded
records no runtime calls at all. So ``import xpuprof`` loads the view library at once (about 2 ms,
the view library only: PTI's core, which can abort the process, loads at the first session), and the
XPU session says so loudly when SYCL had started first.

Switches: ``XPUPROF_DISABLE_BACKENDS`` containing ``xpu``, or ``XPUPROF_EARLY_PTI=0``.
This module imports no vendor package; it loads one shared library with ctypes.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

EARLY_ENV = "XPUPROF_EARLY_PTI"
# The libraries whose presence in the process means the SYCL runtime has (or may have) initialized.
SYCL_RUNTIME_LIBRARIES = ("libsycl.so", "libur_loader.so")
VIEW_LIBRARY = "libpti_view.so"

# The verdict, decided once per process: "loaded_early" (at import, before SYCL), "sycl_first"
# (SYCL was mapped before PTI), "loaded_in_time" (first loaded by a session, SYCL not yet started),
# or None (not decided yet).
_verdict: str | None = None
_sycl_seen: list[str] = []
_status = "not attempted"


def mapped_libraries(names, maps_path: str = "/proc/self/maps") -> list[str]:
    """Which of ``names`` (file-name prefixes) are mapped into this process."""
    try:
        with open(maps_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        path = line.rsplit(" ", 1)[-1]
        base = path.rsplit("/", 1)[-1]
        for name in names:
            if base.startswith(name) and path not in found:
                found.append(path)
    return found


def _view_library_path() -> Path | None:
    """The view library without slow searches (no ldconfig): explicit path, the wheel, oneAPI."""
    from . import pti  # numpy + ctypes only

    explicit = os.environ.get(pti.PTI_LIBRARY_ENV)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    for p in pti._wheel_candidates() + pti._oneapi_candidates():
        if p.is_file():
            return p
    return None


def _disabled() -> str | None:
    if os.environ.get(EARLY_ENV, "").strip().lower() in {"0", "false", "no", "off"}:
        return f"{EARLY_ENV}=0"
    names = {n.strip().lower() for n in os.environ.get("XPUPROF_DISABLE_BACKENDS", "").split(",")}
    if "xpu" in names:
        return "XPUPROF_DISABLE_BACKENDS includes xpu"
    return None


def preload_view_library() -> str:
    """Called at ``import xpuprof``: load ``libpti_view.so`` if it is installed and SYCL has not
    started. Never raises; returns (and remembers) what happened, for ``status()``."""
    global _verdict, _status
    if _verdict is not None:
        return _status
    why_not = _disabled()
    if why_not:
        _status = f"not loaded early: {why_not}"
        return _status
    try:
        path = _view_library_path()
    except Exception as exc:  # a broken metadata entry must not break `import xpuprof`
        _status = f"not loaded early: {type(exc).__name__}: {exc}"
        return _status
    if path is None:
        _status = "not loaded early: intel-pti is not installed"
        return _status
    sycl = mapped_libraries(SYCL_RUNTIME_LIBRARIES)
    if sycl:
        _decide(sycl)
        _status = f"not loaded early: the SYCL runtime was already loaded ({sycl[0]})"
        return _status
    try:
        ctypes.CDLL(str(path))  # RTLD_LOCAL: XPTI dlopens it by path; no symbol interposition
    except OSError as exc:
        _status = f"not loaded early: {exc}"
        return _status
    _verdict = "loaded_early"
    _status = f"loaded at import: {path}"
    return _status


def _decide(sycl: list[str]) -> None:
    global _verdict
    if _verdict is None:
        _verdict = "sycl_first" if sycl else "loaded_in_time"
        _sycl_seen[:] = sycl


def before_session_loads_pti() -> None:
    """Called by the XPU session right before it loads PTI: the first load decides the verdict."""
    if _verdict is None:
        if mapped_libraries((VIEW_LIBRARY,)):
            # Loaded by someone else (LD_PRELOAD, the user, an earlier tool) before us: in time only if
            # SYCL was not there first, which the maps cannot order; LD_PRELOAD is the documented fix.
            _decide([] if VIEW_LIBRARY in os.environ.get("LD_PRELOAD", "") else
                    mapped_libraries(SYCL_RUNTIME_LIBRARIES))
        else:
            _decide(mapped_libraries(SYCL_RUNTIME_LIBRARIES))


def runtime_capture_problem() -> str | None:
    """Why SYCL/UR runtime calls cannot be captured in this process, or None when they can."""
    if _verdict != "sycl_first":
        return None
    lib = _sycl_seen[0] if _sycl_seen else "the SYCL runtime"
    return ("SYCL runtime calls cannot be captured in this process: the SYCL runtime "
            f"({lib}) was loaded before Intel PTI and no runtime call was recorded; SYCL reads PTI's hooks "
            "only when it initializes. "
            "Fix: `import xpuprof` before importing dpnp/dpctl/torch (or before the first SYCL queue), "
            "run through `xpuprof run`, or start the process with "
            "LD_PRELOAD=<venv>/lib/libpti_view.so")


def status() -> str:
    return _status


def _reset_for_tests() -> None:
    global _verdict, _status
    _verdict, _status = None, "not attempted"
    _sycl_seen.clear()
