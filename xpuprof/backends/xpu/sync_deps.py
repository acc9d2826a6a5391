"""XPU inter-stream dependencies from PTI ``DEVICE_SYNCHRONIZATION`` records.

What PTI exposes (``pti_view_record_synchronization``): sync type, context, queue, ONE event
handle, correlation id, number of wait events. Kernel / memory-copy / fill records carry no
signal event handle, so the only producers visible are the sync records that *signal* an event:

- record (producer): ``GPU_BARRIER_EXECUTION`` / ``GPU_BARRIER_MEMORY`` with a non-null event
  handle — ``zeCommandListAppendBarrier(hSignalEvent, ...)`` signals that event on its queue;
- wait (consumer): ``HOST_EVENT`` — ``zeEventHostSynchronize(hEvent)``, the host waiting on it.

Every ``HOST_EVENT`` row carries ``wait_on_xpu_event_id`` (the handle, hex) even when no record
is found; resolved rows add ``wait_on_stream`` (the producer's Level Zero queue handle, as a
number: PTI sync records have no SYCL queue id) and ``wait_on_xpu_event_record_corr_id``, plus
an ``ac2g`` arrow from the barrier to the wait. Limitation: events signalled by kernels or
copies (SYCL events, ``hSignalEvent`` of ``zeCommandListAppendLaunchKernel``) are invisible to
PTI's views, so waits on them stay unresolved. Barriers' own wait lists are not in the record
(only their count, ``Number_wait_events``), so barriers are never consumers here.

The resolver lives for one emit pass, i.e. one session's records: history never crosses sessions.
"""
from __future__ import annotations

import numpy as np

from ..dependencies import DependencyResolver
from ...vendors import pti

RECORD_TYPES = (pti.SYNC_TYPES.index("GPU_BARRIER_EXECUTION"), pti.SYNC_TYPES.index("GPU_BARRIER_MEMORY"))
WAIT_TYPES = (pti.SYNC_TYPES.index("HOST_EVENT"),)


def sync_dependency_args(builder, syncs: np.ndarray, start_ns: np.ndarray, pid, tid,
                         resolver: DependencyResolver | None = None) -> dict:
    """Resolve a batch of sync records; draw arrows; return the ``wait_on_*`` arg columns for them.

    ``start_ns`` is the rows' epoch start (the flow endpoints), ``pid``/``tid`` their row.
    """
    resolver = resolver or DependencyResolver("xpu")
    kind = syncs["_synch_type"].astype(np.int64, copy=False)
    event = syncs["_event_handle"].astype(np.uint64, copy=False)
    corr = syncs["_correlation_id"].astype(np.int64, copy=False)
    queue = syncs["_queue_handle"].astype(np.uint64, copy=False).view(np.int64)
    tid_col = np.broadcast_to(np.asarray(tid, dtype=np.int64), corr.shape)
    start_ns = np.asarray(start_ns, dtype=np.int64)

    is_record = np.isin(kind, RECORD_TYPES) & (event != 0)
    if is_record.any():
        resolver.add_records(event[is_record], corr[is_record], queue[is_record], ts=start_ns[is_record],
                             pid=pid, tid=tid_col[is_record])
    is_wait = np.isin(kind, WAIT_TYPES) & (event != 0)
    res = resolver.resolve(event, corr)
    res.found &= is_wait
    for col, empty in ((res.stream, -1), (res.record_corr_id, -1)):
        col[~res.found] = empty
    resolver.add_flows(builder, res, wait_corr_ids=corr, wait_ts=start_ns, wait_pid=pid, wait_tid=tid_col)
    return resolver.wait_args(event, res, event_based=is_wait, hex_handles=True)
