"""``xpuprof.profile``: torch.profiler's API and schedule, driving recording cycles.

``profile`` selects its sources once (``selection``), then follows its schedule through torch's
action state machine: each cycle is configured (warmup), started (active) and stopped
(``cycle``), its trace built (``assemble``), and ``on_trace_ready`` called at the end of each
active cycle. One profile records in a process at a time.
"""
from __future__ import annotations

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
from . import torch_compat
from .cycle import RecordingCycle
from .events import FinishedCycle, use_device_of
from .pausing import Pausing
from .schedule import CLEARS_EVENTS, ProfilerAction, always_record, as_action, incorrect_schedule, schedule, warn_once
from .selection import (_check_metrics_collectable, explain_host_only, parse_activities, plan_collectors,
                        select_backends, with_metric_activities)
from .stages import load_trace_stages, start_loading
from .torch_methods import TorchResultsMethods

if TYPE_CHECKING:
    from ..trace.builder.builder import TraceBuilder

log = logging.getLogger("xpuprof")

__all__ = ["ProfilerAction", "profile", "schedule", "trace_file_name", "trace_handler"]


# ----------------------------------------------------------------------------- trace files
def default_worker_name(host: str | None = None, pid: int | None = None) -> str:
    """torch's default worker name, ``<host>_<pid>``: TensorBoard reads the node and the process from it."""
    import socket  # the host name of a file name: not needed at `import xpuprof`

    return f"{host or socket.gethostname()}_{os.getpid() if pid is None else pid}"


def trace_file_name(worker_name: str | None = None, *, use_gzip: bool = False, ts_ns: int | None = None,
                    host: str | None = None, pid: int | None = None, format: str = "json") -> str:
    """The one naming rule of every trace file xpuprof writes for a worker (``trace_handler``, ``xpuprof run``,
    the on-demand path): ``<worker>.<ts ns>.pt.trace.json[.gz]`` as torch's tensorboard_trace_handler names
    it (``<worker>.<ts ns>.pftrace`` for ``format="perfetto"``), the worker ``<host>_<pid>`` by default. The
    rank is not in the name: it is in the trace (``distributedInfo``), where TensorBoard's distributed view
    and HTA read it."""
    from ..trace.write.files import suffix

    worker = str(worker_name) if worker_name else default_worker_name(host, pid)
    worker = worker.replace(os.sep, "_").replace("/", "_")
    ts = time.time_ns() if ts_ns is None else ts_ns
    return f"{worker}.{ts}" + suffix(format, use_gzip)


def _make_trace_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # pathlib's recursion chains one error per missing parent: say it once
        raise type(exc)(exc.errno, exc.strerror, exc.filename) from None


def _store_rank(builder: TraceBuilder) -> tuple[int | None, str]:
    """The rank a store partition gets and where it came from (None: the builder's distributedInfo)."""
    info = builder.distributed_info if builder.distributed_info is not None else builder.metadata.get("distributedInfo")
    if isinstance(info, Mapping) and isinstance(info.get("rank"), int):
        return None, "distributedInfo"
    from .. import rank as rank_env

    rank = rank_env.bare_rank()  # a bare RANK without WORLD_SIZE (distributedInfo needs both) still names it
    return (rank, "environment") if rank is not None else (None, "default")


def _export_store(builder: TraceBuilder | None, path, replace: bool, vendor_categories: bool) -> Path:
    """``profile.export_parquet``: the trace as its rank's partition of the store at ``path``."""
    if builder is None:
        raise RuntimeError("no trace to export yet: the profiler has not completed a recording cycle")
    from ..analysis.report_summary import RankRows
    from ..trace.write.parquet import store_trace

    rank, source = _store_rank(builder)
    kept = RankRows()  # the rows as written: the report summary is computed from them, not read back
    got = store_trace(builder, path, rank=rank, rank_source=source, replace=replace,
                      vendor_categories=vendor_categories, keep=kept.add)
    _keep_summary(got.partition, kept, got.metadata)
    log.info("xpuprof: trace stored as %s", got.partition)
    return got.partition


