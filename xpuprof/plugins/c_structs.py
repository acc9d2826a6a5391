"""The C plugin ABI (``xpuprof/include/xpuprof_plugin.h``) as ctypes: its constants, activity codes,
the structs a plugin hands over and the function table it fills, and the checks every value it
passes goes through (a malformed item is refused with the reason, never trusted).

The layouts mirror the header field for field; ``tests/plugins/test_c_abi.py`` compares the two.
"""
from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_uint32,
                    c_uint64, c_void_p)

import numpy as np

from ..activity import ActivityType
from ..backends.base import BackendError

ABI_VERSION = 1
REGISTER_SYMBOL = "xpuprof_plugin_register"
OK, DECLINE = 0, 1
NAME_BUFFER = 256
MAX_TYPES = 64
MESSAGE_BUFFER = 1024
MAX_COUNTER_VALUES = 4096
# Keys the writer owns; a plugin may not set them as metadata.
RESERVED_METADATA_KEYS = frozenset({"schemaVersion", "deviceProperties", "traceEvents", "displayTimeUnit",
                                    "baseTimeNanoseconds", "traceName", "distributedInfo", "dropped_records"})

# XpuprofActivityType codes, fixed forever (the header's enum; tests compare the two).
ACTIVITY_CODES: dict[int, ActivityType] = {
    1: ActivityType.CPU_OP,
    2: ActivityType.USER_ANNOTATION,
    3: ActivityType.GPU_USER_ANNOTATION,
    4: ActivityType.GPU_MEMCPY,
    5: ActivityType.GPU_MEMSET,
    6: ActivityType.CONCURRENT_KERNEL,
    7: ActivityType.EXTERNAL_CORRELATION,
    8: ActivityType.RUNTIME,
    9: ActivityType.DRIVER,
    10: ActivityType.CPU_INSTANT_EVENT,
    11: ActivityType.PYTHON_FUNCTION,
    12: ActivityType.OVERHEAD,
    13: ActivityType.COLLECTIVE_COMM,
    14: ActivityType.GPU_PM_COUNTER,
    15: ActivityType.MTIA_INSIGHT,
    16: ActivityType.CUDA_SYNC,
    17: ActivityType.CUDA_EVENT,
    18: ActivityType.CUDA_PROFILER_RANGE,
    19: ActivityType.XPU_SCOPE_PROFILER,
    20: ActivityType.XPU_SYNC,
    21: ActivityType.HARDWARE_COUNTERS,
}
ACTIVITY_TO_CODE = {t: c for c, t in ACTIVITY_CODES.items()}
FLOW_CATEGORIES = {1: "fwdbwd", 2: "ac2g"}


class PluginLoadError(BackendError):
    """A shared library that is not a usable xpuprof plugin (the message says why)."""


class PluginCallError(BackendError):
    """A plugin function returned an error code."""


# ----------------------------------------------------------------------------- ABI structs
class XpuprofSlice(Structure):
    _fields_ = [("struct_size", c_size_t), ("activity_type", c_int32), ("reserved", c_int32),
                ("start_ns", c_int64), ("end_ns", c_int64), ("device_id", c_int64), ("resource_id", c_int64),
                ("external_id", c_int64), ("name", c_char_p), ("args_json", c_char_p)]


class XpuprofCounter(Structure):
    _fields_ = [("struct_size", c_size_t), ("activity_type", c_int32), ("reserved", c_int32), ("ts_ns", c_int64),
                ("device_id", c_int64), ("resource_id", c_int64), ("name", c_char_p), ("num_values", c_size_t),
                ("metric_names", POINTER(c_char_p)), ("values", POINTER(c_double))]


class XpuprofFlow(Structure):
    _fields_ = [("struct_size", c_size_t), ("flow_id", c_uint64), ("ts_ns", c_int64), ("device_id", c_int64),
                ("resource_id", c_int64), ("flow_type", c_int32), ("is_start", c_int32)]


class XpuprofDeviceRow(Structure):
    _fields_ = [("struct_size", c_size_t), ("device_id", c_int64), ("sort_index", c_int64), ("name", c_char_p),
                ("label", c_char_p)]


class XpuprofResourceRow(Structure):
    _fields_ = [("struct_size", c_size_t), ("device_id", c_int64), ("resource_id", c_int64),
                ("sort_index", c_int64), ("name", c_char_p)]


ADD_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
ADD_MANY_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
SET_METADATA_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p)
MAX_BULK = 1 << 26


