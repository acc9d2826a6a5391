"""The simulated timeline as CUPTI's activity records, written by the CUDA backend's emit stage.

The record kinds CUPTI would deliver for the session's selection (``cuda.activity_api.KINDS_FOR``),
laid out as CUDA's records stage hands them over (``records.gather_records``: cupti-python's record
dtypes narrowed to the fields the emit stage reads, ``CUPTI_DTYPES`` here, so no cupti-python is
needed): runtime calls with their cbids, concurrent kernels with their launch geometry, host-to-device
copies, stream synchronizations and the external correlations (CUSTOM0) of the ranges. They go through
``CudaEmitter``; per-kernel metrics as PM sampling writes its samples (``emit_samples``).
"""
from __future__ import annotations

import numpy as np

from ...activity import ActivityType
from ...vendors import cupti
from .records import (BLOCK, CUDA_DEVICE_PROPERTIES, REGISTERS_PER_THREAD, ROLES, Calls, emitted_types,
                      kernel_streams, name_pointers)
from .timeline import DEVICE_ID, SYNC_ROW_INSET_NS, Timeline

CONTEXT = 1
CALLBACK_NAMES = {41: "cudaMemcpyAsync_v3020", 211: "cudaLaunchKernel_v7000", 131: "cudaStreamSynchronize_v3020"}
HTOD, PINNED, DEVICE = 1, 2, 3  # CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind
STREAM_SYNCHRONIZE = 3  # CUpti_ActivitySynchronizationType
EXTERNAL_CUSTOM0 = 3  # CUpti_ExternalCorrelationKind
_U4, _U8, _I4 = "<u4", "<u8", "<i4"
# cupti-python's dtypes of the records CUPTI 13 delivers, narrowed to the fields the emit stage reads
# (cuda/records.EMITTED_FIELDS), in their order: what gather_records hands the emitter.
CUPTI_DTYPES = {
    cupti.KIND_RUNTIME: np.dtype([("kind", _I4), ("cbid", _U4), ("start", _U8), ("end", _U8), ("process_id", _U4),
                                  ("thread_id", _U4), ("correlation_id", _U4)]),
    cupti.KIND_CONCURRENT_KERNEL: np.dtype(
        [("kind", _I4), ("registers_per_thread", "<u2"), ("start", _U8), ("end", _U8), ("completed", _U8),
         ("device_id", _U4), ("context_id", _U4), ("stream_id", _U4), ("grid_x", _I4), ("grid_y", _I4),
         ("grid_z", _I4), ("block_x", _I4), ("block_y", _I4), ("block_z", _I4), ("static_shared_memory", _I4),
         ("dynamic_shared_memory", _I4), ("correlation_id", _U4), ("name", "<i8"), ("queued", _U8),
         ("graph_node_id", _U8), ("graph_id", _U4), ("channel_id", _U4), ("channel_type", _I4), ("priority", _I4)]),
    cupti.KIND_MEMCPY: np.dtype([("kind", _I4), ("copy_kind", "u1"), ("src_kind", "u1"), ("dst_kind", "u1"),
                                 ("bytes", _U8), ("start", _U8), ("end", _U8), ("device_id", _U4),
                                 ("context_id", _U4), ("stream_id", _U4), ("correlation_id", _U4),
                                 ("graph_node_id", _U8), ("graph_id", _U4), ("channel_id", _U4),
                                 ("channel_type", _I4)]),
    cupti.KIND_SYNCHRONIZATION: np.dtype([("kind", _I4), ("type", _I4), ("start", _U8), ("end", _U8),
                                          ("correlation_id", _U4), ("context_id", _U4), ("stream_id", _U4),
                                          ("cuda_event_id", _U4)]),
    cupti.KIND_EXTERNAL_CORRELATION: np.dtype([("kind", _I4), ("external_kind", _I4), ("external_id", _U8),
                                               ("correlation_id", _U4)]),
}


def _records(kind: int, n: int, **cols) -> np.ndarray:
    rows = np.zeros(n, CUPTI_DTYPES[kind])
    rows["kind"] = kind
    for name, values in cols.items():
        rows[name] = values
    return rows


