"""An example xpuprof Python plugin: the profiled process's resident memory as a counter track.

Put this file in a directory named by ``XPUPROF_PLUGIN_PATH`` (or the config key
``plugin_paths``); xpuprof imports it on first use and the backend below takes part in every
profile run that enables ``gpu_pm_counter``. It samples at start and at stop, plus every
``custom["host_memory_interval_s"]`` seconds in between when that is set.
"""
from __future__ import annotations

import os
import threading

import xpuprof.clock
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
from xpuprof.plugins import register_backend

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
ROW = "Host memory"


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


class HostMemorySession(Session):
    def __init__(self, interval_s: float | None) -> None:
        self.interval_s = interval_s
        self.ts: list[int] = []
        self.rss: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        self.ts.append(xpuprof.clock.now_ns())
        self.rss.append(_rss_bytes())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        self._sample()
        if self.interval_s:
            self._thread = threading.Thread(target=self._run, name="xpuprof-host-memory", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def process(self, builder, window) -> None:
        import numpy as np

        builder.set_process_name(ROW, ROW, sort_index=0x1000000)
        builder.add_counters(name="Resident memory (MiB)", ts=np.asarray(self.ts, dtype=np.int64), pid=ROW, tid=0,
                             cat=ActivityType.GPU_PM_COUNTER,
                             values={"rss": np.asarray(self.rss, dtype=np.float64) / (1 << 20)})


@register_backend
class HostMemoryBackend(Backend):
    name = "host_memory"
    description = "resident memory of the profiled process (example Python plugin)"

    @classmethod
    def probe(cls) -> ProbeResult:
        if not os.path.exists("/proc/self/statm"):
            return ProbeResult.unavailable("/proc/self/statm does not exist (not Linux)")
        return ProbeResult.ok("reads /proc/self/statm")

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return frozenset({ActivityType.GPU_PM_COUNTER})

    def configure(self, activity_types, config):
        if ActivityType.GPU_PM_COUNTER not in activity_types:
            return None
        interval = (getattr(config, "custom", None) or {}).get("host_memory_interval_s")
        return HostMemorySession(float(interval) if interval else None)
