"""A minimal ctypes binding to the Level Zero loader (``libze_loader.so.1``): drivers, devices,
properties, UUIDs. (PyPI's ``pyze`` is an unrelated car client; nothing there wraps core ``ze*``.)

Safe to call in-process: ``zeInit`` without a driver just fails. PTI is the one that aborts, which
is why ``availability`` runs this first, in a subprocess.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

LOADER_ENV = "XPUPROF_ZE_LOADER"  # explicit loader path
ZE_RESULT_SUCCESS = 0
ZE_RESULT_ERROR_UNINITIALIZED = 0x78000001
ZE_DEVICE_TYPE_GPU = 1
ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1
ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3
ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES = 0x4
ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES = 0x7

u32, u64 = ctypes.c_uint32, ctypes.c_uint64


class ze_device_properties_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("type", u32), ("vendorId", u32), ("deviceId", u32),
                ("flags", u32), ("subdeviceId", u32), ("coreClockRate", u32), ("maxMemAllocSize", u64),
                ("maxHardwareContexts", u32), ("maxCommandQueuePriority", u32), ("numThreadsPerEU", u32),
                ("physicalEUSimdWidth", u32), ("numEUsPerSubslice", u32), ("numSubslicesPerSlice", u32),
                ("numSlices", u32), ("timerResolution", u64), ("timestampValidBits", u32),
                ("kernelTimestampValidBits", u32), ("uuid", ctypes.c_uint8 * 16), ("name", ctypes.c_char * 256)]


class ze_device_compute_properties_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("maxTotalGroupSize", u32), ("maxGroupSizeX", u32),
                ("maxGroupSizeY", u32), ("maxGroupSizeZ", u32), ("maxGroupCountX", u32), ("maxGroupCountY", u32),
                ("maxGroupCountZ", u32), ("maxSharedLocalMemory", u32), ("numSubGroupSizes", u32),
                ("subGroupSizes", u32 * 8)]


class ze_device_memory_properties_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("flags", u32), ("maxClockRate", u32),
                ("maxBusWidth", u32), ("totalSize", u64), ("name", ctypes.c_char * 256)]


class ze_driver_properties_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("uuid", ctypes.c_uint8 * 16), ("driverVersion", u32)]


# Level Zero's null driver (ZE_ENABLE_NULL_DRIVER=1) reports devices by this name, vendor 0, zero UUID.
NULL_DEVICE_NAME = "Null Device"
NULL_DEVICE_NOTE = ("the Level Zero null driver's test device (ZE_ENABLE_NULL_DRIVER=1), not a GPU: runtime and "
                    "driver calls only; kernels or copies on it abort PTI, and it cannot collect metrics")


def is_null_device(name: str, vendor_id: int = 0) -> bool:
    return name == NULL_DEVICE_NAME and vendor_id == 0


class LevelZeroError(RuntimeError):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Device:
    index: int  # position among the GPU devices (the trace's device pid)
    name: str
    uuid: bytes
    vendor_id: int
    device_id: int
    type: int
    core_clock_mhz: int
    max_mem_alloc: int
    compute_units: int
    max_work_group_size: int
    local_mem_size: int
    total_memory: int
    driver_version: int

    @property
    def is_null_device(self) -> bool:
        return is_null_device(self.name, self.vendor_id)

    def kineto_properties(self) -> dict:
        """The ``deviceProperties`` object Kineto writes for an XPU device (plus a note on a test device)."""
        props = {"id": self.index, "name": self.name, "totalGlobalMem": self.total_memory,
                 "maxComputeUnits": self.compute_units, "maxWorkGroupSize": self.max_work_group_size,
                 "maxClockFrequency": self.core_clock_mhz, "maxMemAllocSize": self.max_mem_alloc,
                 "localMemSize": self.local_mem_size, "vendor": f"0x{self.vendor_id:04x}",
                 "driverVersion": str(self.driver_version)}
        if self.is_null_device:
            props["note"] = NULL_DEVICE_NOTE
        return props


def find_loader() -> str | None:
    explicit = os.environ.get(LOADER_ENV)
    if explicit:
        return explicit
    for name in ("libze_loader.so.1", "libze_loader.so"):
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return ctypes.util.find_library("ze_loader")


# Set when this module put the Level Zero loader into the process (it was not mapped before): then
# Level Zero was initialized by xpuprof itself, which messages about ZET_ENABLE_METRICS can say.
_loaded_first_by_xpuprof: list[bool] = []


def loader_mapped(maps_path: str = "/proc/self/maps") -> list[str]:
    """Paths of the Level Zero loader mapped into this process (empty when none is)."""
    try:
        with open(maps_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return list(dict.fromkeys(line.rsplit(" ", 1)[-1] for line in text.splitlines()
                              if line.rsplit("/", 1)[-1].startswith("libze_loader.so")))


def loaded_first_by_xpuprof() -> bool:
    """True when xpuprof's own XPU backend (this module) brought Level Zero into this process."""
    return bool(_loaded_first_by_xpuprof and _loaded_first_by_xpuprof[0])


