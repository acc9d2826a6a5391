"""Kineto's on-demand config text -> one capture request (what to record, when, and where to write it).

The text is what ``dyno gputrace`` sends (``ACTIVITIES_LOG_FILE``, ``PROFILE_START_TIME`` +
``ACTIVITIES_DURATION_MSECS``, or ``PROFILE_START_ITERATION`` + ``PROFILE_START_ITERATION_ROUNDUP`` +
``ACTIVITIES_ITERATIONS``, the ``PROFILE_*`` switches, ``ACTIVITY_TYPES``, the XPU metric keys) and
means what it means to Kineto (``config.kineto``, parsed as an on-demand config: the log file must lie
under ``/tmp/`` or ``KINETO_ONDEMAND_TRACE_DIR``). Differences, each said in the trace and the log:

* A request without ``PROFILE_START_TIME`` starts as soon as the capture is ready, not after Kineto's
  warm-up period (Kineto warms CUPTI up; our backends are ready once selected). An explicit start
  time is honoured: the capture is prepared before it and starts at it; one that has passed when the
  request is picked up starts at once, and the trace says how late (Kineto drops such a request).
* What xpuprof cannot honour (unknown keys, a log file outside the trace directory) is listed in the
  trace's ``ondemand.notes``; a memory-snapshot request (``PROFILE_MEMORY``) or a config that fails to parse is
  refused with one line naming the problem. ``PROFILE_PROFILE_MEMORY`` records torch's ``[memory]`` events
  (and Level Zero allocations without torch), as ``profile(profile_memory=True)`` does.
* Without ``ACTIVITIES_LOG_FILE`` (``xpuprof trigger``'s default), or with one outside the trace directory, the
  trace is ``<trace dir>/<host>_<pid>.<ts>.pt.trace.json``: the project's one naming rule, which ``xpuprof
  report DIR``, TensorBoard and HTA find (Kineto's own default is ``libkineto_activities_<pid>.json``).

Bounds (anyone who can reach dynolog's port writes the text): at most ``MAX_CONFIG_BYTES`` (64 KiB) of text;
a ``PROFILE_START_TIME`` at most ``START_HORIZON_S`` (one hour) ahead; kernel name patterns
(``XPUPTI_INCLUDE_KERNELS`` / ``XPUPTI_EXCLUDE_KERNELS``) matched with RE2, in time linear in the name, and
refused when RE2 cannot run them so. ``XPUPROF_ANSWER_TO`` names the ``xpuprof trigger`` to tell what became of
the request (``answers``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..config.kineto import KinetoConfig, KinetoConfigError, ondemand_trace_dir
from ..config.options import ProfilerConfig
from . import answers
from .fabric import MAX_CONFIG_BYTES

DEFAULT_DURATION_MS = 500  # Kineto's ACTIVITIES_DURATION_MSECS default
START_HORIZON_S = 3600  # a PROFILE_START_TIME further ahead is refused (it would hold the process busy)


class RequestError(ValueError):
    """A request that cannot run as sent: the message names the key and what is valid."""


@dataclass
class CaptureRequest:
    config: ProfilerConfig
    source: str  # "daemon" (dynolog or `xpuprof trigger`) or "exec" (the policy `xpuprof exec` was given)
    by_iterations: bool = False
    duration_ms: int = DEFAULT_DURATION_MS
    start_time_ms: int | None = None  # explicit PROFILE_START_TIME (epoch ms); None: as soon as ready
    warmup_ms: int = 0
    start_iteration: int = 0
    roundup: int = -1
    iterations: int = 0
    warmup_iterations: int = 0
    log_file: str | None = None  # the file this process writes (daemon requests); None: the exec rule
    trace_id: str = ""
    text: str = ""
    notes: dict[str, str] = field(default_factory=dict)  # asked for, not honoured: why
    received_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    answer_to: str | None = None  # the xpuprof trigger to tell what became of the request (answers)
    log_file_named: bool = False  # ACTIVITIES_LOG_FILE was given and honoured (else the one naming rule)

    def describe(self) -> str:
        when = (f"{self.iterations} iteration(s) from iteration {self.start_iteration}" if self.by_iterations
                else f"{self.duration_ms} ms")
        ident = f" (trace id {self.trace_id})" if self.trace_id else ""
        return f"{when}{ident}"

    def summary(self) -> dict:
        """What the trace's ``ondemand`` metadata says about the request."""
        out = {"source": self.source, "trace_id": self.trace_id or None, "received_ms": self.received_ms}
        if self.by_iterations:
            out.update(iterations=self.iterations, start_iteration=self.start_iteration,
                       start_iteration_roundup=self.roundup if self.roundup > 0 else None)
        else:
            out.update(duration_ms=self.duration_ms, requested_start_ms=self.start_time_ms)
        return out


