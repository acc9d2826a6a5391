"""``xpuprof.profile``: torch.profiler's shape, driving backend sessions into one TraceBuilder.

A profile run selects backends once (registry, explicit names, probes), then for every
recording cycle of its schedule: configures one session per backend (warmup), starts them with
the host recorder (active), stops them, and builds the trace: each session's ``process``, the
host ranges and instants, thread/process rows, a span row, device properties, metadata,
dropped-record counts and errors. ``on_trace_ready`` is called at the end of each active cycle.
"""
from __future__ import annotations

import enum
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

# DEVICE_GROUP and ACTIVITY_GROUPS (torch's groups) live in activity.py, with the one parser of activity lists.
from .activity import ACTIVITY_GROUPS, DEVICE_GROUP, ActivityType, default_activity_types  # noqa: F401
from .activity import parse_activity_types
from .backends import registry
from .backends.base import Backend, BackendError, ProcessWindow, RangeThreads, Session
from .clock import MONOTONIC_TO_EPOCH_NS, now_ns
from .config.options import ExperimentalConfig, ProfilerConfig
from .host import annotations
from .trace.builder import TraceBuilder, encode_json
from .trace.gpu_annotations import add_gpu_user_annotations
from .trace.chrome import write_chrome_trace

_RANGE_TID = annotations.RANGE_FIELDS.index("tid")
_RANGE_CORRELATION = annotations.RANGE_FIELDS.index("correlation_id")
log = logging.getLogger("xpuprof")

SPAN_NAME = "xpuprof"

# Activities the profiler records itself; every other type needs a backend.
HOST_ACTIVITIES = frozenset({ActivityType.CPU_OP, ActivityType.USER_ANNOTATION, ActivityType.CPU_INSTANT_EVENT,
                             ActivityType.PYTHON_FUNCTION})
_DEVICE_ACTIVITIES = frozenset(ActivityType) - HOST_ACTIVITIES
# Activities that collect hardware metrics: they join a run only when metrics are requested.
METRIC_ACTIVITIES = frozenset({ActivityType.XPU_SCOPE_PROFILER, ActivityType.GPU_PM_COUNTER,
                               ActivityType.HARDWARE_COUNTERS})


def with_metric_activities(config: ProfilerConfig) -> ProfilerConfig:
    """The one rule that turns a metrics request into metric collection on the device.

    Metric names left for the device backends (collector names are planned out before this) plus
    selected device work (explicitly, by group or by default) add the metric activity types, so each
    backend picks its metric session (XPU: the scope profiler; CUDA: PM sampling; sim: per-kernel
    counters). Metric activities without names stay as asked: the backend says that names are needed.
    """
    if not config.experimental.profiler_metrics:
        return config
    device_work = config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES)
    if not device_work or config.activities >= METRIC_ACTIVITIES:
        return config
    return config.with_changes(activities=config.activities | METRIC_ACTIVITIES)


def parse_activities(activities) -> frozenset[ActivityType]:
    """``parse_activity_types`` (names, aliases, group names, torch ProfilerActivity), None = the defaults."""
    if activities is None:
        return ProfilerConfig().activities
    out = parse_activity_types(activities)
    if not out:
        raise ValueError("activities is empty: name at least one activity type (or leave it None for the defaults)")
    return out


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


def _launcher_distributed_info() -> dict | None:
    """``distributedInfo`` from launcher variables (torchrun, MPI, Slurm, ...), None when not launched."""
    from . import rank as rank_env
    try:
        return rank_env.distributed_info()
    except rank_env.RankEnvError as exc:
        log.warning("xpuprof: ignoring launcher rank variables: %s", exc)
        return None


def _rank_of(builder: TraceBuilder | None) -> int | None:
    info = builder.distributed_info if builder is not None else None
    if info is None and builder is not None:
        info = builder.metadata.get("distributedInfo")
    if info is None:
        info = _launcher_distributed_info()
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
        directory.mkdir(parents=True, exist_ok=True)
        name = trace_file_name(worker_name or prof.worker_name or socket.gethostname(),
                               rank=_rank_of(prof.builder), use_gzip=use_gzip)
        return prof.export_chrome_trace(directory / name)

    return handler


