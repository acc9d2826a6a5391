"""NVIDIA device telemetry through NVML (``pip install nvidia-ml-py``; bound in ``vendors.nvml``).

Device rows are NVML indices (PCI bus order); CUDA's default order (fastest first) can differ
unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. Power is the derivative of
``nvmlDeviceGetTotalEnergyConsumption`` (mJ, Volta and newer), not the 1 s-averaged power reading.
"""
from __future__ import annotations

from ..vendors import nvml
from .base import CollectorAvailability, CollectorUnavailable
from .telemetry import DeviceTelemetryCollector

INSTALL_HINT = "pip install nvidia-ml-py"


def _import():
    try:
        return nvml.load()
    except ImportError as exc:
        raise CollectorUnavailable(f"the nvidia-ml-py package is not installed ({exc}); {INSTALL_HINT}") from None


class NvmlCollector(DeviceTelemetryCollector):
    name = "nvml"
    description = "NVIDIA GPU telemetry through NVML (nvidia-ml-py)"
    vendor_label = "GPU"

    @classmethod
    def probe(cls) -> CollectorAvailability:
        try:
            nv = _import()
            nv.nvmlInit()
        except CollectorUnavailable as exc:
            return CollectorAvailability(False, str(exc))
        except Exception as exc:  # NVMLError_LibraryNotFound / _DriverNotLoaded: no NVIDIA driver here
            return CollectorAvailability(False, f"NVML cannot start: {type(exc).__name__}: {exc} "
                                                f"(no NVIDIA driver on this machine?)")
        try:
            n = nv.nvmlDeviceGetCount()
            version = nv.nvmlSystemGetDriverVersion()
        finally:
            nv.nvmlShutdown()
        if n == 0:
            return CollectorAvailability(False, "NVML sees no NVIDIA GPU")
        return CollectorAvailability(True, f"{n} GPU(s), driver {version}", {"devices": n})

    def _open_devices(self) -> list[str]:
        nv = self._nv = _import()
        try:
            nv.nvmlInit()
        except Exception as exc:
            raise CollectorUnavailable(f"NVML cannot start: {type(exc).__name__}: {exc}") from None
        self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        if not self._handles:
            nv.nvmlShutdown()
            raise CollectorUnavailable("NVML sees no NVIDIA GPU")
        labels = []
        for i, h in enumerate(self._handles):
            name = nv.nvmlDeviceGetName(h)
            labels.append(f"GPU {i} ({name.decode() if isinstance(name, bytes) else name})")
        return labels

    def _readers(self):
        nv, h = self._nv, self._handles

        def gpu_utilization(d):
            return nv.nvmlDeviceGetUtilizationRates(h[d]).gpu

        def gpu_memory_activity(d):
            return nv.nvmlDeviceGetUtilizationRates(h[d]).memory

        def gpu_memory_used(d):
            return nv.nvmlDeviceGetMemoryInfo(h[d]).used

        def gpu_power(d):  # cumulative: mJ -> J, the sampler writes d/dt in W
            return nv.nvmlDeviceGetTotalEnergyConsumption(h[d]) / 1e3

        def gpu_temperature(d):
            return nv.nvmlDeviceGetTemperature(h[d], nv.NVML_TEMPERATURE_GPU)

        def gpu_frequency(d):
            return nv.nvmlDeviceGetClockInfo(h[d], nv.NVML_CLOCK_SM)

        return {f.__name__: f for f in (gpu_utilization, gpu_memory_activity, gpu_memory_used, gpu_power,
                                        gpu_temperature, gpu_frequency)}

    def _shutdown(self) -> None:
        self._nv.nvmlShutdown()
