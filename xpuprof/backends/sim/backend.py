"""SimBackend and SimSession: the simulated accelerator as a backend (used only when named).

The session collects host range enter/exit marks while it runs; ``process`` turns the cycle's torch ops
(or, without any, its innermost ranges) into launches (``launches``), a simulated timeline (``timeline``)
and one vendor's records, written by that vendor's emit stage (``records``).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from ...activity import ActivityType
from ...clock import MONOTONIC_TO_EPOCH_NS
from ...host.recorder import Int64Log, log_array
from ...trace.builder.intervals import innermost_containing
from ..base import Backend, BackendError, ProbeResult, ProcessWindow, Session
from ..common import OUT_OF_WINDOW
from .launches import Launches, from_ops, from_ranges, innermost
from .noise import NoiseConfigError, NoiseModel
from .records import CUDA_DEVICE_PROPERTIES, DEVICE_PROPERTIES, SIM_FLAVOURS, SimFlavour
from .timeline import METRICS, MIN_RANGE_NS, metric_values, simulate

_METRIC_ACTIVITIES = frozenset({ActivityType.GPU_PM_COUNTER, ActivityType.XPU_SCOPE_PROFILER,
                                ActivityType.HARDWARE_COUNTERS})
# A launching op or range shorter than MIN_RANGE_NS has no room for its launch call strictly inside it
# (timeline.call_bounds): it launches nothing, and the trace counts it under this reason.
NO_ROOM_FOR_A_CALL = f"launching op or range under {MIN_RANGE_NS} ns (no room for its launch call inside)"


# ---------------------------------------------------------------------------------- the session
class SimSession(Session):
    """Collects host range enter/exit marks; ``process`` turns them into simulated device work."""

    def __init__(self, activity_types: frozenset[ActivityType], metrics: list[str], seed: int,
                 flavour: "SimFlavour | None" = None) -> None:
        self.flavour = flavour or SIM_FLAVOURS["xpu"]
        self.types = activity_types
        self.metrics = metrics
        self.seed = seed
        # Marks (cid, native tid, monotonic ns, parent cid) on enter and (-cid, tid, ns, 0) on exit,
        # written by record_function in C while the recorder is installed (between this session's
        # start and stop): no call per range. The parent is the enclosing range of the entering
        # context (an asyncio task's, a thread's), so leaves are found whatever the interleaving.
        self.correlation_log = Int64Log(4)
        self._pushed = threading.local()  # push/pop_correlation_id callers: each thread's open ids
        self._start_ns = 0
        self._stop_ns = 0
        self._running = False
        self._dropped: dict[str, int] = {}
        self._errors: list[str] = []
        self.vendor_state: dict[str, object] = {}  # what a vendor's emit stage keeps for a session
        self.noise: NoiseModel | None = None  # opt-in (custom sim_noise): noise.py, applied in process()

    def start(self) -> None:
        self.correlation_log.clear()
        self._dropped = {}
        self.vendor_state.clear()
        self._start_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS
        self._running = True

    def stop(self) -> None:
        self._running = False
        self._stop_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        stack = self._pushed.__dict__.setdefault("ids", [])
        if self._running:
            self.correlation_log.append(int(correlation_id), threading.get_native_id(), time.monotonic_ns(),
                                        stack[-1] if stack else 0)
        stack.append(int(correlation_id))

    def pop_correlation_id(self, user: bool = False) -> None:
        stack = self._pushed.__dict__.setdefault("ids", [])
        cid = stack.pop() if stack else 0
        if self._running and cid:
            self.correlation_log.append(-cid, threading.get_native_id(), time.monotonic_ns(), 0)

    # ------------------------------------------------------------------ processing
    def _ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(external id, tid, enter ns, exit ns, leaf) of every range marked while the session ran (epoch
        ns, in enter order); ``leaf``: no other range names it as its parent. A range exited out of order,
        on another thread or never (still open at stop: it ends there) is paired by its id."""
        marks = log_array(self.correlation_log)
        if not len(marks):
            e = np.array([], np.int64)
            return e, e, e, e, np.zeros(0, bool)
        v = marks[:, 0]
        enters = marks[v > 0]
        exits = marks[v < 0]
        cid, tid, t0, parent = enters[:, 0], enters[:, 1], enters[:, 2], enters[:, 3]
        t1 = np.full(len(cid), self._stop_ns - MONOTONIC_TO_EPOCH_NS, np.int64)
        order = np.argsort(cid, kind="stable")
        at = np.searchsorted(cid[order], -exits[:, 0])
        found = at < len(cid)
        found[found] = cid[order][at[found]] == -exits[found, 0]
        t1[order[at[found]]] = exits[found, 2]
        leaf = ~np.isin(cid, parent[parent > 0])
        rows = np.lexsort((cid, t0))
        return (cid[rows], tid[rows], t0[rows] + MONOTONIC_TO_EPOCH_NS,
                np.maximum(t1[rows], t0[rows]) + MONOTONIC_TO_EPOCH_NS, leaf[rows])

    def _range_launches(self, window: ProcessWindow, ops) -> Launches:
        """Innermost ranges, ours and torch's (``user_annotation`` rows of ``ops``), launch (launches.py)."""
        ext, tid, enter, exit_, leaf = self._ranges()
        # Our ranges' leaves by their parents (asyncio tasks interleave ranges on one thread, so nesting
        # in time does not tell which range holds which)
        ext, tid, enter, exit_ = ext[leaf], tid[leaf], enter[leaf], exit_[leaf]
        names, args = (window.ranges(ext) if window.ranges is not None and len(ext)
                       else ([""] * len(ext), [{}] * len(ext)))
        if ops is not None and len(ops):
            rows = np.flatnonzero(ops.cats == "user_annotation")
            if len(rows):
                ext = np.concatenate([ext, ops.external_id[rows]])
                tid = np.concatenate([tid, ops.tid[rows]])
                enter = np.concatenate([enter, ops.start_ns[rows]])
                exit_ = np.concatenate([exit_, ops.end_ns[rows]])
                names = list(names) + [ops.name_table[c] for c in ops.name_codes[rows].tolist()]
                args = list(args) + ops.args(rows.tolist())
                leaf = np.flatnonzero(innermost(tid, enter, exit_))  # torch's ranges nest in time
                return from_ranges(ext[leaf], tid[leaf], enter[leaf], exit_[leaf],
                                   [names[i] or "kernel" for i in leaf.tolist()], [args[i] for i in leaf.tolist()],
                                   self.flavour.name)
        leaf = np.arange(len(ext))
        return from_ranges(ext[leaf], tid[leaf], enter[leaf], exit_[leaf], [names[i] or "kernel" for i in leaf.tolist()],
                           [args[i] for i in leaf.tolist()], self.flavour.name)

    def process(self, builder, window: ProcessWindow) -> None:
        ops = window.host_ops() if window.host_ops is not None else None
        launches = from_ops(ops, self.flavour.name) if ops is not None else None
        if launches is not None:
            # As a device tracer sees them: each launch carries the innermost range of ours around it (the
            # user correlation gpu_user_annotation is drawn from); the profiler then links each call to the
            # innermost torch op around it, the launching op (its calls lie in that op's own time).
            ext, tid, enter, exit_, _ = self._ranges()
            hit = innermost_containing(tid, enter, exit_, launches.tid, launches.enter)
            launches.ext = np.where(hit >= 0, ext[np.maximum(hit, 0)], 0) if len(ext) else np.zeros(len(launches),
                                                                                                    np.int64)
        else:
            launches = self._range_launches(window, ops)
        inside = np.asarray(window.contains(launches.enter), bool)
        if (~inside).any():
            self._dropped[OUT_OF_WINDOW] = int((~inside).sum())
            launches = launches.take(np.flatnonzero(inside))
        fits = (launches.exit_ - launches.enter) >= MIN_RANGE_NS  # room for a call strictly inside
        if not fits.all():
            self._dropped[NO_ROOM_FOR_A_CALL] = int((~fits).sum())
            launches = launches.take(np.flatnonzero(fits))
        if len(launches) == 0:
            return
        if self.noise is not None:
            launches.work_ns = self.noise.apply(launches.names, launches.work_ns)
        rng = np.random.default_rng(self.seed)
        timeline = simulate(launches, rng)
        duration = timeline.k_end - timeline.k_start
        metrics = metric_values(self.metrics, timeline.work_bytes, timeline.comm, duration, rng) if self.metrics else {}
        from . import cuda_records, hip_records, xpu_records  # the flavour's vendor records, through its emit stage

        vendor = {"xpu": xpu_records, "cuda": cuda_records, "hip": hip_records}[self.flavour.name]
        vendor.write(self, builder, timeline, metrics)

    def device_properties(self) -> list[dict[str, Any]]:
        return [dict(CUDA_DEVICE_PROPERTIES if self.flavour.name == "cuda" else DEVICE_PROPERTIES)]

    def metadata(self) -> dict[str, Any]:
        noise = {"sim_noise": self.noise.metadata()} if self.noise is not None else {}
        return {"backend": "sim", "simulated": True, "sim_seed": self.seed, "sim_vendor": self.flavour.name, **noise}

    def errors(self) -> list[str]:
        return list(self._errors)

    def dropped_records(self) -> dict[str, int]:
        return dict(self._dropped)


