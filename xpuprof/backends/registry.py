"""Which backends exist: the built-ins (imported lazily, by module path) and registered ones."""
from __future__ import annotations

import importlib
import threading

from .base import Backend, ProbeResult

# name -> "module:Class". Nothing vendor-specific is imported until a backend is asked for.
BUILTIN_BACKENDS: dict[str, str] = {
    "xpu": "xpuprof.backends.xpu.backend:XpuBackend",
    "cuda": "xpuprof.backends.cuda.backend:CudaBackend",
    "rocm": "xpuprof.backends.rocm.backend:RocmBackend",
    "sim": "xpuprof.backends.sim:SimBackend",
}
# Backends that are never chosen unless named explicitly (the simulator must never stand in
# for real hardware silently).
EXPLICIT_ONLY = frozenset({"sim"})

_lock = threading.Lock()
_registered: dict[str, type[Backend]] = {}


def load_builtin(name: str) -> type[Backend]:
    target = BUILTIN_BACKENDS[name]
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def register(cls: type[Backend], *, replace: bool = False) -> type[Backend]:
    """Low-level registration (validation lives in xpuprof.plugins.registry.register_backend)."""
    with _lock:
        if cls.name in _registered and not replace and _registered[cls.name] is not cls:
            raise ValueError(f"a backend named {cls.name!r} is already registered; pass replace=True to replace it")
        _registered[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    with _lock:
        _registered.pop(name, None)


def registered() -> dict[str, type[Backend]]:
    with _lock:
        return dict(_registered)


def backend_names() -> list[str]:
    return list(dict.fromkeys([*BUILTIN_BACKENDS, *registered()]))


def get_backend_class(name: str) -> type[Backend]:
    reg = registered()
    if name in reg:
        return reg[name]
    if name in BUILTIN_BACKENDS:
        return load_builtin(name)
    raise ValueError(f"unknown backend {name!r}. Known backends: {', '.join(backend_names())}")


def probe_all() -> dict[str, ProbeResult]:
    """Every known backend's probe; a backend whose import or probe fails is reported, not raised."""
    out: dict[str, ProbeResult] = {}
    for name in backend_names():
        try:
            out[name] = get_backend_class(name).probe()
        except Exception as exc:  # a broken backend must not hide the others
            out[name] = ProbeResult.unavailable(f"probe failed: {type(exc).__name__}: {exc}")
    return out
