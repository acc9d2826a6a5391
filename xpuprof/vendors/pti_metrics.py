"""Intel PTI's metrics ABI: metrics scope (per-kernel metrics, ``pti_metrics_scope.h``) and the device
metrics of ``pti_metrics.h`` (metric groups, properties, time-based collection).

ctypes mirrors of the structs (layouts in shared/reference/pti-and-level-zero.md §8), the numpy
dtypes of the scope records and value union, the typed signatures of every function, and the hints
for the metrics result codes. The per-kernel session (``backends/xpu/metrics_scope.py``) and the
time-based collector (``collectors/xpu_metrics.py``) both bind through this module.
"""
from __future__ import annotations

import ctypes
import json
import os

import numpy as np

from .levelzero import NULL_DEVICE_NAME

u8, u32, u64, vp, sz = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t

SCOPE_MODE_AUTO_KERNEL = 1  # PTI_METRICS_SCOPE_AUTO_KERNEL
SCOPE_MODE_USER = 2  # PTI_METRICS_SCOPE_USER: not implemented by PTI
MIN_COLLECTION_BUFFER = 2048  # PTI's default and minimum collection buffer size
ZET_ENABLE_METRICS = "ZET_ENABLE_METRICS"

# pti_metric_value_type -> numpy dtype of the 8-byte pti_value_t union member
VALUE_DTYPES = {0: np.dtype("<u4"), 1: np.dtype("<u8"), 2: np.dtype("<f4"), 3: np.dtype("<f8"), 4: np.dtype("u1"),
                6: np.dtype("u1"), 7: np.dtype("<u2")}
VALUE_TYPE_NAMES = ("uint32", "uint64", "float32", "float64", "bool8", "string", "uint8", "uint16")

# Result codes of the metrics part (pti.h); names at run time come from ptiResultTypeToString.
METRICS_SCOPE_HINTS = {
    50: "the Level Zero driver refused metrics: set ZET_ENABLE_METRICS=1 before Level Zero initializes",
    98: "PTI could not enable metrics (ptiMetricsEnable failed)",
    99: "enabling metrics at run time is not supported: set ZET_ENABLE_METRICS=1 before the process starts",
    151: "a metric name was not found on the device (names are case-sensitive)",
    152: "the metrics belong to more than one metric group; PTI needs one group",
    154: "the collection buffer is too small (raise max_scopes)",
    159: "the profiled devices are not all the same model",
}


class PtiDeviceProperties(ctypes.Structure):
    _fields_ = [("_handle", vp), ("_domain", u8), ("_bus", u8), ("_device", u8), ("_function", u8),
                ("_model_name", ctypes.c_char_p), ("_uuid", u8 * 16)]


class ScopeRecordMetadata(ctypes.Structure):
    _fields_ = [("_struct_size", sz), ("_metrics_count", sz), ("_value_types", ctypes.POINTER(u32)),
                ("_metric_names", ctypes.POINTER(ctypes.c_char_p)), ("_metric_units", ctypes.POINTER(ctypes.c_char_p))]


class ScopeCollectionBufferProperties(ctypes.Structure):
    _fields_ = [("_struct_size", sz), ("_device_handle", vp), ("_num_scopes", sz), ("_buffer_size", sz),
                ("_host_time_first_scope_append", u64), ("_host_time_last_scope_append", u64),
                ("_metric_group_name", ctypes.c_char_p)]


class ScopeRecord(ctypes.Structure):
    _fields_ = [("_kernel_id", u64), ("_queue", vp), ("_kernel_name", vp), ("_metrics_values", vp)]


class MetricsGroupProperties(ctypes.Structure):
    _fields_ = [("_handle", vp), ("_type", u32), ("_domain", u32), ("_metric_count", u32),
                ("_metric_properties", vp), ("_name", ctypes.c_char_p), ("_description", ctypes.c_char_p)]


class MetricProperties(ctypes.Structure):
    _fields_ = [("_handle", vp), ("_name", ctypes.c_char_p), ("_description", ctypes.c_char_p),
                ("_metric_type", u32), ("_value_type", u32), ("_units", ctypes.c_char_p)]


# The calculated buffer begins with an array of pti_metrics_scope_record_t.
SCOPE_RECORD_DTYPE = np.dtype({"names": ["kernel_id", "queue", "kernel_name", "values"],
                               "formats": ["<u8", "<u8", "<u8", "<u8"], "offsets": [0, 8, 16, 24], "itemsize": 32})

_H = vp  # pti_scope_collection_handle_t
SCOPE_SIGNATURES: dict[str, list] = {
    "ptiMetricsGetDevices": [ctypes.POINTER(PtiDeviceProperties), ctypes.POINTER(u32)],
    "ptiMetricsGetMetricGroups": [vp, ctypes.POINTER(MetricsGroupProperties), ctypes.POINTER(u32)],
    "ptiMetricsGetMetricsProperties": [vp, ctypes.POINTER(MetricProperties)],
    "ptiMetricsScopeEnable": [ctypes.POINTER(_H)],
    # device_count is uint32_t in pti_metrics_scope.h (metric_count is size_t)
    "ptiMetricsScopeConfigure": [_H, u32, ctypes.POINTER(vp), u32, ctypes.POINTER(ctypes.c_char_p), sz],
    "ptiMetricsScopeQueryCollectionBufferSize": [_H, sz, ctypes.POINTER(sz)],
    "ptiMetricsScopeSetCollectionBufferSize": [_H, sz],
    "ptiMetricsScopeStartCollection": [_H],
    "ptiMetricsScopeStopCollection": [_H],
    "ptiMetricsScopeGetCollectionBuffersCount": [_H, ctypes.POINTER(sz)],
    "ptiMetricsScopeGetCollectionBuffer": [_H, sz, ctypes.POINTER(vp), ctypes.POINTER(sz)],
    "ptiMetricsScopeGetCollectionBufferProperties": [_H, vp, ctypes.POINTER(ScopeCollectionBufferProperties)],
    "ptiMetricsScopeQueryMetricsBufferSize": [_H, vp, ctypes.POINTER(sz), ctypes.POINTER(sz)],
    "ptiMetricsScopeCalculateMetrics": [_H, vp, vp, sz, ctypes.POINTER(sz)],
    "ptiMetricsScopeGetMetricsMetadata": [_H, ctypes.POINTER(ScopeRecordMetadata)],
    "ptiMetricsScopeDisable": [_H],
}
# Functions a metrics-scope collection cannot run without.
SCOPE_REQUIRED = tuple(n for n in SCOPE_SIGNATURES if n.startswith("ptiMetricsScope"))


