"""Entry-point discovery, one way for backends and collectors: each entry point is imported under
the plugin deadline (an import that hangs costs it once and disables that entry point), and a
broken one is a load fault of its own, never an error of the caller."""
from __future__ import annotations

from typing import Callable

from . import faults
from .isolation import PluginHung, call_plugin


def load_group(group: str, register: Callable[..., object]) -> list[str]:
    """Import every entry point of ``group`` (sorted by name) and ``register(cls, origin=...)`` it.

    Returns the names registered; broken or hanging entry points are reported as faults and skipped.
    """
    from importlib.metadata import entry_points

    try:
        eps = sorted(entry_points(group=group), key=lambda e: (e.name, e.value))
    except Exception as exc:  # a corrupt installed distribution must not break profiling
        faults.report(f"entry points ({group})", "load", faults.describe_exception(exc))
        return []
    names = []
    for ep in eps:
        dist = getattr(ep, "dist", None)
        where = f" from {dist.name} {dist.version}" if dist is not None else ""
        origin = f"entry point {ep.name} = {ep.value}{where}"
        try:
            cls = call_plugin(origin, "load", ep.load)
            register(cls, origin=origin)
        except PluginHung:  # reported (stage "load") and disabled by call_plugin
            continue
        except Exception as exc:
            faults.report(origin, "load", faults.describe_exception(exc))
            continue
        names.append(cls.name)
    return names
