"""Fault isolation for out-of-tree backends.

``isolate(cls, origin)`` returns a subclass of a registered backend class whose every call is
guarded: an exception (or an error a C plugin returns) becomes a ``PluginFault`` reported once
with the plugin's origin, and the call degrades to "take no part" (probe: unavailable,
configure: decline, start/stop/process: no-op). Events the session already wrote stay in the
builder, so the trace is still written complete and valid.
"""
from __future__ import annotations

from typing import Any

from ..activity import ActivityType
from ..backends.base import Backend, ProbeResult, ProcessWindow, Session
from . import faults


class IsolatedSession(Session):
    """Delegates to a plugin's session; failures are reported and contained."""

    def __init__(self, inner: Session, origin: str) -> None:
        self._inner = inner
        self._origin = origin
        self._broken = False
        self._errors: list[str] = []

    _LIFECYCLE = ("start", "stop", "process")

    def _guard(self, stage: str, fn, *args, default=None):
        if self._broken and stage in self._LIFECYCLE:
            return default
        try:
            return fn(*args)
        except Exception as exc:  # a plugin's bug must not end the profile run
            self._broken = self._broken or stage in self._LIFECYCLE
            fault = faults.report(self._origin, stage, faults.describe_exception(exc))
            self._errors.append(str(fault))
            return default

    def start(self) -> None:
        self._guard("start", self._inner.start)

    def stop(self) -> None:
        # stop is still attempted after a failed start, so a half-started plugin can release resources.
        if self._broken:
            try:
                self._inner.stop()
            except Exception:
                pass
            return
        self._guard("stop", self._inner.stop)

    def process(self, builder, window: ProcessWindow) -> None:
        if self._broken:  # no processing after a failed start/stop, but let the plugin release resources
            close = getattr(self._inner, "close", None)
            try:
                if callable(close):
                    close()
            except Exception as exc:
                faults.report(self._origin, "close", faults.describe_exception(exc))
        else:
            self._guard("process", self._inner.process, builder, window)
        for err in self._errors:
            builder.warn(err)

    def device_properties(self) -> list[dict[str, Any]]:
        return list(self._guard("device_properties", self._inner.device_properties, default=[]) or [])

    def metadata(self) -> dict[str, Any]:
        return dict(self._guard("metadata", self._inner.metadata, default={}) or {})

    def errors(self) -> list[str]:
        inner = self._guard("errors", self._inner.errors, default=[]) or []
        return [*map(str, inner), *self._errors]

    def dropped_records(self) -> dict[str, int]:
        return dict(self._guard("dropped_records", self._inner.dropped_records, default={}) or {})

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        self._guard("push_correlation_id", self._inner.push_correlation_id, correlation_id, user)

    def pop_correlation_id(self, user: bool = False) -> None:
        self._guard("pop_correlation_id", self._inner.pop_correlation_id, user)

    @property
    def wants_correlation(self) -> bool:
        try:
            return bool(self._inner.wants_correlation)
        except Exception:
            return False


def isolate(cls: type[Backend], origin: str) -> type[Backend]:
    """A guarded subclass of ``cls`` (same name, vendor, isinstance relations)."""

    class Isolated(cls):  # type: ignore[misc, valid-type]
        plugin_origin = origin
        plugin_class = cls

        def __init__(self, *args, **kwargs) -> None:
            self._plugin_init_error = None
            try:
                super().__init__(*args, **kwargs)
            except Exception as exc:
                self._plugin_init_error = faults.report(origin, "configure", faults.describe_exception(exc))

        @classmethod
        def probe(klass) -> ProbeResult:
            try:
                result = super().probe()
            except Exception as exc:
                fault = faults.report(origin, "probe", faults.describe_exception(exc))
                return ProbeResult.unavailable(f"plugin probe failed: {fault.reason}", origin=origin)
            if not isinstance(result, ProbeResult):
                fault = faults.report(origin, "probe", f"probe() returned {type(result).__name__}, not ProbeResult")
                return ProbeResult.unavailable(f"plugin probe failed: {fault.reason}", origin=origin)
            return result

        @classmethod
        def supported_activities(klass) -> frozenset[ActivityType]:
            try:
                types = super().supported_activities()
                out = frozenset(ActivityType.parse(t) for t in types)
            except Exception as exc:
                faults.report(origin, "supported_activities", faults.describe_exception(exc))
                return frozenset()
            return out

        def configure(self, activity_types, config) -> Session | None:
            if self._plugin_init_error is not None:
                return None
            try:
                session = super().configure(activity_types, config)
            except Exception as exc:
                faults.report(origin, "configure", faults.describe_exception(exc))
                return None
            if session is None:
                return None
            if not isinstance(session, Session):
                faults.report(origin, "configure",
                              f"configure() returned {type(session).__name__}, not a Session or None")
                return None
            return IsolatedSession(session, origin)

    Isolated.__name__ = cls.__name__
    Isolated.__qualname__ = cls.__qualname__
    Isolated.__module__ = cls.__module__
    Isolated.__doc__ = cls.__doc__
    return Isolated
