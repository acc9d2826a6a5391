"""Answers from a process to the ``xpuprof trigger`` that asked it: did its request start a capture, and
where was the trace written (dynolog's protocol has no way back from a process to the requester).

The trigger binds an endpoint ``xpuproftrigger<hex>`` on the fabric (abstract, or ``KINETO_IPC_SOCKET_DIR``)
and adds ``XPUPROF_ANSWER_TO=<that name>`` to the config text. dynolog passes the text through unchanged
and Kineto's own clients ignore the key, so it reaches every process a request reaches; an xpuprof process
sends one small datagram (type ``xans``, JSON) per step, from an unbound socket, and the trigger reads
each sender's kernel credentials (its pid as this machine sees it, and its uid):

  accepted   a capture will run (``path``: the file it will write)
  busy       a capture was already running or pending: this request is listed in that capture's trace
             (``requests_ignored``)
  refused    the request cannot run here (``why``)
  written    the trace is written (``path``)
  failed     the capture or its write failed (``why``)
  cancelled  cancelled before it recorded anything (``xpuprof trigger --cancel``)
  outcome    a control command's outcome (``xpuprof trigger --pause/--resume/--cancel``)

Answers are only sent to a name of that exact shape, at most ``MAX_ANSWER_BYTES`` each.
"""
from __future__ import annotations

import json
import logging
import os
import re
import select
import time
import uuid
from dataclasses import dataclass, field

from . import fabric

log = logging.getLogger("xpuprof.ondemand")

ANSWER_KEY = "XPUPROF_ANSWER_TO"
ANSWER_TYPE = "xans"
NAME_PREFIX = "xpuproftrigger"
MAX_ANSWER_BYTES = 4096
_NAME = re.compile(NAME_PREFIX + r"[0-9a-f]{32}\Z")

ACCEPTED, BUSY, REFUSED, WRITTEN, FAILED, CANCELLED, OUTCOME = (
    "accepted", "busy", "refused", "written", "failed", "cancelled", "outcome")
FINAL = {BUSY, REFUSED, WRITTEN, FAILED, CANCELLED, OUTCOME}  # nothing more comes for that request


def answer_name(text: str) -> str | None:
    """The ``XPUPROF_ANSWER_TO`` name a config text carries, when it has the one valid shape."""
    for raw in text.splitlines():
        key, sep, value = raw.split("#", 1)[0].partition("=")
        if sep and key.strip() == ANSWER_KEY:
            value = value.strip()
            return value if _NAME.match(value) else None
    return None


def without_answer_key(text: str) -> str:
    """The config text less its ``XPUPROF_ANSWER_TO`` line (ours: Kineto's parser would call it unknown)."""
    return "\n".join(line for line in text.splitlines()
                     if line.split("#", 1)[0].partition("=")[0].strip() != ANSWER_KEY)


def encode(state: str, **fields) -> bytes:
    """One answer datagram; text fields cut so that it stays within ``MAX_ANSWER_BYTES``."""
    data = {"state": state, "pid": os.getpid(), **{k: v for k, v in fields.items() if v is not None}}
    payload = json.dumps(data).encode()
    if len(payload) > MAX_ANSWER_BYTES:
        for key in ("why", "path", "asked"):
            if isinstance(data.get(key), str):
                data[key] = data[key][:512] + "..."
        payload = json.dumps(data).encode()[:MAX_ANSWER_BYTES]
    return fabric.encode(ANSWER_TYPE, payload)


def decode(payload: bytes) -> dict | None:
    """An answer's fields, None when it is not one."""
    if len(payload) > MAX_ANSWER_BYTES:
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("state"), str) or not isinstance(data.get("pid"), int):
        return None
    return {k: v for k, v in data.items() if isinstance(v, (str, int, float, bool)) or v is None}


def send(name: str | None, state: str, **fields) -> None:
    """Answer ``name`` (a request's ``XPUPROF_ANSWER_TO``; nothing when None). Never raises: a trigger that
    stopped listening must not disturb the process."""
    if not name or not _NAME.match(name):  # only ever to a trigger's endpoint
        return
    try:
        fabric.send_once(name, encode(state, **fields), fabric.socket_dir())
    except (OSError, ValueError) as exc:
        log.debug("xpuprof: answer %r to %s not sent: %s", state, name, exc)


