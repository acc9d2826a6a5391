"""One capture: a request run through the public ``xpuprof.profile`` object, off the training thread.

The capture thread prepares the profile (backends selected and probed: the warm-up), waits for the
start (a time, or a step boundary), starts it, waits for the end, stops it, builds the trace and
writes it. The training thread pays only for what must run on it: torch's op recorder is per thread,
so its enable and disable are handed to the main thread (``mainthread``); step boundaries are counted
by ``steps`` listeners.

Iteration-based requests start at the iteration Kineto would start at (``start_iteration_for``). The
profile is started one boundary early, so iteration S is recorded whole; each requested iteration k is
a ``ProfilerStep#k`` range on the stepping thread (torch.profiler's step ranges, which HTA and
TensorBoard split iterations by), and the capture stops right after boundary S+N.

Everything the trace does not hold that was asked for is said in its ``ondemand`` metadata (``notes``:
keys not honoured, a late start, a capture cut short at exit; ``requests_ignored``: requests that arrived
while it ran).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time

from ..host import recorder, torch_ops
from ..profiler import profile, trace_file_name
from ..profiler.api import default_worker_name
from . import mainthread, steps, tracefile
from .request import CaptureRequest

log = logging.getLogger("xpuprof.ondemand")

TORCH_START_TIMEOUT_S = 3.0  # the main thread must reach a bytecode boundary by then
TORCH_STOP_TIMEOUT_S = 60.0
STEP_IDLE_TIMEOUT_S = 600.0  # waiting for a start iteration: give up when the program stopped stepping
KINETO_LOG_LEVEL_ENV = "KINETO_LOG_LEVEL"
LATE_START_MS = 100  # a start this much after the requested time is noted in the trace
ARM_AHEAD = 2  # iteration captures start recording this many step boundaries before their first iteration


def start_iteration_for(request: CaptureRequest, current: int) -> int:
    """The iteration an iteration-based request starts at, as Kineto's ``shouldActivateIterationConfig``
    decides it at the first boundary after the request arrives (``current`` + 1)."""
    nxt = current + 1
    if nxt <= request.start_iteration - request.warmup_iterations:
        return request.start_iteration
    start = nxt + request.warmup_iterations
    if request.roundup > 0:
        rem = start % request.roundup
        start += 0 if rem == 0 else request.roundup - rem
    return start


def quiet_kineto(fn):
    """``fn`` with Kineto's log level at its top while torch's profiler initializes (once per process):
    torch 2.13's Kineto prints two ``USDT: profiler_start/stop`` lines to stderr at each start and stop of
    its profiler, which would land in the program's own output. A level the user set is left alone."""
    def run():
        if KINETO_LOG_LEVEL_ENV in os.environ:
            return fn()
        os.environ[KINETO_LOG_LEVEL_ENV] = "6"  # above USDT (5): Kineto reads it when it first initializes
        try:
            return fn()
        finally:
            os.environ.pop(KINETO_LOG_LEVEL_ENV, None)
    return run


class _MainThreadOps:
    """For a torch without its all-threads profiler mode: torch's op recorder started and stopped on the
    main thread (``torch_ops.record_other_threads``)."""

    def start(self, fn):
        return mainthread.run(quiet_kineto(fn), TORCH_START_TIMEOUT_S)

    def stop(self, fn):
        return mainthread.run(fn, TORCH_STOP_TIMEOUT_S)


