"""Runs at interpreter start in every Python process under ``xpuprof exec`` (from ``bootstrap/``).

Applies the capture policy ``xpuprof exec`` was given (``launcher.ExecPolicy``):
  run         the whole process: recording starts here, before the program, and the trace is written
              at exit (at SIGTERM too, when the program left SIGTERM's default action in place);
  window      ``--delay``/``--duration``: one capture on its own thread;
  iterations  ``--iterations N`` from ``--start-iteration``: steps counted as Kineto counts them;
  on-demand   nothing until a request arrives (dynolog, or ``xpuprof trigger`` on this machine).
Whatever the mode the process polls the daemon (dynolog, or ``xpuprof trigger`` on this machine): a trace request
while a capture runs is noted in that trace; ``xpuprof trigger --pause/--resume`` pauses and resumes the running
capture (``control``). Launchers and xpuprof's own helper processes record nothing.
"""
from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time

from . import HELPER_ENV, activate, agent, launcher, torchlink

log = logging.getLogger("xpuprof.ondemand")


def main() -> None:
    raw = os.environ.get(launcher.EXEC_ENV)
    if not raw or os.environ.get(HELPER_ENV) == "1":
        return
    try:
        policy = launcher.ExecPolicy.from_env(raw)
    except (ValueError, TypeError) as exc:
        sys.stderr.write(f"xpuprof exec: {launcher.EXEC_ENV} is not a policy this xpuprof understands ({exc}); "
                         "this process runs without it\n")
        return
    if launcher.is_launcher():  # records nothing; `import xpuprof` already kept torch's client out of it
        return
    from ..host import spill

    spill.start_from_environment()  # crash-safe recording (host/spill.py); its atexit runs after the trace's
    torchlink.install()
    ag = agent.get_agent(out_dir=os.path.abspath(policy.out_dir), out_given=policy.out_given,
                         trace_format=policy.trace_format)
    if policy.mode != "on-demand":
        agent.install_sigterm()
    if policy.mode == "run":
        ag.adopt(WholeRun(policy))
    elif policy.mode in ("window", "iterations"):
        ag.submit(policy.request())
    activate(force=True)  # every mode polls: requests, and `xpuprof trigger --pause/--resume` for its capture


class WholeRun:
    """``xpuprof exec``'s default capture: this whole process, on its main thread."""

    def __init__(self, policy: launcher.ExecPolicy) -> None:
        from ..profiler import profile

        from .capture import exec_trace_name

        self.request = policy.request()
        self.out_dir = os.path.abspath(policy.out_dir)
        self.planned_path = os.path.join(self.out_dir, exec_trace_name(policy.trace_format))
        self.done = threading.Event()
        self.path = None
        self._reason = ""
        self._preempted = ""
        self._finishing = False
        self._ignored: list[dict] = []
        self._lock = threading.Lock()
        self.prof = profile(config=self.request.config, worker_name=f"{socket.gethostname()}_{os.getpid()}")
        self.prof.start()
        torchlink.on_torch_imported(self._torch_imported)

    def _torch_imported(self, torch) -> None:
        from ..host import torch_ops
        from ..profiler.api import record_torch_ops_from_now
        from .capture import quiet_kineto

        torch_ops.record_other_threads(True, yield_to=self._yield_to_program)  # every thread's ops
        try:
            quiet_kineto(lambda: record_torch_ops_from_now(self.prof))()
        finally:
            torch_ops.record_other_threads(False)

    def _yield_to_program(self, why: str) -> None:
        """The program starts torch.profiler itself: this capture ends here (written now), never in its way."""
        with self._lock:
            self._preempted = f"the program started torch.profiler at {time.strftime('%H:%M:%S')}; the capture " \
                              f"stopped there so that only one records ({why.split(':', 1)[0]})"
        log.warning("xpuprof exec: the program started torch.profiler, which has priority: this process's trace "
                    "ends here")
        self.finish_inline()

    def note_ignored(self, request, why: str) -> bool:
        """List ``request`` in the trace; False once the trace's metadata is written (the process is ending)."""
        with self._lock:
            if self._finishing:
                return False
            self._ignored.append({"trace_id": request.trace_id or None, "received_ms": request.received_ms,
                                  "why": why, "asked": request.describe()})
            return True

    def stop(self, reason: str) -> None:
        self._reason = reason

    def control(self, command: str) -> str:
        """``pause`` / ``resume`` from ``xpuprof trigger`` (``control.apply``); the outcome. The whole run is
        not cancelled: it is what ``xpuprof exec`` was asked for (``--pause`` stops its collection)."""
        from . import control

        with self._lock:  # finish_inline takes it before stopping the profile
            if self.done.is_set() or self._finishing:
                return control.NO_CAPTURE
            if command == "cancel":
                return control.NOT_CANCELLABLE
            return control.toggle(self.prof, command)

    def finish_inline(self) -> None:
        from .capture import say_line
        from .tracefile import write_in_dir

        if self.done.is_set():
            return
        try:
            info = {"source": "exec", "mode": "run", "pid": os.getpid()}
            if self._reason and self._reason != "the process exited":
                info["stopped_early"] = f"{self._reason}: recorded until then"
            with self._lock:
                self._finishing = True
                if self._ignored:
                    info["requests_ignored"] = list(self._ignored)
                if self._preempted:
                    info["notes"] = {"preempted": self._preempted}
            self.prof.add_metadata("ondemand", info)
            self.prof.stop()
            self.path = write_in_dir(self.prof, self.out_dir, os.path.basename(self.planned_path))
            say_line(f"xpuprof exec: wrote {self.path}")
        except Exception as exc:
            say_line(f"xpuprof exec: the trace of process {os.getpid()} could not be written: {type(exc).__name__}: "
                 f"{exc}")
        finally:
            self.done.set()
