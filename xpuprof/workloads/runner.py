"""Run one benchmark point: build the workload, warm it up unprofiled, then profile the measured
iterations ``repeats`` times (one trace per recording cycle) and time every iteration on the host."""
from __future__ import annotations

import warnings

import contextlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .. import rank as rank_env
from ..config.yamlconfig import RunPoint
from .interrupt import InterruptGuard, RunInterrupted


@dataclass
class PointResult:
    point: RunPoint
    workload: str = ""
    device: str = ""
    info: dict = field(default_factory=dict)
    traces: list[Path] = field(default_factory=list)
    iteration_ns: list[int] = field(default_factory=list)
    error: str | None = None
    interrupted: RunInterrupted | None = None  # a signal stopped this point (see workloads.interrupt)
    # Each written trace's rows, taken from memory (None: read that trace back to summarize it).
    tables: list = field(default_factory=list)

    def iteration_stats(self) -> dict[str, float]:
        if not self.iteration_ns:
            return {}
        a = np.asarray(self.iteration_ns, dtype=np.float64) / 1e6
        return {"count": int(len(a)), "mean_ms": float(a.mean()), "median_ms": float(np.median(a)),
                "min_ms": float(a.min()), "max_ms": float(a.max()), "std_ms": float(a.std())}


class TraceWriteError(OSError):
    """A point's trace could not be written (a full disk, ...): the message names the file."""


def trace_dir(point: RunPoint, multi_point: bool) -> Path:
    return point.output.dir / point.slug if multi_point else point.output.dir


def store_name(worker_name: str, k: int) -> str:
    """The store of a point's k-th trace: every rank of a distributed run writes its partition there."""
    worker = str(worker_name).replace("/", "_") or "worker"
    return f"{worker}.store" if k == 0 else f"{worker}.{k}.store"


def store_worker(point: RunPoint) -> str:
    """The worker part of a point's store names: the worker given, else the run's name (one store that
    every rank's process shares; the default worker, <host>_<pid>, differs per process)."""
    return point.output.worker_name or point.name


def store_handler(directory: Path, worker_name: str) -> Callable:
    """An ``on_trace_ready`` callback writing each trace into its own store (``store_name``)."""
    count = itertools.count()

    def handler(prof) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        return prof.export_parquet(directory / store_name(worker_name, next(count)))

    return handler


def run_point(point: RunPoint, *, multi_point: bool = False, on_iteration: Callable[[], None] | None = None,
              on_repeat: Callable[[int], None] | None = None, guard: InterruptGuard | None = None,
              result: PointResult | None = None, probe=None) -> PointResult:
    """Raises on workload/profiler errors; the caller records them per point. ``result``: filled as the
    point runs, so a caller that passes one keeps what was measured before an error (iteration times,
    traces written). ``probe``: the machine probe (``analysis.machine_probe.GuardedProbe``), its
    ``before()`` right before the first measured iteration and ``after()`` right after the last.

    With a ``guard``, SIGINT/SIGTERM cut the workload (build, warmup or an iteration), the cycle's trace
    is written marked ``"interrupted"``, and the result comes back with ``interrupted`` set; a signal that
    landed where nothing could be cut (building or writing a trace) marks the result all the same.
    """
    result = PointResult(point) if result is None else result
    try:
        _run_point(point, result, multi_point, on_iteration, on_repeat, guard, probe)
    except RunInterrupted as exc:
        result.interrupted = exc
        if exc.forced:
            result.error = f"abandoned on a second {exc.signal_name} while {guard.phase if guard else 'running'}"
    if result.interrupted is None and guard is not None and guard.signum is not None:
        result.interrupted = guard.interrupted
    return result


