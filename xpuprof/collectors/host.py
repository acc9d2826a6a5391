"""Host telemetry through psutil: CPU utilization, this process's RSS and CPU, system memory."""
from __future__ import annotations

import math
import os

from .base import Collector, CollectorAvailability, CollectorUnavailable, MetricInfo


class HostCollector(Collector):
    name = "host"
    description = "host CPU and memory (psutil), on the host process row"
    scope = "host"

    _METRICS = (
        MetricInfo("cpu_utilization", "%", "system-wide CPU utilization since the previous sample (all CPUs)"),
        MetricInfo("process_cpu_utilization", "%", "this process's CPU use since the previous sample "
                                                   "(100 = one CPU fully busy)"),
        MetricInfo("process_rss", "B", "this process's resident set size"),
        MetricInfo("memory_used", "B", "system memory in use (total - available)"),
        MetricInfo("memory_utilization", "%", "system memory in use, percent of total"),
    )

    @classmethod
    def metrics(cls):
        return cls._METRICS

    @classmethod
    def probe(cls) -> CollectorAvailability:
        try:
            import psutil
        except ImportError as exc:
            return CollectorAvailability(False, f"the psutil package is not installed ({exc}); pip install psutil")
        return CollectorAvailability(True, f"psutil {psutil.__version__}")

    def open(self) -> None:
        try:
            import psutil
        except ImportError as exc:
            raise CollectorUnavailable(f"the psutil package is not installed ({exc}); pip install psutil") from None
        self._psutil = psutil
        self._proc = psutil.Process(os.getpid())
        # cpu_percent(None) measures since the previous call: prime both so the first sample is real.
        psutil.cpu_percent(None)
        self._proc.cpu_percent(None)
        want = set(self.requested)
        self._need_vm = bool(want & {"memory_used", "memory_utilization"})
        readers = {
            "cpu_utilization": lambda vm: psutil.cpu_percent(None),
            "process_cpu_utilization": lambda vm: self._proc.cpu_percent(None),
            "process_rss": lambda vm: float(self._proc.memory_info().rss),
            "memory_used": lambda vm: float(vm.total - vm.available),
            "memory_utilization": lambda vm: float(vm.percent),
        }
        self._readers = [readers[m] for m in self.requested]

    def read(self):
        vm = self._psutil.virtual_memory() if self._need_vm else None
        out = []
        for reader in self._readers:
            try:
                out.append(float(reader(vm)))
            except (OSError, self._psutil.Error):  # one unreadable value is a gap, not a lost sample
                out.append(math.nan)
        return out
