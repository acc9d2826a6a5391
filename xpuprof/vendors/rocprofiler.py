"""ctypes mirrors of rocprofiler-sdk's public ABI (no Python bindings exist).

Layouts follow ``source/include/rocprofiler-sdk/buffer_tracing.h`` and ``fwd.h`` of each SDK
generation in use, checked with sizeof/offsetof printers compiled against ROCm/rocm-systems
``projects/rocprofiler-sdk/source/include`` at eb15bcdf (0.5.0, ROCm 6.3), 0608bbb4 (0.6.0,
ROCm 6.4) and 1b1610fc (1.0.0, ROCm 7); the numbers are kept in
``tests/rocm/data/rocprofiler_sdk_layouts.json``. SDK 1.0 added ``uint64_t ancestor`` to
``rocprofiler_correlation_id_t`` (16 -> 24 bytes), which moved every later field of the HIP API
record (56 -> 64 bytes) and of the callback record; kernel-dispatch and memory-copy records use
``rocprofiler_async_correlation_id_t`` (still 16 bytes) and the copy record only grew at its end
(80 -> 96). Every record starts with ``u64 size``, and that size picks the layout: a size we do
not know is refused with an error naming the known ones, never decoded by guess. Enum values
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


class RocprofError(RuntimeError):
    """A rocprofiler-sdk call that failed; the message names the call and rocprofiler's status."""


class RocprofAbiError(RuntimeError):
    """A record whose size does not match the mirrored layout."""


u64, u32, i32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32


class CorrelationId(ctypes.Structure):
    _fields_ = [("internal", u64), ("external", u64)]  # external: rocprofiler_user_data_t (union u64/void*)


class Dim3(ctypes.Structure):
    _fields_ = [("x", u32), ("y", u32), ("z", u32)]


class CorrelationIdV1(ctypes.Structure):
    """rocprofiler_correlation_id_t of SDK 1.x (fwd.h): ``ancestor`` = the internal id of the API
    call that issued this one."""
    _fields_ = [("internal", u64), ("external", u64), ("ancestor", u64)]


class HipApiRecord(ctypes.Structure):
    """rocprofiler_buffer_tracing_hip_api_record_t, SDK 0.x (56 bytes)."""
    _fields_ = [("size", u64), ("kind", i32), ("operation", i32), ("correlation_id", CorrelationId),
                ("start_timestamp", u64), ("end_timestamp", u64), ("thread_id", u64)]


