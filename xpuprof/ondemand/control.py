"""Control commands for a running capture: ``xpuprof trigger --pause`` / ``--resume``.

They travel as on-demand config text (an ``XPUPROF_CONTROL=pause|resume`` line; dynolog passes the text
through unchanged, so the request reaches every host its RPC reaches; ``ACTIVITIES_ENABLED=false`` beside it
keeps Kineto's own clients from taking it for a trace request) and act on the agent's running
capture through ``profile.pause()`` / ``resume()``: the paused span is marked in the trace as those mark it.
A command that finds no capture recording is logged by the process (and answered to an embedded daemon
that asked for an answer with ``XPUPROF_CONTROL_REPLY=1``).
"""
from __future__ import annotations

import json
import logging
import os

from .request import RequestError

log = logging.getLogger("xpuprof.ondemand")

CONTROL_KEY = "XPUPROF_CONTROL"
REPLY_KEY = "XPUPROF_CONTROL_REPLY"  # the sender (the embedded daemon) waits for the process's answer
COMMANDS = ("pause", "resume")
PASSED_KEYS = {"REQUEST_TRACE_ID"}  # what a daemon adds to any config it hands out
# Kineto's own client (torch's, or an xpuprof without control commands) takes any config text as a trace
# request unless it says ACTIVITIES_ENABLED=false: with it, a command reaching such a process starts nothing.
NO_TRACE_LINE = "ACTIVITIES_ENABLED=false"

ANSWER_TYPE = "xctl"  # the datagram type of a process's answer (never sent to dynolog: it asks for none)

# outcomes of one command in one process
PAUSED, RESUMED, ALREADY_PAUSED, NOT_PAUSED = "paused", "resumed", "already paused", "not paused"
NO_CAPTURE, NOT_RECORDING = "no capture running", "capture not recording yet"


def answer_payload(pid: int, command: str, outcome: str) -> bytes:
    return json.dumps({"pid": pid, "command": command, "outcome": outcome}).encode()


def read_answer(payload: bytes) -> dict | None:
    """A process's answer, None when it is not one."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not isinstance(data.get("outcome"), str):
        return None
    return data


def control_text(command: str, *, reply: bool = False) -> str:
    """The config text that carries ``command``."""
    if command not in COMMANDS:
        raise ValueError(f"control command {command!r} is not one of {', '.join(COMMANDS)}")
    return f"{CONTROL_KEY}={command}\n{NO_TRACE_LINE}\n" + (f"{REPLY_KEY}=1\n" if reply else "")


def parse(text: str) -> tuple[str, bool] | None:
    """``(command, reply wanted)`` when ``text`` is a control command, None when it is a capture config;
    ``RequestError`` for a control text that cannot be obeyed (an unknown command, capture keys beside it)."""
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
    others = sorted(set(keys) - {CONTROL_KEY, REPLY_KEY, "ACTIVITIES_ENABLED"} - PASSED_KEYS)
    if others:
        raise RequestError(f"{CONTROL_KEY} comes alone; this request also carries {', '.join(others)} (send a "
                           "trace request and a control command separately)")
    return command, keys.get(REPLY_KEY, "") in ("1", "true")


def apply(agent, command: str) -> str:
    """Run ``command`` on the agent's running capture; the outcome (also logged, a refusal as a warning)."""
    cur = agent.active()
    outcome = NO_CAPTURE if cur is None else cur.control(command)
    pid = os.getpid()
    if outcome in (NO_CAPTURE, NOT_RECORDING):
        why = ("no capture is running in this process" if outcome == NO_CAPTURE
               else "the capture in this process has not started recording yet")
        log.warning("xpuprof: %s request ignored (pid %d): %s", command, pid, why)
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
