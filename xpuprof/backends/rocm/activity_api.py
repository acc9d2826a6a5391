"""RocprofActivityApi: live collection through rocprofiler-sdk (ctypes + the C part ``rocbuf``).

rocprofiler-sdk accepts a tool once per process and only before HIP/HSA initialise: we register
with ``rocprofiler_force_configure`` and, inside the tool's ``initialize`` (the only place
services may be configured), create one context with

- buffered tracing of the HIP runtime API, kernel dispatches and memory copies;
- callback tracing of CODE_OBJECT kernel-symbol registration (kernel_id -> name);
- callback tracing of the HIP calls whose *arguments* the dependency resolver needs
  (hipEventRecord, hipStreamWaitEvent, hipEventSynchronize), of stream/device syncs and of every
  launch / async copy API (their stream: ``HIP_ARG_LAYOUT``).

rocprofiler-sdk 0.x (ROCm 6) and 1.x (ROCm 7) lay records out differently (1.0 added
``ancestor`` to the correlation id): the SDK version read before registering picks the C
callbacks for its callback-record layout, each buffer record's own size picks its mirror, and
anything else is refused with a clear error (``rocprof.callback_layout``, ``rocprof.layout_for``).

Every callback is C (``xpuprof._native.rocbuf``): they run on rocprofiler's and the
application's threads, where a Python callback would deadlock on the GIL. Python drains
and decodes after ``stop``. Enum values are looked up by name at run time; record sizes are
checked against the mirrors. The registration is process-wide, so later sessions reuse it.
"""
from __future__ import annotations

import array
import atexit
import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...activity import ActivityType
from ...clock import now_ns
from ..base import BackendError, ProcessWindow, Session
from ..common import SessionDrops
from ..dependencies import DependencyResolver
from ...vendors import rocprofiler as rocprof
from .emit import VENDOR, RocmEmitter
from .records import (EVENT_OP_DTYPE, OP_DEVICE_SYNC, OP_EVENT_SYNC, OP_LAUNCH, OP_RECORD, OP_STREAM_SYNC,
                      OP_STREAM_WAIT, RocmRecords, rows_of)

SUPPORTED = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.RUNTIME,
                       ActivityType.EXTERNAL_CORRELATION, ActivityType.CUDA_SYNC})
BUFFER_BYTES = 4 << 20  # Kineto's buffer size
WATERMARK_BYTES = 3 << 20