def log_file_for_pid(path: str, pid: int) -> str:
    """Kineto's file name for ``ACTIVITIES_LOG_FILE``: ``_<pid>`` before the first ``.pt.trace.json``,
    else before the first ``.json`` (or a Perfetto trace's ``.pftrace``/``.perfetto-trace``: the trace is
    written in that format). A name with none gets ``_<pid>.json`` appended (Kineto would use it unchanged,
    so every process of a job would write the same file)."""
    for suffix in (".pt.trace.json", ".json", ".pftrace", ".perfetto-trace"):
        at = path.find(suffix)
        if at >= 0:
            return f"{path[:at]}_{pid}{path[at:]}"
    return f"{path}_{pid}.json"


def rule_file_name(directory: str, pid: int | None = None) -> str:
    """``<directory><host>_<pid>.<ts>.pt.trace.json``: the project's one naming rule (``trace_file_name``)."""
    from ..profiler.api import default_worker_name, trace_file_name

    return f"{directory}{trace_file_name(default_worker_name(pid=pid))}"


def from_kineto_text(text: str, *, source: str = "daemon", pid: int | None = None) -> CaptureRequest:
    """The request a daemon config means; ``RequestError`` when it cannot run."""
    pid = os.getpid() if pid is None else pid
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_CONFIG_BYTES:
        raise RequestError(f"the config is {size} bytes; at most {MAX_CONFIG_BYTES} are accepted (a config is a few "
                           "hundred bytes)")
    answer_to = answers.answer_name(text)
    kc = KinetoConfig()
    kc.set_on_demand(True)
    if not kc.parse(answers.without_answer_key(text)):
        raise RequestError(f"the config does not parse: {'; '.join(kc.errors)}")
    if kc.memory_profiler_enabled:
        raise RequestError("PROFILE_MEMORY=true asks for a memory snapshot (dyno gputrace --profile-memory), which "
                           "xpuprof does not take; send the request without it for an activity trace")
    if not kc.activities_enabled:
        raise RequestError("ACTIVITIES_ENABLED=false: the request asks for no activity trace")
    notes = _not_honoured(kc)
    if kc.activities_log_file_set:
        log_file = log_file_for_pid(kc.activities_log_file, pid)
    else:
        log_file = rule_file_name(ondemand_trace_dir(), pid)
        rejected = [e for e in kc.errors if e.startswith("ACTIVITIES_LOG_FILE")]
        if rejected:
            notes["ACTIVITIES_LOG_FILE"] = (f"{rejected[0]} (on-demand traces are confined to that directory, "
                                            f"as Kineto confines them): written to {log_file} instead")
    request = _timing(kc, CaptureRequest(config=_profiler_config(kc), source=source, log_file=log_file,
                                         trace_id=kc.request_trace_id, text=text, notes=notes,
                                         answer_to=answer_to,
                                         log_file_named=kc.activities_log_file_set))
    return request


def _profiler_config(kc: KinetoConfig) -> ProfilerConfig:
    try:  # kernel name patterns come from the network: matched in linear time (RE2), or refused here
        return ProfilerConfig.from_kineto(kc, linear_kernel_filters=True)
    except (KinetoConfigError, ValueError) as exc:
        raise RequestError(f"the config cannot be recorded: {exc}") from None


def _timing(kc: KinetoConfig, request: CaptureRequest) -> CaptureRequest:
    if kc.iteration_mode:
        request.by_iterations = True
        request.start_iteration = kc.profile_start_iteration
        request.roundup = kc.profile_start_iteration_roundup
        request.iterations = kc.activities_iterations
        request.warmup_iterations = kc.activities_warmup_iterations
        request.duration_ms = kc.activities_duration_ms  # Kineto's fallback when the program never steps
        return request
    if kc.activities_iterations and kc.profile_start_iteration < 0:
        request.notes["ACTIVITIES_ITERATIONS"] = (
            f"{kc.activities_iterations} iterations were asked for without PROFILE_START_ITERATION or "
            f"PROFILE_START_ITERATION_ROUNDUP, so the request is duration-based ({kc.activities_duration_ms} ms), "
            "as Kineto reads it")
    if kc.activities_duration_ms <= 0:
        raise RequestError("ACTIVITIES_DURATION_MSECS=0: a duration-based request must last at least 1 ms")
    request.duration_ms = kc.activities_duration_ms
    request.warmup_ms = kc.activities_warmup_ms
    request.start_time_ms = kc.profile_start_time_ms if kc.profile_start_time_explicit else None
    if request.start_time_ms is not None:
        ahead_s = (request.start_time_ms - time.time_ns() / 1e6) / 1e3
        if ahead_s > START_HORIZON_S:
            raise RequestError(f"PROFILE_START_TIME={request.start_time_ms} is {ahead_s:.0f} s ahead; at most "
                               f"{START_HORIZON_S} s (one hour) ahead is accepted (a pending capture holds the "
                               "process busy until it starts)")
    return request


def _not_honoured(kc: KinetoConfig) -> dict[str, str]:
    notes: dict[str, str] = {}
    if kc.unknown_keys:
        notes["unknown keys"] = f"ignored, as Kineto ignores them: {', '.join(dict.fromkeys(kc.unknown_keys))}"
    return notes
