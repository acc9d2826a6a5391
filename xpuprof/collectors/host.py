"""Host telemetry through psutil: CPU utilization, this process's RSS and CPU, system memory.

CPU utilization is a rate: CPU time counted by the kernel (in clock ticks, 10 ms on most systems)
over the span since the previous rate. A span shorter than the sampling interval or than two clock
ticks measures the tick grid, not the load (two samples ~2 ms apart read 0 %), so such a sample
leaves the rates as gaps and the next one measures the longer span. Nothing is ever invented: a
span in which no CPU counted a tick is a gap too.
"""
from __future__ import annotations

import math
import os
import time

from .base import Collector, CollectorAvailability, CollectorUnavailable, MetricInfo

try:
    CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
except (AttributeError, OSError, ValueError):  # not POSIX: psutil's times are already fine-grained
    CLOCK_TICK_S = 0.001
RATE_MIN_TICKS = 2
RATE_SLACK = 0.9  # samples are an interval apart give or take the sampling thread's wake-up jitter
RATE_METRICS = frozenset({"cpu_utilization", "process_cpu_utilization"})


def rate_span_ns(interval_s: float) -> int:
    """The shortest span a CPU rate is measured over."""
    return int(RATE_SLACK * max(interval_s, RATE_MIN_TICKS * CLOCK_TICK_S) * 1e9)


def _busy_and_total(times) -> tuple[float, float]:
    """(busy, total) CPU seconds of a psutil cpu_times() row, counted as psutil.cpu_percent does."""
    total = sum(times)
    # Linux counts guest time inside user time already.
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class HostCollector(Collector):
    name = "host"
    description = "host CPU and memory (psutil), on the host process row"
    scope = "host"

    _METRICS = (
        MetricInfo("cpu_utilization", "%", "system-wide CPU utilization since the previous value (all CPUs; "
                                           "measured over at least the interval and two clock ticks)"),
        MetricInfo("process_cpu_utilization", "%", "this process's CPU use since the previous value "
                                                   "(100 = one CPU fully busy; same span rule)"),
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
        want = set(self.requested)
        self._need_vm = bool(want & {"memory_used", "memory_utilization"})
        self._want_rates = bool(want & RATE_METRICS)
        self.rate_span_ns = rate_span_ns(self.interval_s)
        self._rates = {"cpu_utilization": math.nan, "process_cpu_utilization": math.nan}
        self._baseline = self._cpu_counters() if self._want_rates else None  # the first rate is measured from here
        readers = {
            "cpu_utilization": lambda vm: self._rates["cpu_utilization"],
            "process_cpu_utilization": lambda vm: self._rates["process_cpu_utilization"],
            "process_rss": lambda vm: float(self._proc.memory_info().rss),
            "memory_used": lambda vm: float(vm.total - vm.available),
            "memory_utilization": lambda vm: float(vm.percent),
        }
        self._readers = [readers[m] for m in self.requested]

    def _cpu_counters(self) -> tuple[int, float, float, float]:
        """(monotonic ns, system busy s, system total s, process CPU s), read now."""
        busy, total = _busy_and_total(self._psutil.cpu_times())
        proc = self._proc.cpu_times()
        return time.monotonic_ns(), busy, total, proc.user + proc.system

    def _update_rates(self) -> None:
        """The rates over the span since the baseline, when that span is long enough; else gaps."""
        self._rates["cpu_utilization"] = self._rates["process_cpu_utilization"] = math.nan
        if time.monotonic_ns() - self._baseline[0] < self.rate_span_ns:
            return  # keep the baseline: the next sample measures the longer span
        now = self._cpu_counters()
        elapsed_s = (now[0] - self._baseline[0]) / 1e9
        busy, total, proc = (max(0.0, a - b) for a, b in zip(now[1:], self._baseline[1:]))
        self._baseline = now
        if total > 0:  # no CPU counted a tick in the span: nothing was measured
            self._rates["cpu_utilization"] = round(100.0 * busy / total, 1)
        self._rates["process_cpu_utilization"] = round(100.0 * proc / elapsed_s, 1)

    def read(self):
        vm = self._psutil.virtual_memory() if self._need_vm else None
        if self._want_rates:
            try:
                self._update_rates()
            except (OSError, self._psutil.Error):
                self._rates["cpu_utilization"] = self._rates["process_cpu_utilization"] = math.nan
        out = []
        for reader in self._readers:
            try:
                out.append(float(reader(vm)))
            except (OSError, self._psutil.Error):  # one unreadable value is a gap, not a lost sample
                out.append(math.nan)
        return out
