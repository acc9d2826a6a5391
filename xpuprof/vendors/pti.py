"""ctypes mirrors of Intel PTI's public view ABI (intel/pti-gpu ``sdk/include/pti/pti_view.h``).

Record structs are the layouts PTI actually *writes*: the ``_v2`` kernel/memcpy/fill/p2p records
(PTI's size table uses ``sizeof(..._v2)``). Numpy dtypes are derived from the ctypes structs so
the two can never disagree. Also here: locating ``libpti_view.so`` (``intel-pti`` wheel, oneAPI
install, or ``XPUPROF_PTI_LIBRARY``) and the ``LD_LIBRARY_PATH`` its core library needs.

Nothing here imports a vendor package; loading the library happens only in ``PtiLibrary.load``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from .pti_locate import PTI_LIBRARY_ENV, oneapi_candidates, wheel_candidates

PTI_MAX_DEVICE_UUID_SIZE = 16
PTI_MAX_PCI_ADDRESS_SIZE = 16


class ViewKind(enum.IntEnum):
    INVALID = 0
    DEVICE_GPU_KERNEL = 1
    DEVICE_CPU_KERNEL = 2
    DRIVER_API = 3
    RESERVED = 4
    COLLECTION_OVERHEAD = 5
    RUNTIME_API = 6
    EXTERNAL_CORRELATION = 7
    DEVICE_GPU_MEM_COPY = 8
    DEVICE_GPU_MEM_FILL = 9
    DEVICE_GPU_MEM_COPY_P2P = 10
    DEVICE_SYNCHRONIZATION = 11
    COMMUNICATION = 12


class ApiGroup(enum.IntEnum):
    RESERVED = 0
    LEVELZERO = 1
    OPENCL = 2
    SYCL = 3
    HYBRID_SYCL_LEVELZERO = 4
    HYBRID_SYCL_OPENCL = 5
    ALL = 0x7FFFFFFF


class ApiClass(enum.IntEnum):
    RESERVED = 0
    GPU_OPERATION_CORE = 1
    HOST_OPERATION_SYNCHRONIZATION = 2
    ALL = 0x7FFFFFFF


class ExternalKind(enum.IntEnum):
    INVALID = 0
    UNKNOWN = 1
    CUSTOM_0 = 2
    CUSTOM_1 = 3
    CUSTOM_2 = 4
    CUSTOM_3 = 5


class Result(enum.IntEnum):
    SUCCESS = 0
    STATUS_END_OF_BUFFER = 1
    ERROR_NOT_IMPLEMENTED = 2
    ERROR_BAD_ARGUMENT = 3
    ERROR_NO_CALLBACKS_SET = 4
    ERROR_EXTERNAL_ID_QUEUE_EMPTY = 5


# Index = enum value. The short spellings are PTI's own (pti_view_memcpy_type / memory_type).
MEMCPY_TYPES = ("M2M", "M2H", "M2D", "M2S", "H2M", "H2H", "H2D", "H2S",
                "D2M", "D2H", "D2D", "D2S", "S2M", "S2H", "S2D", "S2S")
MEMORY_TYPES = ("MEMORY", "HOST", "DEVICE", "SHARED")
SYNC_TYPES = ("UNKNOWN", "GPU_BARRIER_EXECUTION", "GPU_BARRIER_MEMORY", "HOST_FENCE", "HOST_EVENT",
              "HOST_COMMAND_LIST", "HOST_COMMAND_QUEUE", "HOST_DEVICE")
# Kineto's overhead names by pti_view_overhead_kind (TIME is L0 API processing = instrumentation).
OVERHEAD_NAMES = ("Unknown", "Unknown", "Resource", "Buffer Flush", "Driver", "Instrumentation")

u8, u32, u64, vp = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p


class RecordKernel(ctypes.Structure):
    """``pti_view_record_kernel_v2`` (184 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_queue_handle", vp), ("_context_handle", vp), ("_name", vp),
        ("_source_file_name", vp), ("_source_line_number", u64), ("_kernel_id", u64),
        ("_correlation_id", u32), ("_thread_id", u32),
        ("_pci_address", ctypes.c_char * PTI_MAX_PCI_ADDRESS_SIZE), ("_device_uuid", u8 * PTI_MAX_DEVICE_UUID_SIZE),
        ("_append_timestamp", u64), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_submit_timestamp", u64),
        ("_sycl_task_begin_timestamp", u64), ("_sycl_enqk_begin_timestamp", u64), ("_sycl_node_id", u64),
        ("_sycl_queue_id", u64), ("_sycl_invocation_id", u32),
        ("_device_handle", vp), ("_engine_ordinal", u32), ("_engine_index", u32),
    ]


