"""Intel PTI's PC sampling ABI (GPU EU stall sampling, ``pti_pc_sampling.h``).

ctypes mirrors of the structs, the typed signatures of the ``ptiPcSampling*`` functions, the
layouts known per PTI release, and the meaning of the PC-sampling result codes (250-258).

The layouts are those of intel/pti-gpu at fdc44f65 (the revision whose version string the
intel-pti 1.2.0 wheel carries: "Intel(R) Profiling Tools Interfaces (PTI) Version 1.2.0
(fdc44f65...)"), x86-64:

======================================  ====  ===============================================
struct                                  size  fields @offset
======================================  ====  ===============================================
pti_pc_sampling_stall_reason_info_t       24  _struct_size @0, _name @8, _description @16
pti_pc_sampling_source_info_t             16  _file_path @0, _file_line u64 @8
pti_pc_sampling_instruction_t             16  _instruction_offset u64 @0, _source_info @8
pti_pc_sampling_kernel_info_t             56  _struct_size @0, _device @8, _kernel_handle u64 @16,
                                              _kernel_name @24, _reason_count @32,
                                              _instructions_with_samples_count @40,
                                              _aggregated_samples u64* @48
pti_pc_sampling_device_status_t           40  _struct_size @0, _device @8, _samples_dropped u32 @16,
                                              _total_sample_count u64 @24, _total_pc_count u64 @32
======================================  ====  ===============================================

PTI reads ``_struct_size`` to know how much of a caller's struct it may fill, so a caller must
never hand PTI a struct of a release whose layout it does not know: ``layout_for`` refuses a PTI
whose release is not in ``KNOWN_LAYOUTS`` and ``check_struct_size`` a size written back that no
known layout has. Nothing here loads a library.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np

u32, u64, vp, sz = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t

PTI_PC_SAMPLING_DEFAULT_PERIOD_NS = 100_000  # what PTI uses when the period is 0 (pti_pc_sampling.h)
PC_SAMPLING_SOURCE = "intel/pti-gpu fdc44f65 (intel-pti 1.2.0)"


class StallReasonInfo(ctypes.Structure):
    """``pti_pc_sampling_stall_reason_info_t`` (24 bytes)."""

    _fields_ = [("_struct_size", sz), ("_name", ctypes.c_char_p), ("_description", ctypes.c_char_p)]


class SourceInfo(ctypes.Structure):
    """``pti_pc_sampling_source_info_t`` (16 bytes; owned by PTI)."""

    _fields_ = [("_file_path", ctypes.c_char_p), ("_file_line", u64)]


class Instruction(ctypes.Structure):
    """``pti_pc_sampling_instruction_t`` (16 bytes)."""

    _fields_ = [("_instruction_offset", u64), ("_source_info", ctypes.POINTER(SourceInfo))]


class KernelInfo(ctypes.Structure):
    """``pti_pc_sampling_kernel_info_t`` (56 bytes)."""

    _fields_ = [("_struct_size", sz), ("_device", vp), ("_kernel_handle", u64), ("_kernel_name", ctypes.c_char_p),
                ("_reason_count", sz), ("_instructions_with_samples_count", sz),
                ("_aggregated_samples", ctypes.POINTER(u64))]


class DeviceStatus(ctypes.Structure):
    """``pti_pc_sampling_device_status_t`` (40 bytes)."""

    _fields_ = [("_struct_size", sz), ("_device", vp), ("_samples_dropped", u32), ("_total_sample_count", u64),
                ("_total_pc_count", u64)]


STRUCTS = {"stall_reason_info": StallReasonInfo, "source_info": SourceInfo, "instruction": Instruction,
           "kernel_info": KernelInfo, "device_status": DeviceStatus}
# The instruction array PTI fills, read as columns (no ctypes object per instruction).
INSTRUCTION_DTYPE = np.dtype({"names": ["offset", "source_info"], "formats": ["<u8", "<u8"], "offsets": [0, 8],
                              "itemsize": 16})

# (major, minor) of a PTI release -> the size of each struct in that release's header. PTI 1.2 is the
# first release with the PC sampling API in this shape (GetDeviceStatus, _aggregated_samples).
KNOWN_LAYOUTS: dict[tuple[int, int], dict[str, int]] = {
    (1, 2): {"stall_reason_info": 24, "source_info": 16, "instruction": 16, "kernel_info": 56, "device_status": 40},
}
# What this module mirrors: the newest known layout.
MIRRORED = max(KNOWN_LAYOUTS)

_H = vp  # pti_pc_sampling_handle_t
SIGNATURES: dict[str, list] = {
    "ptiPcSamplingEnable": [ctypes.POINTER(_H)],
    "ptiPcSamplingConfigure": [_H, ctypes.POINTER(vp), sz, u32],
    "ptiPcSamplingQueryCollectionBufferSize": [_H, ctypes.POINTER(sz)],
    "ptiPcSamplingSetCollectionBufferSize": [_H, sz],
    "ptiPcSamplingStartCollection": [_H],
    "ptiPcSamplingStopCollection": [_H],
    "ptiPcSamplingGetStallReasons": [_H, ctypes.POINTER(StallReasonInfo), ctypes.POINTER(sz)],
    "ptiPcSamplingGetProfiledDevices": [_H, ctypes.POINTER(vp), ctypes.POINTER(sz)],
    "ptiPcSamplingGetObservedKernelHandles": [_H, vp, ctypes.POINTER(u64), ctypes.POINTER(sz)],
    "ptiPcSamplingGetObservedKernelInfo": [_H, vp, u64, ctypes.POINTER(KernelInfo)],
    "ptiPcSamplingGetSamplesPerInstruction": [_H, vp, u64, vp, sz, vp, sz],
    "ptiPcSamplingGetDeviceStatus": [_H, vp, ctypes.POINTER(DeviceStatus)],
    "ptiPcSamplingDisable": [_H],
}
# What a collection cannot run without (GetDeviceStatus and the buffer-size calls are optional).
REQUIRED = ("ptiPcSamplingEnable", "ptiPcSamplingConfigure", "ptiPcSamplingStartCollection",
            "ptiPcSamplingStopCollection", "ptiPcSamplingGetStallReasons", "ptiPcSamplingGetProfiledDevices",
            "ptiPcSamplingGetObservedKernelHandles", "ptiPcSamplingGetObservedKernelInfo",
            "ptiPcSamplingGetSamplesPerInstruction", "ptiPcSamplingDisable")

# Result codes (pti.h); names at run time come from ptiResultTypeToString.
SUCCESS = 0
NOT_IMPLEMENTED = 2
BAD_ARGUMENT = 3
ALREADY_ENABLED = 250
NOT_CONFIGURED = 251
ALREADY_CONFIGURED = 252
ALREADY_STARTED = 253
NOT_STARTED = 254
ALREADY_STOPPED = 255
NOT_STOPPED = 256
UNSUPPORTED = 257
CONFIGURATION_FAIL = 258  # intel-pti 1.2.0

# The i915 (Ponte Vecchio) and xe (Battlemage and newer) knobs PTI names when it finds no device that can sample.
PARANOID_FILES = ("/proc/sys/dev/i915/perf_stream_paranoid", "/proc/sys/dev/xe/observation_paranoid")


class PcSamplingLayoutError(RuntimeError):
    """The loaded PTI's PC-sampling structs are not a layout this module mirrors."""


