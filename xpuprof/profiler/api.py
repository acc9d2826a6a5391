"""``xpuprof.profile``: torch.profiler's API and schedule, driving recording cycles.

``profile`` selects its sources once (``selection``), then follows its schedule through torch's
action state machine: each cycle is configured (warmup), started (active) and stopped
(``cycle``), its trace built (``assemble``), and ``on_trace_ready`` called at the end of each
active cycle. One profile records in a process at a time.
"""
from __future__ import annotations

import enum
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ..backends import registry
from ..backends.base import Backend
from ..config.options import ExperimentalConfig, ProfilerConfig
from ..host import recorder
from .cycle import RecordingCycle
from .selection import (_check_metrics_collectable, explain_host_only, parse_activities, plan_collectors,
                        select_backends, with_metric_activities)

if TYPE_CHECKING:
    from ..trace.build.builder import TraceBuilder

log = logging.getLogger("xpuprof")


# ----------------------------------------------------------------------------- schedule
class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """torch.profiler.schedule: skip ``skip_first`` steps, then cycles of wait/warmup/active steps.

    ``repeat`` = 0 cycles forever. The last active step of a cycle returns RECORD_AND_SAVE.
    """
    for label, value, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                                ("repeat", repeat, 0), ("skip_first", skip_first, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"schedule {label} must be an integer >= {least}, got {value!r}")
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    schedule_fn.params = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    return schedule_fn


