"""Intel GPU telemetry through Level Zero Sysman (``zes*``); the binding is ``vendors.sysman``."""
from __future__ import annotations

from ..vendors import sysman
from .base import CollectorAvailability, CollectorUnavailable, MetricInfo
from .telemetry import GPU_METRICS, DeviceTelemetryCollector


class SysmanCollector(DeviceTelemetryCollector):
    name = "sysman"
    description = "Intel GPU telemetry through Level Zero Sysman (zes*, ctypes)"

    @classmethod
    def metrics(cls):
        out = []
        for m in GPU_METRICS:
            if m.name == "gpu_memory_activity":
                continue  # Sysman reports bandwidth counters, not a busy share; not offered
            if m.name == "gpu_utilization":  # engine active time (µs) is cumulative: its derivative is the share
                m = MetricInfo(m.name, m.unit, m.description + " (engine group active time)", kind="cumulative")
            out.append(m)
        return tuple(out)

    @classmethod
    def probe(cls) -> CollectorAvailability:
        try:
            lib = sysman.load_loader()
            devices = sysman.sysman_devices(lib)
        except sysman.SysmanError as exc:
            return CollectorAvailability(False, str(exc))
        if not devices:
            return CollectorAvailability(False, "Level Zero Sysman sees no device (zesDeviceGet listed none)")
        return CollectorAvailability(True, f"{len(devices)} device(s)", {"devices": len(devices)})

    def _open_devices(self) -> list[str]:
        try:
            lib = self._lib = sysman.load_loader()
        except sysman.LoaderMissing as exc:
            raise CollectorUnavailable(str(exc)) from None
        try:
            devices = sysman.sysman_devices(lib)
            if not devices:
                raise CollectorUnavailable("Level Zero Sysman sees no device (zesDeviceGet listed none)")
            self._devices = [sysman.Device(lib, d) for d in devices]
        except sysman.SysmanError as exc:
            raise CollectorUnavailable(f"Level Zero Sysman: {exc}") from None
        return [f"XPU {i}" for i in range(len(self._devices))]

    def _readers(self):
        return sysman.readers(self._lib, self._devices)