# HIP call -> (op code, byte offset of the hipEvent_t, of the hipStream_t) inside its member of
# rocprofiler_hip_api_args_t (rocprofiler-sdk/hip/api_args.h); -1 = the call has none. Offsets
# printed by tests/rocm/data/print_layouts.py from the real api_args.h of SDK 0.5.0, 0.6.0 and
# 1.0.0 (ROCm/rocm-systems eb15bcdf, 0608bbb4, 1b1610fc; identical in all three, and the test
# checks every entry against them). Launches and async copies/memsets only give the kernel or
# copy its HIP stream: without them, kernels from rocBLAS/hipBLASLt (hipExtModuleLaunchKernel),
# MIOpen/Triton (hipModuleLaunchKernel) and graphs fall back to the HSA queue.
HIP_ARG_LAYOUT = {
    "hipEventRecord": (OP_RECORD, 0, 8),  # {hipEvent_t event; hipStream_t stream;}
    "hipEventRecord_spt": (OP_RECORD, 0, 8),
    "hipEventRecordWithFlags": (OP_RECORD, 0, 8),  # {event; stream; unsigned flags;} (SDK 1.0+)
    "hipStreamWaitEvent": (OP_STREAM_WAIT, 8, 0),  # {hipStream_t stream; hipEvent_t event; unsigned flags;}
    "hipStreamWaitEvent_spt": (OP_STREAM_WAIT, 8, 0),
    "hipEventSynchronize": (OP_EVENT_SYNC, 0, -1),  # {hipEvent_t event;}
    "hipStreamSynchronize": (OP_STREAM_SYNC, -1, 0),  # {hipStream_t stream;}
    "hipStreamSynchronize_spt": (OP_STREAM_SYNC, -1, 0),
    "hipDeviceSynchronize": (OP_DEVICE_SYNC, -1, -1),  # {no_args}
    # {const void* f; dim3 numBlocks; dim3 dimBlocks; void** args; size_t sharedMemBytes; hipStream_t stream;}
    "hipLaunchKernel": (OP_LAUNCH, -1, 48),
    "hipLaunchKernel_spt": (OP_LAUNCH, -1, 48),
    "hipLaunchCooperativeKernel": (OP_LAUNCH, -1, 48),  # {f; dim3 gridDim; dim3 blockDimX; args; shm; stream}
    "hipLaunchCooperativeKernel_spt": (OP_LAUNCH, -1, 48),
    "hipExtLaunchKernel": (OP_LAUNCH, -1, 48),  # {f; dim3; dim3; args; shm; stream; events...}
    # {hipFunction_t f; unsigned gridDimX..Z, blockDimX..Z, sharedMemBytes; hipStream_t stream; ...}
    "hipModuleLaunchKernel": (OP_LAUNCH, -1, 40),
    "hipModuleLaunchCooperativeKernel": (OP_LAUNCH, -1, 40),
    # {hipFunction_t f; u32 globalWorkSize{X,Y,Z}, localWorkSize{X,Y,Z}; size_t sharedMemBytes; hipStream_t hStream; ...}
    "hipExtModuleLaunchKernel": (OP_LAUNCH, -1, 40),
    "hipGraphLaunch": (OP_LAUNCH, -1, 8),  # {hipGraphExec_t graphExec; hipStream_t stream;}
    "hipGraphLaunch_spt": (OP_LAUNCH, -1, 8),
    "hipMemcpyAsync": (OP_LAUNCH, -1, 32),  # {void* dst; const void* src; size_t sizeBytes; kind; hipStream_t stream;}
    "hipMemcpyAsync_spt": (OP_LAUNCH, -1, 32),
    "hipMemcpyWithStream": (OP_LAUNCH, -1, 32),  # same shape as hipMemcpyAsync
    "hipMemsetAsync": (OP_LAUNCH, -1, 24),  # {void* dst; int value; size_t sizeBytes; hipStream_t stream;}
    "hipMemsetAsync_spt": (OP_LAUNCH, -1, 24),
    "hipMemcpyHtoDAsync": (OP_LAUNCH, -1, 24),  # {dst; src; size_t sizeBytes; hipStream_t stream;}
    "hipMemcpyDtoHAsync": (OP_LAUNCH, -1, 24),
    "hipMemcpyDtoDAsync": (OP_LAUNCH, -1, 24),
    "hipMemcpy2DAsync": (OP_LAUNCH, -1, 56),  # {dst; dpitch; src; spitch; width; height; kind; stream;}
}
# Copy operation names -> the emit stage's direction codes (values differ between releases).
COPY_DIRECTIONS = {"HOST_TO_HOST": 1, "HOST_TO_DEVICE": 2, "DEVICE_TO_HOST": 3, "DEVICE_TO_DEVICE": 4}

def load_rocbuf():
    from ... import _native

    try:
        return _native.load("rocbuf", "the ROCm backend (rocprofiler-sdk's callbacks are C)")
    except _native.NativeUnavailable as exc:
        raise BackendError(str(exc)) from exc


def _need(found: dict[str, int], what: str, *names: str) -> int:
    for n in names:
        if n in found:
            return found[n]
    raise BackendError(f"this rocprofiler-sdk does not offer {what} ({' or '.join(names)}); it offers: "
                       f"{', '.join(sorted(found)) or 'nothing'}")


