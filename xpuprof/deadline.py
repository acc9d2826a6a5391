"""Deadlines for calls into code we do not control (plugins, metric collectors, vendor libraries).

``call_with_deadline`` runs a call on a daemon helper thread and waits at most ``timeout_s``: a
hang costs the caller the deadline, never the process. The hung thread is left behind (Python
cannot kill a thread); it holds no lock of ours.
"""
from __future__ import annotations

import logging
import os
import threading

from . import diagnostics
from typing import Any, Callable

log = logging.getLogger("xpuprof")

ENV_DEADLINE = "XPUPROF_PLUGIN_DEADLINE_S"
DEFAULT_DEADLINE_S = 10.0
# The longest wait Python's locks and events accept (~292 years on Linux): ``inf`` and larger values are
# capped here (they raised OverflowError in every wait, failing every healthy plugin).
MAX_DEADLINE_S = threading.TIMEOUT_MAX


class DeadlineExceeded(TimeoutError):
    """A call that did not return within its deadline."""


def default_deadline_s() -> float:
    """``XPUPROF_PLUGIN_DEADLINE_S`` or 10 s; ``inf`` (or anything above ``MAX_DEADLINE_S``) means no
    practical limit and is capped at ``MAX_DEADLINE_S``. Not a number, NaN, zero or negative: said once
    (a warning naming the value) and the default used - a profile is never lost to a bad setting."""
    raw = os.environ.get(ENV_DEADLINE, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:  # NaN fails this too
        diagnostics.warn_once(log, ("bad-setting", ENV_DEADLINE, raw),
                              "xpuprof: %s=%r is not a deadline (a number of seconds > 0, or inf for no practical "
                              "limit); using the default %g s", ENV_DEADLINE, raw, DEFAULT_DEADLINE_S)
        return DEFAULT_DEADLINE_S
    return min(value, MAX_DEADLINE_S)


def deadline_or_default_s() -> float:
    """``default_deadline_s()`` (kept for the garbage collector and exit paths, which must never raise)."""
    return default_deadline_s()


def call_with_deadline(fn: Callable[..., Any], *args, timeout_s: float | None = None, what: str = "") -> Any:
    """``fn(*args)``, or ``DeadlineExceeded`` after ``timeout_s``; its exception is re-raised here."""
    timeout = default_deadline_s() if timeout_s is None else float(timeout_s)
    box: dict[str, Any] = {}
    done = threading.Event()

    def runner() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=runner, name=f"xpuprof-deadline:{what or getattr(fn, '__name__', 'call')}",
                     daemon=True).start()
    if not done.wait(timeout):
        raise DeadlineExceeded(f"{what or getattr(fn, '__name__', 'call')} did not return within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
