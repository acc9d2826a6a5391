"""Schedules: which action each step of a profile takes (torch.profiler's model).

``schedule`` builds torch's wait/warmup/active cycles; any callable returning a ``ProfilerAction`` (ours
or torch's own ``torch.profiler.ProfilerAction``) is a schedule. ``as_action`` reads a schedule's answer
as ours, and refuses anything else in one line naming the step and the value.
"""
from __future__ import annotations

import enum
import warnings
from typing import Callable

# torch.profiler's warnings, word for word (a torch user's warning filters and tests match them)
NO_WARMUP = "Profiler won't be using warmup, this can skew profiler results"
CLEARS_EVENTS = ("Warning: Profiler clears events at the end of each cycle. Only events from the current cycle will "
                 "be reported. To keep events across cycles, set acc_events=True.")
_shown: set[str] = set()


def warn_once(message: str, stacklevel: int = 3) -> None:
    """torch's ``_warn_once``: a UserWarning the first time this process meets ``message``."""
    if message not in _shown:
        _shown.add(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def incorrect_schedule(prev: str, cur: str) -> None:
    """torch's warning for a schedule that skips a state (``Incorrect schedule: WARMUP followed by NONE``)."""
    warnings.warn(f"Incorrect schedule: {prev} followed by {cur}", UserWarning, stacklevel=4)


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_BY_NAME = {a.name: a for a in ProfilerAction}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """torch.profiler.schedule: skip ``skip_first`` steps, then cycles of wait/warmup/active steps.

    ``repeat`` = 0 cycles forever. The last active step of a cycle returns RECORD_AND_SAVE.
    ``skip_first_wait`` non-zero: the first cycle starts without its wait steps (torch 2.4+).
    """
    for label, value, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                                ("repeat", repeat, 0), ("skip_first", skip_first, 0),
                                ("skip_first_wait", skip_first_wait, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"schedule {label} must be an integer >= {least}, got {value!r}")
    cycle = wait + warmup + active
    if warmup == 0:
        warnings.warn(NO_WARMUP, UserWarning, stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    schedule_fn.params = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
                              skip_first_wait=skip_first_wait)
    return schedule_fn


def always_record(_step: int) -> ProfilerAction:
    """The schedule of a profile without one: record from start to stop (torch's default)."""
    return ProfilerAction.RECORD


def as_action(value, step: int) -> ProfilerAction:
    """A schedule's answer for ``step`` as our ProfilerAction: ours as it is, torch's
    ``torch.profiler.ProfilerAction`` by member name. Anything else is one error naming the step and value."""
    if isinstance(value, ProfilerAction):
        return value
    name = value.name if isinstance(value, enum.Enum) else None
    if name in _BY_NAME and type(value).__name__ == "ProfilerAction":
        return _BY_NAME[name]
    if name == "DEVICE_STOPPED":
        raise ValueError(f"the schedule returned ProfilerAction.DEVICE_STOPPED for step {step}: the profiler sets it "
                         "itself and a schedule must not return it (valid: NONE, WARMUP, RECORD, RECORD_AND_SAVE)")
    raise TypeError(f"the schedule returned {value!r} for step {step}; a schedule must return a ProfilerAction "
                    "(xpuprof.ProfilerAction or torch.profiler.ProfilerAction: NONE, WARMUP, RECORD, "
                    "RECORD_AND_SAVE), as torch.profiler.schedule(...) and xpuprof.schedule(...) do")
