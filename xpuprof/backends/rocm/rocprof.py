"""ctypes mirrors of rocprofiler-sdk's public ABI (no Python bindings exist).

Layouts follow ``source/include/rocprofiler-sdk/buffer_tracing.h`` and ``fwd.h``. Every record
starts with ``u64 size``: a record smaller than our mirror means a different ABI and is
refused; a larger one is a newer release that appended fields, which is fine. Enum values
(buffer-tracing kinds, operations) grow between releases, so they are looked up by *name* at
run time through ``rocprofiler_iterate_buffer_tracing_kinds`` and friends, never hard-coded.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

import numpy as np

LIBRARY = "librocprofiler-sdk.so"
CATEGORY_TRACING = 1
CATEGORY_COUNTERS = 3
BUFFER_POLICY_LOSSLESS = 2
# rocprofiler_counter_record_kind_t (fwd.h); the SDK has no name query for these.
COUNTER_RECORD_DISPATCH_HEADER = 1
COUNTER_RECORD_VALUE = 2
COUNTER_INFO_VERSION_0 = 1  # rocprofiler_counter_info_version_id_t


class RocprofNotFound(RuntimeError):
    """librocprofiler-sdk.so is not installed or not on the loader path."""


class RocprofAbiError(RuntimeError):
    """A record whose size does not match the mirrored layout."""


u64, u32, i32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32


class CorrelationId(ctypes.Structure):
    _fields_ = [("internal", u64), ("external", u64)]  # external: rocprofiler_user_data_t (union u64/void*)


class Dim3(ctypes.Structure):
    _fields_ = [("x", u32), ("y", u32), ("z", u32)]


class HipApiRecord(ctypes.Structure):
    _fields_ = [("size", u64), ("kind", i32), ("operation", i32), ("correlation_id", CorrelationId),
                ("start_timestamp", u64), ("end_timestamp", u64), ("thread_id", u64)]


class KernelDispatchInfo(ctypes.Structure):
    _fields_ = [("size", u64), ("agent_id", u64), ("queue_id", u64), ("kernel_id", u64), ("dispatch_id", u64),
                ("private_segment_size", u32), ("group_segment_size", u32), ("workgroup_size", Dim3),
                ("grid_size", Dim3), ("reserved_padding", ctypes.c_uint8 * 56)]


class KernelDispatchRecord(ctypes.Structure):
    _fields_ = [("size", u64), ("kind", i32), ("operation", i32), ("correlation_id", CorrelationId),
                ("thread_id", u64), ("start_timestamp", u64), ("end_timestamp", u64),
                ("dispatch_info", KernelDispatchInfo)]


class MemoryCopyRecord(ctypes.Structure):
    _fields_ = [("size", u64), ("kind", i32), ("operation", i32), ("correlation_id", CorrelationId),
                ("thread_id", u64), ("start_timestamp", u64), ("end_timestamp", u64), ("dst_agent_id", u64),
                ("src_agent_id", u64), ("bytes", u64)]


class CounterRecord(ctypes.Structure):
    _fields_ = [("id", u64), ("counter_value", ctypes.c_double), ("dispatch_id", u64), ("user_data", u64)]


class DispatchCountingRecord(ctypes.Structure):
    """rocprofiler_dispatch_counting_service_record_t (dispatch_counting_service.h)."""
    _fields_ = [("size", u64), ("num_records", u64), ("correlation_id", CorrelationId), ("start_timestamp", u64),
                ("end_timestamp", u64), ("dispatch_info", KernelDispatchInfo)]


class CounterInfoPrefix(ctypes.Structure):
    """Leading fields of rocprofiler_counter_info_v0_t (counters.h)."""
    _fields_ = [("id", u64), ("name", ctypes.c_char_p), ("description", ctypes.c_char_p),
                ("block", ctypes.c_char_p), ("expression", ctypes.c_char_p)]


class RecordHeader(ctypes.Structure):
    _fields_ = [("category", u32), ("kind", u32), ("payload", ctypes.c_void_p)]


def numpy_dtype(struct: type[ctypes.Structure]) -> np.dtype:
    """The ctypes mirror as a numpy structured dtype (same offsets and size)."""
    dt = np.dtype(struct)
    if dt.itemsize != ctypes.sizeof(struct):
        raise RocprofAbiError(f"{struct.__name__}: numpy sees {dt.itemsize} bytes, ctypes {ctypes.sizeof(struct)}")
    return dt


HIP_API_DTYPE = numpy_dtype(HipApiRecord)
DISPATCH_DTYPE = numpy_dtype(KernelDispatchRecord)
COPY_DTYPE = numpy_dtype(MemoryCopyRecord)
COUNTER_DTYPE = numpy_dtype(CounterRecord)
COUNTING_HEADER_DTYPE = numpy_dtype(DispatchCountingRecord)


def check_sizes(sizes: np.ndarray, struct: type[ctypes.Structure]) -> None:
    """Every record's own ``size`` must cover the mirrored layout."""
    need = ctypes.sizeof(struct)
    if len(sizes) and int(sizes.min()) < need:
        raise RocprofAbiError(f"{struct.__name__}: rocprofiler reported a {int(sizes.min())}-byte record, the "
                              f"mirrored layout needs {need}; this rocprofiler-sdk release has a different ABI")


def library_candidates() -> list[str]:
    out = []
    for env in ("ROCPROFILER_SDK_LIBRARY",):
        if os.environ.get(env):
            out.append(os.environ[env])
    for env in ("ROCM_PATH", "ROCM_HOME"):
        if os.environ.get(env):
            out.append(str(Path(os.environ[env]) / "lib" / LIBRARY))
    out.append(f"/opt/rocm/lib/{LIBRARY}")
    found = ctypes.util.find_library("rocprofiler-sdk")
    out.append(found or LIBRARY)
    return list(dict.fromkeys(out))


def load_library() -> ctypes.CDLL:
    errors = []
    for path in library_candidates():
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    raise RocprofNotFound("rocprofiler-sdk not found (looked for " + "; ".join(errors) +
                          "). Install ROCm's rocprofiler-sdk or set ROCM_PATH / ROCPROFILER_SDK_LIBRARY")


# Callback types of the run-time enum lookup (rocprofiler_iterate_buffer_tracing_kinds etc.).
KIND_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
OP_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def buffer_tracing_kinds(lib) -> dict[str, int]:
    """``ROCPROFILER_BUFFER_TRACING_*`` name -> value, as this installed library numbers them."""
    found: dict[str, int] = {}

    def on_kind(kind, _data):
        name = ctypes.c_char_p()
        length = ctypes.c_uint64()
        if lib.rocprofiler_query_buffer_tracing_kind_name(kind, ctypes.byref(name), ctypes.byref(length)) == 0:
            found[name.value.decode()] = int(kind)
        return 0

    cb = KIND_CB(on_kind)
    lib.rocprofiler_iterate_buffer_tracing_kinds(cb, None)
    return found


def operation_names(lib, kind: int) -> dict[int, str]:
    """Operation value -> name (HIP API function names, copy directions) for one tracing kind."""
    found: dict[int, str] = {}

    def on_op(k, op, _data):
        name = ctypes.c_char_p()
        length = ctypes.c_uint64()
        if lib.rocprofiler_query_buffer_tracing_kind_operation_name(k, op, ctypes.byref(name),
                                                                   ctypes.byref(length)) == 0:
            found[int(op)] = name.value.decode()
        return 0

    cb = OP_CB(on_op)
    lib.rocprofiler_iterate_buffer_tracing_kind_operations(kind, cb, None)
    return found
