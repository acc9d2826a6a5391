"""Out-of-tree backends (the PrivateUse1 route): ``register_backend`` and the ``xpuprof.backends``
entry-point group.

A class is checked against ``xpuprof.backends.base.Backend`` when it is registered (abstract
methods implemented, call signatures compatible) and a precise ``TypeError`` names what is
wrong, so a broken backend fails at import time, not in the middle of a profile run.

Registrations made before the backend registry is first used are kept here and forwarded when
it initializes (Kineto's ``registerProfilerFactory`` queue); later ones go straight through.
Every registered class is stored wrapped by ``isolation.isolate`` so its failures are reported
once and contained.
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
import threading
from typing import Iterator

from ..backends import registry as core
from ..backends.base import Backend
from . import entry_points, faults
from .isolation import isolate

ENTRY_POINT_GROUP = "xpuprof.backends"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")

# The call shapes the profiler uses; a registered class must accept them.
_CLASS_METHODS = {"probe": (), "supported_activities": ()}
_INSTANCE_METHODS = {"configure": ("activity_types", "config")}


class BackendRegistrationError(ValueError):
    """A backend name that is already taken (pass ``replace=True`` to replace it)."""


_lock = threading.RLock()
_pending: dict[str, tuple[type[Backend], str]] = {}  # name -> (class, origin), before initialization
_origins: dict[str, str] = {}  # name -> where it came from (every out-of-tree backend)
_classes: dict[str, type[Backend]] = {}  # name -> the class as the user wrote it
_initialized = False
_entry_points_done = False
_loading_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("xpuprof_plugin_origin", default=None)


# ----------------------------------------------------------------------------- validation
def _qualname(cls) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def _check_callable(cls: type, method: str, call_args: tuple[str, ...], *, on_class: bool) -> None:
    static = inspect.getattr_static(cls, method)
    where = f"{_qualname(cls)}.{method}"
    base = getattr(Backend, method)
    base_sig = inspect.signature(base)
    if on_class and not isinstance(static, (classmethod, staticmethod)):
        raise TypeError(f"{where} must be a @classmethod like Backend.{method}{base_sig}: the profiler calls it on "
                        f"the class, before any instance exists")
    fn = getattr(cls, method)
    target = static.__func__ if isinstance(static, (classmethod, staticmethod)) else fn
    if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
        raise TypeError(f"{where} must be a plain (synchronous) method, not async")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} has no inspectable signature ({exc})") from None
    probe_args = [object() for _ in call_args]
    if not on_class and not isinstance(static, (classmethod, staticmethod)):
        probe_args.insert(0, object())  # self
        shown = f"{method}(self, {', '.join(call_args)})"
    else:
        shown = f"{method}({', '.join(call_args)})"
    try:
        sig.bind(*probe_args)
    except TypeError as exc:
        raise TypeError(f"{where}{sig} is not compatible with Backend.{method}{base_sig}: the profiler calls "
                        f"{shown} and that call fails ({exc})") from None


def validate_backend_class(cls) -> None:
    """Raise ``TypeError`` naming exactly why ``cls`` cannot serve as a backend."""
    if not isinstance(cls, type):
        raise TypeError(f"register_backend expects a class, got {type(cls).__name__} {cls!r}")
    if not issubclass(cls, Backend):
        raise TypeError(f"{_qualname(cls)} must subclass xpuprof.backends.base.Backend "
                        f"(bases: {', '.join(_qualname(b) for b in cls.__bases__)})")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise TypeError(f"{_qualname(cls)} does not implement the abstract method(s) {', '.join(missing)} "
                        f"of xpuprof.backends.base.Backend")
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise TypeError(f"{_qualname(cls)}.name must be a non-empty lowercase string of letters, digits, '_', '-' "
                        f"or '.', got {name!r}")
    if not isinstance(getattr(cls, "vendor", ""), str):
        raise TypeError(f"{_qualname(cls)}.vendor must be a string, got {type(cls.vendor).__name__}")
    for method, args in _CLASS_METHODS.items():
        _check_callable(cls, method, args, on_class=True)
    for method, args in _INSTANCE_METHODS.items():
        _check_callable(cls, method, args, on_class=False)


# ----------------------------------------------------------------------------- registration
def _taken(name: str) -> str | None:
    """Where the name is already used, or None."""
    if name in _pending:
        return _pending[name][1]
    if name in _origins and name in core.registered():
        return _origins[name]
    if name in core.registered():
        return "the backend registry"
    if name in core.BUILTIN_BACKENDS:
        return "the built-in backends"
    return None


def register_backend(cls=None, *, replace: bool = False, origin: str | None = None):
    """Register an out-of-tree backend class; usable as ``@register_backend`` or
    ``@register_backend(replace=True)``. Returns the class unchanged.

    Raises ``TypeError`` when the class does not implement the backend interface and
    ``BackendRegistrationError`` when its name is taken and ``replace`` is False.
    """
    if cls is None:
        return lambda c: register_backend(c, replace=replace, origin=origin)
    validate_backend_class(cls)
    origin = origin or _loading_origin.get() or f"register_backend({_qualname(cls)})"
    if faults.abandoned(origin):
        raise BackendRegistrationError(f"{origin} is disabled (it missed a deadline); its registration of "
                                       f"{_qualname(cls)} is ignored")
    name = cls.name
    with _lock:
        if _classes.get(name) is cls:
            return cls  # the same class again (a module imported twice) is not a conflict
        taken = _taken(name)
        if taken is not None and not replace:
            raise BackendRegistrationError(
                f"cannot register {_qualname(cls)} from {origin}: a backend named {name!r} is already provided by "
                f"{taken}; pass replace=True to replace it")
        declared_types = getattr(cls, "activity_types", ()) or ()
        if isinstance(declared_types, str) or not all(isinstance(t, str) for t in declared_types):
            raise TypeError(f"{_qualname(cls)}.activity_types must be a tuple of names, got {declared_types!r}")
        if declared_types:
            from . import activity_types

            try:
                activity_types.declare(origin, declared_types)
            except activity_types.ActivityTypeClash as exc:
                raise BackendRegistrationError(str(exc)) from None
        _classes[name] = cls
        _origins[name] = origin
        if _initialized:
            core.register(isolate(cls, origin), replace=True)
        else:
            _pending[name] = (cls, origin)
    return cls


def unregister_backend(name: str) -> None:
    """Remove an out-of-tree backend (built-ins cannot be removed; disable them instead)."""
    from . import activity_types

    with _lock:
        _pending.pop(name, None)
        _classes.pop(name, None)
        origin = _origins.pop(name, None)
        if origin is not None:
            core.unregister(name)
            if origin not in _origins.values():
                activity_types.undeclare(origin)


def origin_of(name: str) -> str | None:
    """Where an out-of-tree backend came from; None for built-ins."""
    with _lock:
        return _origins.get(name)


def plugin_backends() -> dict[str, str]:
    """name -> origin of every out-of-tree backend registered so far."""
    with _lock:
        return dict(_origins)


def pending() -> list[str]:
    """Names registered before initialization and not yet forwarded."""
    with _lock:
        return list(_pending)


def is_initialized() -> bool:
    return _initialized


def loading_origin() -> str | None:
    """The plugin file being loaded right now (registrations made there are attributed to it).

    Raises ``BackendRegistrationError`` in a plugin abandoned at load (its late registrations are refused)."""
    origin = _loading_origin.get()
    if faults.abandoned(origin):
        raise BackendRegistrationError(f"{origin} is disabled (it missed a deadline); its registration is ignored")
    return origin


@contextlib.contextmanager
def loading(origin: str) -> Iterator[None]:
    """Registrations inside this block are attributed to ``origin`` (a plugin file being loaded)."""
    token = _loading_origin.set(origin)
    try:
        yield
    finally:
        _loading_origin.reset(token)


# ----------------------------------------------------------------------------- initialization
def discover_entry_points() -> list[str]:
    """Register every class in the ``xpuprof.backends`` entry-point group (once per process).

    Returns the names registered; broken entry points are reported as faults and skipped.
    """
    global _entry_points_done
    with _lock:
        if _entry_points_done:
            return []
        _entry_points_done = True
    return entry_points.load_group(ENTRY_POINT_GROUP, register_backend)


def initialize() -> None:
    """Discover entry points and forward pending registrations to the backend registry (idempotent)."""
    global _initialized
    if _initialized:
        return
    discover_entry_points()
    with _lock:
        if _initialized:
            return
        for name, (cls, origin) in _pending.items():
            core.register(isolate(cls, origin), replace=True)
        _pending.clear()
        _initialized = True


def reset() -> None:
    """Forget every out-of-tree backend and rediscover on next use (tests)."""
    global _initialized, _entry_points_done
    with _lock:
        for name in list(_origins):
            core.unregister(name)
        _pending.clear()
        _origins.clear()
        _classes.clear()
        from . import activity_types

        activity_types.reset()
        _initialized = False
        _entry_points_done = False