class Capture:
    def __init__(self, request: CaptureRequest, *, out_dir: str | None = None, allowed_dir: str | None = None) -> None:
        self.request = request
        self.out_dir = out_dir  # exec traces: the user's output directory
        self.allowed_dir = allowed_dir  # daemon traces: the confinement directory
        self.cancel = threading.Event()  # stop now: process exit
        self.cancel_reason = ""
        self.done = threading.Event()
        self.path = None  # the trace written
        self.error: str | None = None
        self._lock = threading.Lock()
        self._ignored: list[dict] = []
        self._notes = dict(request.notes)
        self._open_notes = True  # notes still reach the trace (until the profile stops)
        self._recording = False
        self._first = self._end = -1
        self._range = None  # the ProfilerStep# range open on the stepping thread
        self._prof = None
        self._thread: threading.Thread | None = None
        self._stop_lock = threading.Lock()
        self._stopped = False

    # ------------------------------------------------------------------ control
    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self.run, name="xpuprof-ondemand-capture", daemon=True)
        self._thread.start()

    def stop(self, reason: str) -> None:
        """End the capture now (``reason`` goes into the trace)."""
        self.cancel_reason = self.cancel_reason or reason
        self.cancel.set()
        steps.notify_cancel()

    def control(self, command: str) -> str:
        """``pause`` / ``resume`` (``control.apply``) while recording; the outcome."""
        from . import control

        with self._stop_lock:  # never against a stop in progress
            if not self._recording or self._stopped or self._prof is None:
                return control.NOT_RECORDING
            return control.toggle(self._prof, command)

    def note_ignored(self, request: CaptureRequest, why: str) -> None:
        entry = {"trace_id": request.trace_id or None, "received_ms": request.received_ms, "why": why,
                 "asked": request.describe()}
        with self._lock:
            if self._open_notes:
                self._ignored.append(entry)

    def note(self, key: str, text: str) -> None:
        with self._lock:
            if self._open_notes:
                self._notes[key] = text

    # ------------------------------------------------------------------ the capture thread
    def run(self) -> None:
        torch_ops.record_other_threads(True, runner=_MainThreadOps(), yield_to=self._yield_to_program)
        try:
            with yielding_gil():
                self._run()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("xpuprof: on-demand capture %s failed: %s", self.request.describe(), self.error)
            if self._prof is not None and self._recording:  # never leave a recorder running behind
                try:
                    self._stop_profile(self._prof)
                except Exception:
                    pass
        finally:
            steps.remove_listener(self._on_step)
            torch_ops.record_other_threads(False)
            self.done.set()

    def _run(self) -> None:
        req = self.request
        _wait_for_torch_import()
        prof = profile(config=req.config, worker_name=default_worker_name())
        prof.check()  # the warm-up: backends chosen and probed, metric names checked, before the start
        self._prof = prof
        if req.config.profile_memory and torch_ops.torch_if_imported() is not None:
            self.note("PROFILE_PROFILE_MEMORY", "torch records [memory] events only in its per-thread profiler mode: "
                      "the main thread's ops and memory events are recorded, other threads' ops are not")
        if req.by_iterations and steps.current() < 0 and req.source != "exec":
            # Kineto's rule: an iteration request to a program that does not step runs by duration
            self.note("iterations", f"{req.iterations} iterations were asked for, but this process has counted no "
                      "step (no torch optimizer step, no xpuprof.step()): recorded "
                      f"{req.duration_ms} ms instead, as Kineto does")
            req.by_iterations = False
        if req.by_iterations:
            if not self._start_at_iteration(prof):
                return
        else:
            if not self._start_at_time(prof):
                return
            self.cancel.wait(max(0.0, req.duration_ms / 1e3 - (time.monotonic() - self._t0)))
        self._finish(prof)

    def _start_at_time(self, prof) -> bool:
        req = self.request
        if req.start_time_ms is not None:
            wait_s = (req.start_time_ms - time.time_ns() / 1e6) / 1e3
            if wait_s > 0 and self.cancel.wait(wait_s):
                log.warning("xpuprof: on-demand capture %s cancelled before it started: %s", req.describe(),
                            self.cancel_reason)
                return False
        self._begin(prof)
        if req.start_time_ms is not None and self._started_ms - req.start_time_ms > LATE_START_MS:
            late = self._started_ms - req.start_time_ms
            self.note("start", f"started {late} ms after the requested start time (the request was picked up late, "
                      "or preparing the capture took longer than the lead time)")
        return True

    def _start_at_iteration(self, prof) -> bool:
        req = self.request
        current = steps.current()
        target = start_iteration_for(req, current)
        if target <= current + 1:  # no whole iteration left to start in: the next start Kineto's rule allows
            target = start_iteration_for(req, current + 1)
        # Started up to two boundaries early (ARM_AHEAD), so iteration `target` is recorded from its first
        # instant even when starting takes longer than what is left of the iteration before it.
        armed = steps.wait_until(lambda n: n >= target - ARM_AHEAD, cancel=self.cancel,
                                 idle_timeout_s=STEP_IDLE_TIMEOUT_S)
        if armed is None:
            why = self.cancel_reason or f"no step for {STEP_IDLE_TIMEOUT_S:g} s (the program stopped stepping)"
            log.warning("xpuprof: on-demand capture %s cancelled while waiting for iteration %d: %s",
                        req.describe(), target, why)
            return False
        self._first, self._end = target, target + req.iterations
        self._begin(prof)
        now = steps.current()
        if now >= target:  # the start took longer than the rest of the iteration before `target`: the next start
            moved = start_iteration_for(req, now)  # Kineto's rule allows (still a multiple of the roundup)
            self.note("start", f"iteration {target} had begun when recording started; recorded iterations "
                      f"{moved}..{moved + req.iterations - 1} instead")
            self._first, self._end = moved, moved + req.iterations
        steps.add_listener(self._on_step)
        done = steps.wait_until(lambda n: n >= self._end, cancel=self.cancel, idle_timeout_s=STEP_IDLE_TIMEOUT_S)
        if done is None and not self.cancel.is_set():  # the program stopped stepping: do not record forever
            self.stop(f"no step for {STEP_IDLE_TIMEOUT_S:g} s")
        return True

    def _begin(self, prof) -> None:
        """Start recording (the program's torch.profiler may pre-empt a started capture, never a starting one)."""
        _wait_for_torch_import()
        with self._stop_lock:
            quiet_kineto(prof.start)()
            self._t0 = time.monotonic()
            self._started_ms = time.time_ns() // 1_000_000
            self._recording = True
        log.info("xpuprof: on-demand capture recording (%s)", self.request.describe())

    def _on_step(self, n: int) -> None:
        """At each boundary, on the stepping thread: the ProfilerStep# ranges of the requested iterations."""
        if not self._recording:
            return
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        if self._first <= n < self._end:
            self._range = recorder.record_function(f"ProfilerStep#{n}")
            self._range.__enter__()

    def _yield_to_program(self, why: str) -> None:
        """The program starts torch.profiler while this capture records (on the program's thread): stop here,
        so the two never record at once; the program's profiler has priority."""
        stamp = time.strftime("%H:%M:%S")
        self.note("preempted", f"the program started torch.profiler at {stamp}; this capture stopped there so "
                  f"that only one records ({why.split(':', 1)[0]})")
        log.warning("xpuprof: on-demand capture %s stopped: the program started torch.profiler, which has priority",
                    self.request.describe())
        self.stop("the program started torch.profiler")
        if self._prof is not None:
            self._stop_profile(self._prof)

    def _stop_profile(self, prof) -> None:
        """Metadata in, profile stopped: once, from the capture thread or the program's (see _yield_to_program)."""
        with self._stop_lock:
            if self._stopped or not self._recording:
                return
            self._stopped = True
            req = self.request
            if self.cancel.is_set():
                got = (f"{max(0, steps.current() - self._first)} of {req.iterations} iterations" if req.by_iterations
                       else f"{int((time.monotonic() - self._t0) * 1e3)} of {req.duration_ms} ms")
                self.note("stopped_early", f"{self.cancel_reason}: recorded {got}")
                log.warning("xpuprof: on-demand capture %s stopped early (%s): recorded %s", req.describe(),
                            self.cancel_reason, got)
            with self._lock:
                self._open_notes = False
                info = req.summary()
                info.update(started_ms=self._started_ms, stopped_ms=time.time_ns() // 1_000_000, pid=os.getpid())
                if req.by_iterations:
                    info.update(first_iteration=self._first, last_iteration=self._end - 1)
                if self._notes:
                    info["notes"] = dict(self._notes)
                if self._ignored:
                    info["requests_ignored"] = list(self._ignored)
            prof.add_metadata("ondemand", info)
            self._recording = False
            prof.stop()

    def _finish(self, prof) -> None:
        self._stop_profile(prof)
        self.path = self._write(prof)
        log.info("xpuprof: on-demand trace written to %s (%s)", self.path, self.request.describe())

    def _write(self, prof):
        req = self.request
        if req.log_file is not None:
            return tracefile.write_confined(prof, req.log_file, self.allowed_dir or "/tmp/")
        return tracefile.write_in_dir(prof, self.out_dir or ".", exec_trace_name())


class yielding_gil:
    """While the capture thread works (backend selection, building and writing the trace: Python-heavy), the
    training thread still gets the GIL back quickly after each of its operators (torch releases the GIL
    inside an op and must take it back after): Python's switch interval is lowered from its 5 ms default,
    and restored after (the program's own value, whatever it was)."""

    INTERVAL_S = 0.0005

    def __enter__(self):
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved, self.INTERVAL_S))
        return self

    def __exit__(self, *exc):
        if sys.getswitchinterval() == min(self._saved, self.INTERVAL_S):  # nobody changed it meanwhile
            sys.setswitchinterval(self._saved)
        return False


def _wait_for_torch_import() -> None:
    """A program importing torch right now (the capture may start while ``import torch`` runs on the main
    thread): wait for it to finish. Python's per-module import lock does the waiting; torch is never
    imported here when the program has not begun importing it."""
    module = sys.modules.get("torch")
    if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False):
        import importlib

        importlib.import_module("torch")


def exec_trace_name() -> str:
    """The file name of an ``xpuprof exec`` trace: the project's one naming rule (``trace_file_name``)."""
    return trace_file_name()