def _keep_summary(partition: Path, rows=None, metadata: dict | None = None) -> None:
    """The rank's report summary beside its rows (``analysis.report_summary``: ``report STORE`` reads it instead
    of the events), of the rows the writer kept (``RankRows``); one that cannot be written is said, and the
    store stays whole."""
    from ..analysis.report_summary import write_summary

    try:
        write_summary(partition, rows, metadata)
    except OSError as exc:
        log.warning("xpuprof: %s: the rank's report summary was not written (%s); `xpuprof report` reads its rows "
                    "instead", partition, exc.strerror or exc)


def export_trace(builder: TraceBuilder | None, path, generic_categories: bool, fmt: str | None) -> Path:
    """``profile.export_chrome_trace`` / ``export_perfetto``: the last completed trace, in the format the path's
    name says (or ``fmt``)."""
    if builder is None:
        raise RuntimeError("no trace to export yet: the profiler has not completed a recording cycle")
    from ..trace.write.files import write_trace

    out = write_trace(builder, path, vendor_categories=not generic_categories, fmt=fmt)
    log.info("xpuprof: trace written to %s", out)
    return out


def trace_handler(dir_name, worker_name: str | None = None, use_gzip: bool = False, *,
                  format: str = "json") -> Callable[["profile"], Path]:
    """An ``on_trace_ready`` callback writing each trace into ``dir_name`` (torch's tensorboard_trace_handler;
    torch's own handler works too); ``format="perfetto"`` writes Perfetto protobuf (``.pftrace``) instead of
    Kineto JSON.

    The directory is created here, so a path that cannot hold traces is one ``ValueError`` before the
    workload runs, not an error after it."""
    from ..trace.write.files import suffix

    try:
        suffix(format, use_gzip)
    except ValueError as exc:
        raise ValueError(f"trace_handler: {exc}") from None
    directory = Path(dir_name)
    try:
        _make_trace_dir(directory)
    except OSError as exc:
        raise ValueError(f"trace_handler: cannot write traces into {str(directory)!r}: {exc.strerror or exc}"
                         + (f" ({exc.filename})" if exc.filename and exc.filename != str(directory) else "")) from None

    def handler(prof: "profile") -> Path:
        _make_trace_dir(directory)  # again: it may have been removed since
        return prof.export_chrome_trace(directory / trace_file_name(worker_name or prof.worker_name, use_gzip=use_gzip,
                                                                    format=format))

    return handler


# ----------------------------------------------------------------------------- profile
_running: "profile | None" = None  # the one profile recording in this process
_running_lock = threading.Lock()


def _forget_running_after_fork() -> None:
    """In a forked child (a DataLoader worker, a fork pool) the parent's running profile does not
    record: the child starts clean and may start its own. The inherited object's step() and stop()
    do nothing there (its sessions, threads and recorder belong to the parent)."""
    global _running, _running_lock
    _running_lock = threading.Lock()  # another thread may have held it at the fork
    inherited, _running = _running, None
    if inherited is not None:
        inherited._forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_running_after_fork)


