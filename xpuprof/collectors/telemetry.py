"""Device telemetry shared by the vendor collectors (NVML, amdsmi, Level Zero Sysman): one set of
metric names, so ``gpu_power`` means the same on every vendor, and one track per device.

A vendor collector implements ``_open_devices`` (-> device labels), ``_readers`` (metric ->
function(device index) -> float) and ``_shutdown``. A reading the device does not support
becomes NaN (a gap in the track, reported once in the trace's metadata), never a fake zero.
"""
from __future__ import annotations

import math
from abc import abstractmethod
from typing import Callable, ClassVar, Sequence

from .base import Collector, MetricInfo, Track

GPU_METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("gpu_utilization", "%", "share of time the device's compute engines were busy"),
    MetricInfo("gpu_memory_activity", "%", "share of time device memory was being read or written"),
    MetricInfo("gpu_memory_used", "B", "device memory in use"),
    MetricInfo("gpu_power", "W", "device power, the derivative of its energy counter", kind="cumulative"),
    MetricInfo("gpu_temperature", "C", "device (GPU core) temperature"),
    MetricInfo("gpu_frequency", "MHz", "current compute clock frequency"),
)


class DeviceTelemetryCollector(Collector):
    scope = "device"
    vendor_label: ClassVar[str] = "GPU"

    @classmethod
    def metrics(cls):
        return GPU_METRICS

    @abstractmethod
    def _open_devices(self) -> list[str]:
        """The vendor library opened; the devices' names, in index order."""

    @abstractmethod
    def _readers(self) -> dict[str, Callable[[int], float]]:
        """Per metric name: the reader of one device's value (by index)."""

    def _shutdown(self) -> None:
        pass

    def open(self) -> None:
        self._labels = self._open_devices()
        readers = self._readers()
        self._calls = [(d, readers[m]) for d in range(len(self._labels)) for m in self.requested]
        self.unsupported: dict[str, str] = {}

    def tracks(self) -> Sequence[Track]:
        return [Track(self.name, tuple(self.requested), device=d, device_label=label)
                for d, label in enumerate(self._labels)]

    def read(self) -> list[float]:
        out = []
        for device, reader in self._calls:
            try:
                out.append(float(reader(device)))
            except Exception as exc:  # not supported on this device/driver: a gap, said once
                key = f"{getattr(reader, '__name__', reader)}@{device}"
                if key not in self.unsupported:
                    self.unsupported[key] = f"{type(exc).__name__}: {exc}"
                out.append(math.nan)
        return out

    def close(self) -> None:
        self._shutdown()