class HipApiRecordV1(ctypes.Structure):
    """The same record in SDK 1.x (64 bytes): start@40, end@48, thread@56."""
    _fields_ = [("size", u64), ("kind", i32), ("operation", i32), ("correlation_id", CorrelationIdV1),
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


class MemoryCopyRecordV1(ctypes.Structure):
    """SDK 1.x appends ``dst_address``/``src_address`` (rocprofiler_address_t) to the copy record (96 bytes)."""
    _fields_ = MemoryCopyRecord._fields_ + [("dst_address", u64), ("src_address", u64)]


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


HIP_API_V1_DTYPE = numpy_dtype(HipApiRecordV1)
COPY_V1_DTYPE = numpy_dtype(MemoryCopyRecordV1)

# Record kind -> {record size: (mirror, SDK generations writing it)}: every size we know.
KNOWN_LAYOUTS: dict[str, dict[int, tuple[type[ctypes.Structure], str]]] = {
    "HIP API": {56: (HipApiRecord, "0.x"), 64: (HipApiRecordV1, "1.x")},
    "kernel dispatch": {184: (KernelDispatchRecord, "0.x and 1.x")},
    "memory copy": {80: (MemoryCopyRecord, "0.x"), 96: (MemoryCopyRecordV1, "1.x")},
    "dispatch counting": {176: (DispatchCountingRecord, "0.x and 1.x")},
}


def layout_for(what: str, sizes: np.ndarray) -> type[ctypes.Structure]:
    """The mirror for records whose own ``size`` fields are ``sizes`` (all one known size), else
    a RocprofAbiError naming the sizes found and the ones known."""
    known = KNOWN_LAYOUTS[what]
    sizes = np.asarray(sizes)
    if len(sizes) and (sizes == sizes[0]).all():  # the usual case, without sorting the column
        uniq = [int(sizes[0])]
    else:
        uniq = sorted({int(x) for x in np.unique(sizes)}) if len(sizes) else []
    if len(uniq) == 1 and uniq[0] in known:
        return known[uniq[0]][0]
    if not uniq:
        return next(iter(known.values()))[0]
    names = ", ".join(f"{n} bytes (rocprofiler-sdk {gen})" for n, (_, gen) in known.items())
    raise RocprofAbiError(f"rocprofiler-sdk wrote {what} records of {'/'.join(map(str, uniq))} bytes; xpuprof "
                          f"knows {names}. This rocprofiler-sdk release has a record layout xpuprof cannot read: "
                          f"nothing of this kind was decoded")


def check_sizes(sizes: np.ndarray, what: str) -> type[ctypes.Structure]:
    """Every record's own ``size`` must be one layout we mirror (see ``layout_for``)."""
    return layout_for(what, sizes)


# The callback-tracing record (passed by value to tool callbacks) has no size field: its layout
# follows the SDK's major version. 0 = SDK 0.x (16-byte correlation id), 1 = SDK 1.x (24 bytes).
CALLBACK_LAYOUTS = {0: "0.x", 1: "1.x"}


def sdk_version(lib) -> tuple[int, int, int]:
    """rocprofiler_get_version (rocprofiler.h; callable before the tool initialises)."""
    fn = getattr(lib, "rocprofiler_get_version", None)
    if fn is None:
        raise RocprofAbiError("this librocprofiler-sdk has no rocprofiler_get_version; its record layouts cannot "
                              "be identified")
    fn.argtypes = [ctypes.POINTER(u32)] * 3
    major, minor, patch = u32(), u32(), u32()
    status = fn(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    if status != 0:
        raise RocprofAbiError(f"rocprofiler_get_version failed (status {status})")
    return int(major.value), int(minor.value), int(patch.value)


def callback_layout(version: tuple[int, int, int]) -> int:
    """Callback record layout for an SDK version; unknown generations are refused clearly."""
    major = version[0]
    if major not in CALLBACK_LAYOUTS:
        raise RocprofAbiError(f"rocprofiler-sdk {'.'.join(map(str, version))} is a generation xpuprof does not know "
                              f"(known: {', '.join(CALLBACK_LAYOUTS.values())}); its callback records may be laid "
                              "out differently, so xpuprof refuses to read them rather than decode garbage")
    return major


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


def strip_prefix(name: str, *prefixes: str) -> str:
    for p in prefixes:
        if name.startswith(p):
            return name[len(p):]
    return name


def callback_tracing_kinds(lib) -> dict[str, int]:
    found: dict[str, int] = {}

    def on_kind(kind, _data):
        name, length = ctypes.c_char_p(), ctypes.c_uint64()
        if lib.rocprofiler_query_callback_tracing_kind_name(kind, ctypes.byref(name), ctypes.byref(length)) == 0 \
                and name.value:
            found[strip_prefix(name.value.decode(), "ROCPROFILER_CALLBACK_TRACING_")] = int(kind)
        return 0

    cb = KIND_CB(on_kind)
    lib.rocprofiler_iterate_callback_tracing_kinds(cb, None)
    return found


def callback_operation_names(lib, kind: int) -> dict[str, int]:
    found: dict[str, int] = {}

    def on_op(k, op, _data):
        name, length = ctypes.c_char_p(), ctypes.c_uint64()
        if lib.rocprofiler_query_callback_tracing_kind_operation_name(k, op, ctypes.byref(name),
                                                                     ctypes.byref(length)) == 0 and name.value:
            found[strip_prefix(name.value.decode(), "ROCPROFILER_")] = int(op)
        return 0

    cb = OP_CB(on_op)
    lib.rocprofiler_iterate_callback_tracing_kind_operations(kind, cb, None)
    return found


def status_text(lib, status: int) -> str:
    parts = []
    for fn in ("rocprofiler_get_status_name", "rocprofiler_get_status_string"):
        f = getattr(lib, fn, None)
        if f is not None:
            f.restype = ctypes.c_char_p
            s = f(status)
            if s:
                parts.append(s.decode(errors="replace"))
    return " / ".join(parts) or f"status {status}"


def query_gpu_agents(lib) -> list[int]:
    """GPU agent handles in rocprofiler's order; device index = position (logical GPU id)."""
    gpus: list[int] = []

    def on_agents(_version, agents, n, _data):
        for i in range(n):
            a = ctypes.cast(agents[i], ctypes.POINTER(AgentPrefix)).contents
            if a.type == AGENT_TYPE_GPU:
                gpus.append(int(a.id))
        return 0

    cb = AGENTS_CB(on_agents)
    status = lib.rocprofiler_query_available_agents(AGENT_INFO_VERSION_0, cb, ctypes.sizeof(AgentPrefix), None)
    if status != 0:
        raise RocprofError(f"rocprofiler_query_available_agents failed: {status_text(lib, status)}")
    return gpus


# ----------------------------------------------------------------------------- tool registration
# C signatures (registration.h, fwd.h, agent.h).
CONFIGURE_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p)
INITIALIZE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
FINALIZE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
AGENTS_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                             ctypes.c_void_p)
AGENT_INFO_VERSION_0 = 1  # ROCPROFILER_AGENT_INFO_VERSION_0 (agent.h)
AGENT_TYPE_GPU = 2  # ROCPROFILER_AGENT_TYPE_GPU (fwd.h)
CLIENT_NAME = b"xpuprof"  # module constant: rocprofiler keeps the pointer