def _always_record(_step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


# ----------------------------------------------------------------------------- trace files
def trace_file_name(worker_name: str, *, rank: int | None = None, use_gzip: bool = False,
                    pid: int | None = None, ts_ns: int | None = None) -> str:
    """``<worker>.<pid>[.rank<r>].<ts>.pt.trace.json[.gz]`` (TensorBoard's plugin globs *.pt.trace.json*)."""
    worker = str(worker_name).replace(os.sep, "_").replace("/", "_") or "worker"
    pid = os.getpid() if pid is None else pid
    ts = time.time_ns() if ts_ns is None else ts_ns
    rank_part = f".rank{int(rank)}" if rank is not None else ""
    return f"{worker}.{pid}{rank_part}.{ts}.pt.trace.json" + (".gz" if use_gzip else "")



def _rank_of(builder: TraceBuilder | None) -> int | None:
    info = builder.distributed_info if builder is not None else None
    if info is None and builder is not None:
        info = builder.metadata.get("distributedInfo")
    if info is None:
        from .assemble import launcher_distributed_info

        info = launcher_distributed_info()
    if isinstance(info, Mapping) and info.get("rank") is not None:
        return int(info["rank"])
    env = os.environ.get("RANK")  # a bare RANK without WORLD_SIZE still names the file
    return int(env) if env is not None and env.strip().isdigit() else None


def _store_rank(builder: TraceBuilder) -> tuple[int | None, str]:
    """The rank a store partition gets and where it came from (None: the builder's distributedInfo)."""
    info = builder.distributed_info if builder.distributed_info is not None else builder.metadata.get("distributedInfo")
    if isinstance(info, Mapping) and isinstance(info.get("rank"), int):
        return None, "distributedInfo"
    rank = _rank_of(builder)
    return (rank, "environment") if rank is not None else (None, "default")


def trace_handler(dir_name, worker_name: str | None = None, use_gzip: bool = False) -> Callable[["profile"], Path]:
    """An ``on_trace_ready`` callback writing each trace into ``dir_name`` (torch's tensorboard_trace_handler)."""
    directory = Path(dir_name)

    def handler(prof: "profile") -> Path:
        import socket  # the host name of a file name: not needed at `import xpuprof`

        directory.mkdir(parents=True, exist_ok=True)
        name = trace_file_name(worker_name or prof.worker_name or socket.gethostname(),
                               rank=_rank_of(prof.builder), use_gzip=use_gzip)
        return prof.export_chrome_trace(directory / name)

    return handler


# ----------------------------------------------------------------------------- profile
_running: "profile | None" = None  # the one profile recording in this process
_running_lock = threading.Lock()


class profile:
    """Profile a block or a loop of steps; see the module docstring and the README."""

    def __init__(self, activities=None, schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], Any] | None = None,
                 experimental_config: ExperimentalConfig | None = None, record_shapes: bool = False,
                 with_stack: bool = False, backends: Iterable[str] | None = None,
                 config: ProfilerConfig | None = None, worker_name: str | None = None) -> None:
        from ..deadline import default_deadline_s

        default_deadline_s()  # a bad XPUPROF_PLUGIN_DEADLINE_S: one DeadlineConfigError before anything starts
        base = config if config is not None else ProfilerConfig()
        changes: dict[str, Any] = {}
        if activities is not None or config is None:
            changes["activities"] = parse_activities(activities)
        if experimental_config is not None:
            changes["experimental"] = experimental_config
        if record_shapes:
            changes["record_shapes"] = True
        if with_stack:
            changes["with_stack"] = True
        if backends is not None:
            if isinstance(backends, str):
                backends = [backends]
            changes["backends"] = [str(b) for b in backends]
        self.config = base.with_changes(**changes) if changes else base
        # metric names served by collectors leave the config the backends see
        self.config, self._collector_plan = plan_collectors(self.config)
        self.config = with_metric_activities(self.config)
        for name in self.config.backends or ():
            registry.get_backend_class(name, self.config)  # unknown backend name: fail before anything starts
        self.schedule = schedule or _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.worker_name = worker_name
        self.metadata: dict[str, Any] = {}  # merged into every trace (e.g. distributedInfo from a launcher)
        self.builder: TraceBuilder | None = None  # the last completed trace
        self.last_trace_path: Path | None = None
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._backends: list[Backend] | None = None
        self._recording = RecordingCycle(self.config, self._collector_plan)  # the sources of the current cycle
        self._cycle = 0
        self._step_rf: recorder.record_function | None = None
        self._started = False
        self._block_error: str | None = None
        self._no_device_reasons: dict[str, str] = {}  # device work asked for, no backend ran: why

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._block_error = f"{exc_type.__name__}: {exc}"
        self.stop()
        return False

    # ------------------------------------------------------------------ public API
    def start(self) -> None:
        global _running
        if self._started:
            raise RuntimeError("this profile is already started")
        with _running_lock:
            other = _running
            if other is not None and other is not self:
                # One recorder per process: a second session would uninstall the first one's recorder at
                # its stop and both traces would silently miss events. Refuse it, loudly, before anything.
                raise RuntimeError(
                    "another xpuprof.profile() is already running in this process (started at step "
                    f"{other.step_num}, activities {sorted(a.value for a in other.config.activities)[:4]}...); "
                    "nested or interleaved profiles are not supported: stop it first, or record both parts in "
                    "one profile (use record_function ranges or a schedule to separate them)")
            _running = self
        self._started = True
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        try:
            self._select()  # a metric nothing can collect (or a named backend missing) fails here, at start
            self._transit(ProfilerAction.NONE, self.current_action)
        except BaseException:
            # Nothing may stay half-started: no recorder, no tracer, no running session.
            self._recording.abort()
            self._started = False
            self._release_running()
            raise
        self._enter_step()

    def stop(self) -> None:
        if not self._started:
            return
        self._exit_step()
        try:
            self._transit(self.current_action, None)
        finally:
            self._started = False
            self._release_running()

    def _release_running(self) -> None:
        global _running
        with _running_lock:
            if _running is self:
                _running = None

    def step(self) -> None:
        """Mark the end of one training/benchmark step (drives the schedule)."""
        if not self._started:
            raise RuntimeError("profile.step() called before start()")
        self._exit_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._enter_step()

    def export_chrome_trace(self, path) -> Path:
        """Write the last completed trace (``.json`` or ``.json.gz``)."""
        if self.builder is None:
            raise RuntimeError("no trace to export yet: the profiler has not completed a recording cycle")
        from ..trace.write.chrome import write_chrome_trace  # loaded by _prepare_trace already

        out = write_chrome_trace(self.builder, path, legacy_categories=not self.config.generic_categories)
        self.last_trace_path = out
        log.info("xpuprof: trace written to %s", out)
        return out

    def export_parquet(self, path, *, replace: bool = False) -> Path:
        """Write the last completed trace as this rank's partition of the trace store at ``path``
        (docs/store.md); returns the partition's directory. Needs pyarrow (``xpuprof[scale]``)."""
        if self.builder is None:
            raise RuntimeError("no trace to export yet: the profiler has not completed a recording cycle")
        from ..trace.write.parquet import write_store

        rank, source = _store_rank(self.builder)
        out = write_store(self.builder, path, rank=rank, rank_source=source, replace=replace,
                          legacy_categories=not self.config.generic_categories)
        self.last_trace_path = out
        log.info("xpuprof: trace stored as %s", out)
        return out

    def key_averages(self, group_by: str = "name"):
        """A summary of the last trace (``.table(sort_by=..., row_limit=...)``).

        ``group_by="name"``: every category's slices by name (kernels, runtime calls, ranges, ops).
        ``group_by="op"``: torch's operator table: self/total host time and the device time of the
        kernels each op launched (self) and its nested ops launched (total)."""
        if group_by not in ("name", "op"):
            raise ValueError(f"key_averages(group_by={group_by!r}): valid values are 'name' and 'op'")
        if self.builder is None:
            raise RuntimeError("no trace yet: key_averages() needs a completed recording cycle")
        if group_by == "op":
            from ..analysis.ops import OpSummary
            return OpSummary.from_builder(self.builder)
        from ..analysis.summary import Summary
        return Summary.from_builder(self.builder)

    def add_metadata(self, key: str, value: Any) -> None:
        """A top-level key for every trace this profile writes."""
        self.metadata[str(key)] = value

    # ------------------------------------------------------------------ steps
    def _enter_step(self) -> None:
        if self.record_steps:
            self._step_rf = recorder.record_function(f"ProfilerStep#{self.step_num}")
            self._step_rf.__enter__()

    def _exit_step(self) -> None:
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None

    # ------------------------------------------------------------------ state machine (torch's action map)
    def _transit(self, prev: ProfilerAction, cur: ProfilerAction | None) -> None:
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if cur is None:  # stop()
            if prev == A.WARMUP:
                self._start_trace()
                self._stop_trace()
            elif prev in recording:
                self._stop_trace()
                self._trace_ready()
            return
        if prev == A.NONE:
            if cur == A.WARMUP:
                self._prepare_trace()
            elif cur in recording:
                self._prepare_trace()
                self._start_trace()
        elif prev == A.WARMUP:
            if cur in recording:
                self._start_trace()
            elif cur == A.NONE:
                log.warning("xpuprof: incorrect schedule: WARMUP followed by NONE")
                self._start_trace()
                self._stop_trace()
        elif prev == A.RECORD:
            if cur == A.NONE:
                log.warning("xpuprof: incorrect schedule: RECORD followed by NONE")
                self._stop_trace()
            elif cur == A.WARMUP:
                log.warning("xpuprof: incorrect schedule: RECORD followed by WARMUP")
                self._stop_trace()
        elif prev == A.RECORD_AND_SAVE:
            self._stop_trace()
            self._trace_ready()
            if cur == A.WARMUP:
                self._prepare_trace()
            elif cur in recording:
                self._prepare_trace()
                self._start_trace()

    # ------------------------------------------------------------------ one cycle
    def _select(self) -> None:
        """Choose the backends once and check that the requested metrics can be collected: at start(),
        so a bad request fails there, not after a schedule's wait steps already ran."""
        if self._backends is None:
            backends = select_backends(self.config)
            log.debug("xpuprof: backends %s", [b.name for b in backends])
            _check_metrics_collectable(self.config, backends)
            self._backends = backends
            self._no_device_reasons = explain_host_only(self.config, self._backends)

    def check(self) -> None:
        """What start() checks before anything runs, without starting: the backends can be chosen and the
        requested metric names are known and collectable (``xpuprof run --dry-run`` calls it)."""
        self._select()

    def _prepare_trace(self) -> None:
        # The trace stages load here, before anything records, not at `import xpuprof` (kept light) nor at
        # stop or export (which may run from atexit or a signal handler).
        from . import assemble  # noqa: F401
        from ..trace.write import chrome  # noqa: F401

        self._select()
        self._recording.prepare(self._backends)

    def _start_trace(self) -> None:
        if not self._recording.sessions and self._backends is None:
            self._prepare_trace()
        self._recording.start()

    def _stop_trace(self) -> None:
        cycle = self._recording
        if not cycle.recording:
            return
        window, errors = cycle.stop()
        from .assemble import build_trace  # loaded by _prepare_trace already

        self.builder = build_trace(cycle, window, errors, iteration=self._cycle, block_error=self._block_error,
                                   no_device_reasons=self._no_device_reasons, metadata=self.metadata)
        cycle.clear()
        self._cycle += 1

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)
