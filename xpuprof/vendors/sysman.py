"""Level Zero Sysman (``zes*``) by ctypes on the loader we find: device telemetry readings.

Why not the official ``pyzes`` binding: it loads the loader from a hard-coded Debian path at
import time, so it cannot use the loader pip installs or the one ``XPUPROF_ZE_LOADER`` names;
we need only ~20 functions, bound here with the structure layouts of ``zes_api.h`` (v1.x,
structure type values of Sysman 1.11+ as in loader 1.32).

Loader: ``XPUPROF_ZE_LOADER`` (a path) or ``libze_loader.so.1`` on the library path. Per device
(``Device``): card power domain (energy -> power), engine group ALL (else COMPUTE_ALL; active
time -> %), GPU frequency domain, GPU (else global) temperature sensors (hottest), device memory
modules. ``readers`` gives one reading function per telemetry metric.
"""
from __future__ import annotations

import ctypes
import os

ENV_LOADER = "XPUPROF_ZE_LOADER"
ZE_RESULT_SUCCESS = 0
ZE_RESULT_ERROR_UNSUPPORTED_FEATURE = 0x78000003
# zes_structure_type_t (zes_api.h)
ZES_STRUCTURE_TYPE_ENGINE_PROPERTIES = 0x5
ZES_STRUCTURE_TYPE_FREQ_PROPERTIES = 0x9
ZES_STRUCTURE_TYPE_MEM_PROPERTIES = 0xB
ZES_STRUCTURE_TYPE_TEMP_PROPERTIES = 0x14
ZES_STRUCTURE_TYPE_FREQ_STATE = 0x1B
ZES_STRUCTURE_TYPE_MEM_STATE = 0x1E
ZES_ENGINE_GROUP_ALL, ZES_ENGINE_GROUP_COMPUTE_ALL = 0, 1
ZES_FREQ_DOMAIN_GPU = 0
ZES_TEMP_SENSORS_GLOBAL, ZES_TEMP_SENSORS_GPU = 0, 1
ZES_MEM_LOC_DEVICE = 1

_u8, _u32, _i32, _u64, _dbl, _ptr = (ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64,
                                     ctypes.c_double, ctypes.c_void_p)


class zes_power_energy_counter_t(ctypes.Structure):
    _fields_ = [("energy", _u64), ("timestamp", _u64)]  # µJ, µs


class zes_engine_stats_t(ctypes.Structure):
    _fields_ = [("activeTime", _u64), ("timestamp", _u64)]  # µs, µs


class zes_engine_properties_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("type", _i32), ("onSubdevice", _u8), ("subdeviceId", _u32)]


class zes_freq_properties_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("type", _i32), ("onSubdevice", _u8), ("subdeviceId", _u32),
                ("canControl", _u8), ("isThrottleEventSupported", _u8), ("min", _dbl), ("max", _dbl)]


class zes_freq_state_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("currentVoltage", _dbl), ("request", _dbl), ("tdp", _dbl),
                ("efficient", _dbl), ("actual", _dbl), ("throttleReasons", _u32)]


class zes_temp_properties_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("type", _i32), ("onSubdevice", _u8), ("subdeviceId", _u32),
                ("maxTemperature", _dbl), ("isCriticalTempSupported", _u8), ("isThreshold1Supported", _u8),
                ("isThreshold2Supported", _u8)]


class zes_mem_properties_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("type", _i32), ("onSubdevice", _u8), ("subdeviceId", _u32),
                ("location", _i32), ("physicalSize", _u64), ("busWidth", _i32), ("numChannels", _i32)]


class zes_mem_state_t(ctypes.Structure):
    _fields_ = [("stype", _u32), ("pNext", _ptr), ("health", _i32), ("free", _u64), ("size", _u64)]


class SysmanError(RuntimeError):
    pass


class LoaderMissing(SysmanError):
    """No Level Zero loader could be loaded."""


def load_loader() -> ctypes.CDLL:
    path = os.environ.get(ENV_LOADER) or "libze_loader.so.1"
    try:
        return ctypes.CDLL(path)
    except OSError as exc:
        where = f"{ENV_LOADER}={path}" if os.environ.get(ENV_LOADER) else "libze_loader.so.1 on the library path"
        raise LoaderMissing(f"no Level Zero loader ({where}): {exc}") from None


_RESULT_NAMES = {0x78000001: "ZE_RESULT_ERROR_UNINITIALIZED: no Level Zero driver is loaded",
                 0x78000003: "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
                 0x70010000: "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS"}


def _check(result: int, call: str) -> None:
    if result != ZE_RESULT_SUCCESS:
        code = result & 0xFFFFFFFF
        name = _RESULT_NAMES.get(code)
        raise SysmanError(f"{call} returned 0x{code:08x}" + (f" ({name})" if name else ""))


def _enum(lib, fn: str, parent) -> list:
    count = _u32(0)
    _check(getattr(lib, fn)(parent, ctypes.byref(count), None), fn)
    handles = (_ptr * count.value)()
    if count.value:
        _check(getattr(lib, fn)(parent, ctypes.byref(count), handles), fn)
    return [_ptr(h) for h in handles[:count.value]]


