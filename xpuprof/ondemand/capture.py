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

An iteration request that arrives before the process's first step (a request picked up while torch still
imports) waits for that step, up to ``first_step_wait_s()`` (``XPUPROF_ONDEMAND_FIRST_STEP_WAIT_S``, default
60 s), before Kineto's fallback to a duration; the trace says which it did (``first_step_wait_ms``, or a
``notes.iterations`` line).

Everything the trace does not hold that was asked for is said in its ``ondemand`` metadata (``notes``:
keys not honoured, a late start, a capture cut short at exit; ``requests_ignored``: requests that arrived
while it was pending, recording, stopping or building, until the moment its metadata is sealed, just before
the write). The requester hears where the trace was written, or why not (``answers``).
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
from . import answers, mainthread, steps, tracefile
from .request import CaptureRequest

log = logging.getLogger("xpuprof.ondemand")

TORCH_START_TIMEOUT_S = 3.0  # the main thread must reach a bytecode boundary by then
TORCH_STOP_TIMEOUT_S = 60.0
STEP_IDLE_TIMEOUT_S = 600.0  # waiting for a start iteration: give up when the program stopped stepping
KINETO_LOG_LEVEL_ENV = "KINETO_LOG_LEVEL"
LATE_START_MS = 100  # a start this much after the requested time is noted in the trace
ARM_AHEAD = 2  # iteration captures start recording this many step boundaries before their first iteration
FIRST_STEP_WAIT_ENV = "XPUPROF_ONDEMAND_FIRST_STEP_WAIT_S"
DEFAULT_FIRST_STEP_WAIT_S = 60.0
CANCEL_REASON = "cancelled by xpuprof trigger --cancel"