# ----------------------------------------------------------------------------- backend selection
_warned_backends: set[str] = set()  # broken backends are reported once per process, not per run
_logged_errors: set[tuple[str, str]] = set()  # (backend, message) already logged
# Plugin fault stages a session reports itself (its errors() reach backend_errors).
_SESSION_STAGES = frozenset({"start", "stop", "process", "events", "close", "device_properties", "metadata", "errors",
                             "dropped_records", "push_correlation_id", "pop_correlation_id"})


def select_backends(config: ProfilerConfig) -> list[Backend]:
    """Instantiate the backends this run uses. Named backends must be available (or it raises)."""
    disabled = set(registry.disabled_backends(config))  # config key + XPUPROF_DISABLE_BACKENDS + Kineto alias
    device_types = config.activities - HOST_ACTIVITIES
    chosen: list[Backend] = []
    if config.backends is not None:
        for name in config.backends:
            if name in disabled:
                raise BackendError(f"backend {name!r} is both requested and in disabled_backends")
            cls = registry.get_backend_class(name, config)  # unknown name -> ValueError listing the known ones
            probe = cls.probe()
            if not probe.available:
                raise BackendError(f"backend {name!r} is not available here: {probe.reason}")
            chosen.append(cls())
        return chosen
    if not device_types:
        return chosen  # host-only run: nothing to probe
    for name in registry.backend_names(config):  # loads config.plugin_paths plugins on first use
        if name in registry.EXPLICIT_ONLY or name in disabled:
            continue
        try:
            cls = registry.get_backend_class(name)
            if not (cls.supported_activities() & device_types):
                continue
            probe = cls.probe()
        except Exception as exc:  # a broken backend must not stop the others
            if name not in _warned_backends:
                _warned_backends.add(name)
                log.warning("xpuprof: backend %s could not be probed: %s: %s", name, type(exc).__name__, exc)
            continue
        if probe.available:
            chosen.append(cls())
        else:
            log.debug("backend %s not used: %s", name, probe.reason)
    return chosen


def _plugin_failed(name: str) -> bool:
    """Whether backend ``name`` is a plugin with a recorded fault outside a session (probe,
    supported_activities, configure, a missed deadline): logged when it happened, in backend_errors."""
    origin = registry.plugin_origins().get(name)
    if origin is None:
        return False
    from .plugins import faults as plugin_faults

    return plugin_faults.abandoned(origin) is not None or any(
        f.stage not in _SESSION_STAGES for f in plugin_faults.faults(origin))


def _check_metrics_collectable(config: ProfilerConfig, backends: list[Backend]) -> None:
    """Metric names left for the device, and no chosen backend that collects metrics: one clear error
    before anything starts (never a trace that silently lacks what was asked for)."""
    metrics = config.experimental.profiler_metrics
    if not metrics or any(type(b).supported_activities() & METRIC_ACTIVITIES for b in backends):
        return
    if backends:
        why = f"the backends in use ({', '.join(b.name for b in backends)}) collect no hardware metrics"
    elif not config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES):
        why = "no device activity is selected (add 'xpu', 'cuda' or 'gpu' to activities)"
    else:
        reasons = "; ".join(f"{name}: {reason}" for name, reason in _unavailable_reasons(config)) or "none is registered"
        why = f"no device backend can run here ({reasons})"
    unknown = _unknown_in_catalogs(metrics)  # no device checks the names here, so the catalogs do
    raise BackendError(f"{unknown}metrics {', '.join(map(repr, metrics))} were requested but nothing can collect "
                       f"them: {why}. `xpuprof devices` says which backends run here; `xpuprof metrics` lists the "
                       "metric names")