class profile(TorchResultsMethods):
    """Profile a block or a loop of steps: torch.profiler.profile's arguments and methods (every keyword it
    accepts; docs/torch-profiler-compat.md), plus ``backends``, ``config`` and ``worker_name``."""

    def __init__(self, activities=None, schedule: Callable[[int], Any] | None = None,
                 on_trace_ready: Callable[["profile"], Any] | None = None,
                 experimental_config: Any = None, record_shapes: bool = False,
                 with_stack: bool = False, backends: Iterable[str] | None = None,
                 config: ProfilerConfig | None = None, worker_name: str | None = None, *,
                 profile_memory: bool = False, with_flops: bool = False, with_modules: bool = False,
                 execution_trace_observer: Any = None, acc_events: bool = False, use_cuda: bool | None = None,
                 custom_trace_id_callback: Callable[[], str] | None = None,
                 post_processing_timeout_s: float | None = None) -> None:
        from ..deadline import default_deadline_s

        default_deadline_s()  # a bad XPUPROF_PLUGIN_DEADLINE_S is said once, before anything starts
        base = config if config is not None else ProfilerConfig()
        changes: dict[str, Any] = {}
        if activities is not None or config is None:
            changes["activities"] = parse_activities(activities)
        if use_cuda is not None:  # torch's deprecated switch (FutureWarning as torch gives it)
            changes["activities"] = torch_compat.use_cuda_activities(use_cuda, changes.get("activities", base.activities))
        if experimental_config is not None:
            if torch_compat.is_torch_experimental_config(experimental_config):
                torch_changes = torch_compat.experimental_changes(experimental_config,
                                                                  changes.get("activities", base.activities))
                torch_changes["custom"] = {**base.custom, **torch_changes.get("custom", {})}
                changes.update(torch_changes)
            elif isinstance(experimental_config, ExperimentalConfig):
                changes["experimental"] = experimental_config
            else:
                raise TypeError(f"experimental_config must be an xpuprof.ExperimentalConfig or torch's "
                                f"torch._C._profiler._ExperimentalConfig, not {type(experimental_config).__name__}")
        for key, value in (("record_shapes", record_shapes), ("with_stack", with_stack),
                           ("profile_memory", profile_memory), ("with_flops", with_flops),
                           ("with_modules", with_modules)):
            if value:
                changes[key] = True
        if post_processing_timeout_s is not None and not post_processing_timeout_s >= 0:
            raise ValueError(f"post_processing_timeout_s must be a non-negative number of seconds, got "
                             f"{post_processing_timeout_s!r}")
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
        self.schedule = schedule or always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.worker_name = worker_name
        self.execution_trace_observer = execution_trace_observer or torch_compat.execution_trace_observer_from_env()
        self.acc_events = bool(acc_events)
        self.custom_trace_id_callback = custom_trace_id_callback
        self.post_processing_timeout_s = post_processing_timeout_s
        self.metadata: dict[str, Any] = {}  # merged into every trace (e.g. distributedInfo from a launcher)
        self.builder: TraceBuilder | None = None  # the last completed trace
        self.last_trace_path: Path | None = None
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._backends: list[Backend] | None = None
        self._recording = RecordingCycle(self.config, self._collector_plan)  # the sources of the current cycle
        self._finished: list[FinishedCycle] = []  # the last cycle's results (every cycle's with acc_events)
        self._trace_id = ""
        self._toggled_off: frozenset = frozenset()  # activities toggle_collection_dynamic paused
        self._cycle = 0
        self._step_rf: recorder.record_function | None = None
        self._started = False
        self._block_error: str | None = None
        self._no_device_reasons: dict[str, str] = {}  # device work asked for, no backend ran: why
        self._forked = False  # this object was copied into a forked child while it recorded
        self._stopping = False
        # on_trace_ready write failures (a full disk): logged, kept here, written into the next trace
        self.trace_ready_errors: list[str] = []
        self._unreported_errors: list[str] = []
        self._pausing = Pausing()  # pause()/resume() and PTI_ENABLE_COLLECTION, across cycles

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._block_error = f"{exc_type.__name__}: {exc}"
        try:
            self.stop()
        finally:
            if self.execution_trace_observer is not None:
                self.execution_trace_observer.cleanup()
        return False

    # ------------------------------------------------------------------ public API
    def start(self) -> None:
        global _running
        if self._started:
            raise RuntimeError("this profile is already started")
        # The schedule is checked once, before anything starts: torch's ProfilerAction or ours, else one error.
        first = as_action(self.schedule(0), 0)
        with _running_lock:
            other = _running
            if other is not None and other is not self:
                raise _another_running(other)
            _running = self
        self._started = True
        self.step_num = 0
        self.current_action = first
        # The trace stages load on a thread (stages.py): now if the first step records (it needs them), else
        # after the selection, whose file reads waited for the GIL behind the loader (42 ms instead of 2).
        if stages_now := first != ProfilerAction.NONE:
            start_loading()
        try:
            self._select()  # a metric nothing can collect (or a named backend missing) fails here, at start
            self._transit(ProfilerAction.NONE, self.current_action)
        except BaseException:
            # Nothing may stay half-started: no recorder, no tracer, no running session.
            self._recording.abort()
            self._started = False
            self._release_running()
            raise
        if not stages_now:
            start_loading()
        self._enter_step()

    def stop(self) -> None:
        if not self._started:
            return
        if self._forked:  # a forked child's copy of the parent's recording: nothing to stop or write here
            self._started = False
            return
        self._exit_step()
        self._stopping = True  # the last trace's write failure is raised here: no later trace could say it
        try:
            self._transit(self.current_action, None)
        finally:
            self._stopping = False
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
        if self._forked:
            return
        nxt = as_action(self.schedule(self.step_num + 1), self.step_num + 1)  # checked before anything changes
        self._exit_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = nxt
        self._transit(prev, self.current_action)
        self._pausing.read_env()  # PTI_ENABLE_COLLECTION, as the program may have set it since
        self._pausing.apply(self._recording, self._toggled_off)
        self._enter_step()

    def pause(self) -> None:
        """Stop collecting (every device session and our ranges) until ``resume()``; the paused span is
        marked in the trace. Lasts across recording cycles of a schedule until resumed."""
        self._pausing.by_user = True
        if not self._forked:  # a forked child's copy: the sessions are the parent's
            self._pausing.apply(self._recording)

    def resume(self) -> None:
        """Collect again after ``pause()`` (``PTI_ENABLE_COLLECTION=0`` still keeps collection paused, and
        what ``toggle_collection_dynamic`` turned off stays off)."""
        self._pausing.by_user = False
        if not self._forked:
            self._pausing.apply(self._recording, self._toggled_off)

    def export_chrome_trace(self, path, use_python_export: bool = False) -> Path:
        """Write the last completed trace: Kineto JSON (``.json``, or ``.json.gz``), or Perfetto protobuf for a
        ``.pftrace``/``.perfetto-trace`` path (``export_perfetto``). ``use_python_export`` (torch's choice
        between its C++ and Python exporters of one format) writes the same file: there is one writer here."""
        return self._export(path, None)

    def export_perfetto(self, path) -> Path:
        """Write the last completed trace as Perfetto protobuf (TracePacket/TrackEvent; the same events as the
        JSON trace, a fraction of its size; Perfetto's UI and trace processor open it natively), whatever the
        path's name (``.pftrace`` by convention)."""
        return self._export(path, "perfetto")

    def _export(self, path, fmt: str | None) -> Path:
        self.last_trace_path = out = export_trace(self.builder, path, self.config.generic_categories, fmt)
        return out

    def export_parquet(self, path, *, replace: bool = False) -> Path:
        """Write the last completed trace as this rank's partition of the trace store at ``path``
        (docs/store.md); returns the partition's directory. Needs pyarrow (``xpuprof[scale]``)."""
        self.last_trace_path = _export_store(self.builder, path, replace, not self.config.generic_categories)
        return self.last_trace_path

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False):
        """torch's averages of the last trace (of every cycle's with ``acc_events=True``): an iterable of rows
        with torch's attributes (``key``, ``count``, ``self_cpu_time_total``, ...) whose ``table(sort_by=...,
        row_limit=...)`` is torch's table, grouped as torch groups them (``analysis.summary.KeyAverages``)."""
        if not self._finished:
            raise RuntimeError("no trace yet: key_averages() needs a completed recording cycle")
        from ..analysis.summary import KeyAverages

        cycles = self._finished if self.acc_events else self._finished[-1:]
        return KeyAverages.from_builder([c.builder for c in cycles], use_device=cycles[-1].use_device,
                                        profile_memory=self.config.profile_memory, with_flops=self.config.with_flops,
                                        group_by_input_shape=bool(group_by_input_shape),
                                        group_by_stack_n=int(group_by_stack_n or 0),
                                        group_by_overload_name=bool(group_by_overload_name))

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
                incorrect_schedule("WARMUP", "NONE")
                self._start_trace()
                self._stop_trace()
        elif prev == A.RECORD:
            if cur == A.NONE:
                incorrect_schedule("RECORD", "NONE")
                self._stop_trace()
            elif cur == A.WARMUP:
                incorrect_schedule("RECORD", "WARMUP")
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
            backends = select_backends(self.config, probes := {})  # probed once: for choosing and explaining
            log.debug("xpuprof: backends %s", [b.name for b in backends])
            _check_metrics_collectable(self.config, backends)
            self._backends = backends
            self._no_device_reasons = explain_host_only(self.config, self._backends, probes)

    def check(self) -> None:
        """What start() checks before anything runs, without starting: the backends can be chosen and the
        requested metric names are known and collectable (``xpuprof run --dry-run`` calls it)."""
        self._select()

    def _prepare_trace(self) -> None:
        # The trace stages load here, before anything records, not at `import xpuprof` (kept light) nor at
        # stop or export (which may run from atexit or a signal handler).
        load_trace_stages()
        self._select()
        if self._cycle and not self.acc_events:  # torch's words, when a second cycle replaces the first's events
            warn_once(CLEARS_EVENTS, stacklevel=5)
        self._release_last_results()  # when torch.profiler releases its own (torch_methods)
        self._trace_id = torch_compat.new_trace_id(self.custom_trace_id_callback, self.config.trace_id)  # per cycle
        self._recording.prepare(self._backends)

    def _start_trace(self) -> None:
        if not self._recording.sessions and self._backends is None:
            self._prepare_trace()
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.start()
        self._recording.start()
        if self._toggled_off:  # paused by toggle_collection_dynamic until resumed, across cycles
            self._recording.pause(self._toggled_off)
        self._pausing.new_cycle()
        self._pausing.read_env()  # PTI_ENABLE_COLLECTION=0 at start: the cycle starts paused
        self._pausing.apply(self._recording, self._toggled_off)

    def _stop_trace(self) -> None:
        cycle = self._recording
        if not cycle.recording:
            return
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.stop()
        window, errors = cycle.stop()
        from .assemble import build_trace  # loaded by _prepare_trace already

        metadata = self.metadata
        if self._unreported_errors:  # the previous trace could not be written: this one says so
            metadata = {**metadata, "previous_trace_write_errors": list(self._unreported_errors)}
            self._unreported_errors = []
        self.builder = build_trace(cycle, window, errors, iteration=self._cycle, block_error=self._block_error,
                                   no_device_reasons=self._no_device_reasons, metadata=metadata,
                                   trace_id=self._trace_id)
        done = FinishedCycle(self.builder, self.config, cycle.torch_ops.result if cycle.torch_ops else None,
                             cycle.torch_id_base, use_device_of(self.builder, [n for n, _ in cycle.sessions],
                                                                str(self.config.custom.get("sim_vendor", "xpu"))))
        self._finished = self._finished + [done] if self.acc_events else [done]
        cycle.clear()
        self._cycle += 1

    def _trace_ready(self) -> None:
        """``on_trace_ready(self)``; a write failure during ``step()`` is kept (``_keep_write_failure``), at
        ``stop()`` (no next trace could say it) and from an explicit ``export_chrome_trace`` it is raised."""
        if self.on_trace_ready is None:
            return
        try:
            self.on_trace_ready(self)
        except OSError as exc:
            if self._stopping:
                raise
            _keep_write_failure(self, exc)


