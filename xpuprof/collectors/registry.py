"""Which metric collectors exist: built-ins (imported lazily, by module path) and user ones.

User collectors register the three ways backends do: ``xpuprof.register_collector`` (call or
decorator), the ``xpuprof.collectors`` entry-point group, or a module in a plugin directory
(``XPUPROF_PLUGIN_PATH`` / ``ProfilerConfig.plugin_paths``) that calls ``register_collector``.
A class is checked when it is registered, so a broken collector fails at import, not mid-run.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any

from ..registry import RegistrationError, Registry, check_name, qualname as _qualname
from .base import Collector, CollectorAvailability, MetricInfo

ENTRY_POINT_GROUP = "xpuprof.collectors"

# name -> "module:Class". Nothing vendor-specific is imported until a collector is asked for.
BUILTIN_COLLECTORS: dict[str, str] = {
    "host": "xpuprof.collectors.host:HostCollector",
    "nvml": "xpuprof.collectors.nvml:NvmlCollector",
    "amdsmi": "xpuprof.collectors.amdsmi:AmdSmiCollector",
    "sysman": "xpuprof.collectors.sysman:SysmanCollector",
    "xpu_metrics": "xpuprof.collectors.xpu_metrics:XpuMetricsCollector",
}


class CollectorRegistrationError(RegistrationError):
    """A collector name that is already taken (pass ``replace=True`` to replace it)."""


COLLECTORS: Registry[Collector] = Registry("collector", BUILTIN_COLLECTORS, entry_point_group=ENTRY_POINT_GROUP,
                                           error=CollectorRegistrationError)
log = logging.getLogger("xpuprof")

# Plugin directories, load attribution and the fault log belong to the plugin layer, which installs
# them here when imported (``xpuprof.plugins`` does; ``import xpuprof`` brings it). So collectors
# import no plugin code and the arrows run one way: plugins -> collectors.
_loading_origin_provider = lambda: None  # noqa: E731  fn() -> the plugin file being loaded, or None
_fault_reporter = None  # fn(origin, stage, reason): the plugin fault log


def install_discovery(discover, loading_origin, report_fault, entry_point_loader) -> None:
    """Called by the plugin layer: how to load plugins and entry points, who is loading now, where
    faults go."""
    global _loading_origin_provider, _fault_reporter
    COLLECTORS.install_discovery(discover, entry_point_loader)
    _loading_origin_provider, _fault_reporter = loading_origin, report_fault


def report_fault(origin: str, stage: str, reason: str) -> None:
    """A user collector failed: into the plugin fault log (so the trace records it), else a warning."""
    if _fault_reporter is not None:
        _fault_reporter(origin, stage, reason)
    else:
        log.warning("xpuprof: %s (%s): %s", origin, stage, reason)


def validate_collector_class(cls) -> None:
    """Raise ``TypeError`` naming exactly why ``cls`` cannot serve as a collector."""
    if not isinstance(cls, type) or not issubclass(cls, Collector):
        raise TypeError(f"register_collector expects a subclass of xpuprof.Collector, got {cls!r}")
    check_name(cls)
    if cls.scope not in ("host", "device"):
        raise TypeError(f"{_qualname(cls)}.scope must be 'host' or 'device', got {cls.scope!r}")
    for method in ("metrics", "series" if cls.self_sampled else "read"):
        if getattr(cls, method) is getattr(Collector, method):
            raise TypeError(f"{_qualname(cls)} does not implement {method}() of xpuprof.Collector")
    if not isinstance(inspect.getattr_static(cls, "metrics"), (classmethod, staticmethod)):
        raise TypeError(f"{_qualname(cls)}.metrics must be a @classmethod: names are listed before any instance exists")
    infos = list(cls.metrics())
    bad = [m for m in infos if not isinstance(m, MetricInfo)]
    if bad or not infos:
        raise TypeError(f"{_qualname(cls)}.metrics() must return a non-empty list of xpuprof.MetricInfo, got {infos!r}")
    names = [m.name for m in infos]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TypeError(f"{_qualname(cls)}.metrics() names {', '.join(dup)} more than once")
    bad_names = [n for n in names if not n or ":" in n or "," in n or n != n.strip()]
    if bad_names:
        raise TypeError(f"{_qualname(cls)}.metrics(): metric names must be non-empty, without ':' or ',' or "
                        f"surrounding spaces: {bad_names!r}")


def register_collector(cls=None, *, replace: bool = False, origin: str | None = None):
    """Register a user collector class; usable as ``@register_collector`` or
    ``@register_collector(replace=True)``. Returns the class unchanged."""
    if cls is None:
        return lambda c: register_collector(c, replace=replace, origin=origin)
    validate_collector_class(cls)
    origin = origin or _loading_origin_provider() or f"register_collector({_qualname(cls)})"
    return COLLECTORS.register(cls, origin=origin, replace=replace)


def unregister_collector(name: str) -> None:
    COLLECTORS.unregister(name)


def plugin_collectors() -> dict[str, str]:
    """name -> origin of every registered (non built-in) collector."""
    return COLLECTORS.origins()


def discover_entry_points() -> list[str]:
    """Register every class in the ``xpuprof.collectors`` entry-point group (once per process)."""
    return COLLECTORS.discover_entry_points(register_collector)


def ensure_loaded(config=None) -> None:
    """Entry points and plugin directories (which may register collectors), once."""
    COLLECTORS.discover(config)


def collector_names(config=None) -> list[str]:
    return COLLECTORS.names(config)


def get_collector_class(name: str, config=None) -> type[Collector]:
    return COLLECTORS.get(name, config)


def offered_metrics(config=None) -> dict[str, list[MetricInfo]]:
    """collector name -> the metrics it offers (a collector whose class cannot load offers none)."""
    out: dict[str, list[MetricInfo]] = {}
    for name in collector_names(config):
        try:
            out[name] = list(get_collector_class(name).metrics())
        except Exception:  # its describe row says why
            out[name] = []
    return out


def qualified_only(config=None) -> dict:
    """collector -> its ``accepts(name)`` for collectors whose metrics resolve only as ``collector:metric``."""
    out = {}
    for name in collector_names(config):
        try:
            cls = get_collector_class(name)
        except Exception:
            continue
        if getattr(cls, "qualified_only", False):
            accepts = getattr(cls, "accepts", None)
            offered = {m.name for m in cls.metrics()}
            out[name] = accepts if callable(accepts) else offered.__contains__
    return out


def describe_collectors(config=None) -> list[dict[str, Any]]:
    """One row per collector for ``xpuprof metrics`` / ``xpuprof devices``: name, status, reason,
    source, origin, scope, description, metrics [(name, unit, description)]."""
    rows = []
    origins = plugin_collectors()
    for name in collector_names(config):
        row: dict[str, Any] = {"name": name, "source": "plugin" if name in origins else "built-in",
                               "origin": origins.get(name, ""), "scope": "", "description": "", "metrics": []}
        try:
            cls = get_collector_class(name)
            row.update(scope=cls.scope, description=cls.description,
                       metrics=[(m.name, m.unit, m.description) for m in cls.metrics()])
            probe = cls.probe()
            if not isinstance(probe, CollectorAvailability):
                probe = CollectorAvailability(False, f"probe() returned {type(probe).__name__}")
        except Exception as exc:
            probe = CollectorAvailability(False, f"probe failed: {type(exc).__name__}: {exc}")
        row.update(status="available" if probe.available else "unavailable", reason=probe.reason,
                   details=dict(probe.details))
        rows.append(row)
    return rows


def reset() -> None:
    """Forget user collectors and rediscover entry points on next use (tests)."""
    COLLECTORS.reset()