# ----------------------------------------------------------------------------- the trigger's side
@dataclass
class ProcessAnswers:
    """What one process answered (``kernel_pid``: its pid as this machine sees it)."""
    kernel_pid: int
    pid: int  # as the process sees itself (dynolog's pids are these)
    states: list[dict] = field(default_factory=list)

    @property
    def last(self) -> dict:
        return self.states[-1]

    def final(self) -> bool:
        return bool(self.states) and self.last["state"] in FINAL


class AnswerBox:
    """The trigger's endpoint for answers: bound for the life of one ``xpuprof trigger``."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = fabric.socket_dir() if directory is None else directory
        self.name = NAME_PREFIX + uuid.uuid4().hex
        # root's trigger hears every user's processes (the kernel says who sent each answer)
        self.endpoint = fabric.Endpoint(self.name, self.directory, replace_stale=False,
                                        mode=0o666 if os.geteuid() == 0 else 0o600)
        self.by_pid: dict[int, ProcessAnswers] = {}  # keyed by the process's own pid
        self._pidfds: dict[int, int] = {}  # kernel pid -> pidfd (exit watch)
        self.exited: set[int] = set()  # kernel pids of watched processes that exited (seen through their pidfd)

    def close(self) -> None:
        self.endpoint.close()
        for fd in self._pidfds.values():
            os.close(fd)
        self._pidfds.clear()

    def config_line(self) -> str:
        return f"{ANSWER_KEY}={self.name}"

    def _trusted(self, cred) -> bool:
        return cred is not None and (os.geteuid() == 0 or cred.uid in (0, os.geteuid()))

    def _take(self, timeout: float) -> bool:
        """One datagram (waiting up to ``timeout``); True when something was read."""
        try:
            dg = self.endpoint.receive(timeout, trust=self._trusted)
        except (fabric.Untrusted, fabric.Malformed):
            return True
        if dg is None:
            return False
        data = decode(dg.payload) if dg.type == ANSWER_TYPE else None
        if data is None or dg.credentials is None:
            return True
        entry = self.by_pid.get(data["pid"])
        if entry is None:
            entry = self.by_pid[data["pid"]] = ProcessAnswers(dg.credentials.pid, data["pid"])
            self.watch(dg.credentials.pid)
        entry.states.append(data)
        return True

    def watch(self, kernel_pid: int) -> None:
        """Note when the process ``kernel_pid`` (as this machine sees it) exits."""
        if kernel_pid in self._pidfds or kernel_pid in self.exited or not hasattr(os, "pidfd_open"):
            return
        try:
            self._pidfds[kernel_pid] = os.pidfd_open(kernel_pid)
        except ProcessLookupError:  # gone already (exited while the embedded daemon still served)
            self.exited.add(kernel_pid)
        except OSError:  # not ours to watch: its answers alone say what happened
            pass

    def of(self, pid: int) -> ProcessAnswers | None:
        """What the process ``pid`` answered: ``pid`` as it sees itself (dynolog's pids) or as this machine sees
        it (the embedded daemon's: they differ across pid namespaces)."""
        got = self.by_pid.get(pid)
        if got is None:
            got = next((a for a in self.by_pid.values() if a.kernel_pid == pid), None)
        return got

    def has_exited(self, pid: int) -> bool:
        """The process (its own pid, or its kernel pid) was seen to exit."""
        got = self.of(pid)
        return pid in self.exited or (got is not None and got.kernel_pid in self.exited)

    def wait(self, done, deadline: float, *, tick_s: float = 1.0) -> None:
        """Read answers until ``done(self)`` holds or ``deadline`` (monotonic) passes, looking again at least
        every ``tick_s`` (``done`` may depend on time); notes processes that exit meanwhile (``exited``), each
        after every answer it sent was read."""
        while self._take(0.0):  # answers queued before the wait (a process that answered, then exited) count
            pass
        while not done(self):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            watched = list(self._pidfds.items())
            ready, _, _ = select.select([self.endpoint.fileno(), *(fd for _, fd in watched)], [], [],
                                        min(left, tick_s))
            while self._take(0.0):  # every queued answer first: one sent just before an exit is not lost
                pass
            for kernel_pid, fd in watched:
                if fd in ready:
                    os.close(fd)
                    del self._pidfds[kernel_pid]
                    self.exited.add(kernel_pid)
