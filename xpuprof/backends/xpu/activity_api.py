"""XpuptiActivityApi: one collection session over Intel PTI's view API.

Life cycle (each step a method subclasses may override, calling ``super()``):

- ``__init__`` -> ``enable()``: registers the C buffer callbacks of ``xpuprof._native.ptibuf``
  with ``ptiViewSetCallbacks`` and enables the PTI views for the selected activity types
  (``views_for``). Like Kineto, views are enabled at configure time; records before ``start``
  are dropped as out of window.
- ``start()``: synchronizes PTI's clock with xpuprof's (``clock_offset_ns``).
- ``stop()``: ``flush()`` (``ptiFlushAllViews`` + drain the C queue into ``self.buffers``), then
  ``disable()`` the views.
- ``process(builder, window)``: ``decode()`` the buffers, ``process_records(...)`` writes them
  through ``emit.XpuEmitter``, and the kernels written are kept in ``self.kernels``
  (``emit.KernelTable``: kernel_id -> start/end/device/queue/name), which is what per-kernel
  metrics join on. Optionally saves a raw capture (``capture.save``) for ``xpuprof replay``.

``XpuptiActivityScopeApi`` (``scope_api.py``) extends this class: it enables metrics scope in
``enable()``, starts/stops collection around ``start()``/``stop()``, and in ``process()`` runs the
base first, then joins its metric records to ``self.kernels``.

Parts every session may carry, each in its own module: EU stall sampling (``stall_session``, when the
config asks: enabled after the views, started/stopped with them, read at ``process()``), kernel
resources (``kernel_resources``: the process's Level Zero tracer, when kernels are recorded) and the
kernel name filter (the config's, applied by ``emit``). ``pause()``/``resume()`` disable and enable the
views (the recording cycle's pause/resume).
"""
from __future__ import annotations

import array
import ctypes
import logging
import time

import numpy as np
from typing import Any

from ... import diagnostics
from ...activity import ActivityType
from ...clock import now_ns
from ..base import BackendError, ProcessWindow, Session
from ..common import SessionDrops
from ...vendors import pti
from . import early_load
from .records import DecodedRecords, PtiWalker, decode_records
from .context import ApiNameCache, RecordContext, StringCache
from .emit import VENDOR, KernelTable, write_records
from .kernel_resources import ResourcesPart
from .stall_session import StallPart
from .views import SUPPORTED_TYPES, VIEWS_BY_TYPE  # noqa: F401 (SUPPORTED_TYPES: read from here too)

log = logging.getLogger("xpuprof")
_PROCESS_LOADER = object()  # read kernel resources through the process's Level Zero loader

_LINKABLE = frozenset(VIEWS_BY_TYPE) - {ActivityType.EXTERNAL_CORRELATION, ActivityType.OVERHEAD}


def with_external_correlation(types: frozenset[ActivityType]) -> frozenset[ActivityType]:
    """Like Kineto's XPU session, the external-correlation view joins whenever device or API calls are
    recorded: without it runtime calls and kernels cannot be linked to their ranges (External id)."""
    return types | {ActivityType.EXTERNAL_CORRELATION} if types & _LINKABLE else types


def load_ptibuf():
    """The C callback module, or a BackendError that says how to get it."""
    from ... import _native

    try:
        return _native.load("ptibuf", "the XPU backend's PTI buffer callbacks, which must be C (Python callbacks "
                                      "deadlock inside SYCL),")
    except _native.NativeUnavailable as exc:
        raise BackendError(str(exc)) from exc


def measure_clock_offset(lib: pti.PtiLibrary, samples: int = 7) -> int:
    """epoch ns - PTI ns, from the tightest bracket of ``ptiViewGetTimestamp`` between two reads of ours."""
    best = None
    for _ in range(samples):
        a = now_ns()
        t = lib.timestamp()
        b = now_ns()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - t)
    return best[1]


