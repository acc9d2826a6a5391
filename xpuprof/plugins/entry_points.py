"""Entry-point discovery, one way for backends and collectors: each entry point is imported under
the plugin deadline (an import that hangs costs it once and disables that entry point), and a
broken one is a load fault of its own, never an error of the caller.

Every ``xpuprof.profile()`` start discovers once per process, on every machine, and almost none has a
plugin installed: ``importlib.metadata.entry_points`` reads every installed distribution's metadata
(10 ms for 170 distributions beside torch, plus 40 ms to import ``importlib.metadata`` where nothing
did), so a plain read of the ``entry_points.txt`` files on ``sys.path`` decides first whether any
distribution mentions the group at all."""
from __future__ import annotations

import os
import sys
from typing import Callable

from . import faults
from .isolation import PluginHung, call_plugin


def group_may_be_declared(group: str) -> bool:
    """False only when no distribution ``importlib.metadata`` could find declares ``group``: every
    ``sys.path`` entry is a directory (or absent), none holds an egg, every ``*.dist-info``/``*.egg-info``
    ``entry_points.txt`` there lacks the group's name, and no finder but the path finder lists
    distributions. Anything else (a zip on the path, a custom finder, a mention) says True."""
    from importlib.machinery import PathFinder

    if any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path):
        return True
    needle = group.encode()
    for entry in sys.path:
        where = entry or "."
        try:
            names = os.listdir(where)
        except NotADirectoryError:  # a zip file: its distributions are read by importlib.metadata
            return True
        except OSError:
            continue
        for name in names:
            lower = name.lower()
            if lower.endswith(".egg"):
                return True
            if not lower.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(where, name, "entry_points.txt"), "rb") as f:
                    if needle in f.read():
                        return True
            except OSError:  # no entry points (or an egg-info file: metadata only)
                continue
    return False


def load_group(group: str, register: Callable[..., object]) -> list[str]:
    """Import every entry point of ``group`` (sorted by name) and ``register(cls, origin=...)`` it.

    Returns the names registered; broken or hanging entry points are reported as faults and skipped.
    """
    if not group_may_be_declared(group):
        return []
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
