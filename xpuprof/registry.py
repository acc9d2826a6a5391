"""Named classes of one kind (backends, metric collectors): the one registry shape both use.

A ``Registry`` knows its built-ins by ``"module:Class"`` (imported only when asked for), the classes
registered at run time with where each came from (its origin: a plugin file, an entry point, a
``register_*`` call), and the discovery the plugin layer installs into it. The plugin layer sits
above the layers that own registries, so it hands its discovery down (``install_discovery``) instead
of being imported: the arrows keep running one way.
"""
from __future__ import annotations

import importlib
import re
import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

NAME_RULE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


class RegistrationError(ValueError):
    """A name that is already taken (pass ``replace=True`` to replace it)."""


def qualname(cls: Any) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def check_name(cls: type) -> None:
    """``TypeError`` unless ``cls.name`` is a lowercase name of letters, digits, '_', '-' or '.'."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not NAME_RULE.match(name):
        raise TypeError(f"{qualname(cls)}.name must be a non-empty lowercase string of letters, digits, '_', '-' "
                        f"or '.', got {name!r}")


class Registry(Generic[T]):
    """Built-in and registered classes of one ``kind`` ("backend", "collector") by name.

    Each registered name keeps the class as the user wrote it, the class used in its place
    (``stored``: e.g. wrapped for fault isolation) and its origin. Discovery (entry points, plugin
    directories) runs on first use through what the plugin layer installed; without it only
    built-ins and direct registrations exist.
    """

    def __init__(self, kind: str, builtins: dict[str, str], *, entry_point_group: str,
                 error: type[RegistrationError] = RegistrationError) -> None:
        self.kind = kind
        self.builtins = builtins
        self.entry_point_group = entry_point_group
        self.error = error
        self._lock = threading.RLock()
        self._written: dict[str, type] = {}  # name -> the class as registered
        self._stored: dict[str, type] = {}  # name -> the class used in its place
        self._origins: dict[str, str] = {}
        self._discover: list[Callable[[Any], None]] = []
        self._entry_point_loader: Callable[[str, Callable], list[str]] | None = None
        self._entry_points_done = False

    # ------------------------------------------------------------------ built-ins
    def load_builtin(self, name: str) -> type[T]:
        module, _, attr = self.builtins[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    # ------------------------------------------------------------------ registration
    def taken_by(self, name: str) -> str | None:
        """What already provides ``name`` (an origin, or the built-ins), or None."""
        with self._lock:
            if name in self._origins:
                return self._origins[name]
        return f"the built-in {self.kind}s" if name in self.builtins else None

    def is_registered(self, cls: type) -> bool:
        """Whether this very class is registered under its name (a module imported twice is no conflict)."""
        with self._lock:
            return self._written.get(getattr(cls, "name", None)) is cls

    def conflict(self, cls: type, origin: str, taken: str) -> RegistrationError:
        return self.error(f"cannot register {qualname(cls)} from {origin}: a {self.kind} named {cls.name!r} is "
                          f"already provided by {taken}; pass replace=True to replace it")

    def register(self, cls: type, *, origin: str, replace: bool = False, stored: type | None = None) -> type:
        """Register ``cls`` under ``cls.name`` (``stored`` used in its place); the same class again is a
        no-op; a name already taken raises ``self.error`` unless ``replace``."""
        with self._lock:
            if self._written.get(cls.name) is cls:
                return cls
            taken = self.taken_by(cls.name)
            if taken is not None and not replace:
                raise self.conflict(cls, origin, taken)
            self._written[cls.name] = cls
            self._stored[cls.name] = stored if stored is not None else cls
            self._origins[cls.name] = origin
        return cls

    def unregister(self, name: str) -> str | None:
        """Forget a registered name (built-ins stay); returns its origin, or None when it had none."""
        with self._lock:
            self._written.pop(name, None)
            self._stored.pop(name, None)
            return self._origins.pop(name, None)

    def registered(self) -> dict[str, type]:
        """name -> the class used for every registered (non built-in) name."""
        with self._lock:
            return dict(self._stored)

    def origins(self) -> dict[str, str]:
        """name -> origin of every registered name."""
        with self._lock:
            return dict(self._origins)

    def origin_of(self, name: str) -> str | None:
        with self._lock:
            return self._origins.get(name)

    # ------------------------------------------------------------------ discovery
    def install_discovery(self, discover: Callable[[Any], None] | None = None,
                          entry_point_loader: Callable[[str, Callable], list[str]] | None = None) -> None:
        """Called by the plugin layer: ``discover(config)`` loads plugins (idempotent);
        ``entry_point_loader(group, register)`` imports an entry-point group."""
        with self._lock:
            if discover is not None and discover not in self._discover:
                self._discover.append(discover)
            if entry_point_loader is not None:
                self._entry_point_loader = entry_point_loader

    def discover_entry_points(self, register: Callable[..., type]) -> list[str]:
        """``register(cls, origin=...)`` every class of this registry's entry-point group, once per process."""
        with self._lock:
            if self._entry_points_done:
                return []
            self._entry_points_done = True
            loader = self._entry_point_loader
        return [] if loader is None else loader(self.entry_point_group, register)

    def discover(self, config=None) -> None:
        """Run the installed discovery (failures are the plugin layer's to report, never raised here)."""
        for fn in list(self._discover):
            fn(config)

    def names(self, config=None) -> list[str]:
        """Built-ins first, then registered names, after discovery."""
        self.discover(config)
        with self._lock:
            return list(dict.fromkeys([*self.builtins, *self._stored]))

    def get(self, name: str, config=None) -> type[T]:
        """The class for ``name`` (registered before built-in); ``ValueError`` listing the known names."""
        self.discover(config)
        with self._lock:
            got = self._stored.get(name)
        if got is not None:
            return got
        if name in self.builtins:
            return self.load_builtin(name)
        from .suggest import did_you_mean

        known = self.names(config)
        raise ValueError(f"unknown {self.kind} {name!r}{did_you_mean(name, known) or '.'} Known {self.kind}s: "
                         f"{', '.join(known)}")

    def reset(self) -> None:
        """Forget every registered name and rediscover entry points on next use (tests)."""
        with self._lock:
            self._written.clear()
            self._stored.clear()
            self._origins.clear()
            self._entry_points_done = False
