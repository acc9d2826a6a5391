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
matching ones of its own user (every user's when run as root). Who polls, and so which process a config
goes to, is the kernel's word (``SCM_CREDENTIALS``), never the datagram's: a process is matched by its
kernel pid and that pid's ancestors as ``/proc`` shows them, and a sender of another user is not even
decoded. Clients check the trigger's uid as they check dynolog's.

Any daemon's RPC answer is read with bounds (``MAX_ANSWER_BYTES``, one overall deadline) and checked for the
shape dynolog gives it; anything else is one ``TriggerError`` line.
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

from . import fabric

DEFAULT_PORT = 1778  # dynolog's --port default
DEFAULT_PROCESS_LIMIT = 3  # the dyno CLI's --process-limit default
_LENGTH = struct.Struct("@i")
MAX_ANSWER_BYTES = 1 << 20  # dynolog's answer is a few hundred bytes (a pid list); far more is not an answer
RPC_TIMEOUT_S = 10.0


class TriggerError(RuntimeError):
    """The request could not be delivered (no daemon at the address)."""


class BadAnswer(TriggerError):
    """A daemon answered something that is not dynolog's answer (broken or hostile): exit status 2."""


@dataclass
class TriggerResult:
    where: str  # "host:port" or "embedded"
    matched: list[int] = field(default_factory=list)
    triggered: list[int] = field(default_factory=list)
    busy: int = 0
    raw: dict = field(default_factory=dict)
    error: str | None = None
    bad_answer: bool = False  # the daemon answered something that is not dynolog's answer (error says what)


# ----------------------------------------------------------------------------- the config text
def gputrace_config(*, log_file: str | None, duration_ms: int = 500, iterations: int = 0, start_time_ms: int = 0,
                    iteration_roundup: int = 1, record_shapes: bool = False, with_stacks: bool = False,
                    with_flops: bool = False, with_modules: bool = False, profile_memory: bool = False,
                    extra: list[str] = ()) -> str:
    """The config ``dyno gputrace`` sends for these options (its line order; ``PROFILE_PROFILE_MEMORY`` only when
    asked, as dyno adds it), plus ``extra`` lines. ``log_file`` None: no ``ACTIVITIES_LOG_FILE`` (each xpuprof
    process then names its trace by the one rule in its own trace directory)."""
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
    lines = ([f"ACTIVITIES_LOG_FILE={log_file}"] if log_file else []) + [when, switches, *extra]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- dynolog's RPC
def rpc(host: str, port: int, message: dict, *, timeout_s: float = RPC_TIMEOUT_S) -> dict:
    """One RPC to dynolog (the dyno CLI's framing); the decoded answer, a JSON object. ``TriggerError`` when
    nothing answers, ``BadAnswer`` for an answer that is not one (every read bounded: its length, its bytes
    and one deadline for the whole exchange)."""
    body = json.dumps(message).encode()
    where = f"{host}:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        conn = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise TriggerError(f"cannot reach dynolog at {where}: {exc.strerror or exc}") from None
    with conn:
        try:
            conn.sendall(_LENGTH.pack(len(body)) + body)
            size = _LENGTH.unpack(_read_exactly(conn, _LENGTH.size, deadline, where))[0]
            if size <= 0:
                raise BadAnswer(f"dynolog at {where} sent no answer (length {size}: it did not understand the request)")
            if size > MAX_ANSWER_BYTES:
                raise BadAnswer(f"dynolog at {where} announced a {size}-byte answer; at most {MAX_ANSWER_BYTES} are read "
                                "(not dynolog's answer)")
            raw = _read_exactly(conn, size, deadline, where)
        except OSError as exc:
            raise BadAnswer(f"dynolog at {where} broke off its answer: {exc.strerror or exc}") from None
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadAnswer(f"dynolog at {where} answered something that is not JSON: {str(exc)[:200]}") from None
    if not isinstance(answer, dict):
        raise BadAnswer(f"dynolog at {where} answered a JSON {type(answer).__name__}, not an object")
    return answer


def _read_exactly(conn: socket.socket, n: int, deadline: float, where: str) -> bytes:
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BadAnswer(f"dynolog at {where} did not finish its answer within {RPC_TIMEOUT_S:g} s")
        conn.settimeout(left)
        try:
            chunk = conn.recv(min(n - got, 1 << 16))
        except socket.timeout:
            raise BadAnswer(f"dynolog at {where} did not finish its answer within {RPC_TIMEOUT_S:g} s") from None
        if not chunk:
            raise BadAnswer(f"dynolog at {where} closed the connection after {got} of {n} answer bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _pid_list(answer: dict, key: str, where: str) -> list[int]:
    value = answer.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 1 << 31
                                              for p in value):
        raise BadAnswer(f"dynolog at {where} answered {key}={str(value)[:120]}, not a list of process ids")
    return list(dict.fromkeys(value))


def daemon_listening(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def send_request(host: str, port: int, config: str, *, job_id: int = 0, pids: list[int] | None = None,
                 process_limit: int = DEFAULT_PROCESS_LIMIT) -> TriggerResult:
    where = f"{host}:{port}"
    answer = rpc(host, port, {"fn": "setKinetOnDemandRequest", "config": config, "job_id": int(job_id),
                              "pids": list(pids or [0]), "process_limit": int(process_limit)})
    if "processesMatched" not in answer:
        status = answer.get("status", answer)
        raise BadAnswer(f"dynolog at {where} refused the request: {str(status)[:200]}")
    matched = _pid_list(answer, "processesMatched", where)
    triggered = _pid_list(answer, "activityProfilersTriggered", where)
    busy = answer.get("activityProfilersBusy", 0)
    if busy is None:
        busy = 0
    if not isinstance(busy, int) or isinstance(busy, bool) or not 0 <= busy <= len(matched):
        raise BadAnswer(f"dynolog at {where} answered activityProfilersBusy={str(busy)[:60]} for {len(matched)} "
                        "matched process(es)")
    if not set(triggered) <= set(matched) or len(triggered) + busy > len(matched):
        raise BadAnswer(f"dynolog at {where} answered {len(triggered)} triggered and {busy} busy of {len(matched)} "
                        f"matched process(es) {matched[:8]}: not an answer dynolog gives")
    return TriggerResult(where, matched, triggered, busy, answer)


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
        """Answer every poll for ``wait_s`` seconds; the matching processes get ``config``. A process is who
        the kernel says sent the poll: its pid and its ancestors are read from ``/proc``, never from the
        datagram (a poll claiming another process's pid gets nothing of its request)."""
        targets = set(pids or [])
        everyone = not targets or targets == {0}
        result = TriggerResult("embedded")
        answered: set[int] = set()
        deadline = time.monotonic() + wait_s
        own_uid = os.geteuid()

        def mine(cred) -> bool:  # before anything of the datagram is decoded
            return cred is not None and (own_uid == 0 or cred.uid == own_uid)

        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return result
            try:
                dg = self.endpoint.receive(left, trust=mine)
            except (fabric.Untrusted, fabric.Malformed):
                continue  # another user's process, or not a datagram: dynolog drops those too
            if dg is None or dg.type != fabric.MSG_REQUEST:
                continue
            try:
                config_type, _claimed, req_job = fabric.decode_request(dg.payload)
            except ValueError:
                continue
            leaf = dg.credentials.pid
            lineage = fabric.ancestor_pids(leaf)
            reply = ""
            matches = req_job == job_id and (everyone or targets.intersection(lineage))
            if matches and leaf not in answered:
                answered.add(leaf)
                result.matched.append(leaf)
                if len(result.triggered) < process_limit and config_type & fabric.CONFIG_ACTIVITIES:
                    reply = f"{config}\nREQUEST_TRACE_ID={_trace_id(leaf)}\n"
            try:
                self.endpoint.send(dg.sender, fabric.encode(fabric.MSG_REQUEST, reply.encode()))
            except OSError as exc:  # gone between its poll and our answer, or the config does not fit a datagram
                if reply:
                    result.error = f"pid {leaf}: the request could not be delivered: {exc.strerror or exc}"
                continue
            if reply:
                result.triggered.append(leaf)
