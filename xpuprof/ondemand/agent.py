"""The process's one on-demand agent: at most one capture at a time, every request either started or
listed in a trace, a clean end at exit and after fork.

A request that arrives while a capture is pending or recording is logged and listed in that capture's trace
(``ondemand.requests_ignored``), and its requester is told so (``answers``). Once a capture has stopped
recording and sealed its trace's metadata (it is only building or writing), a new request starts a new
capture: no request falls between the two. A capture cancelled before it recorded anything
(``xpuprof trigger --cancel``) writes no trace: the requests it had listed go into the next trace this
process writes. At exit a running capture is stopped and written (the trace says it was cut short); under
``xpuprof exec`` SIGTERM is handled the same way when the program left its default action in place, then
the process still dies by SIGTERM (``install_sigterm``).

Control commands (``xpuprof trigger --pause/--resume/--cancel``) arrive through the poll client like requests
and act on ``active()`` (``control``).
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import threading

from ..config.kineto import ondemand_trace_dir
from . import answers, mainthread
from .capture import Capture
from .request import CaptureRequest

log = logging.getLogger("xpuprof.ondemand")

EXIT_TIMEOUT_S = 300.0  # at exit: the capture's stop, build and write

STARTED, BUSY, EXITING = "started", "busy", "exiting"

_agent: "Agent | None" = None
_agent_lock = threading.Lock()
_hooks_installed = False  # atexit, SIGTERM and fork hooks: once per process image


class Agent:
    def __init__(self, *, out_dir: str | None = None, out_given: bool = False, trace_format: str = "json") -> None:
        """``out_dir``: the process runs under ``xpuprof exec`` (its traces go there; each written one is said
        on stderr). ``out_given``: ``--out`` was given, so daemon requests are written there too.
        ``trace_format``: exec's ``--format`` (the traces it names in ``out_dir``)."""
        self.out_dir = out_dir
        self.out_given = out_given
        self.trace_format = trace_format
        self._lock = threading.Lock()
        self._active = None  # a Capture (or exec's whole-run capture): anything with done/stop/note_ignored
        self._exiting = False
        self._carried: list[dict] = []  # requests listed by a capture that wrote no trace: for the next one

    def active(self):
        with self._lock:
            cur = self._active
            return cur if cur is not None and not cur.done.is_set() else None

    def submit(self, request: CaptureRequest) -> str:
        """Start ``request`` unless a capture is pending or recording (``STARTED`` / ``BUSY`` / ``EXITING``);
        the requester is answered either way."""
        with self._lock:
            if self._exiting:
                busy = capture = None
            else:
                cur = self._active
                busy = cur if cur is not None and not cur.done.is_set() and cur.note_ignored(
                    request, "another capture was pending or running in this process") else None
                capture = None
                if busy is None:
                    capture = Capture(request, out_dir=self.out_dir, allowed_dir=ondemand_trace_dir(),
                                      out_given=self.out_given, carried=self._take_carried,
                                      on_unwritten=self._carry, announce=self.out_dir is not None,
                                      trace_format=self.trace_format)
                    self._active = capture
        if capture is None and busy is None:
            answers.send(request.answer_to, answers.REFUSED, trace_id=request.trace_id or None,
                         why="the process is exiting")
            log.warning("xpuprof: on-demand request %s ignored: the process is exiting", request.describe())
            return EXITING
        if busy is not None:
            log.warning("xpuprof: on-demand request %s ignored: a capture is pending or running in this process "
                        "(its trace lists the ignored request)", request.describe())
            answers.send(request.answer_to, answers.BUSY, trace_id=request.trace_id or None,
                         why="a capture was pending or running in this process: its trace lists this request",
                         path=getattr(busy, "planned_path", None))
            return BUSY
        log.info("xpuprof: on-demand request accepted: %s", request.describe())
        answers.send(request.answer_to, answers.ACCEPTED, trace_id=request.trace_id or None,
                     path=capture.planned_path, asked=request.describe())
        capture.start_thread()
        return STARTED

    def _carry(self, entries: list[dict]) -> None:
        with self._lock:
            self._carried.extend(entries)

    def _take_carried(self) -> list[dict]:
        with self._lock:
            out, self._carried = self._carried, []
            return out

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


def get_agent(*, out_dir: str | None = None, out_given: bool = False, trace_format: str = "json") -> Agent:
    global _agent, _hooks_installed
    with _agent_lock:
        if _agent is None:
            _agent = Agent(out_dir=out_dir, out_given=out_given, trace_format=trace_format)
            if not _hooks_installed:
                _hooks_installed = True
                atexit.register(_at_exit)
                os.register_at_fork(after_in_child=_after_fork_in_child)
        elif out_dir is not None:
            _agent.out_dir = out_dir
            _agent.out_given = out_given
            _agent.trace_format = trace_format
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
