"""Plugin faults: each broken plugin is reported once, with its file (origin) and the reason.

A fault never stops a profile run: the loader skips a plugin that fails to load, the isolation
wrapper turns a failing call into a fault and a no-op. ``faults()`` lists what happened (for
``xpuprof devices``, sessions' ``errors()`` and tests).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger("xpuprof.plugins")


@dataclass(frozen=True)
class PluginFault:
    origin: str  # "python plugin /dir/x.py", "C plugin /dir/libx.so", "entry point name = mod:Cls", ...
    stage: str  # "load", "register", "probe", "configure", "start", "stop", "process", "events"
    reason: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.stage} failed: {self.reason}"


_lock = threading.Lock()
_faults: list[PluginFault] = []
_seen: set[tuple[str, str]] = set()
_abandoned: dict[str, str] = {}  # origin -> the fault that disabled it (a call that missed its deadline)
_logged: set[str] = set()  # the text of every fault logged (the profiler does not log them again)


def report(origin: str, stage: str, reason: str) -> PluginFault:
    """Record (and log once per origin and stage) a plugin fault."""
    fault = PluginFault(origin, stage, reason)
    with _lock:
        first = (origin, stage) not in _seen
        if first:
            _seen.add((origin, stage))
            _faults.append(fault)
    if first:
        with _lock:
            _logged.add(str(fault))
        log.warning("%s", fault)
    return fault


def logged(message: str) -> bool:
    """Whether ``message`` is a fault already logged here (traces still list it; the log says it once)."""
    with _lock:
        return message in _logged


def faults(origin: str | None = None) -> list[PluginFault]:
    with _lock:
        return [f for f in _faults if origin is None or f.origin == origin]


def clear() -> None:
    """Forget every fault (tests; a new process starts empty)."""
    with _lock:
        _faults.clear()
        _seen.clear()
        _abandoned.clear()
        _logged.clear()


def abandon(origin: str, stage: str, timeout_s: float) -> PluginFault:
    """A call into the plugin missed its deadline: report it and disable the plugin for the rest of
    the process (Python cannot kill the thread it runs on; nothing of ours waits for it again)."""
    from ..deadline import ENV_DEADLINE

    reason = (f"did not return within the {timeout_s:g} s deadline ({ENV_DEADLINE}); the call was abandoned on a "
              f"daemon thread, anything it does later is ignored, and the plugin is disabled for the rest of this "
              f"process")
    fault = report(origin, stage, reason)
    with _lock:
        _abandoned.setdefault(origin, str(fault))
    return fault


def abandoned(origin: str | None) -> str | None:
    """Why this plugin is disabled (a call of it missed its deadline), or None."""
    if origin is None:
        return None
    with _lock:
        return _abandoned.get(origin)


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` plus where it was raised, in one line."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        where = f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}{where}"
