"""SimBackend and SimSession: the simulated accelerator as a backend (used only when named).

The session collects host range enter/exit marks while it runs; ``process`` turns the innermost
ranges into a simulated timeline (``timeline``) written as one vendor's records (``records``).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from ...activity import ActivityType
from ...clock import MONOTONIC_TO_EPOCH_NS
from ...host.recorder import Int64Log, log_array
from ..base import Backend, BackendError, ProbeResult, ProcessWindow, Session
from ..common import OUT_OF_WINDOW
from .records import CUDA_DEVICE_PROPERTIES, DEVICE_PROPERTIES, SIM_FLAVOURS, SimFlavour, write_timeline
from .timeline import METRICS, metric_values, simulate

_METRIC_ACTIVITIES = frozenset({ActivityType.GPU_PM_COUNTER, ActivityType.XPU_SCOPE_PROFILER,
                                ActivityType.HARDWARE_COUNTERS})


# ---------------------------------------------------------------------------------- the session
class SimSession(Session):
    """Collects host range enter/exit marks; ``process`` turns them into simulated device work."""

    def __init__(self, activity_types: frozenset[ActivityType], metrics: list[str], seed: int,
                 flavour: "SimFlavour | None" = None) -> None:
        self.flavour = flavour or SIM_FLAVOURS["xpu"]
        self.types = activity_types
        self.metrics = metrics
        self.seed = seed
        # Marks (+cid on enter, -1 on exit, native tid, monotonic ns), written by record_function in C
        # while the recorder is installed (between this session's start and stop): no call per range.
        self.correlation_log = Int64Log(3)
        self._start_ns = 0
        self._stop_ns = 0
        self._running = False
        self._dropped: dict[str, int] = {}
        self._errors: list[str] = []

    def start(self) -> None:
        self.correlation_log.clear()
        self._dropped = {}
        self._start_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS
        self._running = True

    def stop(self) -> None:
        self._running = False
        self._stop_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        if self._running:
            self.correlation_log.append(int(correlation_id), threading.get_native_id(), time.monotonic_ns())

    def pop_correlation_id(self, user: bool = False) -> None:
        if self._running:
            self.correlation_log.append(-1, threading.get_native_id(), time.monotonic_ns())

    # ------------------------------------------------------------------ processing
    def _leaf_ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(external id, tid, enter ns, exit ns) of ranges with no nested range, in enter order."""
        marks = log_array(self.correlation_log).ravel().tolist()
        stacks: dict[int, list] = {}
        leaves = []
        end_default = self._stop_ns - MONOTONIC_TO_EPOCH_NS
        for i in range(0, len(marks), 3):
            cid, tid, t = marks[i], marks[i + 1], marks[i + 2]
            stack = stacks.setdefault(tid, [])
            if cid > 0:
                if stack:
                    stack[-1][3] = False  # the enclosing range has a child: not a leaf
                stack.append([cid, tid, t, True])
            elif stack:
                c, tt, t0, leaf = stack.pop()
                if leaf:
                    leaves.append((c, tt, t0, t))
        for stack in stacks.values():  # ranges still open at stop end there
            for c, tt, t0, leaf in stack:
                if leaf:
                    leaves.append((c, tt, t0, end_default))
        if not leaves:
            e = np.array([], np.int64)
            return e, e, e, e
        leaves.sort(key=lambda r: (r[2], r[0]))
        arr = np.array(leaves, dtype=np.int64)
        return arr[:, 0], arr[:, 1], arr[:, 2] + MONOTONIC_TO_EPOCH_NS, arr[:, 3] + MONOTONIC_TO_EPOCH_NS

    def process(self, builder, window: ProcessWindow) -> None:
        ext, tid, enter, exit_ = self._leaf_ranges()
        inside = window.contains(enter)
        if (~inside).any():
            self._dropped[OUT_OF_WINDOW] = int((~inside).sum())
            ext, tid, enter, exit_ = ext[inside], tid[inside], enter[inside], exit_[inside]
        n = len(ext)
        if n == 0:
            return
        rng = np.random.default_rng(self.seed)
        timeline = simulate(ext, tid, enter, exit_, rng)
        duration = timeline.k_end - timeline.k_start
        metrics = metric_values(self.metrics, timeline.kind, duration, rng) if self.metrics else {}
        write_timeline(self, builder, timeline, metrics)

    def device_properties(self) -> list[dict[str, Any]]:
        return [dict(CUDA_DEVICE_PROPERTIES if self.flavour.name == "cuda" else DEVICE_PROPERTIES)]

    def metadata(self) -> dict[str, Any]:
        return {"backend": "sim", "sim_seed": self.seed, "sim_vendor": self.flavour.name}

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

    def configure(self, activity_types, config) -> SimSession | None:
        types = frozenset(activity_types) & self.supported_activities()
        if not types:
            return None
        metrics: list[str] = []
        requested = list(config.experimental.profiler_metrics)
        if requested and types & _METRIC_ACTIVITIES:
            unknown = [m for m in requested if m not in METRICS]
            if unknown:
                raise BackendError(f"the sim backend cannot count {', '.join(map(repr, unknown))}. "
                                   f"Valid metrics: {', '.join(METRICS)}")
            metrics = requested
        seed = config.custom.get("sim_seed", 0)
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise BackendError(f"sim_seed must be an integer, got {seed!r}") from None
        flavour = str(config.custom.get("sim_vendor", "xpu")).strip().lower()
        if flavour not in SIM_FLAVOURS:
            raise BackendError(f"sim_vendor {flavour!r} is not known; valid: {', '.join(SIM_FLAVOURS)}")
        return SimSession(types, metrics, seed, SIM_FLAVOURS[flavour])
