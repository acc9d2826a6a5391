"""CuptiActivityApi: CUPTI activity tracing through cupti-python (the ``[cuda]`` extra).

CUPTI allows one client per process (one set of activity-buffer callbacks, one Callback-API
subscriber). The session claims the subscriber slot under the name "xpuprof" before touching
anything, so a second client (torch.profiler/Kineto, Nsight Systems) is reported by name
instead of silently stealing or losing records.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

from ...activity import ActivityType
from ..base import BackendError, ProcessWindow, Session
from ...vendors import cupti
from ..common import SessionDrops
from ..dependencies import DependencyResolver
from . import records
from .emit import VENDOR, CudaEmitter, DecodeOptions
from .kinds import KINDS_FOR, SUPPORTED  # noqa: F401 (SUPPORTED: read from here too)

BUFFER_BYTES = 8 * 1024 * 1024
SUBSCRIBER_NAME = "xpuprof"

# Kinds whose absence must not cost the whole session: a CUPTI/platform that refuses peer-to-peer
# copy records still records everything else, and the trace says P2P copies are missing.
OPTIONAL_KINDS = {records.KIND_MEMCPY2: "peer-to-peer copies (CUPTI_ACTIVITY_KIND_MEMCPY2)"}


class CuptiBusyError(BackendError):
    """Another CUPTI client holds the process-wide CUPTI slot."""


def import_cupti():
    try:
        return cupti.load()
    except ImportError as exc:
        raise BackendError(f"the cuda backend needs cupti-python (pip install 'xpuprof[cuda]'): {exc}") from exc


def cupti_call(c, fn, *args):
    """Call CUPTI, turning "no driver/GPU" into a BackendError that says so."""
    try:
        return fn(*args)
    except c.cuptiError:
        raise
    except RuntimeError as exc:  # cupti._internal.utils.NotSupportedError and friends
        raise BackendError(f"CUPTI is unusable here: {exc}") from exc


class CuptiActivityApi(Session):
    """Kineto's CuptiActivityApi in Python: buffers in, columnar trace rows out."""

    def __init__(self, activity_types, config, *, cupti_module=None) -> None:
        self.activity_types = frozenset(activity_types)
        self.config = config
        self._c = cupti_module
        self._lock = threading.Lock()
        self._chunks: list[records.RawChunk] = []
        self._errors: list[str] = []
        self._correlation_failures: tuple[int, Any] = (0, None)  # (count, last error)
        self._dropped = SessionDrops(VENDOR)
        self._subscriber = None
        self._enabled: list[int] = []
        self._offset_ns = 0
        self._names: dict[tuple[int, int], str] = {}
        self.dependencies = DependencyResolver(VENDOR)

    # ------------------------------------------------------------------ lifecycle
    @property
    def kinds(self) -> list[int]:
        out: list[int] = []
        for t in sorted(self.activity_types, key=lambda t: t.value):
            out.extend(k for k in KINDS_FOR.get(t, ()) if k not in out)
        return out

    def reset(self) -> None:
        """Forget collected buffers, drops, errors and the event-record history (a new session)."""
        with self._lock:
            self._chunks.clear()
            self._dropped.clear()
            self._errors.clear()
        self.dependencies.reset()

    def _cupti(self):
        if self._c is None:
            self._c = import_cupti()
        return self._c

    def claim(self) -> None:
        """Take CUPTI's single subscriber slot or say who holds it."""
        c = self._cupti()
        params = c.SubscriberParams()
        params.struct_size = c.SUBSCRIBER_PARAMS_SIZE
        params.subscriber_name = SUBSCRIBER_NAME
        try:
            self._subscriber = cupti_call(c, c.subscribe_v2, self._callback, 0, params.ptr)
        except c.cuptiError as exc:
            if exc.status == c.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
                holder = params.old_subscriber_name or "an unnamed client"
                raise CuptiBusyError(
                    f"CUPTI is already in use by {holder!r} (e.g. torch.profiler/Kineto or Nsight Systems); "
                    "CUPTI supports one client per process: finish the other profiler first, "
                    "or profile this run with it instead of xpuprof's cuda backend") from None
            raise BackendError(f"CUPTI refused a subscriber: {c.Result(exc.status).name}") from None

    @staticmethod
    def _callback(*_args) -> None:
        # The subscription only reserves CUPTI; no callback domain is enabled.
        return None

    def _measure_offset(self) -> int:
        from ...clock import now_ns

        c = self._c
        best = None
        for _ in range(5):
            a = now_ns()
            t = c.get_timestamp()
            b = now_ns()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - int(t))
        return best[1]

    def start(self) -> None:
        c = self._cupti()
        self.reset()
        self.claim()
        try:
            cupti_call(c, c.set_thread_id_type, c.ActivityThreadIdType.SYSTEM)
            c.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            for kind in self.kinds:
                try:
                    cupti_call(c, c.activity_enable, kind)
                except c.cuptiError as exc:
                    if kind not in OPTIONAL_KINDS:
                        raise
                    self._errors.append(f"{OPTIONAL_KINDS[kind]} are not recorded: CUPTI refused the activity "
                                        f"kind ({c.Result(exc.status).name})")
                    continue
                self._enabled.append(kind)
            if records.KIND_CUDA_EVENT in self._enabled and hasattr(c, "activity_enable_cuda_event_device_timestamps"):
                try:
                    c.activity_enable_cuda_event_device_timestamps(1)
                except c.cuptiError as exc:  # older drivers: events fall back to the host call time
                    self._errors.append(f"CUDA event device timestamps unavailable: {c.Result(exc.status).name}")
            self._offset_ns = self._measure_offset()
        except BaseException:
            self._release()
            raise

    def stop(self) -> None:
        c = self._c
        if c is None or self._subscriber is None:
            return
        try:
            cupti_call(c, c.activity_flush_all, 1)
            dropped = ctypes.c_size_t(0)
            try:
                c.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
                if dropped.value:
                    self._dropped.set("full", dropped.value, kind="CUPTI buffer")
            except c.cuptiError as exc:
                self._errors.append(f"CUPTI dropped-record count unavailable: {c.Result(exc.status).name}")
            self._offset_ns = (self._offset_ns + self._measure_offset()) // 2
        finally:
            self._release()

    def _release(self) -> None:
        c = self._c
        for kind in self._enabled:
            try:
                c.activity_disable(kind)
            except Exception as exc:  # keep releasing the rest
                self._errors.append(f"activity_disable({kind}) failed: {exc}")
        self._enabled.clear()
        if self._subscriber is not None:
            try:
                c.unsubscribe(self._subscriber)
            finally:
                self._subscriber = None

    # ------------------------------------------------------------------ CUPTI callbacks (CUPTI's thread)
    @staticmethod
    def _buffer_requested():
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities) -> None:
        try:
            chunk = records.capture(activities)
        except Exception as exc:  # never raise into CUPTI
            with self._lock:
                self._errors.append(f"CUPTI buffer dropped: {type(exc).__name__}: {exc}")
                self._dropped.add("capture failed", len(activities), kind="buffer")
            return
        if chunk is not None:
            with self._lock:
                self._chunks.append(chunk)

    # ------------------------------------------------------------------ correlation
    # A failing push/pop is counted and reported at process(), never raised into the user's range.
    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        c = self._c
        kind = c.ExternalCorrelationKind.CUSTOM1 if user else c.ExternalCorrelationKind.CUSTOM0
        try:
            c.activity_push_external_correlation_id(kind, int(correlation_id))
        except c.cuptiError as exc:
            self._count_correlation_failure(exc)

    def pop_correlation_id(self, user: bool = False) -> None:
        c = self._c
        kind = c.ExternalCorrelationKind.CUSTOM1 if user else c.ExternalCorrelationKind.CUSTOM0
        try:
            c.activity_pop_external_correlation_id(kind)
        except c.cuptiError as exc:
            self._count_correlation_failure(exc)

    def _count_correlation_failure(self, exc) -> None:
        with self._lock:
            failed, _ = self._correlation_failures
            self._correlation_failures = (failed + 1, exc)

    # ------------------------------------------------------------------ output
    def callback_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        got = self._names.get(key)
        if got is None:
            c = self._c
            domain = c.CallbackDomain.RUNTIME_API if kind == records.KIND_RUNTIME else c.CallbackDomain.DRIVER_API
            try:
                got = c.get_callback_name(domain, cbid)
                got = got.decode() if isinstance(got, bytes) else str(got)
            except Exception:  # an id this CUPTI does not know: keep the id visible
                got = f"{'cuda' if kind == records.KIND_RUNTIME else 'cu'} cbid {cbid}"
            self._names[key] = got
        return got

    def chunks(self) -> list[records.RawChunk]:
        with self._lock:
            return list(self._chunks)

    def process(self, builder, window: ProcessWindow) -> None:
        with self._lock:
            (failed, last), self._correlation_failures = self._correlation_failures, (0, None)
            if failed:
                self._errors.append(f"{failed} external-correlation push/pop call(s) failed (last: {last}): device "
                                    "work inside those record_function ranges is not linked to them (no External id)")
        with self._lock:  # each buffer is freed once gathered (held once at the peak)
            chunks, self._chunks = self._chunks, []
        if self._offset_ns:
            for chunk in chunks:
                chunk.time_offset_ns = self._offset_ns
        props = {p["id"]: p for p in self.device_properties()}
        options = DecodeOptions(activities=self.activity_types,
                                display_sync_wait_events=getattr(self.config, "display_cuda_sync_wait_events", True),
                                sm_count={d: p.get("numSms", 0) for d, p in props.items()}, device_props=props)
        recs = records.gather_records(chunks, release=True)  # each chunk freed once gathered
        CudaEmitter(self.callback_name, self.dependencies, options).write(builder, window, recs, release=True)
        with self._lock:
            self._dropped.write(builder)

    def device_properties(self) -> list[dict[str, Any]]:
        return cuda_device_properties()

    def errors(self) -> list[str]:
        return list(self._errors)

    def dropped_records(self) -> dict[str, int]:
        with self._lock:
            return self._dropped.labels()


def cuda_device_properties() -> list[dict[str, Any]]:
    """Kineto ``deviceProperties`` of the CUDA devices (``vendors.cupti``)."""
    return cupti.device_properties()
