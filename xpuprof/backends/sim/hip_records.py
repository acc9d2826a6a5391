"""The simulated timeline as rocprofiler-sdk's records, written by the ROCm backend's emit stage.

rocprofiler-sdk's buffer records in its own layouts (``vendors.rocprofiler``: HIP API calls, kernel
dispatches, memory copies, with the external correlation of their range), the HIP stream each
launch, copy and synchronize named (the event operations our C callback captures from the call
arguments), and for per-kernel counters the dispatch-counting headers with each counter's value.
Kernels and copies carry rocprofiler's own begin timestamp, which Kineto's ROCm rows (and ours)
move 1 ns later. They go through ``RocmEmitter`` (``write``, then ``write_counters``).
"""
from __future__ import annotations

import numpy as np

from ...vendors import rocprofiler as rocprof
from .records import BLOCK, ROLES, Calls, emitted_types, kernel_streams
from .timeline import DEVICE_ID, Timeline

AGENT, HOST_AGENT = 0xA6E0, 0xA6E1  # the GPU agent's handle, the CPU agent's
HIP_STREAM = 0x7000  # the HIP stream handle of stream 1 (the collectives' stream: one after it)
HSA_QUEUE = 0x7F0000
COPY_HTOD = 2  # the emit stage's direction code (activity_api maps rocprofiler's operation to it)
KIND_HIP_API, KIND_DISPATCH, KIND_COPY = 5, 11, 10  # rocprofiler's buffer-tracing kinds (as its records carry)


def _records(dtype: np.dtype, n: int, **cols) -> np.ndarray:
    rows = np.zeros(n, dtype)
    rows["size"] = dtype.itemsize
    for name, values in cols.items():
        part = rows
        for key in name.split("."):  # "dispatch_info.grid_size.x": a nested field
            part = part[key]
        part[...] = values
    return rows


def rocprof_records(t: Timeline, flavour):
    """``records.RocmRecords`` of ``t``, kernel ids and HIP stream handles as rocprofiler reports them."""
    from ..rocm.records import EVENT_OP_DTYPE, OP_LAUNCH, OP_STREAM_SYNC, RocmRecords

    calls = Calls.of(t)
    handles = HIP_STREAM + kernel_streams(t, flavour) - flavour.stream
    api = _records(rocprof.HIP_API_DTYPE, len(calls), kind=KIND_HIP_API, **{
        "operation": np.array([flavour.call_ids[r] for r in ROLES], np.int64)[calls.role],
        "correlation_id.internal": calls.corr, "correlation_id.external": calls.ext,
        "start_timestamp": calls.ts, "end_timestamp": calls.ts + calls.dur, "thread_id": calls.tid})
    names, kernel_ids = np.unique(np.asarray(t.kernel_names, dtype=object).astype(str), return_inverse=True)
    n = len(t)
    dispatch = _records(rocprof.DISPATCH_DTYPE, n, kind=KIND_DISPATCH, **{
        "correlation_id.internal": t.corr_launch, "correlation_id.external": t.ext, "thread_id": t.tid,
        "start_timestamp": t.k_start - 1, "end_timestamp": t.k_end, "dispatch_info.agent_id": AGENT,
        "dispatch_info.queue_id": HSA_QUEUE + handles - HIP_STREAM, "dispatch_info.kernel_id": kernel_ids + 1,
        "dispatch_info.dispatch_id": np.arange(1, n + 1), "dispatch_info.workgroup_size.x": BLOCK[0],
        "dispatch_info.workgroup_size.y": BLOCK[1], "dispatch_info.workgroup_size.z": BLOCK[2],
        "dispatch_info.grid_size.x": np.asarray(t.grid_x) * BLOCK[0], "dispatch_info.grid_size.y": 1,
        "dispatch_info.grid_size.z": 1})
    dispatch["dispatch_info"]["size"] = rocprof.DISPATCH_DTYPE["dispatch_info"].itemsize
    m = t.has_copy
    copies = _records(rocprof.COPY_DTYPE, int(m.sum()), kind=KIND_COPY, operation=COPY_HTOD, **{
        "correlation_id.internal": t.corr_launch[m] + 1, "correlation_id.external": np.asarray(t.ext)[m],
        "thread_id": np.asarray(t.tid)[m], "start_timestamp": t.copy_start[m] - 1, "end_timestamp": t.copy_end[m],
        "dst_agent_id": AGENT, "src_agent_id": HOST_AGENT, "bytes": t.copy_bytes[m]})
    # The stream each call named: launches and copies on their stream, synchronizes on the compute stream.
    stream_of_call = np.where(calls.role == 1, handles[calls.launch], HIP_STREAM)
    ops = np.zeros(len(calls), EVENT_OP_DTYPE)
    ops["correlation_id"], ops["stream"] = calls.corr, stream_of_call
    ops["op"] = np.where(calls.role == 2, OP_STREAM_SYNC, OP_LAUNCH)
    return RocmRecords(hip_api=api, dispatch=dispatch, copies=copies, event_ops=ops,
                       api_names={flavour.call_ids[r]: flavour.calls[r] for r in ROLES},
                       kernel_names={i + 1: str(name) for i, name in enumerate(names.tolist())},
                       agent_device={AGENT: DEVICE_ID})


def counting_headers(rec) -> np.ndarray:
    """rocprofiler's dispatch-counting header of each kernel dispatch (what its counter values join on)."""
    d = rec.dispatch
    headers = np.zeros(len(d), rocprof.COUNTING_HEADER_DTYPE)
    headers["size"] = rocprof.COUNTING_HEADER_DTYPE.itemsize
    for name in ("correlation_id", "start_timestamp", "end_timestamp", "dispatch_info"):
        headers[name] = d[name]
    return headers


def write(session, builder, t: Timeline, metrics: dict[str, np.ndarray]) -> None:
    """``t`` through the session's ``RocmEmitter``, then each counter's value per dispatch."""
    from ..rocm.emit import RocmEmitter

    types = emitted_types(session.types)
    emitter = session.vendor_state.get("rocm")
    if emitter is None:  # one per session: the stream numbering lasts the session, as on ROCm
        emitter = session.vendor_state["rocm"] = RocmEmitter(pid=builder.pid, activities=types)
    rec = rocprof_records(t, session.flavour)
    headers = counting_headers(rec) if metrics else None
    emitter.write(builder, None, rec, release=True)
    if metrics:
        emitter.write_counters(builder, None, rec, headers, {m: np.asarray(v, np.float64) for m, v in metrics.items()})