class SimBackend(Backend):
    name = "sim"
    vendor = "sim"
    description = "deterministic simulated accelerator (demos and pipeline tests; only when named)"

    @classmethod
    def probe(cls) -> ProbeResult:
        return ProbeResult.ok("simulated device (always available; used only when named)")

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return frozenset({ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY,
                          ActivityType.CUDA_SYNC, ActivityType.XPU_SYNC, ActivityType.EXTERNAL_CORRELATION}
                         | _METRIC_ACTIVITIES)

    @classmethod
    def check_metrics(cls, names) -> None:
        from ...catalogs import close_matches

        unknown = [m for m in dict.fromkeys(names) if m not in METRICS]
        if unknown:
            named = "; ".join(f"{m!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)"
                                           if (close := close_matches(m, METRICS)) else "") for m in unknown)
            raise BackendError(f"the sim backend cannot count {named}. Valid metrics: {', '.join(METRICS)}")

    def configure(self, activity_types, config) -> SimSession | None:
        types = frozenset(activity_types) & self.supported_activities()
        if not types:
            return None
        metrics: list[str] = []
        requested = list(config.experimental.profiler_metrics)
        if requested and types & _METRIC_ACTIVITIES:
            self.check_metrics(requested)
            metrics = requested
        seed = config.custom.get("sim_seed", 0)
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise BackendError(f"sim_seed must be an integer, got {seed!r}") from None
        flavour = str(config.custom.get("sim_vendor", "xpu")).strip().lower()
        if flavour not in SIM_FLAVOURS:
            raise BackendError(f"sim_vendor {flavour!r} is not known; valid: {', '.join(SIM_FLAVOURS)}")
        session = SimSession(types, metrics, seed, SIM_FLAVOURS[flavour])
        try:
            session.noise = NoiseModel.from_config(config.custom.get("sim_noise"))
        except NoiseConfigError as exc:
            raise BackendError(str(exc)) from None
        return session