@dataclass
class Registration:
    """The process-wide rocprofiler tool: one context, one buffer, the configured services."""

    lib: Any
    rocbuf: Any
    buffer_kinds: dict[str, int]
    context: int = 0
    buffer: int = 0
    counters: bool = False
    hip_names: dict[int, str] = field(default_factory=dict)  # buffer HIP operation -> function name
    copy_directions: dict[int, int] = field(default_factory=dict)
    agents: list[int] = field(default_factory=list)
    kernel_names: dict[int, str] = field(default_factory=dict)
    keep: list = field(default_factory=list)  # ctypes objects rocprofiler holds pointers to
    error: str = ""
    counter_setup: Any = None  # callable(reg) run inside initialize (RocprofCounterApi)
    version: tuple[int, int, int] = (0, 0, 0)  # rocprofiler_get_version
    layout: int = 0  # callback record layout: 0 = SDK 0.x, 1 = SDK 1.x (rocprof.callback_layout)


_REG: Registration | None = None
_REG_LOCK = threading.Lock()


def _check(lib, status: int, what: str) -> None:
    if status != 0:
        raise BackendError(f"{what} failed: {rocprof.status_text(lib, status)}")


def _initialize(reg: Registration) -> None:
    lib, rb = reg.lib, reg.rocbuf
    ctx = ctypes.c_uint64()
    _check(lib, lib.rocprofiler_create_context(ctypes.byref(ctx)), "rocprofiler_create_context")
    reg.context = ctx.value
    addr = rb.callback_addresses(reg.layout)
    buf = ctypes.c_uint64()
    _check(lib, lib.rocprofiler_create_buffer(ctx, ctypes.c_size_t(BUFFER_BYTES), ctypes.c_size_t(WATERMARK_BYTES),
                                              rocprof.BUFFER_POLICY_LOSSLESS, ctypes.c_void_p(addr["buffer"]), None,
                                              ctypes.byref(buf)), "rocprofiler_create_buffer")
    reg.buffer = buf.value
    kinds = reg.buffer_kinds
    hip = _need(kinds, "HIP runtime API tracing", "HIP_RUNTIME_API", "HIP_API")
    for kind in (hip, _need(kinds, "kernel dispatch tracing", "KERNEL_DISPATCH"),
                 _need(kinds, "memory copy tracing", "MEMORY_COPY")):
        _check(lib, lib.rocprofiler_configure_buffer_tracing_service(ctx, kind, None, ctypes.c_size_t(0), buf),
               f"rocprofiler_configure_buffer_tracing_service(kind {kind})")
    cb_kinds = rocprof.callback_tracing_kinds(lib)
    code_kind = _need(cb_kinds, "code object callbacks", "CODE_OBJECT")
    sym_op = _need(rocprof.callback_operation_names(lib, code_kind), "kernel symbol registration",
                   "CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER")
    rb.set_code_object(code_kind, sym_op)
    ops = (ctypes.c_int32 * 1)(sym_op)
    _check(lib, lib.rocprofiler_configure_callback_tracing_service(ctx, code_kind, ops, ctypes.c_size_t(1),
                                                                   ctypes.c_void_p(addr["code_object"]), None),
           "rocprofiler_configure_callback_tracing_service(CODE_OBJECT)")
    cb_hip = _need(cb_kinds, "HIP runtime API callbacks", "HIP_RUNTIME_API", "HIP_API")
    hip_ops = rocprof.callback_operation_names(lib, cb_hip)
    specs = [(hip_ops[n], code, ev, st) for n, (code, ev, st) in HIP_ARG_LAYOUT.items() if n in hip_ops]
    if not any(s[1] == OP_RECORD for s in specs):
        raise BackendError("this rocprofiler-sdk lists no hipEventRecord operation; inter-stream dependencies "
                           "cannot be traced")
    rb.set_hip_ops(cb_hip, specs)
    arr = (ctypes.c_int32 * len(specs))(*[s[0] for s in specs])
    _check(lib, lib.rocprofiler_configure_callback_tracing_service(ctx, cb_hip, arr, ctypes.c_size_t(len(specs)),
                                                                   ctypes.c_void_p(addr["hip"]), None),
           "rocprofiler_configure_callback_tracing_service(HIP_RUNTIME_API)")
    reg.keep += [ops, arr]
    reg.agents = rocprof.query_gpu_agents(lib)
    if reg.counter_setup is not None:
        reg.counter_setup(reg)
        reg.counters = True