def missing_functions(cdll: ctypes.CDLL, names) -> list[str]:
    """The names among ``names`` that ``cdll`` does not export."""
    return [n for n in names if not hasattr(cdll, n)]


def bind_functions(cdll: ctypes.CDLL, signatures: dict[str, list]) -> dict[str, object]:
    """name -> typed function (uint32 result, ``signatures``' argument types); None where not exported."""
    out = {}
    for name, args in signatures.items():
        fn = getattr(cdll, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_uint32, args
        out[name] = fn
    return out


# ----------------------------------------------------------------------------- time-based collection
GROUP_TYPE_TIME_BASED = 2  # pti_metrics_group_type bit
METRIC_TYPE_TIMESTAMP = 4
PTI_SUCCESS = 0


class CollectionParams(ctypes.Structure):  # pti_metrics_group_collection_params_t (32 bytes)
    _fields_ = [("_struct_size", ctypes.c_size_t), ("_group_handle", ctypes.c_void_p),
                ("_sampling_interval", ctypes.c_uint32), ("_time_aggr_window", ctypes.c_uint64)]


TIME_BASED_SIGNATURES = {
    "ptiMetricsConfigureCollection": [ctypes.c_void_p, ctypes.POINTER(CollectionParams), ctypes.c_uint32],
    "ptiMetricsStartCollection": [ctypes.c_void_p],
    "ptiMetricsStopCollection": [ctypes.c_void_p],
    "ptiMetricsGetCalculatedData": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)],
    "ptiViewGetTimestamp": [],
}


# ----------------------------------------------------------------------------- probe
_PROBE = r"""
import ctypes, json, sys
class Props(ctypes.Structure):  # pti_device_properties_t (PtiDeviceProperties)
    _fields_ = [("handle", ctypes.c_void_p), ("domain", ctypes.c_uint8), ("bus", ctypes.c_uint8),
                ("device", ctypes.c_uint8), ("function", ctypes.c_uint8), ("model_name", ctypes.c_char_p),
                ("uuid", ctypes.c_uint8 * 16)]
lib = ctypes.CDLL(sys.argv[1])
n = ctypes.c_uint32(0)
lib.ptiMetricsGetDevices.restype = ctypes.c_uint32
code = lib.ptiMetricsGetDevices(None, ctypes.byref(n))
names = []
if code == 0 and n.value:
    devices = (Props * n.value)()
    if lib.ptiMetricsGetDevices(devices, ctypes.byref(n)) == 0:
        names = [(d.model_name or b"").decode("utf-8", "replace") for d in devices[:n.value]]
print(code, n.value)
print(json.dumps(names))
"""


def probe_metrics(pti_path, timeout: float = 30.0) -> tuple[bool, str]:
    """Can this machine collect per-kernel metrics? Runs PTI in a child (it may abort without a driver)."""
    import subprocess
    import sys

    # XPUPROF_HELPER (backends.probe.HELPER_ENV): xpuprof's own helper process, never profiled itself
    env = dict(os.environ, ZET_ENABLE_METRICS="1", XPUPROF_HELPER="1")
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, str(pti_path)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return False, f"PTI metrics probe timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        return False, (f"PTI aborted while enumerating metric devices (exit {proc.returncode}): a Level Zero loader "
                       "is present but no Level Zero GPU driver is; per-kernel metrics need an Intel GPU with its "
                       "Level Zero driver")
    lines = proc.stdout.splitlines()
    code, count = (int(x) for x in lines[0].split()[:2])
    names = json.loads(lines[1]) if len(lines) > 1 else []
    if code == 2:
        return False, ("PTI's core could not start (ptiMetricsGetDevices -> PTI_ERROR_NOT_IMPLEMENTED): per-kernel "
                       "metrics need a Level Zero GPU driver and a loader exporting zesInit (run with "
                       "PTILOG_LEVEL=info for PTI's exact reason)")
    if code != 0:
        return False, f"ptiMetricsGetDevices returned {code}: " + METRICS_SCOPE_HINTS.get(code, "metrics unavailable")
    if count == 0:
        return False, "no metrics-capable Level Zero GPU device found (per-kernel metrics need an Intel GPU driver)"
    if names and all(name == NULL_DEVICE_NAME for name in names):
        return False, null_device_metrics_message(f"each of the {count} metrics device(s) PTI lists here is")
    return True, f"{count} metrics-capable device(s)"


def null_device_metrics_message(subject: str) -> str:
    """``subject`` ("metrics_device 0 is") + why the null driver's devices give no metrics."""
    return (f"{subject} the Level Zero null driver's test device ({NULL_DEVICE_NAME!r}, ZE_ENABLE_NULL_DRIVER=1), "
            "not a GPU: it has no hardware counters and cannot collect metrics. Metrics need an Intel GPU with its "
            "Level Zero driver; without metric names the null device still records runtime and driver calls")
