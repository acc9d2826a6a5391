"""Load PTI's view library before the SYCL runtime initializes, and know when that was too late.

``libpti_view.so`` hooks SYCL/Unified Runtime calls through XPTI only when it is loaded before the
SYCL runtime initializes: its static initializer sets ``XPTI_SUBSCRIBERS``, ``XPTI_TRACE_ENABLE``,
``XPTI_FRAMEWORK_DISPATCHER`` and ``UR_ENABLE_LAYERS`` in the C environment, which SYCL reads once,
when it initializes. ``import xpuprof`` loads the view library at once (about 2 ms; the view library
only: PTI's core, which can abort the process, loads at the first session).

*Mapped* is not *initialized*: ``import dpnp`` / ``import dpctl`` map ``libsycl.so`` and
``libur_loader.so`` but initialize nothing, and loading the view library then is still in time. SYCL
initializes at its first device query, queue or array; that is when the Unified Runtime loader
dlopens its adapters (``libur_adapter_*.so``; older DPC++: the ``libpi_*.so`` plugins). So the view
library is loaded whenever it is installed and the backend is not disabled, and whether it came too
late is read from ``/proc/self/maps`` at the moment it is loaded: adapters mapped = SYCL initialized
first = no runtime call can be captured in this process (checked on intel-pti 1.2.0 + dpctl/dpnp:
loading it then is harmless, no crash, and the ``ze*`` driver calls are still recorded).

Switches: ``XPUPROF_DISABLE_BACKENDS`` containing ``xpu``, or ``XPUPROF_EARLY_PTI=0`` (the first
session then loads it, judged the same way). This module imports no vendor package; it loads one
shared library with ctypes.
"""
from __future__ import annotations

import os
from pathlib import Path

EARLY_ENV = "XPUPROF_EARLY_PTI"
# Mapped once the SYCL runtime has initialized: the Unified Runtime adapters (the PI plugins before UR).
SYCL_INITIALIZED_LIBRARIES = ("libur_adapter_", "libpi_")
# Mapped by SYCL at initialization when XPTI tracing was switched on (by PTI's view library, in time).
XPTI_FRAMEWORK = "libxptifw.so"
VIEW_LIBRARY = "libpti_view.so"

# The verdict, decided once per process when the view library is first in the process:
# "in_time" (SYCL had not initialized), "sycl_initialized_first", or None (not decided yet).
_verdict: str | None = None
_initialized_seen: list[str] = []
_status = "not attempted"


def mapped_libraries(names, maps_path: str = "/proc/self/maps") -> list[str]:
    """Which libraries whose file names start with one of ``names`` are mapped into this process."""
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


def sycl_initialized(maps_path: str = "/proc/self/maps") -> list[str]:
    """The SYCL runtime's adapter libraries mapped now: non-empty once SYCL has initialized."""
    return mapped_libraries(SYCL_INITIALIZED_LIBRARIES, maps_path)


def _view_library_path() -> Path | None:
    """The view library without slow searches (no ldconfig): explicit path, the wheel, oneAPI."""
    from ...vendors.pti_locate import installed_view_library  # no numpy, ctypes.util or importlib.metadata

    return installed_view_library()


def _disabled() -> str | None:
    if os.environ.get(EARLY_ENV, "").strip().lower() in {"0", "false", "no", "off"}:
        return f"{EARLY_ENV}=0"
    names = {n.strip().lower() for n in os.environ.get("XPUPROF_DISABLE_BACKENDS", "").split(",")}
    if "xpu" in names:
        return "XPUPROF_DISABLE_BACKENDS includes xpu"
    return None


def _view_already_mapped(path: Path | None) -> bool:
    names = [VIEW_LIBRARY] + ([path.name] if path is not None else [])
    return bool(mapped_libraries(tuple(names)))


def _decide(view_path: Path | None) -> None:
    """Judge, right before the view library is first loaded by xpuprof, whether it is in time."""
    global _verdict
    if _verdict is not None:
        return
    initialized = sycl_initialized()
    if initialized and _view_already_mapped(view_path) and mapped_libraries((XPTI_FRAMEWORK,)):
        # Someone loaded it before us (LD_PRELOAD, the user) and SYCL initialized with XPTI on: in time.
        initialized = []
    _verdict = "sycl_initialized_first" if initialized else "in_time"
    _initialized_seen[:] = initialized


def preload_view_library() -> str:
    """Called at ``import xpuprof``: load ``libpti_view.so`` if it is installed and the XPU backend is
    not disabled, whether or not SYCL is already there. Never raises; returns (and remembers) what
    happened, for ``status()``."""
    global _status
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
    _decide(path)
    from ...vendors.pti_locate import preload

    try:
        preload(path)
    except OSError as exc:
        _status = f"not loaded early: {exc}"
        return _status
    if _verdict == "sycl_initialized_first":
        _status = f"loaded at import, after the SYCL runtime had initialized ({_initialized_seen[0]}): {path}"
    else:
        _status = f"loaded at import: {path}"
    return _status


def before_session_loads_pti() -> None:
    """Called by the XPU session right before it loads PTI: decides the verdict if import did not."""
    _decide(None)


def runtime_capture_problem() -> str | None:
    """Why SYCL/UR runtime calls cannot be captured in this process, or None when they can."""
    if _verdict != "sycl_initialized_first":
        return None
    lib = _initialized_seen[0] if _initialized_seen else "its adapters"
    return ("SYCL runtime calls cannot be captured in this process: the SYCL runtime had already initialized "
            f"(Unified Runtime adapter {lib} loaded) when Intel PTI's view library was loaded, and SYCL reads "
            "PTI's hooks only when it initializes (Level Zero driver calls are still recorded). "
            "Fix: `import xpuprof` before the first SYCL work (the first dpnp/dpctl/torch.xpu array, queue or "
            "device query; importing those packages first is fine), run through `xpuprof run`, or start the "
            "process with LD_PRELOAD=<venv>/lib/libpti_view.so")


def status() -> str:
    return _status
