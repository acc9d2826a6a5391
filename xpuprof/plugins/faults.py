"""Plugin faults: each broken plugin is reported once, with its file (origin) and the reason.

A fault never stops a profile run: the loader skips a plugin that fails to load, the isolation
wrapper turns a failing call into a fault and a no-op. ``faults()`` lists what happened (for
``xpuprof devices``, sessions' ``errors()`` and tests). The memory itself is process-wide, in
``xpuprof.diagnostics``.
"""
from __future__ import annotations

import logging

from .. import diagnostics
from ..diagnostics import Fault as PluginFault

log = logging.getLogger("xpuprof.plugins")


def report(origin: str, stage: str, reason: str) -> PluginFault:
    """Record (and log once per origin and stage) a plugin fault."""
    fault, first = diagnostics.record_fault(origin, stage, reason)
    if first:
        log.warning("%s", fault)
    return fault


def logged(message: str) -> bool:
    """Whether ``message`` is a fault already logged here (traces still list it; the log says it once)."""
    return diagnostics.said(diagnostics.FAULT_SAID, message)


def faults(origin: str | None = None) -> list[PluginFault]:
    return diagnostics.faults(origin)


def clear() -> None:
    """Forget every fault (tests; a new process starts empty)."""
    diagnostics.forget_faults()


def abandon(origin: str, stage: str, timeout_s: float) -> PluginFault:
    """A call into the plugin missed its deadline: report it and disable the plugin for the rest of
    the process (Python cannot kill the thread it runs on; nothing of ours waits for it again)."""
    from ..deadline import ENV_DEADLINE

    reason = (f"did not return within the {timeout_s:g} s deadline ({ENV_DEADLINE}); the call was abandoned on a "
              f"daemon thread, anything it does later is ignored, and the plugin is disabled for the rest of this "
              f"process")
    fault = report(origin, stage, reason)
    diagnostics.abandon(origin, fault)
    return fault


def abandoned(origin: str | None) -> str | None:
    """Why this plugin is disabled (a call of it missed its deadline), or None."""
    return diagnostics.abandoned(origin)


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` plus where it was raised, in one line."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        where = f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}{where}"
