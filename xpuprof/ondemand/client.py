"""The process side of dynolog's on-demand protocol: register and poll exactly as Kineto does.

One daemon thread. Every ``ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS`` (Kineto's default 5 s; read from
the base config file ``KINETO_CONFIG``, default ``/etc/libkineto.conf``, re-read every 300 s as
Kineto re-reads it) it sends one ``"req"`` datagram (type ACTIVITIES, this process and its
ancestors, ``SLURM_JOB_ID``) to the daemon's endpoint and waits up to 90 ms for the answer (Kineto:
9 tries 10 ms apart). The first poll happens at once: it registers the process. A config in the answer
becomes a request for the agent. Between polls the thread sleeps: idle, the cost is one datagram
each way per interval.

Only root or this process's own user may configure it: each datagram's sender comes from the kernel
(``SO_PASSCRED``) and is checked before anything of the datagram is decoded or logged; others are dropped,
said once per uid and at most a few lines a minute (``refusals``), as are malformed datagrams. No daemon, or
one that goes away, is said once (INFO) and polled for again at the next interval. What became of each
request is answered to the ``xpuprof trigger`` that sent it, when one did (``answers``).
"""
from __future__ import annotations

import errno
import logging
import os
import threading
import time

from ..config.kineto import KinetoConfig
from . import answers, control, fabric
from .refusals import RefusalLog
from .request import RequestError, from_kineto_text

log = logging.getLogger("xpuprof.ondemand")

BASE_CONFIG_ENV = "KINETO_CONFIG"
DEFAULT_BASE_CONFIG = "/etc/libkineto.conf"
BASE_CONFIG_REFRESH_S = 300.0
REPLY_WAIT_S = 0.09
PREWARM_AFTER_S = 30.0  # a process alive this long is a job, not a short helper: probe its backends then

_client: "DaemonClient | None" = None
_client_lock = threading.Lock()


def read_base_config() -> KinetoConfig:
    """Kineto's base config (``KINETO_CONFIG`` or /etc/libkineto.conf); the defaults when unreadable."""
    kc = KinetoConfig()
    path = os.environ.get(BASE_CONFIG_ENV) or DEFAULT_BASE_CONFIG
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return kc
    if not kc.parse(text):
        log.warning("xpuprof: base config %s does not parse (%s); using Kineto's defaults for the poll interval",
                    path, "; ".join(kc.errors))
        return KinetoConfig()
    return kc


