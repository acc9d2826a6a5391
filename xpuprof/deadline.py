"""Deadlines for calls into code we do not control (plugins, metric collectors, vendor libraries).

``call_with_deadline`` runs a call on a daemon helper thread and waits at most ``timeout_s``: a
hang costs the caller the deadline, never the process. The hung thread is left behind (Python
cannot kill a thread); it holds no lock of ours.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

ENV_DEADLINE = "XPUPROF_PLUGIN_DEADLINE_S"
DEFAULT_DEADLINE_S = 10.0
# The longest wait Python's locks and events accept (~292 years on Linux): ``inf`` and larger values are
# capped here (they raised OverflowError in every wait, failing every healthy plugin).
MAX_DEADLINE_S = threading.TIMEOUT_MAX


class DeadlineExceeded(TimeoutError):
    """A call that did not return within its deadline."""


class DeadlineConfigError(ValueError):
    """``XPUPROF_PLUGIN_DEADLINE_S`` is not a usable number of seconds (one configuration error, raised
    before anything starts: profile(), ``xpuprof run``, plugin loading)."""


def default_deadline_s() -> float:
    """``XPUPROF_PLUGIN_DEADLINE_S`` or 10 s; ``inf`` (or anything above ``MAX_DEADLINE_S``) means no
    practical limit and is capped at ``MAX_DEADLINE_S``. Not a number, NaN, zero or negative:
    ``DeadlineConfigError``."""
    raw = os.environ.get(ENV_DEADLINE, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:  # NaN fails this too
        raise DeadlineConfigError(f"{ENV_DEADLINE}={raw!r} is not a deadline: set a number of seconds > 0 "
                                  f"(default {DEFAULT_DEADLINE_S:g}), or inf for no practical limit")
    return min(value, MAX_DEADLINE_S)


def deadline_or_default_s() -> float:
    """``default_deadline_s()``, or the default when the setting is bad: for the garbage collector and
    exit paths, which must neither raise nor hang (the bad setting is reported where a run starts)."""
    try:
        return default_deadline_s()
    except DeadlineConfigError:
        return DEFAULT_DEADLINE_S


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