def _unknown_in_catalogs(metrics) -> str:
    """The names no catalog in metrics/ knows, with close matches (a paragraph ending in a newline; "" when
    every name is known or the catalogs cannot be read)."""
    from . import catalogs

    try:
        index: dict[str, list[str]] = {}
        for cat in catalogs.load_catalogs():
            for name in [*cat.all_metric_names(), *cat.derived]:
                index.setdefault(name, []).append(f"{cat.vendor}/{cat.family}")
        names = [catalogs.parse_selector(m)[0] for m in metrics]
    except (catalogs.CatalogError, catalogs.MetricSelectionError, OSError) as exc:
        return f"(the metric names could not be checked against the catalogs: {exc})\n"
    lines = []
    for name in dict.fromkeys(n for n in names if n not in index):
        close = catalogs._close_matches(name, index)
        hint = "did you mean " + "; ".join(f"{c} ({', '.join(dict.fromkeys(index[c]))})" for c in close) + "?" \
            if close else "no similar metric in any catalog"
        lines.append(f"  {name!r}: {hint}")
    if not lines:
        return ""
    return ("unknown metric name(s), checked against the catalogs in metrics/ since no device here checks them "
            "(names are case-sensitive):\n" + "\n".join(lines) + "\n")


def _unavailable_reasons(config: ProfilerConfig) -> list[tuple[str, str]]:
    """(backend, probe reason or the switch that disabled it) for every auto-selectable backend that is not
    available (probes are cached)."""
    disabled = registry.disabled_backends(config)
    out = []
    for name in registry.backend_names(config):
        if name in registry.EXPLICIT_ONLY:
            continue
        if name in disabled:  # switched off is a reason too: all off must not read as "nothing is wrong"
            out.append((name, disabled[name]))
            continue
        try:
            probe = registry.get_backend_class(name).probe()
        except Exception as exc:  # reported by select_backends already
            out.append((name, f"probe failed: {exc}"))
            continue
        if not probe.available:
            out.append((name, probe.reason))
    return out