_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


def layout_for(version: str) -> dict[str, int]:
    """The struct sizes of the PTI release ``version`` ("1.2.0"); raises for a release not in KNOWN_LAYOUTS."""
    m = _VERSION.match(version or "")
    key = (int(m.group(1)), int(m.group(2))) if m else None
    if key not in KNOWN_LAYOUTS:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(KNOWN_LAYOUTS))
        raise PcSamplingLayoutError(
            f"PTI {version or '(no version)'}'s PC sampling structs are not a layout xpuprof knows (it mirrors PTI "
            f"{known}: {PC_SAMPLING_SOURCE}); handing PTI a struct of another release's size could make it write "
            "past it, so stall sampling is refused. Use intel-pti 1.2 (pip install 'intel-pti==1.2.*') or an "
            "xpuprof that knows this release")
    mirrored = {name: ctypes.sizeof(s) for name, s in STRUCTS.items()}
    if KNOWN_LAYOUTS[key] != mirrored:  # a known release whose layout this module does not mirror
        raise PcSamplingLayoutError(f"PTI {version}: its PC sampling struct sizes {KNOWN_LAYOUTS[key]} differ from "
                                    f"the ones xpuprof mirrors ({mirrored}); stall sampling is refused")
    return dict(KNOWN_LAYOUTS[key])


def check_struct_size(struct: str, size: int) -> None:
    """A ``_struct_size`` PTI wrote back must be one a known layout has for ``struct``."""
    known = sorted({layout[struct] for layout in KNOWN_LAYOUTS.values()})
    if int(size) not in known:
        raise PcSamplingLayoutError(
            f"PTI wrote _struct_size {int(size)} into a pti_pc_sampling_{struct}_t; the known sizes are "
            f"{', '.join(map(str, known))} bytes: this PTI's layout is unknown to xpuprof, so its data is not read")


def missing_functions(cdll, names=REQUIRED) -> list[str]:
    return [n for n in names if not hasattr(cdll, n)]


def bind_functions(cdll) -> dict[str, object]:
    """name -> typed function (uint32 result); None where the library does not export it."""
    out = {}
    for name, args in SIGNATURES.items():
        fn = getattr(cdll, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_uint32, args
        out[name] = fn
    return out


def read_paranoid(paths=PARANOID_FILES) -> dict[str, str]:
    """path -> its value, for each GPU driver paranoid setting present on this machine."""
    out = {}
    for p in paths:
        try:
            with open(p) as f:
                out[p] = f.read().strip()
        except OSError:
            continue
    return out


def paranoid_advice(values: dict[str, str]) -> str | None:
    """What to run when a driver's paranoid setting blocks EU stall sampling (None when none does)."""
    blocking = {p: v for p, v in values.items() if v != "0"}
    if not blocking:
        return None
    fixes = "; ".join(f"{p} is {v}: set it to 0 (sudo sysctl {p[len('/proc/sys/'):].replace('/', '.')}=0)"
                      for p, v in blocking.items())
    return f"the GPU driver's paranoid setting blocks EU stall sampling for non-root users: {fixes}"


RESULT_HINTS = {
    NOT_IMPLEMENTED: "this PTI's core did not load or it has no PC sampling (intel-pti >= 1.2 has it)",
    ALREADY_ENABLED: "another EU stall sampling collection is enabled in this process (PTI allows one at a time)",
    ALREADY_CONFIGURED: "the collection was already configured",
    NOT_STARTED: "the collection never started",
    NOT_STOPPED: "the collection has not stopped",
    CONFIGURATION_FAIL: "none of the selected devices supports EU stall sampling",
}
