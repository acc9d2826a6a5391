"""Control commands for a capture: ``xpuprof trigger --pause`` / ``--resume`` / ``--cancel``.

They travel as on-demand config text (an ``XPUPROF_CONTROL=pause|resume|cancel`` line; dynolog passes the text
through unchanged, so the request reaches every host its RPC reaches; ``ACTIVITIES_ENABLED=false`` beside it
keeps Kineto's own clients from taking it for a trace request). ``pause`` / ``resume`` act on the agent's
recording capture through ``profile.pause()`` / ``resume()``: the paused span is marked in the trace as those
mark it. ``cancel`` drops a pending capture (waiting for its start time, its first step or its start
iteration: nothing recorded, no trace) or stops a recording one now (its trace is written with what it
recorded). Each outcome is logged by the process and answered to the trigger that asked (``answers``).
"""
from __future__ import annotations

import logging
import os

from . import answers
from .request import RequestError

log = logging.getLogger("xpuprof.ondemand")

CONTROL_KEY = "XPUPROF_CONTROL"
COMMANDS = ("pause", "resume", "cancel")
PASSED_KEYS = {"REQUEST_TRACE_ID", answers.ANSWER_KEY}  # what a daemon or the trigger add to any config
# Kineto's own client (torch's, or an xpuprof without control commands) takes any config text as a trace
# request unless it says ACTIVITIES_ENABLED=false: with it, a command reaching such a process starts nothing.
NO_TRACE_LINE = "ACTIVITIES_ENABLED=false"

# outcomes of one command in one process
PAUSED, RESUMED, ALREADY_PAUSED, NOT_PAUSED = "paused", "resumed", "already paused", "not paused"
NO_CAPTURE, NOT_RECORDING = "no capture running", "capture not recording yet"
CANCELLED = "cancelled before it recorded (no trace)"
STOPPED = "stopped: its trace is written with what it recorded"
NOT_CANCELLABLE = "the whole-run capture of xpuprof exec is not cancelled (--pause stops its collection)"
NOTHING_DONE = (NO_CAPTURE, NOT_RECORDING, NOT_CANCELLABLE)  # outcomes where the command changed nothing


def control_text(command: str, *, answer_to: str | None = None) -> str:
    """The config text that carries ``command`` (answered to ``answer_to``, an ``xpuprof trigger``)."""
    if command not in COMMANDS:
        raise ValueError(f"control command {command!r} is not one of {', '.join(COMMANDS)}")
    return f"{CONTROL_KEY}={command}\n{NO_TRACE_LINE}\n" + (f"{answers.ANSWER_KEY}={answer_to}\n" if answer_to else "")


def parse(text: str) -> str | None:
    """The command when ``text`` is a control command, None when it is a capture config; ``RequestError``
    for a control text that cannot be obeyed (an unknown command, capture keys beside it)."""
    keys: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            keys[key.strip()] = value.strip()
    if CONTROL_KEY not in keys:
        return None
    command = keys[CONTROL_KEY].lower()
    if command not in COMMANDS:
        raise RequestError(f"{CONTROL_KEY}={keys[CONTROL_KEY]!r} is not a control command (valid: "
                           f"{', '.join(COMMANDS)})")
    others = sorted(set(keys) - {CONTROL_KEY, "ACTIVITIES_ENABLED"} - PASSED_KEYS)
    if others:
        raise RequestError(f"{CONTROL_KEY} comes alone; this request also carries {', '.join(others)} (send a "
                           "trace request and a control command separately)")
    return command


def apply(agent, command: str) -> str:
    """Run ``command`` on the agent's running capture; the outcome (also logged, a refusal as a warning)."""
    cur = agent.active()
    outcome = NO_CAPTURE if cur is None else cur.control(command)
    pid = os.getpid()
    if outcome in NOTHING_DONE:
        why = {NO_CAPTURE: "no capture is running in this process",
               NOT_RECORDING: "the capture in this process is not recording", NOT_CANCELLABLE: outcome}[outcome]
        log.warning("xpuprof: %s request ignored (pid %d): %s", command, pid, why)
    elif command == "cancel":
        log.info("xpuprof: capture %s by a control request (pid %d)", outcome.split(":")[0], pid)
    else:
        log.info("xpuprof: collection %s by a control request (pid %d)", outcome, pid)
    return outcome


def toggle(prof, command: str) -> str:
    """``prof.pause()`` or ``prof.resume()``; the outcome."""
    from ..profiler.pausing import paused_by_user

    if command == "pause":
        if paused_by_user(prof):
            return ALREADY_PAUSED
        prof.pause()
        return PAUSED
    if not paused_by_user(prof):
        return NOT_PAUSED
    prof.resume()
    return RESUMED
