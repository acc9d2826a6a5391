"""AMD device telemetry through AMD SMI (``pip install amdsmi`` with ROCm's libamd_smi; bound
in ``vendors.amdsmi``). Power is the derivative of the energy accumulator (``amdsmi_get_energy_count``:
accumulator x counter_resolution µJ); VRAM is reported by amdsmi in MB."""
from __future__ import annotations

from ..vendors import amdsmi
from .base import CollectorAvailability, CollectorUnavailable
from .telemetry import DeviceTelemetryCollector

INSTALL_HINT = "pip install amdsmi (it needs ROCm's libamd_smi.so)"


def _import():
    try:
        return amdsmi.load()
    except ImportError as exc:
        raise CollectorUnavailable(f"the amdsmi package is not installed ({exc}); {INSTALL_HINT}") from None
    except (OSError, KeyError) as exc:  # the package is there but libamd_smi.so is not
        raise CollectorUnavailable(f"amdsmi cannot load ROCm's libamd_smi: {type(exc).__name__}: {exc}") from None


def _number(value, what: str) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    raise ValueError(f"{what} is {value!r} on this device")  # amdsmi answers "N/A" when unsupported


class AmdSmiCollector(DeviceTelemetryCollector):
    name = "amdsmi"
    description = "AMD GPU telemetry through AMD SMI (amdsmi)"

    @classmethod
    def probe(cls) -> CollectorAvailability:
        try:
            smi = _import()
            smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        except CollectorUnavailable as exc:
            return CollectorAvailability(False, str(exc))
        except Exception as exc:
            return CollectorAvailability(False, f"AMD SMI cannot start: {type(exc).__name__}: {exc} "
                                                f"(no amdgpu driver on this machine?)")
        try:
            n = len(smi.amdsmi_get_processor_handles())
        finally:
            smi.amdsmi_shut_down()
        if n == 0:
            return CollectorAvailability(False, "AMD SMI sees no AMD GPU")
        return CollectorAvailability(True, f"{n} GPU(s)", {"devices": n})

    def _open_devices(self) -> list[str]:
        smi = self._smi = _import()
        try:
            smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        except Exception as exc:
            raise CollectorUnavailable(f"AMD SMI cannot start: {type(exc).__name__}: {exc}") from None
        self._handles = list(smi.amdsmi_get_processor_handles())
        if not self._handles:
            smi.amdsmi_shut_down()
            raise CollectorUnavailable("AMD SMI sees no AMD GPU")
        labels = []
        for i, h in enumerate(self._handles):
            try:
                market = smi.amdsmi_get_gpu_asic_info(h).get("market_name") or ""
            except Exception:  # the label is cosmetic
                market = ""
            labels.append(f"GPU {i}" + (f" ({market})" if market else ""))
        return labels

    def _readers(self):
        smi, h = self._smi, self._handles

        def gpu_utilization(d):
            return _number(smi.amdsmi_get_gpu_activity(h[d])["gfx_activity"], "gfx_activity")

        def gpu_memory_activity(d):
            return _number(smi.amdsmi_get_gpu_activity(h[d])["umc_activity"], "umc_activity")

        def gpu_memory_used(d):
            return _number(smi.amdsmi_get_gpu_vram_usage(h[d])["vram_used"], "vram_used") * 1024 * 1024

        def gpu_power(d):  # cumulative J
            e = smi.amdsmi_get_energy_count(h[d])
            acc = e.get("energy_accumulator", e.get("power"))  # older amdsmi named the accumulator "power"
            return _number(acc, "energy_accumulator") * _number(e["counter_resolution"], "counter_resolution") / 1e6

        def gpu_temperature(d):
            return _number(smi.amdsmi_get_temp_metric(h[d], smi.AmdSmiTemperatureType.EDGE,
                                                      smi.AmdSmiTemperatureMetric.CURRENT), "edge temperature")

        def gpu_frequency(d):
            info = smi.amdsmi_get_clock_info(h[d], smi.AmdSmiClkType.GFX)
            return _number(info.get("clk", info.get("cur_clk")), "GFX clock")

        return {f.__name__: f for f in (gpu_utilization, gpu_memory_activity, gpu_memory_used, gpu_power,
                                        gpu_temperature, gpu_frequency)}

    def _shutdown(self) -> None:
        self._smi.amdsmi_shut_down()