class XpuptiActivityApi(Session):
    """A PTI view session (kernels, copies, fills, runtime/driver calls, syncs, overhead)."""

    def __init__(self, activity_types: frozenset[ActivityType], config: Any = None, *,
                 library: pti.PtiLibrary | None = None, device_uuids: list[bytes] | None = None,
                 device_names: dict[int, str] | None = None, device_properties: list[dict] | None = None,
                 ze_loader=None) -> None:
        """``library``/``ze_loader``: a PTI and a Level Zero loader other than the process's (tests); kernel
        resources are read through the process's loader when PTI is, else through ``ze_loader`` if given."""
        self.types = frozenset(activity_types)
        self.config = config
        if library is None:
            early_load.before_session_loads_pti()
        self.lib = library if library is not None else pti.PtiLibrary.load()
        # SYCL initialized before PTI's view library was loaded: runtime calls are lost for the whole process.
        # Said once per process, and in every trace's metadata: never a trace that looks complete.
        self.runtime_problem = early_load.runtime_capture_problem() if ActivityType.RUNTIME in self.types else None
        if self.runtime_problem:
            diagnostics.warn_once(log, ("xpu-runtime-load-order",), "xpuprof: %s", self.runtime_problem)
        self._ptibuf = load_ptibuf()
        self.device_uuids = list(device_uuids or [])
        self.device_names = dict(device_names or {})
        self._device_properties = list(device_properties or [])
        self.buffers: list[bytes] = []
        self.kernels: KernelTable = KernelTable.empty()
        self.clock_offset_ns: int | None = None
        self.enabled_views: list[pti.ViewKind] = []
        self._errors: list[str] = []
        self._dropped = SessionDrops(VENDOR)
        self._external_corr = ActivityType.EXTERNAL_CORRELATION in with_external_correlation(self.types)
        # (failed push/pop calls, last PTI result): written by the C record_function, read at process()
        self.correlation_failures = array.array("q", [0, 0])
        self.strings = StringCache.live()
        self.api_names = ApiNameCache(lookup=self.lib.api_name)
        self.allocations = None  # Level Zero allocations while profile_memory=True (allocations.py)
        self._memory_info: dict | None = None
        buffer_bytes = getattr(config, "custom", {}).get("xpu_buffer_bytes") if config is not None else None
        if buffer_bytes:
            self._ptibuf.set_buffer_size(int(buffer_bytes))
        self.stall = StallPart.from_config(config, self.lib, list(self.device_names.values()))
        self._ze_loader = ze_loader if ze_loader is not None or library is not None else _PROCESS_LOADER
        self.resources: ResourcesPart | None = None
        self.enable()

    # ------------------------------------------------------------------ hooks
    @staticmethod
    def views_for(types: frozenset[ActivityType]) -> list[pti.ViewKind]:
        seen: dict[pti.ViewKind, None] = {}
        for t in sorted(types, key=lambda t: t.value):
            for v in VIEWS_BY_TYPE.get(t, ()):
                seen[v] = None
        return list(seen)

    def enable(self) -> None:
        request, complete = self._ptibuf.callback_addresses()
        try:
            self.lib.call("ptiViewSetCallbacks", request, complete)
        except pti.PtiError as exc:
            raise BackendError(f"PTI refused the buffer callbacks: {exc}. {self._hint(exc)}") from exc
        for view in self.views_for(with_external_correlation(self.types)):
            code = self.lib.ptiViewEnable(int(view))
            if code == pti.Result.SUCCESS:
                self.enabled_views.append(view)
                continue
            err = pti.PtiError("ptiViewEnable", code, self.lib.result_name(code))
            if code == pti.Result.ERROR_NOT_IMPLEMENTED and not self.enabled_views:
                raise BackendError(f"PTI cannot collect {view.name} records: {err}. {self._hint(err)}")
            # One optional view the driver lacks (e.g. no tracing layer) must not stop the others.
            self._errors.append(f"view {view.name} not enabled: {err}")
        self._views_on = True
        if pti.ViewKind.RUNTIME_API in self.enabled_views and self.lib.ptiViewEnableRuntimeApiClass is not None:
            # Runtime records limited to work-submitting calls (kernels, copies), as Kineto does.
            code = self.lib.ptiViewEnableRuntimeApiClass(1, int(pti.ApiClass.GPU_OPERATION_CORE), int(pti.ApiGroup.ALL))
            if code != pti.Result.SUCCESS:
                self._errors.append(f"ptiViewEnableRuntimeApiClass: {self.lib.result_name(code)}")
        if ActivityType.CONCURRENT_KERNEL in self.types and self._ze_loader is not None:
            # as early as possible: a kernel's resources can only be read when it is created
            self.resources = ResourcesPart(None if self._ze_loader is _PROCESS_LOADER else self._ze_loader)
        if self.stall is not None:  # after the kernel view, which PTI's sampler needs
            try:
                self.stall.enable()
            except BaseException:
                self.disable()
                raise

    def _hint(self, err: pti.PtiError) -> str:
        if err.code == pti.Result.ERROR_NOT_IMPLEMENTED:
            missing = pti.library_path_missing(self.lib.path)
            if missing is not None:
                return (f"PTI's core library could not load because LD_LIBRARY_PATH lacks {missing} at process start; "
                        "run through the xpuprof CLI (it re-executes itself) or export LD_LIBRARY_PATH")
            return ("PTI's core library did not load (no usable Level Zero loader/driver); "
                    "run `xpuprof devices` for the reason, or set PTILOG_LEVEL=info")
        return ""

    def disable(self) -> None:
        """Disable the views this session enabled (``enabled_views`` stays as the record of them)."""
        if self._views_on:
            for view in self.enabled_views:
                self.lib.ptiViewDisable(int(view))
            self._views_on = False

    def pause(self) -> None:
        """PTI collects nothing while paused: its views are disabled (records already in flight may still
        come; the cycle drops those that start in the paused span). PTI's EU stall sampling cannot pause."""
        self.disable()
        if self.stall is not None:
            self.stall.note_paused()

    def resume(self) -> None:
        if self._views_on:
            return
        for view in self.enabled_views:
            code = self.lib.ptiViewEnable(int(view))
            if code != pti.Result.SUCCESS:
                self._errors.append(f"view {view.name} not enabled again after a pause: {self.lib.result_name(code)}")
        self._views_on = True

    def start(self) -> None:
        self.clock_offset_ns = measure_clock_offset(self.lib)
        self.start_ns = now_ns()
        if self.stall is not None:
            self.stall.start()
        if getattr(self.config, "profile_memory", False):
            self._start_allocations()

    def _start_allocations(self) -> None:
        from .allocations import AllocationTracerError, LevelZeroAllocations

        try:
            tracer = LevelZeroAllocations()
            tracer.start()
        except AllocationTracerError as exc:  # asked for and not given: said, in the trace too
            self._memory_info = {"events": 0, "not_recorded": str(exc)}
            self._errors.append(f"profile_memory: {exc}")
            return
        self.allocations = tracer

    def flush(self) -> None:
        """``ptiFlushAllViews`` and move every completed buffer out of the C queue."""
        code = self.lib.ptiFlushAllViews()
        if code != pti.Result.SUCCESS:
            self._errors.append(f"ptiFlushAllViews: {self.lib.result_name(code)}")
        self.buffers.extend(self._ptibuf.drain())

    def stop(self) -> None:
        if self.stall is not None:
            self.stall.stop()
        if self.allocations is not None:
            self.allocations.stop()
        self.flush()
        self.disable()
        if self.clock_offset_ns is None:
            self.clock_offset_ns = measure_clock_offset(self.lib)
        stats = self._ptibuf.stats()
        if stats["request_failures"]:
            self._dropped.set("PTI buffers not allocated (records lost)", stats["request_failures"])
        if stats["queue_failures"]:
            self._dropped.set("completed PTI buffers lost (out of memory)", stats["queue_failures"])

    def decode(self, window: ProcessWindow | None = None, *, release: bool = False) -> DecodedRecords:
        """The emit stage's columns of every buffer collected (``records.decode_records``): inside
        ``window`` only, when given; ``release``: the buffers are handed over and freed as read."""
        win = None if window is None else (int(window.start_ns), int(window.end_ns), int(self.clock_offset_ns or 0))
        buffers = self.buffers
        if release:
            self.buffers = []
        return decode_records(buffers, PtiWalker(self.lib.next_record_address()), window=win, release=release)

    def context(self) -> RecordContext:
        return RecordContext(pti_version=self.lib.version(), clock_offset_ns=int(self.clock_offset_ns or 0),
                             device_uuids=self.device_uuids, device_names=self.device_names,
                             strings=self.strings, api_names=self.api_names,
                             memory_type_name=self.lib.memory_type_name, memcpy_type_name=self.lib.memcpy_type_name)

    @property
    def kernel_filter(self):
        """The config's kernel name filter (``config.kernel_filter.KernelFilter``), or None."""
        return getattr(self.config, "kernel_filter", None) if self.config is not None else None

    def kernel_arg_sources(self, builder) -> list:
        """More arg columns for the kernel slices (``XpuEmitter``'s kernel_args): each kernel's resources
        and EU stall mix."""
        def text_of(i):
            return builder.strings.strings[i]
        parts = [p.kernel_args(text_of) for p in (self.resources, self.stall) if p is not None]
        return [p for p in parts if p is not None]

    def process_records(self, records: DecodedRecords, builder, window: ProcessWindow | None) -> None:
        # process() is done with the records once written: each kind is freed as soon as it is.
        result = write_records(records, self.context(), builder, window, self.types, release_records=True,
                               kernel_args=self.kernel_arg_sources(builder), kernel_filter=self.kernel_filter)
        self.kernels = result.kernels
        self._errors.extend(result.errors)

    def process(self, builder, window: ProcessWindow) -> None:
        try:
            if self.stall is not None:
                self.stall.collect(self.kernel_filter.keep if self.kernel_filter is not None else None)
            self._process(builder, window)
            if self.resources is not None:
                self.resources.finish(builder)
        finally:
            if self.stall is not None:
                self.stall.finish(builder)

    def _process(self, builder, window: ProcessWindow) -> None:
        t0 = time.perf_counter()
        path = getattr(self.config, "raw_capture_path", None) if self.config is not None else None
        # Without a capture to save, nothing reads the raw buffers after this: each is freed once read.
        records = self.decode(window, release=not path)
        self.decode_seconds = time.perf_counter() - t0
        self.counts_decoded = {int(k): len(v) + records.out_of_window.get(int(k), 0)
                               for k, v in records.by_kind.items()}
        self.counts_decoded.update({int(k): n for k, n in records.out_of_window.items() if k not in records.by_kind})
        self.counts_decoded.update({-int(k): n for k, n in records.unknown.items()})
        range_threads = None
        if path and window is not None and window.range_threads is not None:
            # The capture keeps the threads of the ranges its records name, so a replay places
            # thread-less runtime records exactly as this trace does.
            ext_ids = np.unique(records.get(pti.ViewKind.EXTERNAL_CORRELATION)["_external_id"].astype(np.int64))
            range_threads = (ext_ids, window.range_threads.lookup(ext_ids))
        self.process_records(records, builder, window)
        if self.allocations is not None:
            self._memory_info = self.allocations.write(builder, window, host_reports_memory=bool(
                getattr(window, "host_reports_memory", False)))
        failed = self._correlation_failure_report()
        if failed:
            self._errors.append(failed)
        self._dropped.write(builder)
        if path:
            from .capture import save

            save(path, self.buffers, self.context(), self.types, window, range_threads=range_threads)
        self.process_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ Session extras
    @property
    def correlation_hooks(self):
        """PTI's own C push/pop entry points, which the C ``record_function`` calls directly (a
        Python call per range through ctypes cost ~1.7 us of the range's enter+exit); failures are
        counted into ``correlation_failures``. None: the Python methods below are used."""
        push = getattr(self.lib, "ptiViewPushExternalCorrelationId", None)
        pop = getattr(self.lib, "ptiViewPopExternalCorrelationId", None)
        if not self._external_corr or push is None or pop is None:
            return None
        return (ctypes.cast(push, ctypes.c_void_p).value, ctypes.cast(pop, ctypes.c_void_p).value,
                int(pti.ExternalKind.CUSTOM_0), self.correlation_failures)

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        if self._external_corr:
            kind = pti.ExternalKind.CUSTOM_1 if user else pti.ExternalKind.CUSTOM_0
            try:
                self.lib.push_external_correlation(kind, correlation_id)
            except pti.PtiError as exc:  # counted and reported at process(), never raised into the range
                self._count_correlation_failure(exc.code)

    def pop_correlation_id(self, user: bool = False) -> None:
        if self._external_corr:
            try:
                self.lib.pop_external_correlation(pti.ExternalKind.CUSTOM_1 if user else pti.ExternalKind.CUSTOM_0)
            except pti.PtiError as exc:
                self._count_correlation_failure(exc.code)

    def _count_correlation_failure(self, code: int) -> None:
        self.correlation_failures[0] += 1
        self.correlation_failures[1] = int(code)

    def _correlation_failure_report(self) -> str | None:
        failed, last = self.correlation_failures
        if not failed:
            return None
        return (f"{failed} external-correlation push/pop call(s) failed (last: {self.lib.result_name(int(last))}): "
                f"device work inside those record_function ranges is not linked to them (no External id)")

    def device_properties(self) -> list[dict[str, Any]]:
        return list(self._device_properties)

    def metadata(self) -> dict[str, Any]:
        meta = {"xpupti_version": self.lib.version()}
        notes = {p["id"]: p["note"] for p in self._device_properties if "note" in p}
        if notes:  # the trace says what its "Null Device" is, as `xpuprof devices` does
            meta["xpu_test_device"] = f"device {', '.join(map(str, notes))}: {next(iter(notes.values()))}"
        if self.runtime_problem:
            meta["xpu_runtime_calls_missing"] = self.runtime_problem
        if self._memory_info is not None:
            meta["levelzero_memory_events"] = dict(self._memory_info)
        return meta

    def errors(self) -> list[str]:
        return list(self._errors) + (self.stall.errors() if self.stall is not None else [])

    def dropped_records(self) -> dict[str, int]:
        return self._dropped.labels()
