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


class DeadlineExceeded(TimeoutError):
    """A call that did not return within its deadline."""


def default_deadline_s() -> float:
    """``XPUPROF_PLUGIN_DEADLINE_S`` or 10 s."""
    raw = os.environ.get(ENV_DEADLINE, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV_DEADLINE} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"{ENV_DEADLINE} must be > 0, got {raw!r}")
    return value


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