def register(lib, rocbuf, *, counter_setup=None) -> Registration:
    """Configure rocprofiler once per process (force_configure -> our initialize)."""
    global _REG
    with _REG_LOCK:
        if _REG is not None:
            if counter_setup is not None and not _REG.counters:
                raise BackendError("rocprofiler-sdk was already configured in this process without per-kernel "
                                   "counters; it accepts one configuration per process, so start the counter "
                                   "session (profiler_metrics) in the first ROCm profiling session")
            return _REG
        rocprof.declare(lib)
        rocbuf.reset()
        rocbuf.set_agent_configs([])
        for category, kind, size in ((rocprof.CATEGORY_COUNTERS, rocprof.COUNTER_RECORD_VALUE,
                                      ctypes.sizeof(rocprof.CounterRecord)),):
            rocbuf.set_fixed_size(category, kind, size)
        # The callback records passed by value have no size field: the SDK generation decides
        # their layout, so it is read before anything is registered, and unknown ones refused.
        try:
            version = rocprof.sdk_version(lib)
            layout = rocprof.callback_layout(version)
        except rocprof.RocprofAbiError as exc:
            raise BackendError(str(exc)) from None
        kinds = {rocprof.strip_prefix(k, "ROCPROFILER_BUFFER_TRACING_"): v for k, v in rocprof.buffer_tracing_kinds(lib).items()}
        reg = Registration(lib=lib, rocbuf=rocbuf, buffer_kinds=kinds, counter_setup=counter_setup, version=version,
                           layout=layout)
        hip = _need(kinds, "HIP runtime API tracing", "HIP_RUNTIME_API", "HIP_API")
        reg.hip_names = rocprof.operation_names(lib, hip)
        copy_names = rocprof.operation_names(lib, _need(kinds, "memory copy tracing", "MEMORY_COPY"))
        reg.copy_directions = {op: COPY_DIRECTIONS.get(rocprof.strip_prefix(n, "ROCPROFILER_", "MEMORY_COPY_"), 0)
                               for op, n in copy_names.items()}

        def initialize(_finalize, _data):
            try:
                _initialize(reg)
                return 0
            except Exception as exc:  # reported by register(); rocprofiler discards the tool on -1
                reg.error = str(exc)
                return -1

        def configure(sdk_version, _runtime, _priority, client_id):
            # ROCPROFILER_VERSION = major * 10000 + minor * 100 + patch (version.h): it must agree
            # with rocprofiler_get_version, or the callback layout chosen above could be wrong.
            if int(sdk_version) // 10000 != reg.version[0]:
                reg.error = (f"rocprofiler-sdk configured the tool as version {int(sdk_version)} but "
                             f"rocprofiler_get_version said {'.'.join(map(str, reg.version))}; the callback record "
                             "layout cannot be trusted")
                return None
            if client_id:
                rocprof.set_client_name(client_id)
            return ctypes.addressof(result)

        init_fn, fini_fn = rocprof.INITIALIZE_FN(initialize), rocprof.FINALIZE_FN(lambda _data: None)
        result = rocprof.ToolConfigureResult(ctypes.sizeof(rocprof.ToolConfigureResult), init_fn, fini_fn, None)
        cfg_fn = rocprof.CONFIGURE_FN(configure)
        reg.keep += [init_fn, fini_fn, result, cfg_fn, initialize, configure]
        status = lib.rocprofiler_force_configure(cfg_fn)
        if status != 0:
            text = rocprof.status_text(lib, status)
            if "CONFIGURATION_LOCKED" in text.upper():
                raise BackendError("rocprofiler-sdk is already configured (ROCPROFILER_STATUS_ERROR_CONFIGURATION_"
                                   "LOCKED): the ROCm backend must be started before HIP initialises (before the "
                                   "first torch.cuda / HIP call), and no other rocprofiler tool may hold it")
            raise BackendError(f"rocprofiler_force_configure failed: {text}")
        if reg.error or not reg.context:
            raise BackendError(f"rocprofiler-sdk tool initialisation failed: {reg.error or 'initialize never ran'}")
        _REG = reg
        atexit.register(_stop_at_exit, reg)
        return reg