def slice_dtype(itemsize: int) -> np.dtype:
    """XpuprofSlice as a numpy record (the bulk path decodes a plugin's array without a loop)."""
    formats = {"struct_size": np.uintp, "activity_type": np.int32, "reserved": np.int32, "start_ns": np.int64,
               "end_ns": np.int64, "device_id": np.int64, "resource_id": np.int64, "external_id": np.int64,
               "name": np.uintp, "args_json": np.uintp}
    return np.dtype({"names": list(formats), "formats": list(formats.values()),
                     "offsets": [getattr(XpuprofSlice, f).offset for f in formats], "itemsize": itemsize})


class XpuprofTraceBuilderApi(Structure):
    _fields_ = [("struct_size", c_size_t), ("builder", c_void_p), ("window_start_ns", c_int64),
                ("window_end_ns", c_int64), ("add_slice", ADD_FN), ("add_counter", ADD_FN), ("add_flow", ADD_FN),
                ("add_device_row", ADD_FN), ("add_resource_row", ADD_FN), ("set_metadata", SET_METADATA_FN),
                ("add_slices", ADD_MANY_FN)]


QUERY_FN = CFUNCTYPE(c_int, c_char_p, c_size_t, POINTER(c_int32), c_size_t, POINTER(c_size_t))
CREATE_FN = CFUNCTYPE(c_int, POINTER(c_int32), c_size_t, c_char_p, POINTER(c_void_p))
HANDLE_FN = CFUNCTYPE(c_int, c_void_p)
PROCESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(XpuprofTraceBuilderApi))
PROBE_FN = CFUNCTYPE(c_int, c_char_p, c_size_t)
LAST_ERROR_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_size_t)


class XpuprofPluginInterface(Structure):
    _fields_ = [("struct_size", c_size_t), ("abi_version", c_uint32), ("reserved", c_uint32),
                ("query", QUERY_FN), ("create", CREATE_FN), ("destroy", HANDLE_FN), ("start", HANDLE_FN),
                ("stop", HANDLE_FN), ("process_events", PROCESS_FN), ("probe", PROBE_FN),
                ("last_error", LAST_ERROR_FN),
                # appended (ABI 1, minor 1): activity types the plugin declares
                ("declared_activity_types", ctypes.POINTER(ctypes.c_char_p)),
                ("num_declared_activity_types", c_size_t)]

# A plugin names its i-th declared activity type XPUPROF_DECLARED_TYPE(i) in query(), events
# and the enabled list create() receives (the header's macro).
DECLARED_TYPE_BASE = 0x40000000
MAX_DECLARED_TYPES = 256


# The smallest table a v1 plugin may fill: everything up to process_events is required.
REQUIRED_TABLE_SIZE = XpuprofPluginInterface.process_events.offset + ctypes.sizeof(PROCESS_FN)
REQUIRED_FUNCTIONS = ("query", "create", "destroy", "start", "stop", "process_events")
# Room behind the table so a plugin that ignores struct_size and writes a bigger table cannot
# corrupt memory; it is then refused.
TABLE_SLACK = 4096


def field_present(table: XpuprofPluginInterface, name: str) -> bool:
    f = getattr(XpuprofPluginInterface, name)
    return table.struct_size >= f.offset + f.size and bool(getattr(table, name))


class Malformed(ValueError):
    pass


def read_struct(addr: int | None, struct_type, what: str):
    """Copy a plugin struct honouring its struct_size (fields past it read as zero)."""
    if not addr:
        raise Malformed(f"{what} pointer is NULL")
    size = c_size_t.from_address(addr).value
    full = ctypes.sizeof(struct_type)
    if size < full:  # every v1 field is required; later versions only append
        raise Malformed(f"{what}.struct_size is {size}, smaller than the ABI v{ABI_VERSION} size {full}")
    out = struct_type()
    ctypes.memmove(ctypes.addressof(out), addr, full)
    return out


def checked_text(raw: bytes | None, what: str, *, required: bool = True, strings=None) -> str | None:
    """A string the plugin passed. Invalid UTF-8 is replaced with U+FFFD (never a lost event) and counted
    in ``strings.invalid_utf8`` (written as invalid_utf8_names), as Python names are."""
    if raw is None:
        if required:
            raise Malformed(f"{what} is NULL")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if strings is not None:
            strings.invalid_utf8 += 1
        return raw.decode("utf-8", "replace")


def checked_activity(code: int, what: str, codes: dict | None = None) -> ActivityType:
    at = (codes or ACTIVITY_CODES).get(code)
    if at is None:
        raise Malformed(f"{what}.activity_type {code} is not an XpuprofActivityType (1..{max(ACTIVITY_CODES)}) "
                        f"nor a type the plugin declared")
    return at


def checked_timestamp(ns: int, what: str) -> int:
    if ns <= 0:
        raise Malformed(f"{what} is {ns}; timestamps are epoch nanoseconds > 0")
    return ns