# ----------------------------------------------------------------------------- metric collectors
def plan_collectors(config: ProfilerConfig) -> tuple[ProfilerConfig, dict[str, list[str]]]:
    """Resolve the requested metric names (``collectors.resolve``) before anything starts.

    Returns the config the backends see (their own metric names only) and collector -> metrics.
    Unknown or ambiguous names, and requests a collector rejects, raise ``CollectorError``.
    """
    names = config.experimental.profiler_metrics
    if not names:
        return config, {}
    from dataclasses import replace as _replace

    from .collectors import registry as collector_registry
    from .collectors.resolve import resolve_metrics

    plan = resolve_metrics(names, device_activities=bool(config.activities - HOST_ACTIVITIES), config=config)
    if not plan.collectors:
        return config, {}
    interval_s = config.experimental.metrics_interval_ms / 1e3
    for name, metrics in plan.collectors.items():
        collector_registry.get_collector_class(name, config)(metrics, interval_s)  # validate() before start
    config = config.with_changes(experimental=_replace(config.experimental, profiler_metrics=plan.device))
    return config, plan.collectors


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
        from .deadline import default_deadline_s

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
        self._collectors = None
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
        self._sessions: list[tuple[str, Session]] = []
        self._recorder: annotations.HostRecorder | None = None
        self._pytracer = None
        self._torch_ops = None  # torch's CPU-only profiler for this cycle (host.torch_ops), when torch is in use
        self._torch_guard = None  # keeps a conflicting torch.profiler from starting during this cycle
        self._torch_ops_note: str | None = None
        self._window_start = 0
        self._cycle = 0
        self._step_rf: annotations.record_function | None = None
        self._started = False
        self._block_error: str | None = None
        self._no_device_reasons: dict[str, str] = {}  # device work asked for, no backend ran: why
        self._setup_errors: dict[str, list[str]] = {}  # named backends that took no part in this cycle: why
        self._not_collected: dict[str, str] = {}  # asked-for activities no backend in use records: why

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
            self._abort_cycle()
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
        out = write_chrome_trace(self.builder, path, legacy_categories=not self.config.generic_categories)
        self.last_trace_path = out
        log.info("xpuprof: trace written to %s", out)
        return out

    def export_parquet(self, path, *, replace: bool = False) -> Path:
        """Write the last completed trace as this rank's partition of the trace store at ``path``
        (docs/store.md); returns the partition's directory. Needs pyarrow (``xpuprof[scale]``)."""
        if self.builder is None:
            raise RuntimeError("no trace to export yet: the profiler has not completed a recording cycle")
        from .trace.write.parquet import write_store

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
            from .analysis.ops import OpSummary
            return OpSummary.from_builder(self.builder)
        from .analysis.summary import Summary
        return Summary.from_builder(self.builder)

    def add_metadata(self, key: str, value: Any) -> None:
        """A top-level key for every trace this profile writes."""
        self.metadata[str(key)] = value

    # ------------------------------------------------------------------ steps
    def _enter_step(self) -> None:
        if self.record_steps:
            self._step_rf = annotations.record_function(f"ProfilerStep#{self.step_num}")
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
            self._no_device_reasons = self._explain_host_only()

    def check(self) -> None:
        """What start() checks before anything runs, without starting: the backends can be chosen and the
        requested metric names are known and collectable (``xpuprof run --dry-run`` calls it)."""
        self._select()

    def _prepare_trace(self) -> None:
        self._select()
        self._sessions = []
        self._setup_errors = {}
        device_types = self.config.activities
        named = set(self.config.backends or ())
        served: set[ActivityType] = set()
        for backend in self._backends:
            supported = backend.supported_activities()
            types = frozenset(device_types & supported)
            if not types:
                # Asked for by name and silently absent would be a lie; a plugin whose call failed has that
                # fault in backend_errors already (said once), so no second line for the same failure.
                if backend.name in named and not _plugin_failed(backend.name):
                    self._setup_errors.setdefault(backend.name, []).append(
                        "took no part: it records none of the requested activities (it supports: "
                        f"{', '.join(sorted(t.value for t in supported)) or 'nothing'})")
                continue
            session = backend.configure(types, self.config)
            if session is not None:
                self._sessions.append((backend.name, session))
                served |= types
            elif backend.name in named and not _plugin_failed(backend.name):
                self._setup_errors.setdefault(backend.name, []).append("took no part: configure() declined")
        self._not_collected = self._activities_not_collected(served)

    def _activities_not_collected(self, served: set[ActivityType]) -> dict[str, str]:
        """Explicitly requested device activity groups (or single types outside the groups) that no backend
        in use records: warned once, listed in the trace. With no backend at all,
        ``device_backends_unavailable`` says why instead."""
        if not self._backends or self.config.activities == default_activity_types():
            return {}
        asked = self.config.activities - HOST_ACTIVITIES
        in_use = ", ".join(b.name for b in self._backends)
        failed = [b.name for b in self._backends if _plugin_failed(b.name)]
        why = f"no backend in use records it (in use: {in_use})"
        if failed:
            why += f"; failed: {', '.join(failed)} (see backend_errors)"
        out: dict[str, str] = {}
        work = asked & (DEVICE_GROUP - {ActivityType.GPU_USER_ANNOTATION, ActivityType.EXTERNAL_CORRELATION})
        if work and not work & served:
            out["device activities (" + ", ".join(sorted(t.value for t in work)) + ")"] = why
        metric = asked & METRIC_ACTIVITIES
        if metric and not metric & served:
            out["metric activities (" + ", ".join(sorted(t.value for t in metric)) + ")"] = why
        for t in sorted(asked - DEVICE_GROUP - METRIC_ACTIVITIES - served, key=lambda t: t.value):
            out[t.value] = why
        key = "not-collected:" + ",".join(sorted(out))
        # When every backend in use failed, the failure (logged once where it happened) is the reason:
        # the trace lists what was not collected, the log does not say the same failure twice.
        if out and key not in _warned_backends and len(failed) < len(self._backends):
            _warned_backends.add(key)
            log.warning("xpuprof: requested activities that nothing in this run records: %s",
                        "; ".join(f"{k}: {v}" for k, v in out.items()))
        return out

    def _plugin_errors(self) -> dict[str, list[str]]:
        """Faults of plugin backends outside a session (probe, supported_activities, configure, a missed
        deadline) for the plugins this run could have used and that took no part: the trace says why."""
        from .plugins import faults as plugin_faults

        named = self.config.backends
        if named is None and not self.config.activities - HOST_ACTIVITIES:
            return {}
        disabled = registry.disabled_backends(self.config)
        active = {name for name, _ in self._sessions}
        out: dict[str, list[str]] = {}
        for name, origin in registry.plugin_origins().items():
            if name in disabled or name in active or (named is not None and name not in named):
                continue
            msgs = [str(f) for f in plugin_faults.faults(origin) if f.stage not in _SESSION_STAGES]
            hung = plugin_faults.abandoned(origin)
            if hung:
                msgs.append(hung)
            if msgs:
                out[name] = msgs
        return out

    def _explain_host_only(self) -> dict[str, str]:
        """Device activities were asked for (no backend named) and no backend can run: warn once per
        process with each probe's reason; the trace's metadata carries them too (never silent)."""
        if self._backends or self.config.backends is not None:
            return {}
        if not self.config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES - {ActivityType.GPU_USER_ANNOTATION}):
            return {}
        reasons = dict(_unavailable_reasons(self.config))
        if not reasons:
            return {}
        key = "host-only:" + ",".join(sorted(reasons))
        explicit = self.config.activities != default_activity_types()  # the defaults alone do not warn
        if explicit and key not in _warned_backends:
            _warned_backends.add(key)
            # A plugin's fault was logged when it happened: named here, not said again (the trace has both).
            said = {n: "plugin failed (see backend_errors)" if _plugin_failed(n) else r for n, r in reasons.items()}
            log.warning("xpuprof: device activities were requested but no device backend can run here, so the "
                        "trace holds host activity only: %s", "; ".join(f"{n}: {r}" for n, r in said.items()))
        return reasons

    def _start_trace(self) -> None:
        if not self._sessions and self._backends is None:
            self._prepare_trace()
        guard, torch_ops = self._torch_op_recorder()  # a running torch.profiler refuses here, before anything starts
        corr = [s for _, s in self._sessions if s.wants_correlation]
        self._recorder = annotations.HostRecorder(correlation_sessions=corr)
        self._window_start = now_ns()
        started: list[tuple[str, Session]] = []
        try:
            if torch_ops is not None:
                torch_ops.start()
                self._torch_ops = torch_ops
            if guard is not None:
                guard.install()
                self._torch_guard = guard
            for name, session in self._sessions:
                session.start()
                started.append((name, session))
            if self.config.python_functions and ActivityType.PYTHON_FUNCTION in self.config.activities:
                from .host.pyfunctions import PythonFunctionTracer
                tracer = PythonFunctionTracer()
                tracer.start()  # raises when another tool already owns sys.setprofile
                self._pytracer = tracer
            if self._collector_plan:
                self._collectors = self._start_collectors()
        except BaseException:
            self._sessions = started  # stop only what started
            self._abort_cycle()
            raise
        annotations.install(self._recorder)

    def _torch_op_recorder(self):
        """(guard, recorder) for this cycle when the program uses torch: the guard whenever torch.profiler
        could conflict (we record ops through it, or a backend of ours owns the vendor tracing API), the
        recorder of torch's CPU-only profiler when cpu_op is asked for. A torch.profiler already running
        is refused here, before anything starts. (None, None) without torch: torch is never imported."""
        self._torch_ops_note = None
        from .host import torch_ops

        torch = torch_ops.torch_if_imported()
        if torch is None:
            return None, None
        records_ops = ActivityType.CPU_OP in self.config.activities
        # every backend but the simulator traces through a vendor API (CUPTI, PTI, roctracer, a plugin's)
        owner = ", ".join(name for name, _ in self._sessions if name != "sim")
        if not records_ops and not owner:
            return None, None
        guard = torch_ops.TorchProfilerGuard(torch, records_ops=records_ops, device_owner=owner)
        guard.check_not_running()
        if not records_ops:
            return guard, None
        return guard, torch_ops.TorchOpRecorder(torch, record_shapes=self.config.record_shapes,
                                                with_stack=self.config.with_stack, guard=guard)

    def _start_collectors(self):
        from .collectors import registry as collector_registry
        from .collectors.sampler import CollectorRun

        classes = {name: collector_registry.get_collector_class(name, self.config) for name in self._collector_plan}
        run = CollectorRun(self._collector_plan, classes, self.config.experimental.metrics_interval_ms / 1e3,
                           origins=collector_registry.plugin_collectors())
        run.start()
        return run

    def _abort_cycle(self) -> None:
        if self._collectors is not None:
            self._collectors.stop(abort=True)
            self._collectors = None
        if self._pytracer is not None:
            self._pytracer.stop()
            self._pytracer = None
        if self._torch_guard is not None:
            self._torch_guard.remove()
            self._torch_guard = None
        if self._torch_ops is not None:
            self._torch_ops.abort()
            self._torch_ops = None
        if annotations.active_recorder() is self._recorder:
            annotations.install(None)
        for _, session in self._sessions:
            try:
                session.stop()
            except Exception:  # already failing; the first error is the one to report
                pass
        self._sessions = []
        self._recorder = None

    def _stop_trace(self) -> None:
        if self._recorder is None:
            return
        if self._pytracer is not None:
            self._pytracer.stop()
        if self._torch_guard is not None:
            self._torch_guard.remove()
            self._torch_guard = None
        if self._torch_ops is not None:
            self._torch_ops.stop()
        annotations.install(None)
        if self._collectors is not None:
            self._collectors.stop()  # its last sample lies inside the window
        end = now_ns()
        errors: dict[str, list[str]] = {}
        for name, session in self._sessions:
            try:
                session.stop()
            except Exception as exc:
                errors.setdefault(name, []).append(f"stop failed: {type(exc).__name__}: {exc}")
        rec = self._recorder

        def range_threads():  # read only if a backend's records lack their thread (RangeThreads)
            rows = annotations.log_array(rec.ranges)
            return rows[:, _RANGE_CORRELATION], rows[:, _RANGE_TID]

        window = ProcessWindow(self._window_start, end, RangeThreads(range_threads) if rec is not None else None)
        self.builder = self._build(window, errors)
        self._collectors = None
        self._recorder = None
        self._pytracer = None
        self._torch_ops = None
        self._sessions = []
        self._cycle += 1

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ------------------------------------------------------------------ building the trace
    def _build(self, window: ProcessWindow, errors: dict[str, list[str]]) -> TraceBuilder:
        builder = TraceBuilder()
        builder.set_window(window.start_ns, window.end_ns)
        for name, session in self._sessions:
            try:
                session.process(builder, window)
            except Exception as exc:
                errors.setdefault(name, []).append(f"process failed: {type(exc).__name__}: {exc}")
                log.exception("xpuprof: backend %s failed to process its records", name)
            for getter, merge in ((session.device_properties, lambda v: [builder.add_device_properties(p) for p in v or ()]),
                                  (session.metadata, lambda v: [builder.set_metadata(k, x) for k, x in dict(v or {}).items()])):
                try:
                    merge(getter())
                except Exception as exc:
                    errors.setdefault(name, []).append(f"{getter.__name__} failed: {type(exc).__name__}: {exc}")
            try:
                for reason, n in (session.dropped_records() or {}).items():
                    builder.count_dropped(f"{name}: {reason}", n)
                errors.setdefault(name, []).extend(session.errors() or ())
            except Exception as exc:
                errors.setdefault(name, []).append(f"error report failed: {type(exc).__name__}: {exc}")
        if self._collectors is not None:
            self._collectors.emit(builder)
        tids = self._add_host_events(builder)
        if ActivityType.GPU_USER_ANNOTATION in self.config.activities:
            # Before the op linking: device work still carries the innermost record_function's id, the
            # user correlation Kineto keeps apart from the op one.
            add_gpu_user_annotations(builder)
        tids |= self._add_torch_ops(builder)
        if self._pytracer is not None:
            tids |= self._pytracer.process(builder, MONOTONIC_TO_EPOCH_NS)
        self._add_rows(builder, tids)
        builder.add_span(SPAN_NAME, window.start_ns, window.end_ns, op_count=self._recorder.range_count(),
                         iteration=self._cycle)
        builder.set_metadata("backends", [name for name, _ in self._sessions])
        for source in (self._setup_errors, self._plugin_errors()):
            for name, msgs in source.items():
                errors.setdefault(name, []).extend(msgs)
        load_failures = registry.plugin_load_failures()
        if load_failures:  # logged once each when they happened (plugins.faults)
            builder.set_metadata("plugin_load_errors", {origin: reason for origin, reason in load_failures})
        if self._not_collected:
            builder.set_metadata("activities_not_collected", dict(self._not_collected))
        if self.config.trace_id:
            builder.set_metadata("trace_id", self.config.trace_id)
        if self.config.group_trace_id:
            builder.set_metadata("group_trace_id", self.config.group_trace_id)
        errors = {k: list(dict.fromkeys(v)) for k, v in errors.items() if v}
        if errors:
            from .plugins import faults as plugin_faults

            builder.set_metadata("backend_errors", errors)
            for name, msgs in errors.items():
                for msg in msgs:
                    # Said once per process, in every trace it touches; a plugin fault was logged when it
                    # happened (plugins.faults), so it is not logged a second time here.
                    if (name, msg) not in _logged_errors and not plugin_faults.logged(msg):
                        _logged_errors.add((name, msg))
                        log.warning("xpuprof: backend %s: %s", name, msg)
        if builder.dropped:
            # Records outside the window are the expected warmup/between-cycle ones: counted in the trace,
            # logged at DEBUG; any other loss is a warning.
            unexpected = {k: v for k, v in builder.dropped.items() if not k.endswith("out of window")}
            text = ", ".join(f"{k}={v}" for k, v in builder.dropped.items())
            (log.warning if unexpected else log.debug)("xpuprof: dropped records: %s", text)
        if self._no_device_reasons:
            builder.set_metadata("device_backends_unavailable", dict(self._no_device_reasons))
        if self._block_error:
            builder.set_metadata("profiled_block_exception", self._block_error)
        for key, value in self.metadata.items():
            if key == "distributedInfo" and isinstance(value, Mapping):
                builder.set_distributed_info(value)
            else:
                builder.set_metadata(key, value)
        if "distributedInfo" not in self.metadata:
            launched = _launcher_distributed_info()
            if launched is not None:  # under torchrun/MPI/Slurm every trace says its rank (HTA reads it)
                builder.set_distributed_info(launched)
        builder.flush()
        return builder

    def _add_host_events(self, builder: TraceBuilder) -> set[int]:
        rec = self._recorder
        pid = builder.pid
        tids: set[int] = set()
        n = rec.range_count()
        bad = 0  # args JSON cannot hold, kept as a note (never a lost trace)
        intern = builder.strings.intern
        # Each distinct name (ranges and instants share the table) interned once.
        name_table = np.fromiter((intern(x) for x in rec.names), np.int32, len(rec.names))
        if n and ActivityType.USER_ANNOTATION in self.config.activities:
            # Columns straight from the C records.
            rec_arr = annotations.log_array(rec.ranges)
            args_idx = rec_arr[:, 5]
            plain = args_idx == annotations.NO_ARGS
            idx = slice(None) if plain.all() else np.flatnonzero(plain)
            t0_plain = rec_arr[idx, 0]
            # Copies (fancy indexing, arithmetic): nothing keeps a view on the recorder's log.
            builder.add_slices(names=None, name_ids=name_table[rec_arr[idx, 4]], ts=t0_plain + MONOTONIC_TO_EPOCH_NS,
                               dur=rec_arr[idx, 1] - t0_plain, pid=pid, tid=rec_arr[idx, 2].copy(),
                               cat=ActivityType.USER_ANNOTATION, external_id=rec_arr[idx, 3].copy())
            if not plain.all():  # ranges with args: most were stored encoded at exit (exact-size JSON bytes)
                sel = np.flatnonzero(~plain)
                stored, encoded = rec.args, []
                for arg_i in args_idx[sel].tolist():
                    value = stored[arg_i]
                    if type(value) is bytes:
                        encoded.append(None if value == b"{}" else value)
                        continue
                    try:  # objects the recorder could not encode as given (cleaned here, or noted)
                        as_dict = dict(value)
                        encoded.append(encode_json(as_dict) if as_dict else None)
                    except Exception as exc:  # one bad args value must never lose the trace: keep the range
                        encoded.append(encode_json(annotations.invalid_args_note(value, exc)))
                        bad += 1
                t0_args = rec_arr[sel, 0]
                builder.add_slices(names=None, name_ids=name_table[rec_arr[sel, 4]], ts=t0_args + MONOTONIC_TO_EPOCH_NS,
                                   dur=rec_arr[sel, 1] - t0_args, pid=pid, tid=rec_arr[sel, 2],
                                   cat=ActivityType.USER_ANNOTATION, external_id=rec_arr[sel, 3], row_args=encoded)
            tid_arr = rec_arr[:, 2]
            tids.update(np.unique(tid_arr).tolist())
        if len(rec.instants) and ActivityType.CPU_INSTANT_EVENT in self.config.activities:
            inst = annotations.log_array(rec.instants)  # t, tid, name, args, scope (HostRecorder.INSTANT_FIELDS)
            row_args = None
            if (inst[:, 3] != annotations.NO_ARGS).any():  # args were snapshotted as JSON bytes at the call
                stored, row_args = rec.args, []
                for arg_i in inst[:, 3].tolist():
                    value = None if arg_i == annotations.NO_ARGS else stored[arg_i]
                    if isinstance(value, annotations.InvalidArgs):
                        bad += 1
                        value = bytes(value)
                    row_args.append(None if value == b"{}" else value)
            builder.add_instants(name_ids=name_table[inst[:, 2]], ts=inst[:, 0] + MONOTONIC_TO_EPOCH_NS, pid=pid,
                                 tid=inst[:, 1].copy(), cat=ActivityType.CPU_INSTANT_EVENT, scope=inst[:, 4],
                                 row_args=row_args)
            tids.update(np.unique(inst[:, 1]).tolist())
        if bad:
            builder.set_metadata("invalid_args", bad)
            log.warning("xpuprof: %d record_function/instant args could not be written as JSON; each range is kept "
                        "with an xpuprof_invalid_args note saying why (first seen in this trace)", bad)
        return tids

    def _add_torch_ops(self, builder: TraceBuilder) -> set[int]:
        """torch's ops and ranges of this cycle, and every runtime call linked to the innermost torch op
        running on its thread when it was made (none when it was made in no op)."""
        from .host import torch_ops

        if self._torch_ops is None:
            if ActivityType.CPU_OP in self.config.activities and torch_ops.torch_if_imported() is not None:
                # torch came in after the cycle started: its ops could not be recorded (said, never silent)
                note = "torch was imported after this recording cycle started; start the profile after importing torch"
                builder.set_metadata("torch_ops_not_recorded", note)
                if "torch-late" not in _warned_backends:
                    _warned_backends.add("torch-late")
                    log.warning("xpuprof: PyTorch ops (cpu_op) not recorded: %s", note)
            return set()
        try:
            ops = torch_ops.TorchOps.from_trace_bytes(self._torch_ops.read_trace(),
                                                  id_base=annotations.reserve_correlation_id())
        except Exception as exc:  # torch's result unreadable: the rest of the trace stays, and says so
            why = f"torch's profiler result could not be read: {type(exc).__name__}: {exc}"
            builder.set_metadata("torch_ops_not_recorded", why)
            log.warning("xpuprof: PyTorch ops (cpu_op) not recorded in this trace: %s", why)
            return set()
        tids = ops.add_to(builder, builder.pid)
        n_ops = int((ops.cats == "cpu_op").sum())
        summary = {"ops": n_ops, "record_shapes": self.config.record_shapes, "with_stack": self.config.with_stack}
        if n_ops:
            # As Kineto: a call's External id is the innermost torch op's on its thread, none outside ops (our
            # ranges, like torch's, are user ranges; their gpu_user_annotation was drawn before this). A
            # cycle that ran no torch op (torch merely imported) keeps our ranges' ids, as without torch.
            linked, outside = torch_ops.link_runtime_calls(builder, *ops.linkable(),
                                                           explicit_zero=self.config.generic_categories)
            summary.update(runtime_calls_linked=linked, runtime_calls_outside_ops=outside)
        builder.set_metadata("torch_ops", summary)
        return tids

    def _add_rows(self, builder: TraceBuilder, tids: set[int]) -> None:
        pid = builder.pid
        argv0 = sys.argv[0] if sys.argv else ""
        # Kineto's main CPU process rows: name = basename of argv[0], label "CPU", sort index = pid.
        builder.set_process_name(pid, Path(argv0).name if argv0 not in ("", "-", "-c") else "python", label="CPU",
                                 sort_index=pid)
        recorded = self._recorder.thread_names if self._recorder is not None else {}
        for tid, name in annotations.thread_names_for(sorted(tids), recorded).items():
            builder.set_thread_name(pid, tid, f"thread {tid} ({name})", sort_index=tid)