def _props(lib, fn: str, handle, struct, stype):
    p = struct(stype=stype)
    _check(getattr(lib, fn)(handle, ctypes.byref(p)), fn)
    return p


def sysman_devices(lib) -> list:
    _check(lib.zesInit(0), "zesInit")
    devices = []
    for driver in _drivers(lib):
        devices += _enum(lib, "zesDeviceGet", driver)
    return devices


def _drivers(lib) -> list:
    count = _u32(0)
    _check(lib.zesDriverGet(ctypes.byref(count), None), "zesDriverGet")
    handles = (_ptr * count.value)()
    if count.value:
        _check(lib.zesDriverGet(ctypes.byref(count), handles), "zesDriverGet")
    return [_ptr(h) for h in handles[:count.value]]


class Device:
    """The handles one device's readings use (None where the device has none)."""

    def __init__(self, lib, dev) -> None:
        self.power = None
        pwr = _ptr()
        if lib.zesDeviceGetCardPowerDomain(dev, ctypes.byref(pwr)) == ZE_RESULT_SUCCESS and pwr.value:
            self.power = pwr
        else:
            domains = _enum(lib, "zesDeviceEnumPowerDomains", dev)
            self.power = domains[0] if domains else None
        engines = {}
        for h in _enum(lib, "zesDeviceEnumEngineGroups", dev):
            p = _props(lib, "zesEngineGetProperties", h, zes_engine_properties_t, ZES_STRUCTURE_TYPE_ENGINE_PROPERTIES)
            if not p.onSubdevice:
                engines.setdefault(p.type, h)
        self.engine = engines.get(ZES_ENGINE_GROUP_ALL) or engines.get(ZES_ENGINE_GROUP_COMPUTE_ALL)
        self.freq = None
        for h in _enum(lib, "zesDeviceEnumFrequencyDomains", dev):
            p = _props(lib, "zesFrequencyGetProperties", h, zes_freq_properties_t, ZES_STRUCTURE_TYPE_FREQ_PROPERTIES)
            if p.type == ZES_FREQ_DOMAIN_GPU and self.freq is None:
                self.freq = h
        temps: dict[int, list] = {}
        for h in _enum(lib, "zesDeviceEnumTemperatureSensors", dev):
            p = _props(lib, "zesTemperatureGetProperties", h, zes_temp_properties_t,
                       ZES_STRUCTURE_TYPE_TEMP_PROPERTIES)
            temps.setdefault(p.type, []).append(h)
        self.temps = temps.get(ZES_TEMP_SENSORS_GPU) or temps.get(ZES_TEMP_SENSORS_GLOBAL) or []
        self.mems = []
        for h in _enum(lib, "zesDeviceEnumMemoryModules", dev):
            p = _props(lib, "zesMemoryGetProperties", h, zes_mem_properties_t, ZES_STRUCTURE_TYPE_MEM_PROPERTIES)
            if p.location == ZES_MEM_LOC_DEVICE:
                self.mems.append(h)


def need(handle, what: str):
    if handle is None or handle == []:
        raise SysmanError(f"the device exposes no {what}")
    return handle


def readers(lib, devices: list[Device]) -> dict:
    """metric name -> reading function of a device index (the collector's ``_readers``)."""
    devs = devices
    energy, stats = zes_power_energy_counter_t(), zes_engine_stats_t()
    freq, mem, temp = zes_freq_state_t(), zes_mem_state_t(), _dbl()

    def gpu_power(d):  # cumulative J
        _check(lib.zesPowerGetEnergyCounter(need(devs[d].power, "power domain"), ctypes.byref(energy)),
               "zesPowerGetEnergyCounter")
        return energy.energy / 1e6

    def gpu_utilization(d):  # cumulative: active µs / 1e4, so d/dt (per s) is percent busy
        _check(lib.zesEngineGetActivity(need(devs[d].engine, "engine group ALL or COMPUTE_ALL"),
                                        ctypes.byref(stats)), "zesEngineGetActivity")
        return stats.activeTime / 1e4

    def gpu_frequency(d):
        freq.stype, freq.pNext = ZES_STRUCTURE_TYPE_FREQ_STATE, None
        _check(lib.zesFrequencyGetState(need(devs[d].freq, "GPU frequency domain"), ctypes.byref(freq)),
               "zesFrequencyGetState")
        if freq.actual < 0:
            raise SysmanError("zesFrequencyGetState reported no actual frequency (-1)")
        return freq.actual

    def gpu_temperature(d):
        hottest = None
        for h in need(devs[d].temps, "GPU or global temperature sensor"):
            _check(lib.zesTemperatureGetState(h, ctypes.byref(temp)), "zesTemperatureGetState")
            hottest = temp.value if hottest is None else max(hottest, temp.value)
        return hottest

    def gpu_memory_used(d):
        used = 0
        for h in need(devs[d].mems, "device memory module"):
            mem.stype, mem.pNext = ZES_STRUCTURE_TYPE_MEM_STATE, None
            _check(lib.zesMemoryGetState(h, ctypes.byref(mem)), "zesMemoryGetState")
            used += mem.size - mem.free
        return used

    return {f.__name__: f for f in (gpu_power, gpu_utilization, gpu_frequency, gpu_temperature, gpu_memory_used)}
