"""The process's one on-demand agent: at most one capture at a time, requests while busy noted, a
clean end at exit and after fork.

The protocol has no reply path to the requester, so a request that arrives while a capture runs
is logged and listed in that capture's trace (``ondemand.requests_ignored``). At exit a running
capture is stopped and written (the trace says it was cut short); under ``xpuprof exec`` SIGTERM is
handled the same way when the program left its default action in place, then the process still dies
by SIGTERM (``install_sigterm``).

Control commands (``xpuprof trigger --pause/--resume``) arrive through the poll client like requests and
act on ``active()`` (``control``).
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import threading

from ..config.kineto import ondemand_trace_dir
from . import mainthread
from .capture import Capture
from .request import CaptureRequest

log = logging.getLogger("xpuprof.ondemand")

EXIT_TIMEOUT_S = 300.0  # at exit: the capture's stop, build and write

_agent: "Agent | None" = None
_agent_lock = threading.Lock()
_hooks_installed = False  # atexit, SIGTERM and fork hooks: once per process image


class Agent:
    def __init__(self, *, out_dir: str | None = None) -> None:
        self.out_dir = out_dir
        self._lock = threading.Lock()
        self._active = None  # a Capture (or exec's whole-run capture): anything with done/stop/note_ignored
        self._exiting = False
        self.history: list[Capture] = []

    def active(self):
        with self._lock:
            cur = self._active
            return cur if cur is not None and not cur.done.is_set() else None

    def submit(self, request: CaptureRequest) -> str:
        """Start ``request`` unless a capture runs ("started" / "busy" / "exiting")."""
        with self._lock:
            if self._exiting:
                return "exiting"
            cur = self._active
            if cur is not None and not cur.done.is_set():
                busy = cur
            else:
                busy = None
                capture = Capture(request, out_dir=self.out_dir, allowed_dir=ondemand_trace_dir())
                self._active = capture
                self.history.append(capture)
        if busy is not None:
            busy.note_ignored(request, "another capture was running in this process")
            log.warning("xpuprof: on-demand request %s ignored: a capture is running in this process (its trace "
                        "lists the ignored request)", request.describe())
            return "busy"
        log.info("xpuprof: on-demand request accepted: %s", request.describe())
        capture.start_thread()
        return "started"

    def adopt(self, capture) -> None:
        """A capture started elsewhere (``xpuprof exec``'s whole run) that requests must see as busy."""
        with self._lock:
            self._active = capture

    def shutdown(self, reason: str = "the process exited") -> None:
        """Stop the running capture and wait for its trace (called at exit, on the main thread)."""
        with self._lock:
            self._exiting = True
            cur = self._active
        if cur is None or cur.done.is_set():
            return
        cur.stop(reason)
        finisher = getattr(cur, "finish_inline", None)
        if finisher is not None:  # a capture that lives on the main thread finishes right here
            finisher()
            return
        if threading.current_thread() is threading.main_thread():
            finished = mainthread.wait_serving(cur.done, EXIT_TIMEOUT_S)
        else:
            finished = cur.done.wait(EXIT_TIMEOUT_S)
        if not finished:
            log.warning("xpuprof: the on-demand capture %s did not finish within %g s of exit; its trace is lost",
                        cur.request.describe(), EXIT_TIMEOUT_S)


def get_agent(*, out_dir: str | None = None) -> Agent:
    global _agent, _hooks_installed
    with _agent_lock:
        if _agent is None:
            _agent = Agent(out_dir=out_dir)
            if not _hooks_installed:
                _hooks_installed = True
                atexit.register(_at_exit)
                os.register_at_fork(after_in_child=_after_fork_in_child)
        elif out_dir is not None:
            _agent.out_dir = out_dir
        return _agent


def _at_exit() -> None:
    agent = _agent
    if agent is not None:
        agent.shutdown()


def install_sigterm() -> None:
    """For ``xpuprof exec``'s planned captures (the whole run, a window, iterations): a running capture is
    written at SIGTERM too, then the process ends by SIGTERM as it would have. Only where the program left
    SIGTERM's default action (its own handler always wins). Python runs the handler when the main thread
    next runs bytecode: a process blocked in C at that moment ends when it returns (or at SIGKILL). Not
    installed for on-demand requests alone: a short capture is not worth changing how SIGTERM ends the
    process."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    agent = _agent
    if agent is not None and agent.active() is not None:
        agent.shutdown("SIGTERM")
    os.kill(os.getpid(), signal.SIGTERM)


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker, a multiprocessing fork) is not the process that was asked:
    it inherits no capture and no poll thread."""
    global _agent
    _agent = None
    from . import client

    client.after_fork_in_child()
