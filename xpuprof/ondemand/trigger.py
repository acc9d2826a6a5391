"""The requesting side: the dyno CLI's ``gputrace`` request to dynolog, and an embedded daemon for a
machine without one.

RPC (dynolog ``rpc/SimpleJsonServer``, dyno ``cli/src/commands/{gputrace,utils}.rs``): TCP, each
message a 4-byte native-endian int32 length then JSON. ``{"fn": "setKinetOnDemandRequest", "config":
TEXT, "job_id": N, "pids": [...], "process_limit": N}`` answers ``processesMatched``,
``activityProfilersTriggered``, ``activityProfilersBusy`` (a request still pending in the process),
``eventProfilers*``. The config text is the CLI's: ``ACTIVITIES_LOG_FILE``, then either
``PROFILE_START_TIME`` + ``ACTIVITIES_DURATION_MSECS`` or ``PROFILE_START_ITERATION=0`` +
``PROFILE_START_ITERATION_ROUNDUP`` + ``ACTIVITIES_ITERATIONS``, then the ``PROFILE_*`` switches.

Several hosts (dynolog's ``scripts/pytorch/unitrace.py``): one request per host, all with one
``PROFILE_START_TIME`` in the future, so every rank records the same window.

Embedded (no dynolog here): the trigger binds the daemon's IPC endpoint itself for one poll interval,
answers each process that polls (the same datagrams dynolog sends), and hands the config to the
matching ones of its own user (every user's when run as root). Clients check the trigger's uid as
they check dynolog's.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import struct
import time
from dataclasses import dataclass, field

from . import control, fabric

DEFAULT_PORT = 1778  # dynolog's --port default
DEFAULT_PROCESS_LIMIT = 3  # the dyno CLI's --process-limit default
_LENGTH = struct.Struct("@i")
ANSWER_GRACE_S = 1.0  # embedded control commands: how long past --wait the processes' answers are awaited


class TriggerError(RuntimeError):
    """The request could not be delivered (no daemon at the address, a broken answer)."""


@dataclass
class TriggerResult:
    where: str  # "host:port" or "embedded"
    matched: list[int] = field(default_factory=list)
    triggered: list[int] = field(default_factory=list)
    busy: int = 0
    raw: dict = field(default_factory=dict)
    error: str | None = None
    answers: dict[int, str] | None = None  # control commands, embedded: each process's outcome


# ----------------------------------------------------------------------------- the config text
def gputrace_config(*, log_file: str, duration_ms: int = 500, iterations: int = 0, start_time_ms: int = 0,
                    iteration_roundup: int = 1, record_shapes: bool = False, with_stacks: bool = False,
                    with_flops: bool = False, with_modules: bool = False, profile_memory: bool = False,
                    extra: list[str] = ()) -> str:
    """The config ``dyno gputrace`` sends for these options (its line order; ``PROFILE_PROFILE_MEMORY`` only when
    asked, as dyno adds it), plus ``extra`` lines."""
    if iterations > 0:
        when = (f"PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP={iteration_roundup}\n"
                f"ACTIVITIES_ITERATIONS={iterations}")
    else:
        when = f"PROFILE_START_TIME={start_time_ms}\nACTIVITIES_DURATION_MSECS={duration_ms}"
    switches = (f"PROFILE_REPORT_INPUT_SHAPES={str(record_shapes).lower()}\n"
                f"PROFILE_WITH_STACK={str(with_stacks).lower()}\nPROFILE_WITH_FLOPS={str(with_flops).lower()}\n"
                f"PROFILE_WITH_MODULES={str(with_modules).lower()}")
    if profile_memory:
        switches += "\nPROFILE_PROFILE_MEMORY=true"
    lines = [f"ACTIVITIES_LOG_FILE={log_file}", when, switches, *extra]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- dynolog's RPC
def rpc(host: str, port: int, message: dict, *, timeout_s: float = 10.0) -> dict:
    """One RPC to dynolog (the dyno CLI's framing); the decoded answer."""
    body = json.dumps(message).encode()
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.sendall(_LENGTH.pack(len(body)) + body)
            size = _LENGTH.unpack(_read_exactly(conn, _LENGTH.size))[0]
            if size <= 0:
                raise TriggerError(f"dynolog at {host}:{port} sent no answer (it did not understand the request)")
            raw = _read_exactly(conn, size)
    except OSError as exc:
        raise TriggerError(f"cannot reach dynolog at {host}:{port}: {exc.strerror or exc}") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise TriggerError(f"dynolog at {host}:{port} answered something that is not JSON: {exc}") from None


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError(errno.ECONNRESET, "the connection closed before the whole answer arrived")
        data += chunk
    return data


def daemon_listening(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def send_request(host: str, port: int, config: str, *, job_id: int = 0, pids: list[int] | None = None,
                 process_limit: int = DEFAULT_PROCESS_LIMIT) -> TriggerResult:
    answer = rpc(host, port, {"fn": "setKinetOnDemandRequest", "config": config, "job_id": int(job_id),
                              "pids": list(pids or [0]), "process_limit": int(process_limit)})
    if "processesMatched" not in answer:
        raise TriggerError(f"dynolog at {host}:{port} refused the request: {answer.get('status', answer)}")
    return TriggerResult(f"{host}:{port}", list(answer.get("processesMatched") or []),
                         list(answer.get("activityProfilersTriggered") or []),
                         int(answer.get("activityProfilersBusy") or 0), answer)


# ----------------------------------------------------------------------------- embedded daemon
def _trace_id(pid: int) -> str:
    # dynolog hashes host:pid:time into a decimal id; any unique decimal id does
    digest = hashlib.sha256(f"{socket.gethostname()}:{pid}:{time.time_ns()}".encode()).digest()
    return str(int.from_bytes(digest[:8], "little"))


class EmbeddedDaemon:
    """dynolog's IPC side for one request, in this process, for ``wait_s`` seconds."""

    def __init__(self, *, directory: str | None = None) -> None:
        self.directory = fabric.socket_dir() if directory is None else directory
        try:
            self.endpoint = fabric.Endpoint(fabric.DAEMON_NAME, self.directory, replace_stale=True, mode=0o666)
        except fabric.FabricError as exc:
            if exc.errno == errno.EADDRINUSE:
                where = f"{self.directory}/{fabric.DAEMON_NAME}" if self.directory else f"@{fabric.DAEMON_NAME}"
                raise TriggerError(f"a dynolog daemon already holds the IPC endpoint {where} on this machine, but no "
                                   f"RPC answered on port {DEFAULT_PORT}: pass its --port") from None
            raise TriggerError(f"cannot act as the on-demand daemon here: {exc.strerror or exc}") from None

    def close(self) -> None:
        self.endpoint.close()

    def serve(self, config: str, *, wait_s: float, job_id: int = 0, pids: list[int] | None = None,
              process_limit: int = DEFAULT_PROCESS_LIMIT) -> TriggerResult:
        """Answer every poll for ``wait_s`` seconds; the matching processes get ``config``."""
        targets = set(pids or [])
        everyone = not targets or targets == {0}
        result = TriggerResult("embedded")
        wants_answers = control.parse(config) is not None
        if wants_answers:
            result.answers = {}
        answered: set[int] = set()
        deadline = time.monotonic() + wait_s
        own_uid = os.getuid()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pending = wants_answers and len(result.answers) < len(result.triggered)
                if not pending or left <= -ANSWER_GRACE_S:  # a control's answers: a little longer
                    return result
                left += ANSWER_GRACE_S
            try:
                dg = self.endpoint.receive(left)
            except ValueError:
                continue  # a malformed datagram: dynolog drops it too
            if dg is None:
                continue
            mine = dg.credentials is not None and (own_uid == 0 or dg.credentials.uid == own_uid)
            if dg.type == control.ANSWER_TYPE and wants_answers and mine:
                answer = control.read_answer(dg.payload)
                if answer is not None and dg.credentials.pid in result.triggered:
                    result.answers[dg.credentials.pid] = answer["outcome"]
                continue
            if dg.type != fabric.MSG_REQUEST:
                continue
            try:
                config_type, req_pids, req_job = fabric.decode_request(dg.payload)
            except ValueError:
                continue
            reply = ""
            leaf = req_pids[0] if req_pids else 0
            matches = mine and req_job == job_id and (everyone or targets.intersection(req_pids))
            if matches and leaf not in answered:
                answered.add(leaf)
                result.matched.append(leaf)
                if len(result.triggered) < process_limit and config_type & fabric.CONFIG_ACTIVITIES:
                    result.triggered.append(leaf)
                    reply = (f"{config}\n{control.REPLY_KEY}=1\n" if wants_answers
                             else f"{config}\nREQUEST_TRACE_ID={_trace_id(leaf)}\n")
            try:
                self.endpoint.send(dg.sender, fabric.encode(fabric.MSG_REQUEST, reply.encode()))
            except OSError:
                pass  # the process went away between its poll and our answer