class RecordMemoryCopy(ctypes.Structure):
    """``pti_view_record_memory_copy_v2`` (152 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_memcpy_type", u32), ("_mem_src", u32), ("_mem_dst", u32),
        ("_queue_handle", vp), ("_context_handle", vp), ("_name", vp),
        ("_pci_address", ctypes.c_char * PTI_MAX_PCI_ADDRESS_SIZE), ("_device_uuid", u8 * PTI_MAX_DEVICE_UUID_SIZE),
        ("_mem_op_id", u64), ("_correlation_id", u32), ("_thread_id", u32),
        ("_append_timestamp", u64), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_submit_timestamp", u64),
        ("_bytes", u64), ("_sycl_queue_id", u64),
        ("_device_handle", vp), ("_engine_ordinal", u32), ("_engine_index", u32),
    ]


class RecordMemoryCopyP2P(ctypes.Structure):
    """``pti_view_record_memory_copy_p2p_v2`` (192 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_memcpy_type", u32), ("_mem_src", u32), ("_mem_dst", u32),
        ("_queue_handle", vp), ("_context_handle", vp), ("_name", vp),
        ("_src_pci_address", ctypes.c_char * PTI_MAX_PCI_ADDRESS_SIZE),
        ("_dst_pci_address", ctypes.c_char * PTI_MAX_PCI_ADDRESS_SIZE),
        ("_src_uuid", u8 * PTI_MAX_DEVICE_UUID_SIZE), ("_dst_uuid", u8 * PTI_MAX_DEVICE_UUID_SIZE),
        ("_mem_op_id", u64), ("_correlation_id", u32), ("_thread_id", u32),
        ("_append_timestamp", u64), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_submit_timestamp", u64),
        ("_bytes", u64), ("_sycl_queue_id", u64),
        ("_src_device_handle", vp), ("_dst_device_handle", vp), ("_engine_ordinal", u32), ("_engine_index", u32),
    ]


class RecordMemoryFill(ctypes.Structure):
    """``pti_view_record_memory_fill_v2`` (152 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_mem_type", u32), ("_queue_handle", vp), ("_context_handle", vp), ("_name", vp),
        ("_pci_address", ctypes.c_char * PTI_MAX_PCI_ADDRESS_SIZE), ("_device_uuid", u8 * PTI_MAX_DEVICE_UUID_SIZE),
        ("_mem_op_id", u64), ("_correlation_id", u32), ("_thread_id", u32),
        ("_append_timestamp", u64), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_submit_timestamp", u64),
        ("_bytes", u64), ("_value_for_set", u64), ("_sycl_queue_id", u64),
        ("_device_handle", vp), ("_engine_ordinal", u32), ("_engine_index", u32),
    ]


class RecordApi(ctypes.Structure):
    """``pti_view_record_api`` (48 bytes): DRIVER_API and RUNTIME_API records."""

    _fields_ = [
        ("_view_kind", u32), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_api_group", u32),
        ("_api_id", u32), ("_process_id", u32), ("_thread_id", u32), ("_correlation_id", u32), ("_return_code", u32),
    ]


class RecordExternalCorrelation(ctypes.Structure):
    """``pti_view_record_external_correlation`` (24 bytes)."""

    _fields_ = [("_view_kind", u32), ("_correlation_id", u32), ("_external_id", u64), ("_external_kind", u32)]


class RecordSynchronization(ctypes.Structure):
    """``pti_view_record_synchronization`` (72 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_synch_type", u32), ("_context_handle", vp), ("_queue_handle", vp),
        ("_event_handle", vp), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_thread_id", u32),
        ("_correlation_id", u32), ("_number_wait_events", u32), ("_return_code", u32), ("_api_id", u32),
        ("_api_group", u32),
    ]


