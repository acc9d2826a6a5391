"""One recording cycle: configure, start, stop and abort every source of a profile run.

A cycle configures one session per chosen backend (warmup), starts them with the host recorder,
torch's op recorder, the Python function tracer and the metric collectors (active), and stops them
again, handing the finished sources to ``assemble``. Whatever fails while starting is undone, so
nothing stays half-started.
"""
from __future__ import annotations

import time

from ..activity import ActivityType
from ..backends.base import Backend, ProcessWindow, RangeThreads, Session
from ..clock import now_ns
from ..config.options import ProfilerConfig
from ..host import recorder
from .selection import _plugin_failed, activities_not_collected

# toggle_collection_dynamic's host side: torch's op recorder (its ops, ranges and [memory] events) and our ranges
HOST_SOURCE = "host"
HOST_TOGGLED = frozenset({ActivityType.CPU_OP, ActivityType.USER_ANNOTATION, ActivityType.CPU_INSTANT_EVENT})
_RANGE_TID = recorder.RANGE_FIELDS.index("tid")
_RANGE_CORRELATION = recorder.RANGE_FIELDS.index("correlation_id")


class RecordingCycle:
    """The sources of the current (or last) recording cycle of one profile."""

    def __init__(self, config: ProfilerConfig, collector_plan: dict[str, list[str]]) -> None:
        self.config = config
        self.collector_plan = collector_plan  # collector -> metric names (profiler.selection.plan_collectors)
        self.sessions: list[tuple[str, Session]] = []
        self.session_types: dict[str, frozenset[ActivityType]] = {}  # what each session was configured for
        self.recorder: recorder.HostRecorder | None = None
        self.pytracer = None
        self.torch_ops = None  # torch's CPU-only profiler for this cycle (host.torch_ops), when torch is in use
        self.torch_guard = None  # keeps a conflicting torch.profiler from starting during this cycle
        self.torch_ops_note: str | None = None
        self.torch_id_base = 0  # torch's External ids were moved above this in the last trace (assemble_torch)
        self.collectors = None
        self.window_start = 0
        # paused intervals [start, end or None] (epoch ns) per source: a session's name, or HOST_SOURCE
        self.paused: dict[str, list[list]] = {}
        self.setup_errors: dict[str, list[str]] = {}  # named backends that took no part in this cycle: why
        self.not_collected: dict[str, str] = {}  # asked-for activities no backend in use records: why
        self.truncated_ranges = 0  # ranges still open at stop, closed at its end (HostRecorder.truncated)
        self.lifetimes: dict[str, int] = {}  # HostRecorder.lifetimes() at stop
        self.recording_stopped: dict | None = None  # HostRecorder.recording_state() at stop: the cap was reached

    @property
    def recording(self) -> bool:
        return self.recorder is not None

    def prepare(self, backends: list[Backend]) -> None:
        """Configure one session per backend that records any requested activity (warmup)."""
        self.sessions = []
        self.session_types: dict[str, frozenset[ActivityType]] = {}
        self.setup_errors = {}
        device_types = self.config.activities
        named = set(self.config.backends or ())
        served: set[ActivityType] = set()
        for backend in backends:
            supported = backend.supported_activities()
            types = frozenset(device_types & supported)
            if not types:
                # Asked for by name and silently absent would be a lie; a plugin whose call failed has that
                # fault in backend_errors already (said once), so no second line for the same failure.
                if backend.name in named and not _plugin_failed(backend.name):
                    self.setup_errors.setdefault(backend.name, []).append(
                        "took no part: it records none of the requested activities (it supports: "
                        f"{', '.join(sorted(t.value for t in supported)) or 'nothing'})")
                continue
            session = backend.configure(types, self.config)
            if session is not None:
                self.sessions.append((backend.name, session))
                self.session_types[backend.name] = types
                served |= types
            elif backend.name in named and not _plugin_failed(backend.name):
                self.setup_errors.setdefault(backend.name, []).append("took no part: configure() declined")
        self.not_collected = activities_not_collected(self.config, backends, served)

    def start(self) -> None:
        """Start every source; on any failure stop what started and re-raise."""
        guard, torch_ops = self._torch_op_recorder()  # a running torch.profiler refuses here, before anything starts
        corr = [s for _, s in self.sessions if s.wants_correlation]
        self.recorder = recorder.HostRecorder(correlation_sessions=corr)
        self.window_start = now_ns()
        self.paused = {}
        started: list[tuple[str, Session]] = []
        try:
            self._start_torch(guard, torch_ops)
            for name, session in self.sessions:
                session.start()
                started.append((name, session))
            if self.config.records_python_functions:
                from ..host.pyfunctions import PythonFunctionTracer
                tracer = PythonFunctionTracer()
                tracer.start()  # raises when another tool already owns sys.setprofile
                self.pytracer = tracer
            if self.collector_plan:
                self.collectors = self._start_collectors()
        except BaseException:
            self.sessions = started  # stop only what started
            self.abort()
            raise
        recorder.install(self.recorder)

    def record_torch_ops_from_now(self) -> bool:
        """torch was imported while this cycle records: record its ops from now on, on the calling thread."""
        if not self.recording or self.torch_ops is not None or self.torch_guard is not None:
            return False
        guard, torch_ops = self._torch_op_recorder()
        self._start_torch(guard, torch_ops)
        return torch_ops is not None

    def _start_torch(self, guard, torch_ops) -> None:
        if torch_ops is not None:
            torch_ops.start()
            self.torch_ops = torch_ops
        if guard is not None:
            guard.install()
            self.torch_guard = guard

    def _torch_op_recorder(self):
        """(guard, recorder) for this cycle when the program uses torch: the guard whenever torch.profiler
        could conflict (we record ops through it, or a backend of ours owns the vendor tracing API), the
        recorder of torch's CPU-only profiler when cpu_op is asked for. A torch.profiler already running
        is refused here, before anything starts. (None, None) without torch: torch is never imported."""
        self.torch_ops_note = None
        from ..host import torch_ops

        torch = torch_ops.torch_if_imported()
        if torch is None:
            return None, None
        # torch's [memory] events come from the same recorder as its ops
        records_ops = ActivityType.CPU_OP in self.config.activities or self.config.profile_memory
        # every backend but the simulator traces through a vendor API (CUPTI, PTI, roctracer, a plugin's)
        owner = ", ".join(name for name, _ in self.sessions if name != "sim")
        if not records_ops and not owner:
            return None, None
        guard = torch_ops.TorchProfilerGuard(torch, records_ops=records_ops, device_owner=owner)
        guard.check_not_running()
        if not records_ops:
            return guard, None
        cfg = self.config
        return guard, torch_ops.TorchOpRecorder(torch, record_shapes=cfg.record_shapes, with_stack=cfg.with_stack,
                                                guard=guard, profile_memory=cfg.profile_memory,
                                                with_flops=cfg.with_flops, with_modules=cfg.with_modules,
                                                experimental=cfg.torch_experimental,
                                                shapes_for_sim=any(name == "sim" for name, _ in self.sessions))

    def _start_collectors(self):
        from ..collectors import registry as collector_registry
        from ..collectors.sampler import CollectorRun

        classes = {name: collector_registry.get_collector_class(name, self.config) for name in self.collector_plan}
        run = CollectorRun(self.collector_plan, classes, self.config.experimental.metrics_interval_ms / 1e3,
                           origins=collector_registry.plugin_collectors())
        run.start()
        return run

    def abort(self) -> None:
        """Stop whatever started, reporting nothing (the first error is the one raised)."""
        if self.collectors is not None:
            self.collectors.stop(abort=True)
            self.collectors = None
        if self.pytracer is not None:
            self.pytracer.stop()
            self.pytracer = None
        if self.torch_guard is not None:
            self.torch_guard.remove()
            self.torch_guard = None
        if self.torch_ops is not None:
            self.torch_ops.abort()
            self.torch_ops = None
        if recorder.active_recorder() is self.recorder:
            recorder.install(None)
        if self.recorder is not None:
            self.recorder.discard_spill()
        for _, session in self.sessions:
            try:
                session.stop()
            except Exception:  # already failing; the first error is the one to report
                pass
        self.sessions = []
        self.recorder = None

    def stop(self) -> tuple[ProcessWindow, dict[str, list[str]]]:
        """Stop every source; the recorded window and each backend's stop errors. The sources stay
        readable for ``assemble`` until ``clear()``."""
        if self.pytracer is not None:
            self.pytracer.stop()
        if self.torch_guard is not None:
            self.torch_guard.remove()
            self.torch_guard = None
        if self.torch_ops is not None:
            self.torch_ops.stop()
        rec = self.recorder
        if rec is not None:  # while it is installed: ranges still open end here, never dropped
            self.truncated_ranges = rec.close_open_ranges(time.monotonic_ns())
            self.lifetimes = rec.lifetimes()
            self.recording_stopped = rec.recording_state()
        recorder.install(None)
        if self.collectors is not None:
            self.collectors.stop()  # its last sample lies inside the window
        end = now_ns()
        errors: dict[str, list[str]] = {}
        for name, session in self.sessions:
            try:
                session.stop()
            except Exception as exc:
                errors.setdefault(name, []).append(f"stop failed: {type(exc).__name__}: {exc}")

        def range_threads():  # read only if a backend's records lack their thread (RangeThreads)
            rows = recorder.log_array(rec.ranges)
            return rows[:, _RANGE_CORRELATION], rows[:, _RANGE_TID]

        window = ProcessWindow(self.window_start, end, RangeThreads(range_threads) if rec is not None else None)
        return window, errors

    # ------------------------------------------------------------------ pause / resume
    def sources_of(self, activities: frozenset[ActivityType] | None) -> list[str]:
        """The sources recording ``activities`` (None: every device source): session names, and HOST_SOURCE
        (torch's ops and our ranges) for host activities."""
        names = [name for name, _ in self.sessions if activities is None or self.session_types.get(name, frozenset())
                 & activities]
        if activities is not None and activities & HOST_TOGGLED:
            names.append(HOST_SOURCE)
        return names

    def pause(self, activities: frozenset[ActivityType] | None = None) -> list[str]:
        """Stop accepting records of ``activities`` (None: every device source) until ``resume``: each
        session's ``pause()``, torch's op recorder toggled off for host activities, and the interval noted
        (its records are dropped at processing and the trace marks it). Returns the sources paused."""
        paused = []
        for name in self.sources_of(activities):
            spans = self.paused.setdefault(name, [])
            if spans and spans[-1][1] is None:
                continue  # already paused
            if name == HOST_SOURCE:
                if self.torch_ops is not None:
                    self.torch_ops.toggle(False)
            else:
                dict(self.sessions)[name].pause()
            spans.append([now_ns(), None])
            paused.append(name)
        return paused

    def resume(self, activities: frozenset[ActivityType] | None = None) -> list[str]:
        """Accept records of ``activities`` again (None: every paused source). Returns the sources resumed."""
        resumed = []
        for name in self.sources_of(activities) if activities is not None else list(self.paused):
            spans = self.paused.get(name)
            if not spans or spans[-1][1] is not None:
                continue
            if name == HOST_SOURCE:
                if self.torch_ops is not None:
                    self.torch_ops.toggle(True)
            else:
                dict(self.sessions)[name].resume()
            spans[-1][1] = now_ns()
            resumed.append(name)
        return resumed

    def paused_intervals(self, name: str, end_ns: int) -> tuple:
        """``name``'s paused (start, end) intervals; one still open at stop ends at ``end_ns``."""
        return tuple((s, e if e is not None else end_ns) for s, e in self.paused.get(name, ()))

    def clear(self) -> None:
        """Drop the stopped sources (their records are in the trace now, so their crash-safe copy goes)."""
        if self.recorder is not None:
            self.recorder.discard_spill()
        self.collectors = None
        self.recorder = None
        self.pytracer = None
        self.torch_ops = None
        self.sessions = []
