"""Out-of-tree backends (the PrivateUse1 route): ``register_backend`` and the ``xpuprof.backends``
entry-point group.

A class is checked against ``xpuprof.backends.base.Backend`` when it is registered (abstract
methods implemented, call signatures compatible) and a precise ``TypeError`` names what is
wrong, so a broken backend fails at import time, not in the middle of a profile run.

Registered classes go into the backend registry (``xpuprof.backends.registry.BACKENDS``) with
their origin; the profiler uses each wrapped by ``isolation.isolate``, so its failures are
reported once and contained. Entry points are discovered on the registry's first use.
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
from typing import Iterator

from ..backends.base import Backend
from ..backends.registry import BACKENDS, BackendRegistrationError
from ..registry import check_name, qualname as _qualname
from . import faults
from .isolation import isolate

# The call shapes the profiler uses; a registered class must accept them.
_CLASS_METHODS = {"probe": (), "supported_activities": ()}
_INSTANCE_METHODS = {"configure": ("activity_types", "config")}

_lock = threading.RLock()
_initialized = False
_loading_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("xpuprof_plugin_origin", default=None)


# ----------------------------------------------------------------------------- validation
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
    check_name(cls)
    if not isinstance(getattr(cls, "vendor", ""), str):
        raise TypeError(f"{_qualname(cls)}.vendor must be a string, got {type(cls.vendor).__name__}")
    for method, args in _CLASS_METHODS.items():
        _check_callable(cls, method, args, on_class=True)
    for method, args in _INSTANCE_METHODS.items():
        _check_callable(cls, method, args, on_class=False)


# ----------------------------------------------------------------------------- registration
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
    with _lock:
        if BACKENDS.is_registered(cls):
            return cls  # the same class again (a module imported twice) is not a conflict
        taken = BACKENDS.taken_by(cls.name)
        if taken is not None and not replace:
            raise BACKENDS.conflict(cls, origin, taken)
        declared_types = getattr(cls, "activity_types", ()) or ()
        if isinstance(declared_types, str) or not all(isinstance(t, str) for t in declared_types):
            raise TypeError(f"{_qualname(cls)}.activity_types must be a tuple of names, got {declared_types!r}")
        if declared_types:
            from . import activity_types

            try:
                activity_types.declare(origin, declared_types)
            except activity_types.ActivityTypeClash as exc:
                raise BackendRegistrationError(str(exc)) from None
        BACKENDS.register(cls, origin=origin, replace=True, stored=isolate(cls, origin))
    return cls


def unregister_backend(name: str) -> None:
    """Remove an out-of-tree backend (built-ins cannot be removed; disable them instead)."""
    from . import activity_types

    with _lock:
        origin = BACKENDS.unregister(name)
        if origin is not None and origin not in BACKENDS.origins().values():
            activity_types.undeclare(origin)


def origin_of(name: str) -> str | None:
    """Where an out-of-tree backend came from; None for built-ins."""
    return BACKENDS.origin_of(name)


def plugin_backends() -> dict[str, str]:
    """name -> origin of every out-of-tree backend registered so far."""
    return BACKENDS.origins()


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
    return BACKENDS.discover_entry_points(register_backend)


def initialize() -> None:
    """Discover entry points (idempotent)."""
    global _initialized
    if _initialized:
        return
    discover_entry_points()
    _initialized = True


def reset() -> None:
    """Forget every out-of-tree backend and rediscover on next use (tests)."""
    global _initialized
    from . import activity_types

    with _lock:
        BACKENDS.reset()
        activity_types.reset()
        _initialized = False
