"""Iterations as Kineto counts them, for iteration-based captures.

Kineto's count starts at -1 and each ``step()`` adds one (the first step is iteration 0). With torch,
the steps come from ``torch.autograd.profiler.KinetoStepTracker``: one count per requester
(``"Optimizer"`` from the optimizer's step hook, ``"ProfilerStep"`` from torch.profiler, ours), and
the step is the maximum over them, so a program that steps two optimizers or also calls
``xpuprof.step()`` is not counted twice. ``torchlink`` hooks the tracker's ``_kineto_step`` (called
once per increase of that maximum) to land here. Without torch, ``xpuprof.step()`` counts directly.

Listeners run on the stepping thread at each boundary (they must be cheap); waiters block on the
condition with a deadline.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

REQUESTER = "xpuprof"  # our key in torch's KinetoStepTracker

_cond = threading.Condition()
_count = -1
_last_step_monotonic: float | None = None
_listeners: list[Callable[[int], None]] = []
_tracker = None  # torch's KinetoStepTracker once torchlink hooked it


def step() -> None:
    """``xpuprof.step()``: one iteration ended. Through torch's tracker when torch is hooked."""
    tracker = _tracker
    if tracker is not None:
        tracker.increment_step(REQUESTER)  # advance() runs from the hooked _kineto_step when the max grows
    else:
        advance()


def advance() -> None:
    """One step boundary (Kineto's ``step()``)."""
    global _count, _last_step_monotonic
    with _cond:
        _count += 1
        n = _count
        _last_step_monotonic = time.monotonic()
        listeners = tuple(_listeners)
        _cond.notify_all()
    for listener in listeners:
        listener(n)


def current() -> int:
    """The current iteration (-1: this process has not stepped)."""
    return _count


def seconds_since_last_step() -> float | None:
    last = _last_step_monotonic
    return None if last is None else time.monotonic() - last


def use_torch_tracker(tracker) -> None:
    global _tracker
    _tracker = tracker


def add_listener(listener: Callable[[int], None]) -> None:
    with _cond:
        _listeners.append(listener)


def remove_listener(listener: Callable[[int], None]) -> None:
    with _cond:
        if listener in _listeners:
            _listeners.remove(listener)


def wait_until(predicate: Callable[[int], bool], *, cancel: threading.Event, idle_timeout_s: float,
               timeout_s: float | None = None) -> int | None:
    """Block until ``predicate(current())`` holds; returns that iteration. None when ``cancel`` is set,
    when no step arrives for ``idle_timeout_s`` seconds (the program stopped stepping), or after
    ``timeout_s`` seconds in all."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with _cond:
        while True:
            n = _count
            if predicate(n):
                return n
            if cancel.is_set():
                return None
            now = time.monotonic()
            last = _last_step_monotonic
            idle = 0.0 if last is None else now - last
            if idle >= idle_timeout_s:
                return None
            if deadline is not None and now >= deadline:
                return None
            # Woken by a step or by notify_cancel(); the timeout bounds the idle and deadline checks only.
            wait = min(idle_timeout_s - idle, 1.0) if last is not None else 1.0
            if deadline is not None:
                wait = min(wait, deadline - now)
            _cond.wait(wait)


def notify_cancel() -> None:
    """Wake waiters so they look at their cancel event."""
    with _cond:
        _cond.notify_all()


def _reset_for_tests() -> None:
    global _count, _last_step_monotonic, _tracker
    with _cond:
        _count, _last_step_monotonic, _tracker = -1, None, None
        _listeners.clear()
