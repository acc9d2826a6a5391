"""Activity types that plugins declare at load (the dynamic-plugin review's ask).

A plugin declares named activity types (a backend class's ``activity_types`` tuple); each
plugin gets its own id range (``PLUGIN_ID_BASE + k * PLUGIN_ID_SPAN``), the names then parse in
activity lists, Kineto ``ACTIVITY_TYPES`` and YAML ``activities:`` like built-in names, a clash
with a built-in name (or alias) or another plugin's is one clear error, the enabled ones are
handed to the plugin's ``configure`` (create time), and its events carry the names as categories.
"""
from __future__ import annotations

import re
import threading

from .. import activity
from ..activity import ActivityType, PluginActivityType

PLUGIN_ID_BASE = 0x10000
PLUGIN_ID_SPAN = 0x100
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")

_lock = threading.RLock()
_types: dict[str, PluginActivityType] = {}
_ranges: dict[str, int] = {}  # origin -> first id of its range
_resolving = threading.local()


class ActivityTypeClash(ValueError):
    """A declared activity type name that is invalid or already taken."""


def declare(origin: str, names) -> list[PluginActivityType]:
    """Declare ``names`` for the plugin ``origin`` (idempotent for the same plugin)."""
    names = [str(n) for n in names]
    with _lock:
        out = []
        for name in names:
            if not _NAME_RE.match(name) or len(name) > 64:
                raise ActivityTypeClash(f"{origin}: activity type name {name!r} must be lowercase letters, digits "
                                        f"and '_' (at most 64), starting with a letter")
            if name in ActivityType.all_names():
                raise ActivityTypeClash(f"{origin}: activity type {name!r} clashes with the built-in activity type "
                                        f"{ActivityType.parse(name).value!r}")
            owner = _types.get(name)
            if owner is not None and owner.origin != origin:
                raise ActivityTypeClash(f"{origin}: activity type {name!r} is already declared by {owner.origin}")
        if len(set(names)) != len(names):
            raise ActivityTypeClash(f"{origin}: activity types declared twice: {names!r}")
        base = _ranges.get(origin)
        if base is None:
            base = PLUGIN_ID_BASE + len(_ranges) * PLUGIN_ID_SPAN
            _ranges[origin] = base
        used = {t.type_id for t in _types.values() if t.origin == origin}
        for name in names:
            if name in _types:
                out.append(_types[name])
                continue
            next_id = next(i for i in range(base, base + PLUGIN_ID_SPAN) if i not in used) \
                if len(used) < PLUGIN_ID_SPAN else None
            if next_id is None:
                raise ActivityTypeClash(f"{origin}: more than {PLUGIN_ID_SPAN} activity types")
            used.add(next_id)
            _types[name] = PluginActivityType(name, next_id, origin)
            out.append(_types[name])
        return out


def undeclare(origin: str) -> None:
    with _lock:
        for name in [n for n, t in _types.items() if t.origin == origin]:
            del _types[name]


def declared() -> dict[str, PluginActivityType]:
    with _lock:
        return dict(_types)


def _resolve(name: str):
    with _lock:
        found = _types.get(name)
    if found is not None or getattr(_resolving, "active", False):
        return found
    # Not declared yet: the plugins named by the environment and entry points may declare it.
    _resolving.active = True
    try:
        from ..backends import registry

        registry.ensure_plugins()
    except Exception:  # plugin failures are reported as faults; the name just stays unknown
        pass
    finally:
        _resolving.active = False
    with _lock:
        return _types.get(name)


def reset() -> None:
    with _lock:
        _types.clear()
        _ranges.clear()


activity._PLUGIN_RESOLVERS.append(_resolve)
activity._PLUGIN_NAMES.append(lambda: tuple(declared()))
