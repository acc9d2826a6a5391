"""The simulated timeline as PTI's records, written by the XPU backend's emit stage.

The views PTI would hand over for the session's selection (``xpu.activity_api.VIEWS_BY_TYPE``):
SYCL runtime calls (the Unified Runtime's ``urEnqueue*``/``urQueueFinish``), kernels and copies on
SYCL queues with their append/submit times, Level Zero host synchronizations, and the external
correlations that link them to their ranges; intel-pti 1.2.0's memory-type wording. They go through
``XpuEmitter`` (with per-kernel metrics, the scope profiler's ``MetricArgsEmitter`` and
``emit_scope_metrics``, as ``XpuptiActivityScopeApi`` writes them).
"""
from __future__ import annotations

import numpy as np

from ...activity import ActivityType
from ...vendors import pti
from .records import DEVICE_PROPERTIES, ROLES, Calls, emitted_types, kernel_streams, name_pointers
from .timeline import METRICS, SYNC_ROW_INSET_NS, Timeline

PTI_VERSION = "1.2.0 (simulated)"
DEVICE_UUID = b"xpuprof-sim-xpu0"
CONTEXT, L0_QUEUE = 0x5100000, 0x5200000
COPY_CALL = "zeCommandListAppendMemoryCopy"
SYNC_CALL = ("zeCommandListHostSynchronize", pti.ApiGroup.LEVELZERO, 1)  # urQueueFinish on an immediate list
# intel-pti 1.2.0's ptiViewMemoryTypeToString, by pti_view_memory_type
MEMORY_TYPES = ("Host (User Allocated)", "Host (Driver Allocated)", "Device", "Shared")
_V = pti.ViewKind


def _records(kind: int, n: int, **cols) -> np.ndarray:
    rows = np.zeros(n, pti.record_dtype(kind))
    rows["_view_kind"] = int(kind)
    for name, values in cols.items():
        rows[name] = values
    return rows