class RecordOverhead(ctypes.Structure):
    """``pti_view_record_overhead`` (56 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_overhead_start_timestamp_ns", u64), ("_overhead_end_timestamp_ns", u64),
        ("_overhead_thread_id", u32), ("_api_id", u32), ("_overhead_count", u64), ("_overhead_duration_ns", u64),
        ("_overhead_kind", u32),
    ]


class RecordComms(ctypes.Structure):
    """``pti_view_record_comms`` (64 bytes)."""

    _fields_ = [
        ("_view_kind", u32), ("_start_timestamp", u64), ("_end_timestamp", u64), ("_process_id", u32),
        ("_thread_id", u32), ("_send_size", u64), ("_recv_size", u64), ("_communicator_id", u64), ("_name", vp),
    ]


# What PTI writes for each view kind. DEVICE_CPU_KERNEL shares the kernel layout.
RECORD_STRUCTS: dict[int, type[ctypes.Structure]] = {
    ViewKind.DEVICE_GPU_KERNEL: RecordKernel,
    ViewKind.DEVICE_CPU_KERNEL: RecordKernel,
    ViewKind.DRIVER_API: RecordApi,
    ViewKind.COLLECTION_OVERHEAD: RecordOverhead,
    ViewKind.RUNTIME_API: RecordApi,
    ViewKind.EXTERNAL_CORRELATION: RecordExternalCorrelation,
    ViewKind.DEVICE_GPU_MEM_COPY: RecordMemoryCopy,
    ViewKind.DEVICE_GPU_MEM_FILL: RecordMemoryFill,
    ViewKind.DEVICE_GPU_MEM_COPY_P2P: RecordMemoryCopyP2P,
    ViewKind.DEVICE_SYNCHRONIZATION: RecordSynchronization,
    ViewKind.COMMUNICATION: RecordComms,
}


@lru_cache(maxsize=None)
def record_dtype(kind: int) -> np.dtype:
    """The numpy structured dtype of a view kind's record (offsets and itemsize from ctypes).

    ``char[16]`` becomes ``S16`` and ``uint8[16]`` a ``(u1, 16)`` subarray; pointers are ``u8``.
    """
    struct = RECORD_STRUCTS[int(kind)]
    names, formats, offsets = [], [], []
    for fname, ftype in struct._fields_:
        names.append(fname)
        offsets.append(getattr(struct, fname).offset)
        if issubclass(ftype, ctypes.Array):
            formats.append(f"S{ftype._length_}" if ftype._type_ is ctypes.c_char else ("u1", (ftype._length_,)))
        else:
            formats.append(np.dtype(ftype).newbyteorder("<"))
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": ctypes.sizeof(struct)})


def record_sizes() -> dict[int, int]:
    """view kind -> record size in bytes (the stride PTI uses when walking a buffer)."""
    return {int(k): ctypes.sizeof(s) for k, s in RECORD_STRUCTS.items()}


# ----------------------------------------------------------------------------- callbacks
BUFFER_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)),
                                    ctypes.POINTER(ctypes.c_size_t))
BUFFER_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_ubyte), ctypes.c_size_t, ctypes.c_size_t)


# ----------------------------------------------------------------------------- locating the library
class PtiNotFound(RuntimeError):
    """No libpti_view.so: the message says where xpuprof looked and how to install it."""


# The light search (no importlib.metadata, no numpy) that `import xpuprof` runs too: locate.py.
_wheel_candidates = wheel_candidates
_oneapi_candidates = oneapi_candidates


def find_pti_library() -> Path:
    """Path of libpti_view.so: $XPUPROF_PTI_LIBRARY, the intel-pti wheel, then a oneAPI install."""
    explicit = os.environ.get(PTI_LIBRARY_ENV)
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise PtiNotFound(f"{PTI_LIBRARY_ENV}={explicit} does not name an existing file")
        return p
    tried = _wheel_candidates() + _oneapi_candidates()
    for p in tried:
        if p.is_file():
            return p
    found = ctypes.util.find_library("pti_view")
    if found:
        return Path(found)
    raise PtiNotFound("Intel PTI (libpti_view.so) not found; install it with "
                      "`pip install --no-deps intel-pti intel-cmplr-lib-rt` (the xpuprof[xpu] extra) or source a "
                      f"oneAPI environment. Looked in: {', '.join(str(p) for p in dict.fromkeys(tried))}")


def required_library_dir(pti_path: Path) -> Path | None:
    """The directory that must be on LD_LIBRARY_PATH at process start, or None when nothing is needed.

    With the pip layout, ``<lib>/pti/libpti.so`` NEEDs ``libxptifw.so`` which only exists in ``<lib>``
    (and carries the SONAME ``libxptifw.so.1``, so pre-loading it does not help).
    """
    lib_dir = pti_path.resolve().parent
    if not (lib_dir / "pti" / "libpti.so").exists() or not (lib_dir / "libxptifw.so").exists():
        return None
    return lib_dir


def library_path_missing(pti_path: Path, environ=None) -> Path | None:
    """The directory missing from LD_LIBRARY_PATH (as the process started with it), else None."""
    need = required_library_dir(pti_path)
    if need is None:
        return None
    env = os.environ if environ is None else environ
    have = {str(Path(p).resolve()) for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p}
    return None if str(need) in have else need


def environment_with_library_path(pti_path: Path, environ=None) -> dict[str, str]:
    """A copy of the environment with the PTI library directory prepended to LD_LIBRARY_PATH."""
    env = dict(os.environ if environ is None else environ)
    need = required_library_dir(pti_path)
    if need is not None:
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = f"{need}{os.pathsep}{old}" if old else str(need)
    return env


def reexec_with_library_path(argv: list[str] | None = None) -> None:
    """For a CLI launcher: re-exec this Python process with LD_LIBRARY_PATH set, if it is missing.

    Returns normally when nothing is needed (or PTI is absent); otherwise never returns. A marker
    variable stops a second re-exec if the dynamic loader still cannot use the path.
    """
    if os.environ.get("XPUPROF_REEXECED") == "1":
        return
    try:
        path = find_pti_library()
    except PtiNotFound:
        return
    if library_path_missing(path) is None:
        return
    env = environment_with_library_path(path)
    env["XPUPROF_REEXECED"] = "1"
    args = [sys.executable, *(sys.orig_argv[1:] if argv is None else argv)]
    os.execve(sys.executable, args, env)


# ----------------------------------------------------------------------------- the loaded library
class PtiError(RuntimeError):
    def __init__(self, func: str, code: int, name: str) -> None:
        super().__init__(f"{func} failed: {name} ({code})")
        self.func, self.code, self.name = func, code, name


_SIGNATURES: dict[str, tuple] = {
    # name: (restype, argtypes)
    "ptiVersionString": (ctypes.c_char_p, []),
    "ptiResultTypeToString": (ctypes.c_char_p, [ctypes.c_uint32]),
    "ptiViewSetCallbacks": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_void_p]),
    "ptiViewEnable": (ctypes.c_uint32, [ctypes.c_uint32]),
    "ptiViewDisable": (ctypes.c_uint32, [ctypes.c_uint32]),
    "ptiViewGPULocalAvailable": (ctypes.c_uint32, []),
    "ptiFlushAllViews": (ctypes.c_uint32, []),
    "ptiViewGetNextRecord": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "ptiViewPushExternalCorrelationId": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_uint64]),
    "ptiViewPopExternalCorrelationId": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]),
    "ptiViewGetTimestamp": (ctypes.c_uint64, []),
    "ptiViewGetApiIdName": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]),
    "ptiViewEnableRuntimeApiClass": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]),
    "ptiViewEnableDriverApiClass": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]),
    "ptiViewMemoryTypeToString": (ctypes.c_char_p, [ctypes.c_uint32]),
    "ptiViewMemcpyTypeToString": (ctypes.c_char_p, [ctypes.c_uint32]),
}
_REQUIRED = ("ptiVersionString", "ptiResultTypeToString", "ptiViewSetCallbacks", "ptiViewEnable", "ptiViewDisable",
             "ptiFlushAllViews", "ptiViewGetNextRecord", "ptiViewGetTimestamp")


def table_name(table: tuple[str, ...], code: int) -> str:
    """An enum's name from a built-in table; out-of-range codes say so."""
    code = int(code)
    return table[code] if 0 <= code < len(table) else f"UNKNOWN_{code}"