def first_step_wait_s() -> float:
    """How long an iteration request waits for the process's first step (``XPUPROF_ONDEMAND_FIRST_STEP_WAIT_S``,
    seconds >= 0; default 60: a program starts stepping after its imports, model and data loading)."""
    raw = os.environ.get(FIRST_STEP_WAIT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_FIRST_STEP_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        log.warning("xpuprof: %s=%r is not a number of seconds >= 0; waiting %g s for the first step",
                    FIRST_STEP_WAIT_ENV, raw, DEFAULT_FIRST_STEP_WAIT_S)
        return DEFAULT_FIRST_STEP_WAIT_S
    return value


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
    def __init__(self, request: CaptureRequest, *, out_dir: str | None = None, allowed_dir: str | None = None,
                 out_given: bool = False, carried=None, on_unwritten=None, announce: bool = False,
                 trace_format: str = "json") -> None:
        """``out_dir``: exec traces (and, with ``out_given``, daemon requests too) go there, named by the one
        rule in ``trace_format`` (exec's ``--format``); ``allowed_dir``: the confinement directory of daemon
        requests. ``carried()``: requests an earlier capture listed but wrote no trace for;
        ``on_unwritten(entries)``: hands this one's over when it writes none. ``announce``: say the written path
        on stderr (``xpuprof exec``). A request's own file name says its format (``.pftrace``: Perfetto)."""
        self.request = request
        self.out_dir = out_dir  # exec traces: the user's output directory
        self.allowed_dir = allowed_dir  # daemon traces: the confinement directory
        self.cancel = threading.Event()  # stop now: process exit, --cancel
        self.cancel_reason = ""
        self.done = threading.Event()
        self.path = None  # the trace written
        self.error: str | None = None
        self._announce = announce
        self._carried = carried
        self._on_unwritten = on_unwritten
        self._lock = threading.Lock()
        self._ignored: list[dict] = []
        self._notes = dict(request.notes)
        self._open_notes = True  # requests and notes still reach the trace (until its metadata is sealed)
        self._recording = False
        self._first = self._end = -1
        self._range = None  # the ProfilerStep# range open on the stepping thread
        self._prof = None
        self._info: dict = {}
        self._thread: threading.Thread | None = None
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._in_dir = request.log_file is None or (out_given and out_dir is not None)
        if self._in_dir:
            self.planned_path = os.path.join(out_dir or ".", trace_file_name(default_worker_name(),
                                                                             format=trace_format))
            if request.log_file is not None and request.log_file_named:
                self._notes["ACTIVITIES_LOG_FILE"] = (f"{request.log_file} not used: xpuprof exec --out {out_dir} "
                                                      "holds this process's traces, named by the one naming rule")
            elif request.log_file is not None and "ACTIVITIES_LOG_FILE" in self._notes:  # rejected: say where
                self._notes["ACTIVITIES_LOG_FILE"] = self._notes["ACTIVITIES_LOG_FILE"].replace(
                    f"written to {request.log_file} instead", f"written to {self.planned_path} (xpuprof exec --out)")
        else:
            self.planned_path = request.log_file

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
        """``pause`` / ``resume`` while recording, ``cancel`` (``control.apply``); the outcome."""
        from . import control

        with self._stop_lock:  # never against a stop in progress
            if command == "cancel":
                if self._stopped:
                    return control.NOT_RECORDING
                self.stop(CANCEL_REASON)
                return control.STOPPED if self._recording else control.CANCELLED
            if not self._recording or self._stopped or self._prof is None:
                return control.NOT_RECORDING
            return control.toggle(self._prof, command)

    def note_ignored(self, request: CaptureRequest, why: str) -> bool:
        """List ``request`` in this capture's trace; False once its metadata is sealed (the agent then starts
        a new capture for it)."""
        entry = {"trace_id": request.trace_id or None, "received_ms": request.received_ms, "why": why,
                 "asked": request.describe()}
        with self._lock:
            if self._open_notes:
                self._ignored.append(entry)
                return True
            return False

    def note(self, key: str, text: str) -> None:
        with self._lock:
            if self._open_notes:
                self._notes[key] = text

    # ------------------------------------------------------------------ the capture thread
    def run(self) -> None:
        torch_ops.record_other_threads(True, runner=_MainThreadOps(), yield_to=self._yield_to_program)
        try:
            if self._carried is not None:
                carried = self._carried()
                with self._lock:
                    self._ignored[:0] = carried
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
            self._conclude()
            self.done.set()

    def _conclude(self) -> None:
        """Tell the requester how it ended; hand the listed requests on when no trace holds them."""
        req = self.request
        ident = req.trace_id or None
        if self.path is not None:
            answers.send(req.answer_to, answers.WRITTEN, trace_id=ident, path=str(self.path))
            if self._announce:
                say_line(f"xpuprof exec: wrote {self.path}")
            return
        with self._lock:
            self._open_notes = False
            unwritten = list(self._ignored)
        if unwritten and self._on_unwritten is not None:
            self._on_unwritten(unwritten)
        if self.error is not None:
            answers.send(req.answer_to, answers.FAILED, trace_id=ident, why=self.error)
            if self._announce:
                say_line(f"xpuprof exec: no trace written: {self.error}")
        elif self.cancel_reason == CANCEL_REASON:
            answers.send(req.answer_to, answers.CANCELLED, trace_id=ident, why=CANCEL_REASON)
        else:
            why = self.cancel_reason or "the capture ended before it recorded"
            answers.send(req.answer_to, answers.FAILED, trace_id=ident, why=f"nothing recorded: {why}")

    def _run(self) -> None:
        req = self.request
        _wait_for_torch_import()
        prof = profile(config=req.config, worker_name=default_worker_name())
        prof.check()  # the warm-up: backends chosen and probed, metric names checked, before the start
        self._prof = prof
        if req.config.profile_memory and torch_ops.torch_if_imported() is not None:
            self.note("PROFILE_PROFILE_MEMORY", "torch records [memory] events only in its per-thread mode: "
                      "the main thread's ops and memory events are recorded, other threads' ops are not")
        if req.by_iterations and steps.current() < 0 and req.source != "exec":
            if not self._wait_for_first_step():
                return
        if req.by_iterations:
            if not self._start_at_iteration(prof):
                return
        else:
            if not self._start_at_time(prof):
                return
            self.cancel.wait(max(0.0, req.duration_ms / 1e3 - (time.monotonic() - self._t0)))
        self._finish(prof)

    def _wait_for_first_step(self) -> bool:
        """An iteration request before the first step: wait for it (bounded), then Kineto's rule. False when
        cancelled meanwhile."""
        req = self.request
        limit = first_step_wait_s()
        t0 = time.monotonic()
        first = steps.wait_until(lambda n: n >= 0, cancel=self.cancel, idle_timeout_s=STEP_IDLE_TIMEOUT_S,
                                 timeout_s=limit)
        waited_ms = int((time.monotonic() - t0) * 1e3)
        if first is not None:
            self._info["first_step_wait_ms"] = waited_ms
            log.info("xpuprof: on-demand capture %s waited %d ms for the process's first step", req.describe(),
                     waited_ms)
            return True
        if self.cancel.is_set():
            log.warning("xpuprof: on-demand capture %s cancelled while waiting for the first step: %s",
                        req.describe(), self.cancel_reason)
            return False
        # Kineto's rule: an iteration request to a program that does not step runs by duration
        self.note("iterations", f"{req.iterations} iterations were asked for, but this process counted no step "
                  f"(no torch optimizer step, no xpuprof.step()) within {limit:g} s of the request "
                  f"({FIRST_STEP_WAIT_ENV}): recorded {req.duration_ms} ms instead, as Kineto does")
        req.by_iterations = False
        return True

    def _start_at_time(self, prof) -> bool:
        req = self.request
        if req.start_time_ms is not None:
            wait_s = (req.start_time_ms - time.time_ns() / 1e6) / 1e3
            if wait_s > 0 and self.cancel.wait(wait_s):
                log.warning("xpuprof: on-demand capture %s cancelled before it started: %s", req.describe(),
                            self.cancel_reason)
                return False
        if not self._begin(prof):
            return False
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
        if not self._begin(prof):
            return False
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

    def _begin(self, prof) -> bool:
        """Start recording (the program's torch.profiler may pre-empt a started capture, never a starting one);
        False when the capture was cancelled before it could."""
        _wait_for_torch_import()
        with self._stop_lock:
            if self.cancel.is_set():
                log.warning("xpuprof: on-demand capture %s cancelled before it started: %s", self.request.describe(),
                            self.cancel_reason)
                return False
            quiet_kineto(prof.start)()
            self._t0 = time.monotonic()
            self._started_ms = time.time_ns() // 1_000_000
            self._recording = True
        log.info("xpuprof: on-demand capture recording (%s)", self.request.describe())
        return True

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
        """Profile stopped, its ``ondemand`` metadata drafted: once, from the capture thread or the program's
        (see _yield_to_program). Requests arriving meanwhile are still listed (``_seal`` adds them)."""
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
                info = {**req.summary(), **self._info}
                info.update(started_ms=self._started_ms, stopped_ms=time.time_ns() // 1_000_000, pid=os.getpid())
                if req.by_iterations:
                    info.update(first_iteration=self._first, last_iteration=self._end - 1)
                self._info = info
            prof.add_metadata("ondemand", self._sealed_info(final=False))
            self._recording = False
            prof.stop()

    def _sealed_info(self, *, final: bool) -> dict:
        """The ``ondemand`` metadata as it stands; ``final``: no request or note is added after it."""
        with self._lock:
            if final:
                self._open_notes = False
            info = dict(self._info)
            if self._notes:
                info["notes"] = dict(self._notes)
            if self._ignored:
                info["requests_ignored"] = list(self._ignored)
            return info

    def _finish(self, prof) -> None:
        self._stop_profile(prof)
        builder = getattr(prof, "builder", None)
        info = self._sealed_info(final=True)  # from here on, a new request starts a new capture
        if builder is not None:
            builder.set_metadata("ondemand", info)
        self.path = self._write(prof)
        log.info("xpuprof: on-demand trace written to %s (%s)", self.path, self.request.describe())

    def _write(self, prof):
        req = self.request
        if not self._in_dir:
            return tracefile.write_confined(prof, req.log_file, self.allowed_dir or "/tmp/")
        directory, name = os.path.split(self.planned_path)
        return tracefile.write_in_dir(prof, directory or ".", name)


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


def exec_trace_name(trace_format: str = "json") -> str:
    """The file name of an ``xpuprof exec`` trace: the project's one naming rule (``trace_file_name``)."""
    return trace_file_name(format=trace_format)


def say_line(line: str) -> None:
    """One line on the process's stderr, straight to fd 2 (it may run at exit, after sys.stderr is gone)."""
    try:
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