def load_loader(path: str | None = None) -> ctypes.CDLL:
    already = None if _loaded_first_by_xpuprof else bool(loader_mapped())
    path = path or find_loader()
    if not path:
        raise LevelZeroError("no Level Zero loader (libze_loader.so.1) found; install the Intel GPU driver "
                             "packages (level-zero / intel-level-zero-gpu) or set " + LOADER_ENV)
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise LevelZeroError(f"cannot load the Level Zero loader {path}: {exc}") from exc
    if already is not None:
        _loaded_first_by_xpuprof.append(not already)
    return lib


def _check(fn: str, code: int) -> None:
    if code != ZE_RESULT_SUCCESS:
        raise LevelZeroError(f"{fn} failed with 0x{code:08x}", code)


def drivers(lib: ctypes.CDLL) -> list[ctypes.c_void_p]:
    _check("zeInit", lib.zeInit(ctypes.c_uint32(0)))
    count = ctypes.c_uint32(0)
    _check("zeDriverGet", lib.zeDriverGet(ctypes.byref(count), None))
    handles = (ctypes.c_void_p * count.value)()
    if count.value:
        _check("zeDriverGet", lib.zeDriverGet(ctypes.byref(count), handles))
    return list(handles)


def gpu_devices(lib: ctypes.CDLL | None = None) -> list[Device]:
    """Every GPU device of every driver, in enumeration order (index = trace device id)."""
    lib = lib or load_loader()
    out: list[Device] = []
    for drv in drivers(lib):
        dprops = ze_driver_properties_t(stype=ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES)
        drv_version = dprops.driverVersion if lib.zeDriverGetProperties(ctypes.c_void_p(drv), ctypes.byref(dprops)) == 0 else 0
        count = ctypes.c_uint32(0)
        _check("zeDeviceGet", lib.zeDeviceGet(ctypes.c_void_p(drv), ctypes.byref(count), None))
        devs = (ctypes.c_void_p * count.value)()
        if count.value:
            _check("zeDeviceGet", lib.zeDeviceGet(ctypes.c_void_p(drv), ctypes.byref(count), devs))
        for dev in devs:
            p = ze_device_properties_t(stype=ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
            _check("zeDeviceGetProperties", lib.zeDeviceGetProperties(ctypes.c_void_p(dev), ctypes.byref(p)))
            if p.type != ZE_DEVICE_TYPE_GPU:
                continue
            c = ze_device_compute_properties_t(stype=ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES)
            has_compute = lib.zeDeviceGetComputeProperties(ctypes.c_void_p(dev), ctypes.byref(c)) == 0
            total = 0
            n = ctypes.c_uint32(0)
            if lib.zeDeviceGetMemoryProperties(ctypes.c_void_p(dev), ctypes.byref(n), None) == 0 and n.value:
                mems = (ze_device_memory_properties_t * n.value)()
                for m in mems:
                    m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES
                if lib.zeDeviceGetMemoryProperties(ctypes.c_void_p(dev), ctypes.byref(n), mems) == 0:
                    total = sum(m.totalSize for m in mems[:n.value])
            out.append(Device(
                index=len(out), name=p.name.decode("utf-8", "replace"), uuid=bytes(p.uuid), vendor_id=p.vendorId,
                device_id=p.deviceId, type=p.type, core_clock_mhz=p.coreClockRate, max_mem_alloc=p.maxMemAllocSize,
                compute_units=p.numSlices * p.numSubslicesPerSlice * p.numEUsPerSubslice,
                max_work_group_size=c.maxTotalGroupSize if has_compute else 0,
                local_mem_size=c.maxSharedLocalMemory if has_compute else 0, total_memory=total,
                driver_version=drv_version))
    return out
