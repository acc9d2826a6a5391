"""What this process has already said, and the faults it remembers.

Warnings about the same cause are said once per process (traces still carry the facts every time):
``first(namespace, *detail)`` is true the first time a key is seen, ``warn_once`` logs on that first
time only. Keys are tuples whose first item names the kind of message, so one kind can be
forgotten (``forget``) without the others.

Faults (a plugin that failed to load, a call that raised or missed its deadline) are remembered for
the whole process, each (origin, stage) once, in the order they happened; ``abandon`` marks an origin
disabled for the rest of the process. ``reset()`` forgets everything (tests; a new process starts
empty).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Hashable

_lock = threading.Lock()
_said: set[tuple] = set()  # (namespace, *detail) of every message already said
_faults: list["Fault"] = []
_fault_stages: set[tuple[str, str]] = set()  # (origin, stage) already recorded
_abandoned: dict[str, str] = {}  # origin -> the fault that disabled it

FAULT_SAID = "fault"  # namespace of the faults' own text once logged (``said(FAULT_SAID, str(fault))``)


# ----------------------------------------------------------------------------- said once
def first(namespace: str, *detail: Hashable) -> bool:
    """True the first time this key is seen in the process (and remembers it), False after."""
    key = (namespace, *detail)
    with _lock:
        if key in _said:
            return False
        _said.add(key)
        return True


def said(namespace: str, *detail: Hashable) -> bool:
    """Whether this key was already seen (without remembering it)."""
    with _lock:
        return (namespace, *detail) in _said


def warn_once(logger: logging.Logger, key: tuple, message: str, *args) -> bool:
    """``logger.warning(message, *args)`` the first time ``key`` (namespace, *detail) is seen; whether it did."""
    if not first(*key):
        return False
    logger.warning(message, *args)
    return True


def forget(namespace: str) -> None:
    """Forget every key of one namespace (its messages are said again)."""
    with _lock:
        _said.difference_update([k for k in _said if k[0] == namespace])


# ----------------------------------------------------------------------------- faults
@dataclass(frozen=True)
class Fault:
    origin: str  # "python plugin /dir/x.py", "C plugin /dir/libx.so", "entry point name = mod:Cls", ...
    stage: str  # "load", "register", "probe", "configure", "start", "stop", "process", "events"
    reason: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.stage} failed: {self.reason}"


def record_fault(origin: str, stage: str, reason: str) -> tuple[Fault, bool]:
    """Remember a fault, once per (origin, stage): (the fault, whether it is the first of its stage).
    A first fault's text counts as said (``said(FAULT_SAID, str(fault))``): its reporter logs it."""
    fault = Fault(origin, stage, reason)
    with _lock:
        is_first = (origin, stage) not in _fault_stages
        if is_first:
            _fault_stages.add((origin, stage))
            _faults.append(fault)
            _said.add((FAULT_SAID, str(fault)))
    return fault, is_first


def faults(origin: str | None = None) -> list[Fault]:
    """The faults remembered (of one origin), in the order they happened."""
    with _lock:
        return [f for f in _faults if origin is None or f.origin == origin]


def abandon(origin: str, fault: Fault) -> None:
    """``origin`` is disabled for the rest of the process because of ``fault`` (the first one counts)."""
    with _lock:
        _abandoned.setdefault(origin, str(fault))


def abandoned(origin: str | None) -> str | None:
    """Why ``origin`` is disabled, or None."""
    if origin is None:
        return None
    with _lock:
        return _abandoned.get(origin)


def forget_faults() -> None:
    """Forget every fault (and that their text was said)."""
    with _lock:
        _faults.clear()
        _fault_stages.clear()
        _abandoned.clear()
        _said.difference_update([k for k in _said if k[0] == FAULT_SAID])


def reset() -> None:
    """Forget everything said and every fault (tests)."""
    with _lock:
        _said.clear()
        _faults.clear()
        _fault_stages.clear()
        _abandoned.clear()