class ToolConfigureResult(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("initialize", INITIALIZE_FN), ("finalize", FINALIZE_FN),
                ("tool_data", ctypes.c_void_p)]


class AgentPrefix(ctypes.Structure):
    """The leading fields of rocprofiler_agent_v0_t (we ask for this many bytes only)."""
    _fields_ = [("size", ctypes.c_uint64), ("id", ctypes.c_uint64), ("type", ctypes.c_int32),
                ("cpu_cores_count", ctypes.c_uint32)]


def set_client_name(client_id: int) -> None:
    """Set ``rocprofiler_client_id_t::name`` in either layout of registration.h.

    Older SDKs: ``{const char* name; u32 handle}``; newer ones put ``size_t size`` first. A
    leading word that is a small struct size (not a pointer, which is NULL or an address) means
    the newer layout, where ``name`` follows it.
    """
    words = ctypes.cast(client_id, ctypes.POINTER(ctypes.c_uint64))
    slot = 1 if 0 < words[0] < 4096 else 0
    ctypes.cast(client_id, ctypes.POINTER(ctypes.c_char_p))[slot] = CLIENT_NAME


def declare(lib) -> None:
    u64 = ctypes.c_uint64
    lib.rocprofiler_force_configure.argtypes = [CONFIGURE_FN]
    lib.rocprofiler_create_context.argtypes = [ctypes.POINTER(u64)]
    lib.rocprofiler_create_buffer.argtypes = [u64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                                              ctypes.c_void_p, ctypes.POINTER(u64)]
    lib.rocprofiler_configure_buffer_tracing_service.argtypes = [u64, ctypes.c_int, ctypes.c_void_p,
                                                                 ctypes.c_size_t, u64]
    lib.rocprofiler_configure_callback_tracing_service.argtypes = [u64, ctypes.c_int, ctypes.c_void_p,
                                                                   ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
    for fn in ("rocprofiler_start_context", "rocprofiler_stop_context", "rocprofiler_flush_buffer"):
        getattr(lib, fn).argtypes = [u64]
    lib.rocprofiler_query_available_agents.argtypes = [ctypes.c_int, AGENTS_CB, ctypes.c_size_t, ctypes.c_void_p]
    lib.rocprofiler_get_timestamp.argtypes = [ctypes.POINTER(u64)]
    lib.rocprofiler_get_thread_id.argtypes = [ctypes.POINTER(u64)]
    lib.rocprofiler_push_external_correlation_id.argtypes = [u64, u64, u64]
    lib.rocprofiler_pop_external_correlation_id.argtypes = [u64, u64, ctypes.POINTER(u64)]


# ----------------------------------------------------------------------------- counters
COUNTERS_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                               ctypes.c_void_p)
CONFIG_FUNCTIONS = ("rocprofiler_create_counter_config", "rocprofiler_create_profile_config")
COUNTING_FUNCTIONS = ("rocprofiler_configure_buffer_dispatch_counting_service",
                      "rocprofiler_configure_buffered_dispatch_counting_service",
                      "rocprofiler_configure_buffered_dispatch_profile_counting_service")


def agent_counters(lib, agent: int) -> dict[str, int]:
    """Counter name -> counter id for one agent (rocprofiler_iterate_agent_supported_counters)."""
    ids: list[int] = []

    def on_ids(_agent, counter_ids, n, _data):
        ids.extend(int(counter_ids[i]) for i in range(n))
        return 0

    cb = COUNTERS_CB(on_ids)
    status = lib.rocprofiler_iterate_agent_supported_counters(ctypes.c_uint64(agent), cb, None)
    if status != 0:
        raise RocprofError(f"rocprofiler_iterate_agent_supported_counters failed: {status_text(lib, status)}")
    out = {}
    for cid in ids:
        info = CounterInfoPrefix()
        if lib.rocprofiler_query_counter_info(ctypes.c_uint64(cid), COUNTER_INFO_VERSION_0,
                                              ctypes.byref(info)) == 0 and info.name:
            out[info.name.decode()] = cid
    return out