def _queue_times(call_ts, call_dur, start) -> tuple[np.ndarray, np.ndarray]:
    """Appended to the command list inside the call, submitted right after; never after the item starts."""
    appended = np.minimum(call_ts + call_dur // 2, start)
    return appended, np.minimum(appended + call_dur // 4, start)


def pti_records(t: Timeline, flavour, types: frozenset[ActivityType], pid: int):
    """(``DecodedRecords``, ``RecordContext``) of ``t``: the records PTI's views give for ``types``."""
    from ..xpu.activity_api import VIEWS_BY_TYPE, with_external_correlation
    from ..xpu.context import ApiNameCache, RecordContext, StringCache
    from ..xpu.records import DecodedRecords

    views = {int(v) for ty in with_external_correlation(types) for v in VIEWS_BY_TYPE.get(ty, ())}
    calls = Calls.of(t)
    streams = kernel_streams(t, flavour)
    k_ptr, strings = name_pointers(t.kernel_names + [COPY_CALL], 0x10000)
    by_kind: dict[int, np.ndarray] = {}
    if int(_V.RUNTIME_API) in views:
        ids = np.array([flavour.call_ids[r] for r in ROLES], np.int64)[calls.role]
        by_kind[int(_V.RUNTIME_API)] = _records(
            _V.RUNTIME_API, len(calls), _start_timestamp=calls.ts, _end_timestamp=calls.ts + calls.dur,
            _api_group=int(pti.ApiGroup.SYCL), _api_id=ids, _process_id=pid, _thread_id=calls.tid,
            _correlation_id=calls.corr)
    if int(_V.DEVICE_GPU_KERNEL) in views:
        n = len(t)
        appended, submitted = _queue_times(t.launch_ts, t.launch_dur, t.k_start)
        ids = np.arange(1, n + 1)  # PTI's kernel ids, which the scope profiler's records join on
        by_kind[int(_V.DEVICE_GPU_KERNEL)] = _records(
            _V.DEVICE_GPU_KERNEL, n, _start_timestamp=t.k_start, _end_timestamp=t.k_end, _append_timestamp=appended,
            _submit_timestamp=submitted, _device_uuid=np.frombuffer(DEVICE_UUID, np.uint8), _sycl_queue_id=streams,
            _name=k_ptr[:n], _correlation_id=t.corr_launch, _context_handle=CONTEXT,
            _queue_handle=L0_QUEUE + streams - flavour.stream, _kernel_id=ids, _sycl_node_id=ids,
            _sycl_invocation_id=ids)
    if int(_V.DEVICE_GPU_MEM_COPY) in views and t.has_copy.any():
        m = t.has_copy
        appended, submitted = _queue_times(t.copy_ts[m], t.copy_dur[m], t.copy_start[m])
        by_kind[int(_V.DEVICE_GPU_MEM_COPY)] = _records(
            _V.DEVICE_GPU_MEM_COPY, int(m.sum()), _start_timestamp=t.copy_start[m], _end_timestamp=t.copy_end[m],
            _append_timestamp=appended, _submit_timestamp=submitted, _sycl_queue_id=flavour.stream,
            _correlation_id=t.corr_launch[m] + 1, _context_handle=CONTEXT, _queue_handle=L0_QUEUE, _name=k_ptr[-1],
            _mem_op_id=np.flatnonzero(m) + 1, _bytes=t.copy_bytes[m], _device_uuid=np.frombuffer(DEVICE_UUID, np.uint8),
            _memcpy_type=pti.MEMCPY_TYPES.index("H2D"), _mem_src=pti.MEMORY_TYPES.index("HOST"),
            _mem_dst=pti.MEMORY_TYPES.index("DEVICE"))
    if int(_V.DEVICE_SYNCHRONIZATION) in views and t.has_sync.any():
        m = t.has_sync
        by_kind[int(_V.DEVICE_SYNCHRONIZATION)] = _records(
            _V.DEVICE_SYNCHRONIZATION, int(m.sum()), _start_timestamp=t.sync_ts[m] + SYNC_ROW_INSET_NS,
            _end_timestamp=t.sync_end[m] - SYNC_ROW_INSET_NS, _thread_id=np.asarray(t.tid)[m],
            _api_group=int(SYNC_CALL[1]), _api_id=SYNC_CALL[2], _correlation_id=t.corr_launch[m] + 2,
            _synch_type=pti.SYNC_TYPES.index("HOST_COMMAND_LIST"), _context_handle=CONTEXT, _queue_handle=L0_QUEUE)
    if int(_V.EXTERNAL_CORRELATION) in views:
        linked = calls.ext != 0
        by_kind[int(_V.EXTERNAL_CORRELATION)] = _records(
            _V.EXTERNAL_CORRELATION, int(linked.sum()), _correlation_id=calls.corr[linked],
            _external_id=calls.ext[linked], _external_kind=int(pti.ExternalKind.CUSTOM_0))
    names = {(int(pti.ApiGroup.SYCL), flavour.call_ids[r]): flavour.calls[r] for r in ROLES}
    names[(int(SYNC_CALL[1]), SYNC_CALL[2])] = SYNC_CALL[0]
    ctx = RecordContext(PTI_VERSION, 0, device_uuids=[DEVICE_UUID], device_names={0: DEVICE_PROPERTIES["name"]},
                        strings=StringCache(strings), api_names=ApiNameCache(names),
                        memory_type_name=MEMORY_TYPES.__getitem__)
    return DecodedRecords(by_kind), ctx


def scope_results(t: Timeline, flavour, metrics: dict[str, np.ndarray]):
    """The per-kernel metric values as PTI's metrics scope reports them (one record per kernel id)."""
    from ..xpu.metrics_scope import ScopeMetadata, ScopeResults

    queues = (L0_QUEUE + kernel_streams(t, flavour) - flavour.stream).astype(np.uint64)
    return ScopeResults(np.arange(1, len(t) + 1, dtype=np.uint64), queues, list(t.kernel_names),
                        {m: np.asarray(v, np.float64) for m, v in metrics.items()},
                        ScopeMetadata(list(metrics), [METRICS[m] for m in metrics], [0] * len(metrics)))


def write(session, builder, t: Timeline, metrics: dict[str, np.ndarray]) -> None:
    """``t`` through ``XpuEmitter`` (``MetricArgsEmitter`` with metrics), then the metric tracks."""
    from ..xpu.metrics_scope import emit_scope_metrics
    from ..xpu.scope_api import MetricArgsEmitter, join_table

    types = emitted_types(session.types)
    records, ctx = pti_records(t, session.flavour, types, builder.pid)
    results = scope_results(t, session.flavour, metrics) if metrics else None
    written = MetricArgsEmitter(results, ctx, types).write(builder, None, records, release=True)
    if results is not None:
        emit_scope_metrics(builder, results, join_table(written.kernels))