def cupti_records(t: Timeline, flavour, types: frozenset[ActivityType], pid: int):
    """``records.CuptiRecords`` of ``t``: the records CUPTI delivers for ``types``."""
    from ..cuda.activity_api import KINDS_FOR
    from ..cuda.records import CuptiRecords

    kinds = {k for ty in types for k in KINDS_FOR.get(ty, ())}
    calls = Calls.of(t)
    by_kind: dict[int, np.ndarray] = {}
    if cupti.KIND_RUNTIME in kinds:
        cbids = np.array([flavour.call_ids[r] for r in ROLES], np.int64)[calls.role]
        by_kind[cupti.KIND_RUNTIME] = _records(cupti.KIND_RUNTIME, len(calls), cbid=cbids, start=calls.ts,
                                               end=calls.ts + calls.dur, process_id=pid, thread_id=calls.tid,
                                               correlation_id=calls.corr)
    names: dict[int, str] = {}
    if cupti.KIND_CONCURRENT_KERNEL in kinds:
        ptrs, names = name_pointers(t.kernel_names, 0x10000)
        by_kind[cupti.KIND_CONCURRENT_KERNEL] = _records(
            cupti.KIND_CONCURRENT_KERNEL, len(t), start=t.k_start, end=t.k_end, device_id=DEVICE_ID,
            context_id=CONTEXT, stream_id=kernel_streams(t, flavour), grid_x=t.grid_x, grid_y=1, grid_z=1,
            block_x=BLOCK[0], block_y=BLOCK[1], block_z=BLOCK[2], registers_per_thread=REGISTERS_PER_THREAD,
            correlation_id=t.corr_launch, name=ptrs)
    if cupti.KIND_MEMCPY in kinds and t.has_copy.any():
        m = t.has_copy
        by_kind[cupti.KIND_MEMCPY] = _records(
            cupti.KIND_MEMCPY, int(m.sum()), copy_kind=HTOD, src_kind=PINNED, dst_kind=DEVICE, bytes=t.copy_bytes[m],
            start=t.copy_start[m], end=t.copy_end[m], device_id=DEVICE_ID, context_id=CONTEXT,
            stream_id=flavour.stream, correlation_id=t.corr_launch[m] + 1)
    if cupti.KIND_SYNCHRONIZATION in kinds and t.has_sync.any():
        m = t.has_sync
        by_kind[cupti.KIND_SYNCHRONIZATION] = _records(
            cupti.KIND_SYNCHRONIZATION, int(m.sum()), type=STREAM_SYNCHRONIZE, start=t.sync_ts[m] + SYNC_ROW_INSET_NS,
            end=t.sync_end[m] - SYNC_ROW_INSET_NS, correlation_id=t.corr_launch[m] + 2, context_id=CONTEXT,
            stream_id=flavour.stream)
    if cupti.KIND_EXTERNAL_CORRELATION in kinds:
        linked = calls.ext != 0
        by_kind[cupti.KIND_EXTERNAL_CORRELATION] = _records(
            cupti.KIND_EXTERNAL_CORRELATION, int(linked.sum()), external_kind=EXTERNAL_CUSTOM0,
            external_id=calls.ext[linked], correlation_id=calls.corr[linked])
    return CuptiRecords(by_kind, names)


def pm_samples(t: Timeline, metrics: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(sample times, values (samples x metrics)) as PM sampling delivers them: a sample when each
    kernel starts (its values) and one when it ends (0)."""
    ts = np.concatenate([t.k_start, t.k_end])
    order = np.argsort(ts, kind="stable")
    values = np.stack([np.concatenate([np.asarray(v, np.float64), np.zeros(len(t))])[order]
                       for v in metrics.values()], axis=1)
    return ts[order], values


def write(session, builder, t: Timeline, metrics: dict[str, np.ndarray]) -> None:
    """``t`` through ``CudaEmitter``, then the metrics as PM sampling's counter tracks."""
    from ..cuda.emit import CudaEmitter, DecodeOptions
    from ..cuda.pm_sampling_api import emit_samples

    types = emitted_types(session.types)
    options = DecodeOptions(activities=types, device_props={DEVICE_ID: CUDA_DEVICE_PROPERTIES})
    records = cupti_records(t, session.flavour, types, builder.pid)
    CudaEmitter(lambda kind, cbid: CALLBACK_NAMES[cbid], options=options).write(builder, None, records, release=True)
    if metrics:
        emit_samples(builder, DEVICE_ID, list(metrics), *pm_samples(t, metrics))
