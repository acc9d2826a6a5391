"""Fault isolation for out-of-tree backends.

``isolate(cls, origin)`` returns a subclass of a registered backend class whose every call is
guarded: an exception (or an error a C plugin returns) becomes a ``PluginFault`` reported once
with the plugin's origin, and the call degrades to "take no part" (probe: unavailable,
configure: decline, start/stop/process: no-op). Events the session already wrote stay in the
builder, so the trace is still written complete and valid.

Every call but the per-range correlation push/pop runs under the deadline of ``xpuprof.deadline``
(``XPUPROF_PLUGIN_DEADLINE_S``, 10 s by default) on a daemon helper thread. A call that misses it is
abandoned there (Python cannot kill a thread, nor can anything stop a C function), reported as a
fault naming the phase and the deadline, and the plugin is disabled for the rest of the process:
nothing of ours calls it or waits for it again, and a builder it still holds refuses its writes.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from ..activity import ActivityType
from ..backends.base import Backend, ProbeResult, ProcessWindow, Session
from ..deadline import ENV_DEADLINE, DeadlineExceeded, call_with_deadline, default_deadline_s
from . import faults


class PluginHung(RuntimeError):
    """A plugin call missed its deadline, or the plugin was disabled by an earlier one."""

    def __init__(self, fault: str) -> None:
        super().__init__(fault)
        self.fault = fault


def call_plugin(origin: str, stage: str, fn, *args, late: list | None = None):
    """``fn(*args)`` under the plugin deadline; ``PluginHung`` when it misses it or the plugin is disabled.

    A call that returns only after its deadline - one that held the interpreter lock, so the wait for
    it could not end in time - keeps its result and is reported with its duration (appended to
    ``late`` too, for the session's errors)."""
    why = faults.abandoned(origin)
    if why is not None:
        raise PluginHung(why)
    timeout = default_deadline_s()
    started = time.monotonic()
    try:
        result = call_with_deadline(fn, *args, timeout_s=timeout, what=f"{origin} {stage}")
    except DeadlineExceeded:
        raise PluginHung(str(faults.abandon(origin, stage, timeout))) from None
    except BaseException:
        _check_overrun(origin, stage, started, timeout, late)
        raise
    _check_overrun(origin, stage, started, timeout, late)
    return result


def _check_overrun(origin: str, stage: str, started: float, timeout: float, late: list | None) -> None:
    took = time.monotonic() - started
    if took <= timeout:
        return
    fault = faults.report(origin, stage, f"returned after {took:.1f} s, past its {timeout:g} s deadline "
                                         f"({ENV_DEADLINE}): it held the interpreter lock, so it could not be "
                                         f"abandoned in time; the profiled program waited for it")
    if late is not None and str(fault) not in late:
        late.append(str(fault))


class BuilderGate:
    """The builder as a plugin's ``process`` sees it: closed when the call returns or misses its
    deadline, so an abandoned call can never write into a trace that is being (or was) written."""

    def __init__(self, builder, origin: str) -> None:
        self._builder = builder
        self._origin = origin
        self._lock = threading.RLock()  # re-entered by hold() around a C callback's builder calls
        self._open = True
        self.refused = 0

    @contextlib.contextmanager
    def hold(self):
        """Keep the gate open for a group of builder uses (a C callback); ``PluginHung`` once closed."""
        with self._lock:
            if not self._open:
                self.refused += 1
                raise PluginHung(f"{self._origin}: a builder callback after process() returned or was abandoned "
                                 f"is ignored")
            yield

    def close(self) -> None:
        # Waits for a builder call in flight (ours, bounded); a plugin that hangs inside a callback of
        # its own while holding nothing of ours cannot block this.
        if self._lock.acquire(timeout=default_deadline_s()):
            self._open = False
            self._lock.release()
        else:
            self._open = False

    def __getattr__(self, attr: str):
        value = getattr(self._builder, attr)
        if not callable(value):
            return value

        def gated(*args, **kwargs):
            with self._lock:
                if not self._open:
                    self.refused += 1
                    raise PluginHung(f"{self._origin}: builder.{attr}() after process() returned or was abandoned "
                                     f"is ignored")
                return value(*args, **kwargs)

        return gated


class IsolatedSession(Session):
    """Delegates to a plugin's session; failures are reported and contained."""

    def __init__(self, inner: Session, origin: str) -> None:
        self._inner = inner
        self._origin = origin
        self._broken = False
        self._hung = False
        self._errors: list[str] = []

    _LIFECYCLE = ("start", "stop", "process")

    def _disabled(self) -> bool:
        """The plugin missed a deadline (here or in another session): never call it again."""
        if self._hung:
            return True
        why = faults.abandoned(self._origin)
        if why is None:
            return False
        self._hung = self._broken = True
        if why not in self._errors:
            self._errors.append(why)
        return True

    def _guard(self, stage: str, fn, *args, default=None):
        if (self._broken and stage in self._LIFECYCLE) or self._disabled():
            return default
        try:
            return call_plugin(self._origin, stage, fn, *args, late=self._errors)
        except PluginHung as exc:
            self._hung = self._broken = True
            if exc.fault not in self._errors:
                self._errors.append(exc.fault)
            return default
        except Exception as exc:  # a plugin's bug must not end the profile run
            self._broken = self._broken or stage in self._LIFECYCLE
            fault = faults.report(self._origin, stage, faults.describe_exception(exc))
            self._errors.append(str(fault))
            return default

    def start(self) -> None:
        self._guard("start", self._inner.start)

    def stop(self) -> None:
        # stop is still attempted after a failed start, so a half-started plugin can release resources
        # (not after a missed deadline: the plugin may still be inside the call that hung).
        if self._disabled():
            return
        if self._broken:
            try:
                call_plugin(self._origin, "stop", self._inner.stop, late=self._errors)
            except PluginHung as exc:
                self._hung = True
                self._errors.append(exc.fault)
            except Exception:
                pass
            return
        self._guard("stop", self._inner.stop)

    def process(self, builder, window: ProcessWindow) -> None:
        if self._disabled():
            pass
        elif self._broken:  # no processing after a failed start/stop, but let the plugin release resources
            close = getattr(self._inner, "close", None)
            try:
                if callable(close):
                    call_plugin(self._origin, "close", close, late=self._errors)
            except PluginHung as exc:
                self._hung = True
                self._errors.append(exc.fault)
            except Exception as exc:
                faults.report(self._origin, "close", faults.describe_exception(exc))
        else:
            gate = BuilderGate(builder, self._origin)
            try:
                self._guard("process", self._inner.process, gate, window)
            finally:
                gate.close()
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

    # Per-range calls: no helper thread (a deadline would cost more than the range); a plugin already
    # disabled is skipped.
    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        if self._hung:
            return
        try:
            self._inner.push_correlation_id(correlation_id, user)
        except Exception as exc:
            self._errors.append(str(faults.report(self._origin, "push_correlation_id", faults.describe_exception(exc))))

    def pop_correlation_id(self, user: bool = False) -> None:
        if self._hung:
            return
        try:
            self._inner.pop_correlation_id(user)
        except Exception as exc:
            self._errors.append(str(faults.report(self._origin, "pop_correlation_id", faults.describe_exception(exc))))

    @property
    def wants_correlation(self) -> bool:
        try:
            return bool(self._inner.wants_correlation)
        except Exception:
            return False


def isolate(cls: type[Backend], origin: str) -> type[Backend]:
    """A guarded subclass of ``cls`` (same name, vendor, isinstance relations)."""

    late: list[str] = []  # calls outside a session that returned past their deadline: each session reports them

    class Isolated(cls):  # type: ignore[misc, valid-type]
        plugin_origin = origin
        plugin_class = cls

        def __init__(self, *args, **kwargs) -> None:
            self._plugin_init_error = None
            try:
                call_plugin(origin, "configure", lambda: super(Isolated, self).__init__(*args, **kwargs), late=late)
            except PluginHung as exc:
                self._plugin_init_error = exc.fault
            except Exception as exc:
                self._plugin_init_error = faults.report(origin, "configure", faults.describe_exception(exc))

        @classmethod
        def probe(klass) -> ProbeResult:
            try:
                result = call_plugin(origin, "probe", super().probe, late=late)
            except PluginHung as exc:
                return ProbeResult.unavailable(f"plugin disabled: {exc.fault}", origin=origin)
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
                types = call_plugin(origin, "supported_activities", super().supported_activities, late=late)
                out = frozenset(ActivityType.parse(t) for t in types)
            except PluginHung:
                return frozenset()
            except Exception as exc:
                faults.report(origin, "supported_activities", faults.describe_exception(exc))
                return frozenset()
            return out

        def configure(self, activity_types, config) -> Session | None:
            if self._plugin_init_error is not None:
                return None
            try:
                session = call_plugin(origin, "configure", super().configure, activity_types, config, late=late)
            except PluginHung:
                return None
            except Exception as exc:
                faults.report(origin, "configure", faults.describe_exception(exc))
                return None
            if session is None:
                return None
            if not isinstance(session, Session):
                faults.report(origin, "configure",
                              f"configure() returned {type(session).__name__}, not a Session or None")
                return None
            isolated = IsolatedSession(session, origin)
            isolated._errors.extend(late)
            return isolated

    Isolated.__name__ = cls.__name__
    Isolated.__qualname__ = cls.__qualname__
    Isolated.__module__ = cls.__module__
    Isolated.__doc__ = cls.__doc__
    return Isolated


def destroy_c_handle(plugin, handle: int, state: dict) -> None:
    """A C plugin's ``destroy(handle)``, once (``state``), under the deadline like every other call."""
    if state.get("destroyed"):
        return
    state["destroyed"] = True
    # Under the deadline (a plugin already abandoned is not called: its handle is leaked): this also runs
    # from the garbage collector and at exit, which must never hang on a plugin - a crashed program exits.
    try:
        rc = call_plugin(plugin.origin, "destroy", _destroy_locked, plugin, handle)
    except PluginHung:
        return
    if rc is not None and rc < 0:
        faults.report(f"C plugin {plugin.path}", "destroy", f"destroy() returned {rc}")


def _destroy_locked(plugin, handle: int) -> int | None:
    from ..deadline import default_deadline_s

    if not plugin.lock.acquire(timeout=default_deadline_s()):
        faults.report(plugin.origin, "destroy", "not called: another call of the plugin still holds it")
        return None
    try:
        return plugin.table.destroy(handle)
    finally:
        plugin.lock.release()