def _stop_at_exit(reg: Registration) -> None:
    # Stop and flush before rocprofiler's own teardown (Kineto's exit segfault, kineto#1249).
    try:
        reg.lib.rocprofiler_stop_context(reg.context)
        reg.lib.rocprofiler_flush_buffer(reg.buffer)
    except Exception:  # interpreter teardown: nothing left to report to
        pass


class RocprofActivityApi(Session):
    """HIP API, kernel dispatch and memory copy tracing with inter-stream dependencies."""

    counter_setup = None

    def __init__(self, activity_types: frozenset[ActivityType], config: Any = None, *, library=None) -> None:
        import os

        self.types = frozenset(activity_types)
        self.config = config
        self.lib = library if library is not None else rocprof.load_library()
        self.rocbuf = load_rocbuf()
        self.reg = register(self.lib, self.rocbuf, counter_setup=self.counter_setup)
        self.pid = os.getpid()
        self.dependencies = DependencyResolver("hip")
        self.emitter = RocmEmitter(pid=self.pid, dependencies=self.dependencies, activities=self.types)
        self._external = ActivityType.EXTERNAL_CORRELATION in self.types
        self.correlation_failures = array.array("q", [0, 0])  # failed push/pop calls, last status
        self._dropped = SessionDrops(VENDOR)
        self._stats_base: dict[str, int] = {}
        self._errors: list[str] = []
        self.packed: list[bytes] = []
        self.event_ops = b""
        self.clock_offset_ns = 0

    # ------------------------------------------------------------------ collection
    def start(self) -> None:
        # Records from before this session (another session, warm-up) are not ours.
        self.rocbuf.drain()
        self.rocbuf.drain_event_ops()
        self.emitter.reset()  # the session's resolver (shared with the emitter) and stream numbering
        self._dropped.clear()
        self._errors.clear()
        self.packed, self.event_ops = [], b""
        # rocbuf's counters run for the whole process: this session reports what it adds.
        self._stats_base = self.rocbuf.stats()
        self.clock_offset_ns = self.measure_clock_offset()
        _check(self.lib, self.lib.rocprofiler_start_context(self.reg.context), "rocprofiler_start_context")

    def measure_clock_offset(self) -> int:
        """epoch ns - rocprofiler ns (rocprofiler stamps records with a monotonic clock)."""
        ts = ctypes.c_uint64()
        before = now_ns()
        _check(self.lib, self.lib.rocprofiler_get_timestamp(ctypes.byref(ts)), "rocprofiler_get_timestamp")
        return (before + now_ns()) // 2 - int(ts.value)

    def to_epoch(self, rows: np.ndarray | None) -> np.ndarray | None:
        if rows is not None and len(rows):
            for f in ("start_timestamp", "end_timestamp"):
                rows[f] = (rows[f].astype(np.int64) + self.clock_offset_ns).astype(rows[f].dtype)
        return rows

    def stop(self) -> None:
        _check(self.lib, self.lib.rocprofiler_stop_context(self.reg.context), "rocprofiler_stop_context")
        _check(self.lib, self.lib.rocprofiler_flush_buffer(self.reg.buffer), "rocprofiler_flush_buffer")
        self.packed = self.rocbuf.drain()
        self.event_ops = self.rocbuf.drain_event_ops()
        self.reg.kernel_names.update(self.rocbuf.drain_kernel_symbols())
        now = self.rocbuf.stats()
        stats = {k: v - self._stats_base.get(k, 0) for k, v in now.items()}
        for key, kind, reason in (("dropped", "records", "dropped by rocprofiler"),
                                  ("malformed", "records", "with an implausible size"),
                                  ("queue_failures", "buffers", "lost (out of memory)")):
            self._dropped.set(reason, stats[key], kind=kind)

    @property
    def correlation_hooks(self):
        """rocprofiler-sdk's own C entry points (push/pop by context and thread, and the thread id),
        which the C ``record_function`` calls directly: two ctypes calls per push or pop cost more
        than the whole range. Failures are counted into ``correlation_failures``. None: the Python
        methods below are used."""
        if not self._external:
            return None
        lib = self.lib
        addr = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in (
            "rocprofiler_push_external_correlation_id", "rocprofiler_pop_external_correlation_id",
            "rocprofiler_get_thread_id")]
        return (addr[0], addr[1], int(self.reg.context), self.correlation_failures, addr[2])

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        if self._external and not user:
            tid = ctypes.c_uint64()
            status = self.lib.rocprofiler_get_thread_id(ctypes.byref(tid))
            if status == 0:
                status = self.lib.rocprofiler_push_external_correlation_id(self.reg.context, tid.value,
                                                                           int(correlation_id))
            self._count_correlation_failure(status)

    def pop_correlation_id(self, user: bool = False) -> None:
        if self._external and not user:
            tid, out = ctypes.c_uint64(), ctypes.c_uint64()
            status = self.lib.rocprofiler_get_thread_id(ctypes.byref(tid))
            if status == 0:
                status = self.lib.rocprofiler_pop_external_correlation_id(self.reg.context, tid.value,
                                                                          ctypes.byref(out))
            self._count_correlation_failure(status)

    def _count_correlation_failure(self, status: int) -> None:
        if status:  # counted and reported at process(), never raised into the range
            self.correlation_failures[0] += 1
            self.correlation_failures[1] = int(status)

    # ------------------------------------------------------------------ decoding
    def records(self) -> tuple[RocmRecords, dict]:
        # The drained buffers are handed over and freed once split: held once, not three times.
        packed, self.packed = self.packed, []
        groups = self.rocbuf.split(b"".join(packed)) if packed else {}
        del packed
        k = self.reg.buffer_kinds
        trace = rocprof.CATEGORY_TRACING

        def get(kind, what):
            blob = groups.get((trace, kind))
            return self.to_epoch(rows_of(blob, what)) if blob else None

        copies = get(k["MEMORY_COPY"], "memory copy")
        if copies is not None and len(copies):
            ops = copies["operation"]
            copies["operation"] = np.array([self.reg.copy_directions.get(int(o), 0) for o in ops.tolist()], ops.dtype)
        rec = RocmRecords(
            hip_api=get(k.get("HIP_RUNTIME_API", k.get("HIP_API")), "HIP API"),
            dispatch=get(k["KERNEL_DISPATCH"], "kernel dispatch"), copies=copies,
            event_ops=np.frombuffer(self.event_ops, EVENT_OP_DTYPE).copy(), api_names=self.reg.hip_names,
            kernel_names=dict(self.reg.kernel_names),
            agent_device={a: i for i, a in enumerate(self.reg.agents)})
        return rec, groups

    def process(self, builder, window: ProcessWindow) -> None:
        failed, last = self.correlation_failures
        if failed:
            self._errors.append(f"{failed} external-correlation push/pop call(s) failed (last: "
                                f"{rocprof.status_text(self.lib, int(last))}): device work inside those record_function "
                                "ranges is not linked to them (no External id)")
            self.correlation_failures[0] = 0
        rec, groups = self.records()
        groups = {key: blob for key, blob in groups.items() if key[0] != rocprof.CATEGORY_TRACING}  # decoded in rec
        self.emitter.write(builder, window, rec, release=True)
        self.process_counters(builder, window, rec, groups)
        self._dropped.write(builder)

    def process_counters(self, builder, window, rec: RocmRecords, groups: dict) -> None:
        return None

    def errors(self) -> list[str]:
        return list(self._errors)

    def dropped_records(self) -> dict[str, int]:
        return self._dropped.labels()