def _another_running(other: profile) -> RuntimeError:
    # One recorder per process: a second session would uninstall the first one's recorder at its stop and
    # both traces would silently miss events. It is refused, loudly, before anything starts.
    return RuntimeError(
        "another xpuprof.profile() is already running in this process (started at step "
        f"{other.step_num}, activities {sorted(a.value for a in other.config.activities)[:4]}...); "
        "nested or interleaved profiles are not supported: stop it first, or record both parts in "
        "one profile (use record_function ranges or a schedule to separate them)")


def _keep_write_failure(prof: profile, exc: OSError) -> None:
    """A trace that cannot be written (a full disk, a read-only directory) during ``step()`` must not end
    the user's loop: the failure is logged, kept in ``trace_ready_errors`` and written into the next
    trace's metadata (``previous_trace_write_errors``)."""
    from ..outputs import write_error_line

    what = write_error_line(exc.filename, exc) if isinstance(exc.filename, str) else str(exc)
    why = what if what.startswith("trace not written") else f"trace not written: {what}"
    why = f"step {prof.step_num}: {why}"
    prof.trace_ready_errors.append(why)
    prof._unreported_errors.append(why)
    log.warning("xpuprof: %s (the profile goes on; the next trace records this)", why)


def record_torch_ops_from_now(prof: profile) -> bool:
    """torch was imported while ``prof`` records (``xpuprof exec`` starts recording before the program imports
    anything): record its ops from now on, on the calling thread (torch's recorder is per thread). False when
    nothing records, torch is absent, or its ops are already recorded."""
    return prof._recording.record_torch_ops_from_now()