def _run_point(point: RunPoint, result: PointResult, multi_point: bool, on_iteration, on_repeat,
               guard: InterruptGuard | None, probe=None) -> None:
    from ..host.recorder import record_function
    from ..profiler import profile, schedule, trace_handler

    from . import build_workload

    cut = guard.cuttable if guard is not None else contextlib.nullcontext

    def phase(name: str) -> None:
        if guard is not None:
            guard.phase = name

    phase("building the workload")
    with cut():
        workload = build_workload(point.workload, point.device)
    result.workload, result.device, result.info = workload.name, workload.device, dict(workload.info)
    phase("warming up")
    for _ in range(point.warmup):
        with cut():
            workload.step()
            workload.sync()

    dist = rank_env.distributed_info()
    if point.output.format == "parquet":
        handler = store_handler(trace_dir(point, multi_point), store_worker(point))
    else:
        handler = trace_handler(trace_dir(point, multi_point), worker_name=point.output.worker_name,
                                use_gzip=point.output.use_gzip, format=point.output.format)

    def ready(prof) -> None:
        if guard is not None and guard.signum is not None:  # landed while the trace was built: it says so too
            prof.builder.set_metadata("interrupted", guard.signal_name)
        phase("writing a trace")
        try:
            path = handler(prof)
        except OSError as exc:  # a full disk: name the file (the write error alone does not)
            from ..outputs import write_error_line

            raise TraceWriteError(f"trace not written: {write_error_line(trace_dir(point, multi_point), exc)}") \
                from exc
        if path is not None:
            from ..analysis.event_table import EventTable

            result.traces.append(Path(path))
            result.tables.append(EventTable.from_table(prof.builder.freeze()))
        phase("recording")

    config = point.profiler_config() if probe is not None else None
    # the machine probe times the host right next to the measured iterations, inside the profiled window
    # (nothing of it is recorded: plain numpy and Python) - outside it when Python calls are traced
    probe_inside = probe is not None and not config.traces_python_calls
    for repeat in range(point.repeats):
        if guard is not None:
            guard.check()  # a signal during the last repeat's trace: no new repeat starts
        if probe is not None and not probe_inside and repeat == 0:
            probe.before()
        with warnings.catch_warnings():  # a config's warmup: 0 is chosen, not a torch.profiler slip to warn about
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup", category=UserWarning)
            sched = schedule(**point.schedule) if point.schedule else None
        interrupted: RunInterrupted | None = None
        phase("recording")
        with profile(config=point.profiler_config(), schedule=sched, on_trace_ready=ready,
                     worker_name=point.output.worker_name) as prof:
            prof.add_metadata("benchmark", {"name": point.name, "point": point.params, "label": point.label,
                                            "repeat": repeat, "workload": workload.name, "device": workload.device})
            if dist is not None:
                prof.add_metadata("distributedInfo", dist)
            # a built-in's work per step (flops, bytes) rides on each iteration's range: the sim sizes its
            # kernels from it, and a reader of the trace can compute rates
            work = {k: workload.info[k] for k in ("flops", "bytes") if isinstance(workload.info.get(k), (int, float))}
            try:
                if probe_inside and repeat == 0:
                    probe.before()
                for i in range(point.iterations):
                    t0 = time.perf_counter_ns()
                    with record_function(workload.name, {"iteration": i, "repeat": repeat, **work}):
                        with cut():  # a signal ends this range here; what was recorded is kept
                            workload.step()
                            workload.sync()
                    result.iteration_ns.append(time.perf_counter_ns() - t0)
                    if sched is not None:
                        prof.step()
                    if on_iteration is not None:
                        on_iteration()
                    if guard is not None:
                        guard.check()  # a signal that landed outside the workload (a trace write) stops here
                if probe_inside and repeat == point.repeats - 1:
                    probe.after()
                phase("building a trace")  # profile's exit builds (and ready() writes) the last cycle's trace
            except RunInterrupted as exc:
                interrupted = exc
                prof.add_metadata("interrupted", exc.signal_name)
        if interrupted is not None:
            raise interrupted
        if probe is not None and not probe_inside and repeat == point.repeats - 1:
            probe.after()
        if prof.trace_ready_errors:  # a cycle's trace the disk refused at a step: the point says so
            raise TraceWriteError(prof.trace_ready_errors[0].split(": ", 1)[-1])
        if on_repeat is not None:
            on_repeat(repeat)
