"""Which backends exist: the built-ins (imported lazily, by module path) and registered ones.

Out-of-tree backends (``xpuprof.register_backend``, the ``xpuprof.backends`` entry-point group,
directory plugins from ``XPUPROF_PLUGIN_PATH`` / ``ProfilerConfig.plugin_paths``) are loaded on
first use of this registry and appear here exactly like built-ins, so the profiler needs no
special case. Backends can be switched off with ``XPUPROF_DISABLE_BACKENDS=xpu,cuda`` or
``ProfilerConfig.disabled_backends`` (``KINETO_DISABLE_CUPTI=1`` is honoured as an alias that
disables "cuda").
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Mapping

from .. import diagnostics
from ..registry import RegistrationError, Registry, qualname
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
ENTRY_POINT_GROUP = "xpuprof.backends"
_TRUE = frozenset({"1", "true", "yes", "on"})


class BackendRegistrationError(RegistrationError):
    """A backend name that is already taken (pass ``replace=True`` to replace it)."""


# Validation, fault isolation and the plugin discovery live in the plugin layer
# (xpuprof.plugins.registry), which registers into this and installs its discovery here when
# imported: this core registry imports no plugin code, so the arrows run one way.
BACKENDS: Registry[Backend] = Registry("backend", BUILTIN_BACKENDS, entry_point_group=ENTRY_POINT_GROUP,
                                       error=BackendRegistrationError)
_load_failures_provider = list  # fn() -> [(origin, reason)] for plugins that failed to load


def install_load_failures(load_failures) -> None:
    """Called by the plugin layer: where the list of plugins that failed to load comes from."""
    global _load_failures_provider
    _load_failures_provider = load_failures


def load_builtin(name: str) -> type[Backend]:
    return BACKENDS.load_builtin(name)


def register(cls: type[Backend], *, replace: bool = False) -> type[Backend]:
    """Low-level registration: no validation, no fault isolation (``xpuprof.register_backend`` has both)."""
    return BACKENDS.register(cls, origin=f"the backend registry ({qualname(cls)})", replace=replace)


def unregister(name: str) -> None:
    BACKENDS.unregister(name)


def registered() -> dict[str, type[Backend]]:
    """name -> class of every out-of-tree backend (as the profiler uses it: fault-isolated)."""
    return BACKENDS.registered()


def plugin_origins() -> dict[str, str]:
    """Backend name -> the plugin file or entry point it came from (out-of-tree backends only)."""
    return BACKENDS.origins()


def plugin_load_failures() -> list[tuple[str, str]]:
    """(origin, reason) for every plugin that failed to load (or was refused) in this process."""
    return list(_load_failures_provider())


def ensure_plugins(config=None) -> None:
    """Run the installed discovery (idempotent; failures are reported by the plugin layer, never raised)."""
    BACKENDS.discover(config)


def backend_names(config=None) -> list[str]:
    return BACKENDS.names(config)


def get_backend_class(name: str, config=None) -> type[Backend]:
    return BACKENDS.get(name, config)


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


def probe_many(classes: Mapping[str, type[Backend]]) -> dict[str, ProbeResult | Exception]:
    """``cls.probe()`` of every class at once, one thread each, so that the slowest probe, not their sum, is
    what the caller waits for (a vendor probe that must load a driver runs in a child interpreter: 0.3-0.7 s;
    one ruled out from files takes a few ms, see ``system_facts``). Each backend caches its own result
    for the process. What a probe raises is returned in its place, for the caller to report."""
    out: dict[str, ProbeResult | Exception] = {}

    def run(name: str, cls: type[Backend]) -> None:
        try:
            out[name] = cls.probe()
        except Exception as exc:  # a broken backend must not stop the others
            out[name] = exc

    items = list(classes.items())
    threads = [threading.Thread(target=run, args=item, name=f"xpuprof-probe:{item[0]}", daemon=True)
               for item in items[1:]]
    for t in threads:
        t.start()
    if items:
        run(*items[0])  # the calling thread takes one itself
    for t in threads:
        t.join()
    return {name: out[name] for name, _ in items}


def probe_all(config=None) -> dict[str, ProbeResult]:
    """Every known backend's probe (all at once: ``probe_many``); a disabled backend is not probed (it
    reports the switch), and one whose import or probe fails is reported, not raised."""
    out: dict[str, ProbeResult] = {}
    names = backend_names(config)
    disabled = disabled_backends(config)
    _warn_unknown_disabled(disabled, names)
    classes: dict[str, type[Backend]] = {}
    for name in names:
        if name in disabled:
            out[name] = ProbeResult.unavailable(disabled[name], disabled=True)
            continue
        try:
            classes[name] = get_backend_class(name)
        except Exception as exc:  # a broken backend must not hide the others
            out[name] = ProbeResult.unavailable(f"probe failed: {type(exc).__name__}: {exc}")
    for name, res in probe_many(classes).items():
        out[name] = res if isinstance(res, ProbeResult) else \
            ProbeResult.unavailable(f"probe failed: {type(res).__name__}: {res}")
    return {name: out[name] for name in names}