class DaemonClient:
    def __init__(self, agent, *, directory: str | None = None) -> None:
        self.agent = agent
        self.directory = fabric.socket_dir() if directory is None else directory
        self.pids = fabric.ancestor_pids()
        self.jobid = fabric.job_id()
        self.interval_s = 5.0
        self.enabled = True
        self.polls = 0
        self.endpoint: fabric.Endpoint | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._base_read_at = float("-inf")
        self._daemon_seen: bool | None = None
        self._refusals = RefusalLog(log)
        self._request_datagram = fabric.encode_request(fabric.CONFIG_ACTIVITIES, self.pids, self.jobid)

    # ------------------------------------------------------------------ life
    def start(self) -> bool:
        try:
            self.endpoint = fabric.Endpoint(fabric.new_client_name(), self.directory)
        except fabric.FabricError as exc:
            log.warning("xpuprof: on-demand tracing is off in this process: %s", exc.strerror or exc)
            return False
        self._thread = threading.Thread(target=self._loop, name="xpuprof-ondemand-poll", daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=0.2)  # a poll in flight ends within its 90 ms wait; never hold up exit
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None

    def _loop(self) -> None:
        warmed = False
        started = time.monotonic()
        while True:
            self._refresh_base_config()
            if self.enabled:
                try:
                    self.poll_once()
                except Exception:  # never let the poll thread die: the next interval tries again
                    log.exception("xpuprof: on-demand poll failed")
                if not warmed and time.monotonic() - started >= PREWARM_AFTER_S and self.agent.active() is None:
                    warmed = True
                    prewarm()
            if self._stop.wait(self.interval_s):
                return

    def _refresh_base_config(self) -> None:
        now = time.monotonic()
        if now - self._base_read_at < BASE_CONFIG_REFRESH_S:
            return
        self._base_read_at = now
        base = read_base_config()
        interval = base.on_demand_config_update_interval_s
        if interval < 1:
            log.warning("xpuprof: ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=%d would poll without pause; polling every "
                        "1 s", interval)
            interval = 1
        self.interval_s = float(interval)
        # ENABLE_IPC_FABRIC=false in the base config switches polling off, as it switches Kineto's off
        explicit = any(line.split("#", 1)[0].split("=", 1)[0].strip() == "ENABLE_IPC_FABRIC"
                       for line in base.source.splitlines())
        self.enabled = base.enable_ipc_fabric if explicit else True

    # ------------------------------------------------------------------ one poll
    def poll_once(self) -> None:
        ep = self.endpoint
        if ep is None:
            return
        self._drain(ep)  # an answer that came after the last poll stopped waiting still counts
        try:
            ep.send(fabric.DAEMON_NAME, self._request_datagram)
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN, errno.ENOTCONN):
                self._daemon_present(False, exc)
                return
            raise
        self.polls += 1
        deadline = time.monotonic() + REPLY_WAIT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._receive(ep, left):
                self._daemon_present(True)
                return

    def _drain(self, ep: fabric.Endpoint) -> None:
        while self._receive(ep, 0.0) is not None:
            pass

    def _receive(self, ep: fabric.Endpoint, timeout: float) -> bool | None:
        """One datagram: True for the daemon's answer, False for anything else, None when none came."""
        try:
            dg = ep.receive(timeout, trust=fabric.trusted_sender)
        except fabric.Untrusted as exc:  # nothing of it decoded: said once per uid, rate-limited
            cred = exc.credentials
            uid = cred.uid if cred else None
            self._refusals.say(("uid", uid), lambda: (
                f"xpuprof: ignored an on-demand datagram from "
                f"{f'uid {uid} (pid {cred.pid})' if cred else 'an unknown sender'}: only root or this process's own "
                f"user (uid {os.getuid()}) may configure it"))
            return False
        except fabric.Malformed as exc:
            cred = exc.credentials
            self._refusals.say(("malformed", cred.pid if cred else None), lambda: (
                f"xpuprof: dropped a malformed datagram on the on-demand socket (from pid "
                f"{cred.pid if cred else '?'}): {exc}"))
            return False
        if dg is None:
            return None
        if dg.type != fabric.MSG_REQUEST:
            log.debug("xpuprof: ignored a %r datagram from %s", dg.type, dg.sender)
            return False
        text = dg.payload.decode("utf-8", "replace")
        if text.strip():
            self.handle_config(text, sender=dg.sender)
        return True

    def handle_config(self, text: str, *, sender: str | None = None) -> None:
        log.info("xpuprof: on-demand config received:\n%s", text.strip()[:4096])
        answer_to = answers.answer_name(text)
        try:
            command = control.parse(text)
            if command is not None:
                outcome = control.apply(self.agent, command)
                answers.send(answer_to, answers.OUTCOME, command=command, outcome=outcome)
                return
            request = from_kineto_text(text)
        except RequestError as exc:
            log.warning("xpuprof: on-demand request refused: %s", exc)
            answers.send(answer_to, answers.REFUSED, why=str(exc))
            return
        for key, why in request.notes.items():
            log.warning("xpuprof: on-demand request %s: %s: %s", request.describe(), key, why)
        self.agent.submit(request)

    def _daemon_present(self, present: bool, exc: OSError | None = None) -> None:
        if present == self._daemon_seen:
            return
        self._daemon_seen = present
        where = self.endpoint.directory + "/" + fabric.DAEMON_NAME if self.endpoint and self.endpoint.directory \
            else "@" + fabric.DAEMON_NAME
        if present:
            log.info("xpuprof: registered with the on-demand daemon at %s (pids %s, job id %d, polling every %g s)",
                     where, self.pids, self.jobid, self.interval_s)
        else:
            log.info("xpuprof: no on-demand daemon answers at %s (%s); polling every %g s", where,
                     exc.strerror if exc else "", self.interval_s)


def prewarm() -> None:
    """Probe the backends once and load the trace stages' modules, when the process has run for
    ``PREWARM_AFTER_S`` (short-lived helpers, such as spawned workers, never pay for it): a capture then
    starts without probing (seconds with CUDA's probe) and starts and stops without importing, which would
    otherwise delay it and hold the GIL against the training thread meanwhile."""
    from ..profiler import profile
    from ..profiler.stages import load_trace_stages

    try:
        profile().check()
    except Exception as exc:  # the capture that needs it says the same, in its trace
        log.debug("xpuprof: backend probe at registration failed: %s: %s", type(exc).__name__, exc)
    load_trace_stages()


def start(agent) -> DaemonClient | None:
    """The process's one client (started once)."""
    global _client
    with _client_lock:
        if _client is None:
            client = DaemonClient(agent)
            if not client.start():
                return None
            _client = client
            import atexit

            atexit.register(_close_at_exit)
        return _client


def current() -> DaemonClient | None:
    return _client


def _close_at_exit() -> None:
    client = _client
    if client is not None:
        client.close()


def after_fork_in_child() -> None:
    global _client
    client = _client
    _client = None
    if client is not None and client.endpoint is not None:
        client.endpoint.detach()
