"""Fake ``pynvml`` (nvidia-ml-py) and ``amdsmi`` modules with the real packages' call shapes and
constants (nvidia-ml-py 12/13 ``pynvml.py``; amdsmi 6.x/7.x ``amdsmi_interface.py``), so the
collectors' logic is tested here; only a real GPU proves the feature."""
from __future__ import annotations

import threading
import types
from types import SimpleNamespace


def fake_pynvml(*, devices=2, init_error: Exception | None = None, unsupported_temp_on=(1,)):
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        def __str__(self):
            return "Not Supported"

    class NVMLError_LibraryNotFound(NVMLError):
        def __str__(self):
            return "NVML Shared Library Not Found"

    nv.NVMLError, nv.NVMLError_NotSupported, nv.NVMLError_LibraryNotFound = (
        NVMLError, NVMLError_NotSupported, NVMLError_LibraryNotFound)
    nv.NVML_TEMPERATURE_GPU = 0
    nv.NVML_CLOCK_GRAPHICS, nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM = 0, 1, 2
    state = SimpleNamespace(inits=0, shutdowns=0, energy_calls=0, enough=threading.Event(), want=4,
                            energy_mj=[0] * devices)

    def nvmlInit():
        if init_error is not None:
            raise init_error
        state.inits += 1

    def nvmlShutdown():
        state.shutdowns += 1

    def handle(i):
        if not 0 <= i < devices:
            raise NVMLError("Invalid Argument")
        return ("h", i)

    def energy(h):
        state.energy_calls += 1
        if state.energy_calls >= state.want * devices:
            state.enough.set()
        state.energy_mj[h[1]] += 500 * (h[1] + 1)  # device 0 gains 0.5 J per read, device 1 gains 1 J
        return state.energy_mj[h[1]]

    def temperature(h, sensor):
        assert sensor == nv.NVML_TEMPERATURE_GPU
        if h[1] in unsupported_temp_on:
            raise NVMLError_NotSupported()
        return 60 + h[1]

    nv.nvmlInit, nv.nvmlShutdown = nvmlInit, nvmlShutdown
    nv.nvmlDeviceGetCount = lambda: devices
    nv.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    nv.nvmlDeviceGetHandleByIndex = handle
    nv.nvmlDeviceGetName = lambda h: f"NVIDIA H100 80GB HBM3 #{h[1]}"
    nv.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=37 + h[1], memory=12)
    nv.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=80 << 30, free=70 << 30, used=10 << 30)
    nv.nvmlDeviceGetTotalEnergyConsumption = energy
    nv.nvmlDeviceGetTemperature = temperature
    nv.nvmlDeviceGetClockInfo = lambda h, kind: {0: 1755, 1: 1980, 2: 2619}[kind]
    nv.state = state
    return nv


def fake_amdsmi(*, devices=1, init_error: Exception | None = None):
    smi = types.ModuleType("amdsmi")

    class AmdSmiLibraryException(Exception):
        pass

    smi.AmdSmiLibraryException = AmdSmiLibraryException
    smi.AmdSmiInitFlags = SimpleNamespace(INIT_ALL_PROCESSORS=0xFFFFFFFF, INIT_AMD_CPUS=1, INIT_AMD_GPUS=2)
    smi.AmdSmiTemperatureType = SimpleNamespace(EDGE=0, HOTSPOT=1, VRAM=2)
    smi.AmdSmiTemperatureMetric = SimpleNamespace(CURRENT=0)
    smi.AmdSmiClkType = SimpleNamespace(SYS=0, GFX=0, DF=1, DCEF=2, SOC=3, MEM=4)
    state = SimpleNamespace(acc=[0] * devices, calls=0, enough=threading.Event(), want=4, shut=0)

    def init(flags):
        if init_error is not None:
            raise init_error
        assert flags == smi.AmdSmiInitFlags.INIT_AMD_GPUS

    def energy(h):
        state.calls += 1
        if state.calls >= state.want * devices:
            state.enough.set()
        state.acc[h] += 65536  # x 15.3 µJ resolution = ~1.0027 J per read
        return {"energy_accumulator": state.acc[h], "counter_resolution": 15.3, "timestamp": 0}

    def shut():
        state.shut += 1

    smi.amdsmi_init = init
    smi.amdsmi_shut_down = shut
    smi.amdsmi_get_processor_handles = lambda: list(range(devices))
    smi.amdsmi_get_gpu_asic_info = lambda h: {"market_name": "AMD Instinct MI300X"}
    smi.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 88, "umc_activity": "N/A", "mm_activity": 0}
    smi.amdsmi_get_gpu_vram_usage = lambda h: {"vram_total": 196592, "vram_used": 1024}
    smi.amdsmi_get_energy_count = energy
    smi.amdsmi_get_temp_metric = lambda h, kind, metric: 45
    smi.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100, "min_clk": 500, "max_clk": 2100, "clk_locked": False}
    smi.state = state
    return smi