def _pti_string(fn, code: int, table: tuple[str, ...]) -> str:
    if fn is not None:
        text = fn(int(code))
        if text:
            return text.decode("utf-8", "replace")
    return table_name(table, code)


def load_cdll(path: Path | None = None) -> ctypes.CDLL:
    """The PTI view library as a plain ctypes library (the metrics API's functions are bound by
    ``vendors.pti_metrics``); ``path`` defaults to ``find_pti_library()``."""
    return ctypes.CDLL(str(find_pti_library() if path is None else path))


def version_string(path: Path | None = None) -> str:
    """``ptiVersionString`` without initializing PTI's core (safe in-process, even without a driver)."""
    fn = load_cdll(path).ptiVersionString
    fn.restype = ctypes.c_char_p
    return (fn() or b"").decode("utf-8", "replace")


class PtiLibrary:
    """A loaded libpti_view.so with typed functions. ``check(name, code)`` raises ``PtiError``."""

    def __init__(self, path: Path, cdll: ctypes.CDLL) -> None:
        self.path = Path(path)
        self._lib = cdll
        missing = [n for n in _REQUIRED if not hasattr(cdll, n)]
        if missing:
            raise PtiNotFound(f"{path} is not a PTI view library: missing {', '.join(missing)}")
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(cdll, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = res, args
                setattr(self, name, fn)
            else:
                setattr(self, name, None)
        self._api_names: dict[tuple[int, int], str] = {}

    @classmethod
    def load(cls, path: Path | None = None) -> "PtiLibrary":
        """Load PTI (RTLD_GLOBAL so SYCL's XPTI dispatcher can find its subscriber symbols)."""
        path = find_pti_library() if path is None else Path(path)
        try:
            cdll = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise PtiNotFound(f"cannot load {path}: {exc}") from exc
        return cls(path, cdll)

    # ------------------------------------------------------------------ helpers
    def version(self) -> str:
        v = self.ptiVersionString()
        return v.decode("utf-8", "replace") if v else ""

    def result_name(self, code: int) -> str:
        """PTI's own name for a result code (``ptiResultTypeToString``), e.g. ``PTI_ERROR_NOT_IMPLEMENTED``."""
        s = self.ptiResultTypeToString(int(code))
        return s.decode("utf-8", "replace") if s else f"PTI result {code}"

    def check(self, func: str, code: int) -> int:
        if code != Result.SUCCESS:
            raise PtiError(func, int(code), self.result_name(code))
        return code

    def call(self, func: str, *args) -> int:
        fn = getattr(self, func, None)
        if fn is None:
            raise PtiError(func, int(Result.ERROR_NOT_IMPLEMENTED), f"{self.path.name} does not export {func}")
        return self.check(func, fn(*args))

    def memory_type_name(self, code: int) -> str:
        """PTI's own memory-type string (what Kineto puts in memcpy names; it changed across PTI
        releases, e.g. "DEVICE" before 1.0, "Device" in 1.2), the built-in table without it."""
        return _pti_string(self.ptiViewMemoryTypeToString, code, MEMORY_TYPES)

    def memcpy_type_name(self, code: int) -> str:
        return _pti_string(self.ptiViewMemcpyTypeToString, code, MEMCPY_TYPES)

    def api_name(self, group: int, api_id: int) -> str:
        """``ptiViewGetApiIdName`` with a cache; unknown ids give ``"<group>:<id>"``."""
        key = (int(group), int(api_id))
        got = self._api_names.get(key)
        if got is None:
            name = ctypes.c_char_p()
            fn = self.ptiViewGetApiIdName
            ok = fn is not None and fn(key[0], key[1], ctypes.byref(name)) == Result.SUCCESS and name.value
            got = name.value.decode("utf-8", "replace") if ok else f"api_{key[0]}_{key[1]}"
            self._api_names[key] = got
        return got

    def timestamp(self) -> int:
        return int(self.ptiViewGetTimestamp())

    def push_external_correlation(self, kind: int, external_id: int) -> None:
        self.call("ptiViewPushExternalCorrelationId", int(kind), int(external_id))

    def pop_external_correlation(self, kind: int) -> int:
        out = ctypes.c_uint64()
        self.call("ptiViewPopExternalCorrelationId", int(kind), ctypes.byref(out))
        return int(out.value)

    def next_record_address(self) -> int:
        """C address of ``ptiViewGetNextRecord`` (the C buffer walker calls it directly)."""
        return ctypes.cast(self.ptiViewGetNextRecord, ctypes.c_void_p).value
