"""Which backends exist: the built-ins (imported lazily, by module path) and registered ones.

Out-of-tree backends (``xpuprof.register_backend``, the ``xpuprof.backends`` entry-point group,
directory plugins from ``XPUPROF_PLUGIN_PATH`` / ``ProfilerConfig.plugin_paths``) are loaded on
first use of this registry and appear here exactly like built-ins, so the profiler needs no
special case. Backends can be switched off with ``XPUPROF_DISABLE_BACKENDS=xpu,cuda`` or
``ProfilerConfig.disabled_backends`` (``KINETO_DISABLE_CUPTI=1`` is honoured as an alias that
disables "cuda").
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
from typing import Any

from .. import diagnostics
from .base import Backend, ProbeResult

log = logging.getLogger("xpuprof.backends")

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

ENV_DISABLE = "XPUPROF_DISABLE_BACKENDS"
ENV_KINETO_DISABLE_CUPTI = "KINETO_DISABLE_CUPTI"
_TRUE = frozenset({"1", "true", "yes", "on"})

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


# Discovery is the plugin layer's job: it installs these providers when it is imported
# (``xpuprof.plugins`` runs ``install_discovery``), so this core registry imports no plugin code and
# the arrows run one way: plugins -> backends.registry.
_discover_providers: list = []  # fn(config) -> None: entry points, early registrations, plugin directories
_origins_provider = dict  # fn() -> {backend name: plugin origin}
_load_failures_provider = list  # fn() -> [(origin, reason)] for plugins that failed to load


def install_discovery(discover, origins, load_failures) -> None:
    """Called by the plugin layer: how to discover plugins, where each came from, and what failed."""
    global _origins_provider, _load_failures_provider
    if discover not in _discover_providers:
        _discover_providers.append(discover)
    _origins_provider, _load_failures_provider = origins, load_failures


def plugin_origins() -> dict[str, str]:
    """Backend name -> the plugin file or entry point it came from (out-of-tree backends only)."""
    return dict(_origins_provider())


def plugin_load_failures() -> list[tuple[str, str]]:
    """(origin, reason) for every plugin that failed to load (or was refused) in this process."""
    return list(_load_failures_provider())


def ensure_plugins(config=None) -> None:
    """Run the installed discovery (idempotent; failures are reported by the plugin layer, never raised)."""
    for discover in list(_discover_providers):
        discover(config)


def backend_names(config=None) -> list[str]:
    ensure_plugins(config)
    return list(dict.fromkeys([*BUILTIN_BACKENDS, *registered()]))


def get_backend_class(name: str, config=None) -> type[Backend]:
    ensure_plugins(config)
    reg = registered()
    if name in reg:
        return reg[name]
    if name in BUILTIN_BACKENDS:
        return load_builtin(name)
    raise ValueError(f"unknown backend {name!r}. Known backends: {', '.join(backend_names(config))}")


# ----------------------------------------------------------------------------- switches
def _notice_once(key: str, message: str) -> None:
    diagnostics.warn_once(log, ("backend-switch", key), "%s", message)


def _names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [str(v).strip().lower() for v in value if str(v).strip()]


def disabled_backends(config=None, environ=None) -> dict[str, str]:
    """name -> which switch disabled it (env ``XPUPROF_DISABLE_BACKENDS``, the config key
    ``disabled_backends``, or the Kineto alias ``KINETO_DISABLE_CUPTI=1``)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name in _names(env.get(ENV_DISABLE)):
        out.setdefault(name, f"disabled by {ENV_DISABLE}")
    if config is not None:
        for name in _names(getattr(config, "disabled_backends", None)):
            out.setdefault(name, "disabled by the config key disabled_backends")
    if str(env.get(ENV_KINETO_DISABLE_CUPTI, "")).strip().lower() in _TRUE:
        _notice_once("kineto-disable-cupti", f"notice: {ENV_KINETO_DISABLE_CUPTI}=1 is honoured as an alias of "
                                             f"{ENV_DISABLE}=cuda; please switch to {ENV_DISABLE}")
        out.setdefault("cuda", f"disabled by {ENV_KINETO_DISABLE_CUPTI}=1 (alias of {ENV_DISABLE}=cuda)")
    return out


def _warn_unknown_disabled(disabled: dict[str, str], known: list[str]) -> None:
    unknown = sorted(set(disabled) - set(known))
    if unknown:
        _notice_once(f"unknown-disabled:{','.join(unknown)}",
                     f"warning: cannot disable unknown backend(s) {', '.join(map(repr, unknown))}; "
                     f"known backends: {', '.join(known)}")


def enabled_backend_names(config=None) -> list[str]:
    """Every known backend that no switch disabled (explicit-only ones included)."""
    names = backend_names(config)
    disabled = disabled_backends(config)
    _warn_unknown_disabled(disabled, names)
    return [n for n in names if n not in disabled]


def probe_all(config=None) -> dict[str, ProbeResult]:
    """Every known backend's probe; a disabled backend is not probed (it reports the switch), and
    one whose import or probe fails is reported, not raised."""
    out: dict[str, ProbeResult] = {}
    names = backend_names(config)
    disabled = disabled_backends(config)
    _warn_unknown_disabled(disabled, names)
    for name in names:
        if name in disabled:
            out[name] = ProbeResult.unavailable(disabled[name], disabled=True)
            continue
        try:
            out[name] = get_backend_class(name).probe()
        except Exception as exc:  # a broken backend must not hide the others
            out[name] = ProbeResult.unavailable(f"probe failed: {type(exc).__name__}: {exc}")
    return out


def describe_backends(config=None) -> list[dict[str, Any]]:
    """One row per known backend for ``xpuprof devices``.

    Keys: ``name``; ``status`` ("available", "unavailable" or "disabled"); ``reason`` (the probe's
    reason or the switch); ``source`` ("built-in" or "plugin"); ``origin`` (the plugin file or
    entry point, "" for built-ins); ``explicit_only`` (chosen only when named); ``activities``
    (sorted activity type names, [] when unknown); ``details`` (the probe's details). Plugins
    that failed to load get a row each with status "unavailable", source "plugin" and ``name``
    "" (``origin`` and ``reason`` say which file and why).
    """
    probes = probe_all(config)
    origins = _origins_provider()
    rows: list[dict[str, Any]] = []
    for name, probe in probes.items():
        disabled = bool(probe.details.get("disabled"))
        activities: list[str] = []
        if not disabled:
            try:
                activities = sorted(t.value for t in get_backend_class(name).supported_activities())
            except Exception:  # the probe row already says why this backend cannot run
                activities = []
        rows.append({
            "name": name,
            "status": "disabled" if disabled else ("available" if probe.available else "unavailable"),
            "reason": probe.reason,
            "source": "plugin" if name in origins else "built-in",
            "origin": origins.get(name, ""),
            "explicit_only": name in EXPLICIT_ONLY,
            "activities": activities,
            "details": {k: v for k, v in probe.details.items() if k != "disabled"},
        })
    for origin, reason in _load_failures_provider():
        rows.append({"name": "", "status": "unavailable", "reason": f"failed to load: {reason}",
                     "source": "plugin", "origin": origin, "explicit_only": False, "activities": [],
                     "details": {}})
    return rows
