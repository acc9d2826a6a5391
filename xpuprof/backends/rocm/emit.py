"""rocprofiler-sdk records -> TraceBuilder columns (Kineto's ROCm rows), vectorized (``RocmEmitter``).

GPU ops: pid = device, tid = a dense per-device logical stream index (1, 2, ...) derived from
the HIP stream (for kernels the HSA queue when the stream is unknown, the raw queue kept in
``args.hsa_queue``; copies whose call was not captured share one copy row per device); ``ts = begin + 1``, ``dur = end - (begin + 1)`` like Kineto. HIP calls are
``cuda_runtime`` rows on host threads. HIP args follow the ROCm inter-stream-dependency design
(the CUPTI-parity table): ``hipEventRecord`` rows carry ``hip_event`` + ``hip_stream``; every
sync row carries ``sync_type`` (``Stream Wait Event``, ``Event Sync``, ``Stream Sync``,
``Device Sync``); ``hipStreamSynchronize``/``hipDeviceSynchronize`` carry ``hip_stream`` (-1: no
stream); ``hipStreamWaitEvent``/``hipEventSynchronize`` carry ``wait_on_stream``,
``wait_on_hip_event_record_corr_id`` and ``wait_on_hip_event_id`` plus an arrow from the producer.

Streams are named one way everywhere: ``hip_stream``, ``wait_on_stream`` and the GPU rows' tid /
``stream`` arg are the same dense logical stream index, so a dependency can be followed to the
row it names. ``hip_event`` and ``wait_on_hip_event_id`` are the same hex event handle.

Unresolved waits (the producer record is not in the trace): ``wait_on_hip_event_id`` is written,
the producer fields (``wait_on_stream``, ``wait_on_hip_event_record_corr_id``) are omitted, as
the ROCm design says (CUDA writes -1 there, as Kineto does).

Device processes are named ``GPU <d>`` (sorted after the host's), as Kineto's ROCm rows label them.
Stream and device synchronisation also get GPU-side ``cuda_sync`` rows like CUDA's: ``Stream
Sync`` at tid = logical stream + 1000000 (row ``stream N (sync)``) and ``Device Sync`` at tid
1000000 (row ``Device d (sync)``), spanning the call, on the stream's device (for a device sync,
the device the calling thread last launched on; device 0 before any launch).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...activity import ActivityType
from ...trace.builder.columns import ArgColumn, hex_column, stored_once
from ...trace.builder.keyindex import distinct_rows, factorize, factorize_pairs
from ..demangle import demangle
from ...vendors import rocprofiler as rocprof
from ..common import CorrelationMap, bandwidth, count_dropped, keep_in_window, kept
from ..dependencies import DependencyResolver
from ..emitter import Emitter
from .records import (EVENT_OP_DTYPE, OP_DEVICE_SYNC, OP_EVENT_SYNC, OP_RECORD, OP_STREAM_SYNC,
                      OP_STREAM_WAIT, SYNC_TYPES, RocmRecords)

VENDOR = "rocm"
SUPPRESSED = frozenset({"hipGetDevice", "hipSetDevice", "hipGetLastError", "__hipPushCallConfiguration",
                        "__hipPopCallConfiguration", "hipCtxSetCurrent", "hipGetDevicePropertiesR0600",
                        "hipGetDeviceCount", "hipDeviceGetAttribute", "hipRuntimeGetVersion", "hipPeekAtLastError",
                        "hipModuleGetFunction"})
COPY_NAMES = {1: ("HtoH", "Host", "Host"), 2: ("HtoD", "Host", "Device"), 3: ("DtoH", "Device", "Host"),
              4: ("DtoD", "Device", "Device")}

STREAM_SYNC_TID_OFFSET = 1_000_000  # as CUDA's Stream Sync rows
_NO_STREAM_OPS = (OP_EVENT_SYNC, OP_DEVICE_SYNC)


class StreamTable(CorrelationMap):
    """correlation id -> the HIP stream its call named (launches and event records whose arguments
    were captured), -1 where none was; an id captured twice keeps its last stream."""

    def __init__(self, corr: np.ndarray, stream: np.ndarray) -> None:
        super().__init__(corr, stream, default=-1, last=True)

    def __bool__(self) -> bool:
        return len(self) > 0


def _triple(xyz: np.ndarray) -> np.ndarray:
    """A dim3 field (grid, workgroup) as (n, 3) int64, stored once when every row holds one."""
    cols = [stored_once(xyz[a], np.int64) for a in "xyz"]
    if len(xyz) and all(c.strides[0] == 0 for c in cols):
        return np.broadcast_to(np.array([c[0] for c in cols], np.int64).reshape(1, 3), (len(xyz), 3))
    return np.stack(cols, 1)


def _launch_fields(dispatch: np.ndarray) -> np.ndarray:
    """The dispatch fields device-sync rows still read, under the same names (24 of 184 bytes)."""
    dt = np.dtype([("thread_id", "<u8"), ("correlation_id", [("internal", "<u8")]),
                   ("dispatch_info", [("agent_id", "<u8")])])
    out = np.empty(len(dispatch), dt)
    out["thread_id"] = dispatch["thread_id"]
    out["correlation_id"]["internal"] = dispatch["correlation_id"]["internal"]
    out["dispatch_info"]["agent_id"] = dispatch["dispatch_info"]["agent_id"]
    return out


def _intern(builder, labels) -> np.ndarray:
    return np.fromiter((builder.strings.intern(s) for s in labels), np.int32, len(labels))


def _map(table: dict[int, int], keys: np.ndarray, default: int) -> np.ndarray:
    f = factorize(keys)  # one pass; the dict is read once per distinct key
    return np.array([table.get(int(k), default) for k in np.asarray(keys)[f.first].tolist()], np.int64)[f.codes]


@dataclass
class HipSyncCalls:
    """The HIP synchronize calls of a batch (rocprofiler has no sync records: the calls, with the
    stream their arguments named, span the device-side sync rows): their API records and columns."""

    rows: np.ndarray
    corr: np.ndarray
    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    op: np.ndarray  # OP_STREAM_SYNC or OP_DEVICE_SYNC
    stream: np.ndarray  # logical stream (-1: none)
    raw_stream: np.ndarray  # the HIP stream handle
    sync_ids: np.ndarray  # string id of each op's sync type


class RocmEmitter(Emitter):
    """rocprofiler-sdk's records (``records.RocmRecords``) -> slices, flows and dependency args, one
    ``write`` per batch. Made once per session: ``pid`` is the process the HIP calls ran in,
    ``dependencies`` the session's event-record history; the stream numbering lasts the session."""

    vendor = VENDOR

    def __init__(self, *, pid: int, dependencies: DependencyResolver | None = None,
                 activities=frozenset(ActivityType)) -> None:
        super().__init__(activities)
        self.pid = pid
        # `is None`, never `or`: the resolver has __len__, so an empty (fresh) session resolver is
        # falsy and `or` would swap in a private one that no session ever resets.
        self.dependencies = dependencies if dependencies is not None else DependencyResolver("hip")
        self._streams: dict[tuple[int, int], int] = {}
        self._stream_device: dict[int, int] = {}  # HIP stream handle -> device its work ran on

    def reset(self) -> None:
        """A new session: forget event records and the stream numbering of the previous one."""
        self.dependencies.reset()
        self._streams.clear()
        self._stream_device.clear()

    def hip_stream_ids(self, handles: np.ndarray) -> np.ndarray:
        """HIP stream handles -> the logical stream index their GPU rows use (on the device the
        stream's work ran on; device 0 for a stream with no work in the trace)."""
        handles = np.asarray(handles).astype(np.int64)
        if not len(handles):
            return np.zeros(0, np.int64)
        uniq, inv = np.unique(handles, return_inverse=True)
        dev = np.array([self._stream_device.get(h, 0) for h in uniq.tolist()], np.int64)
        return self.logical_stream(dev, uniq)[inv.reshape(-1)]
    def logical_stream(self, device: np.ndarray, handle: np.ndarray) -> np.ndarray:
        """Dense 1, 2, ... per device, in first-seen order (stable across batches)."""
        device, handle = np.asarray(device).astype(np.int64), np.asarray(handle).astype(np.int64)
        f = factorize_pairs(device, handle)
        found = list(zip(device[f.first].tolist(), handle[f.first].tolist()))
        order = sorted(range(len(found)), key=found.__getitem__)  # new streams numbered in (device, handle) order
        out = np.empty(len(found), np.int64)
        for i, (d, h) in ((i, found[i]) for i in order):
            key = (d, h)
            if key not in self._streams:
                self._streams[key] = 1 + sum(1 for k in self._streams if k[0] == d)
            out[i] = self._streams[key]
        return out[f.codes]

    def kernel_rows(self, rec: RocmRecords, stream_of: "StreamTable", corr, queue, agent) -> tuple[np.ndarray, np.ndarray]:
        """(device, logical stream) of kernels: the HIP stream decides the row; the HSA queue only
        when the stream is unknown (#1398)."""
        dev = _map(rec.agent_device, agent, 0)
        handle = queue.astype(np.int64) | np.int64(1 << 62)
        if stream_of:  # else no launch's stream is known: every row is its queue's
            hip_stream = stream_of.lookup(corr)
            known = hip_stream >= 0
            handle = np.where(known, hip_stream, handle)
            self._stream_device.update(distinct_rows(hip_stream[known], dev[known]))
        return dev, self.logical_stream(dev, handle)

    @staticmethod
    def stream_of(rec: RocmRecords) -> "StreamTable":
        """correlation id -> HIP stream handle, from the captured launch / event-record arguments."""
        ops = rec.event_ops
        if ops is None or not len(ops):
            return StreamTable(np.zeros(0, np.int64), np.zeros(0, np.int64))
        keep = ~np.isin(ops["op"], _NO_STREAM_OPS)
        return StreamTable(ops["correlation_id"][keep], ops["stream"][keep])

    def external_ids(self, rows) -> np.ndarray | None:
        if ActivityType.EXTERNAL_CORRELATION not in self.activities:
            return None
        return rows["correlation_id"]["external"].astype(np.int64)

    def write_batch(self, rec: RocmRecords, *, release: bool = False) -> None:
        """Kernels, copies, then HIP calls and the sync rows they span. ``release``: each record
        array is dropped from ``rec`` once written (kernel dispatches keep only the three fields
        device-sync rows read)."""
        if rec.dropped:
            count_dropped(self.b, VENDOR, "dropped by rocprofiler", rec.dropped, kind="records")
        ops = rec.event_ops if rec.event_ops is not None else np.zeros(0, EVENT_OP_DTYPE)
        self._rec, self._ops = rec, ops
        self._stream_of = self.stream_of(rec)  # correlation id -> HIP stream handle, for kernels
        try:
            if rec.dispatch is not None and ActivityType.CONCURRENT_KERNEL in self.activities:
                self.write_kernels(rec.dispatch)
            if release and rec.dispatch is not None:  # device-sync rows need three fields of it, if any
                rec.dispatch = _launch_fields(rec.dispatch) if (ops["op"] == OP_DEVICE_SYNC).any() else None
            if rec.copies is not None and ActivityType.GPU_MEMCPY in self.activities:
                self.write_copies(rec.copies)
            if release:
                rec.copies = None
            if rec.hip_api is not None and ActivityType.RUNTIME in self.activities:
                syncs = self.write_api(rec.hip_api)
                if syncs is not None and ActivityType.CUDA_SYNC in self.activities:
                    self.write_syncs(syncs)
            if release:  # the event operations stay (a few bytes per call): counters find their kernels' rows by them
                rec.hip_api = rec.dispatch = None
        finally:
            self._rec = self._ops = self._stream_of = None

    def _window(self, start, kind) -> np.ndarray | None:
        return keep_in_window(self.b, self.window, start, VENDOR, kind)

    def write_kernels(self, rows) -> None:
        """Kernel dispatches -> kernels on their device's logical stream rows."""
        rec, builder = self._rec, self.b
        rocprof.check_sizes(rows["size"], "kernel dispatch")
        start = rows["start_timestamp"].astype(np.int64)
        keep = self._window(start, "kernel")
        rows, start = kept(rows, keep), kept(start, keep)
        del keep
        if not len(rows):
            return
        start += 1  # Kineto's begin + 1 (in place: kernels are the bulk of the records)
        dur = rows["end_timestamp"].astype(np.int64)
        dur -= start
        info = rows["dispatch_info"]
        corr = rows["correlation_id"]["internal"].astype(np.int64)
        queue = info["queue_id"]
        dev, tid = (stored_once(c) for c in self.kernel_rows(rec, self._stream_of, corr, queue, info["agent_id"]))
        kid = factorize(info["kernel_id"])
        names = [demangle(rec.kernel_names.get(int(k), f"kernel {int(k)}")) for k in kid.uniq.tolist()]
        grid, block = _triple(info["grid_size"]), _triple(info["workgroup_size"])
        self.slices(ActivityType.CONCURRENT_KERNEL, start, dur, dev, tid, name_ids=_intern(builder, names)[kid.codes],
                    external_id=self.external_ids(rows), args={
                        "device": dev, "stream": tid, "hsa_queue": hex_column(queue), "correlation": corr,
                        "kind": ArgColumn("str", np.broadcast_to(np.int32(builder.strings.intern(
                            "Dispatch Kernel")), (len(rows),))), "grid": grid, "block": block,
                        "shared memory": stored_once(info["group_segment_size"], np.int64)})
        self._rows(dev, tid)
        self.flow_ends(corr, start, dev, tid, host=False)

    def write_copies(self, rows) -> None:
        """Memory copies -> ``gpu_memcpy`` rows on the device side's logical stream."""
        rec, builder = self._rec, self.b
        rocprof.check_sizes(rows["size"], "memory copy")
        rows = self.in_window(rows, rows["start_timestamp"].astype(np.int64), "memcpy")
        if not len(rows):
            return
        op = rows["operation"].astype(np.int64)
        # The device side of the copy owns the row (D2H: source; H2D/D2D: destination).
        agent = np.where(op == 3, rows["src_agent_id"], rows["dst_agent_id"])
        dev = stored_once(_map(rec.agent_device, agent, 0))
        # The HIP stream the async copy was issued on (as Kineto: stream, else the queue); copies
        # whose call was not captured (synchronous hipMemcpy, ...) share one copy row per device.
        corr_all = rows["correlation_id"]["internal"].astype(np.int64)
        hip_stream = self._stream_of.lookup(corr_all)
        known = hip_stream >= 0
        self._stream_device.update(distinct_rows(hip_stream[known], np.broadcast_to(dev, known.shape)[known]))
        tid = stored_once(self.logical_stream(dev, np.where(known, hip_stream, -2)))
        ops = factorize(op)  # linear: np.unique would sort the whole column
        labels = [f"Memcpy {COPY_NAMES.get(o, ('Unknown', 'Unknown', 'Unknown'))[0]} "
                  f"({COPY_NAMES.get(o, ('', 'Unknown', ''))[1]} -> {COPY_NAMES.get(o, ('', '', 'Unknown'))[2]})"
                  for o in ops.uniq.tolist()]
        kinds = [COPY_NAMES.get(o, ("Unknown",))[0] for o in ops.uniq.tolist()]
        inv = ops.codes
        start = rows["start_timestamp"].astype(np.int64) + 1
        end = rows["end_timestamp"].astype(np.int64)
        nbytes = rows["bytes"].astype(np.int64)
        dur = end - start
        corr = rows["correlation_id"]["internal"].astype(np.int64)
        self.slices(ActivityType.GPU_MEMCPY, start, dur, dev, tid, name_ids=_intern(builder, labels)[inv.reshape(-1)],
                    external_id=self.external_ids(rows), args={
                        "device": dev, "stream": tid, "correlation": corr,
                        "kind": ArgColumn("str", _intern(builder, kinds)[inv.reshape(-1)]),
                        "bytes": nbytes, "memory bandwidth (GB/s)": bandwidth(nbytes, dur)})
        self._rows(dev, tid)
        self.flow_ends(corr, start, dev, tid, host=False)

    def write_fills(self, rows) -> None:
        """rocprofiler-sdk has no fill records: a hipMemset runs as a kernel dispatch of the HIP
        runtime's fill kernels (``__amd_rocclr_fillBuffer...``), which ``write_kernels`` writes, as
        Kineto's ROCm path does. Fill records handed here anyway are an error, never dropped."""
        if rows is not None and len(rows):
            raise ValueError(f"rocprofiler-sdk records no fills; {len(rows)} fill records cannot be written "
                             "(a hipMemset is a kernel dispatch: pass it to write_kernels)")

    def write_api(self, rows) -> HipSyncCalls | None:
        """HIP API records -> ``cuda_runtime`` calls with their stream/event/sync args and the
        arrows from the event records they wait on. Returns the synchronize calls among them (the
        device-side sync rows ``write_syncs`` draws), None where the batch captured no arguments."""
        rec, builder, ops = self._rec, self.b, self._ops
        rocprof.check_sizes(rows["size"], "HIP API")
        corr_all = rows["correlation_id"]["internal"].astype(np.int64)
        start_all = rows["start_timestamp"].astype(np.int64)
        tid_all = rows["thread_id"].astype(np.int64)
        dep = self.dependencies
        # Every hipEventRecord enters the history, in or out of the window (a wait may need it).
        rec_ops = ops[ops["op"] == OP_RECORD]
        if len(rec_ops):
            order = np.argsort(corr_all)
            pos = np.minimum(np.searchsorted(corr_all[order], rec_ops["correlation_id"].astype(np.int64)),
                             len(order) - 1)
            hit = corr_all[order][pos] == rec_ops["correlation_id"].astype(np.int64)
            idx = order[pos]
            dep.add_records(rec_ops["event"], rec_ops["correlation_id"].astype(np.int64),
                            self.hip_stream_ids(rec_ops["stream"]), ts=np.where(hit, start_all[idx], 0),
                            pid=self.pid, tid=np.where(hit, tid_all[idx], 0))
        keep = self._window(start_all, "hip api")
        keep = np.ones(len(rows), bool) if keep is None else keep
        ops_f = factorize(rows["operation"])
        labels = [rec.api_names.get(int(o), f"hip operation {int(o)}") for o in rows["operation"][ops_f.first].tolist()]
        keep &= ~np.array([lbl in SUPPRESSED for lbl in labels], bool)[ops_f.codes]
        inv = ops_f.codes[keep]
        rows = rows if keep.all() else rows[keep]
        if not len(rows):
            return None
        corr, start = corr_all[keep], start_all[keep]
        end, tid = rows["end_timestamp"].astype(np.int64), tid_all[keep]
        args = {"cid": rows["operation"].astype(np.int64), "correlation": corr}
        syncs = None
        if len(ops):
            okey = np.argsort(ops["correlation_id"], kind="stable")
            oc = ops["correlation_id"][okey].astype(np.int64)
            pos = np.minimum(np.searchsorted(oc, corr), len(oc) - 1)
            has = oc[pos] == corr
            op = np.where(has, ops["op"][okey][pos], 0)
            event = np.where(has, ops["event"][okey][pos], 0).astype(np.uint64)
            with_stream = has & ~np.isin(op, _NO_STREAM_OPS)
            raw_stream = np.where(with_stream, ops["stream"][okey][pos], 0).astype(np.int64)
            stream = np.full(len(corr), -1, np.int64)
            stream[with_stream] = self.hip_stream_ids(raw_stream[with_stream])
            waits = (op == OP_STREAM_WAIT) | (op == OP_EVENT_SYNC)
            is_sync = waits | (op == OP_STREAM_SYNC) | (op == OP_DEVICE_SYNC)
            args["hip_event"] = hex_column(event, op == OP_RECORD)
            args["hip_stream"] = ArgColumn("num", stream, with_stream | (op == OP_DEVICE_SYNC))
            sync_ids = _intern(builder, ["" if o not in SYNC_TYPES else SYNC_TYPES[o] for o in range(8)])
            args["sync_type"] = ArgColumn("str", sync_ids[np.minimum(op, 7)], is_sync)
            res = dep.resolve(event, corr)
            res.found &= waits
            args.update(dep.wait_args(event, res, waits, hex_handles=True))
            dep.add_flows(builder, res, wait_corr_ids=corr, wait_ts=start, wait_pid=self.pid, wait_tid=tid)
            syncs = HipSyncCalls(rows, corr, start, end, tid, op, stream, raw_stream, sync_ids)
        self.slices(ActivityType.RUNTIME, start, end - start, self.pid, tid, name_ids=_intern(builder, labels)[inv],
                    args=args, external_id=self.external_ids(rows))
        self.flow_ends(corr, start, np.broadcast_to(np.int64(self.pid), corr.shape), stored_once(tid), host=True)
        return syncs

    def write_syncs(self, calls: HipSyncCalls) -> None:
        """GPU-side Stream Sync / Device Sync rows (rocprofiler has no sync records: the call spans them)."""
        rec, builder = self._rec, self.b
        m = (calls.op == OP_STREAM_SYNC) | (calls.op == OP_DEVICE_SYNC)
        if not m.any():
            return
        rows, sync_ids, raw_stream = calls.rows, calls.sync_ids, calls.raw_stream
        op, stream, corr, start, end, thread = (c[m] for c in (calls.op, calls.stream, calls.corr, calls.start,
                                                                calls.end, calls.thread))
        # Stream sync: the device the stream's work ran on (as hip_stream_ids numbered it).
        dev = np.where(op == OP_STREAM_SYNC, _map(self._stream_device, raw_stream[m], 0), 0)
        # Device sync: the device the calling thread last launched a kernel on before the call.
        ds = np.flatnonzero(op == OP_DEVICE_SYNC)
        if len(ds) and rec.dispatch is not None and len(rec.dispatch):
            k_thread = rec.dispatch["thread_id"].astype(np.int64)
            k_corr = rec.dispatch["correlation_id"]["internal"].astype(np.int64)
            k_dev = _map(rec.agent_device, rec.dispatch["dispatch_info"]["agent_id"], 0)
            order = np.lexsort((k_corr, k_thread))
            kt, kc, kd = k_thread[order], k_corr[order], k_dev[order]
            for i in ds.tolist():  # one binary search per device sync (rare calls)
                lo, hi = np.searchsorted(kt, [thread[i], thread[i] + 1])
                j = lo + np.searchsorted(kc[lo:hi], corr[i]) - 1
                if j >= lo:
                    dev[i] = kd[j]
        tid = np.where(op == OP_STREAM_SYNC, stream + STREAM_SYNC_TID_OFFSET, STREAM_SYNC_TID_OFFSET)
        self.slices(ActivityType.CUDA_SYNC, start, end - start, dev, tid, name_ids=sync_ids[op],
                    external_id=self.external_ids(rows[m]),
                    args={"sync_type": ArgColumn("str", sync_ids[op]), "hip_stream": stream, "correlation": corr,
                          "device": dev})
        for d, s_, o in distinct_rows(dev, stream, op):
            t = s_ + STREAM_SYNC_TID_OFFSET if o == OP_STREAM_SYNC else STREAM_SYNC_TID_OFFSET
            if (d, t) not in builder.thread_names:
                builder.set_thread_name(d, t, f"stream {s_} (sync)" if o == OP_STREAM_SYNC else f"Device {d} (sync)",
                                        sort_index=t)
        self.flow_ends(corr, start, dev, tid, host=False)

    def _rows(self, dev, tid) -> None:
        pairs = self.name_streams(dev, tid, "stream {} ".format)
        self.name_devices(np.array([d for d, _ in pairs], np.int64), "GPU {}".format)

    def write_counters(self, builder, window, rec: RocmRecords, headers: np.ndarray, metrics: dict) -> None:
        """Per-kernel counters: ``headers`` (rocprofiler's dispatch-counting headers) with one value
        column per counter (``metrics``: name -> a value per header, its instances summed) -> counter
        tracks and ``metrics: <kernel>`` slices on the kernels' rows, as the XPU scope profiler writes."""
        keep = keep_in_window(builder, window, headers["start_timestamp"], VENDOR, "counter dispatches")
        if keep is not None and not keep.any():
            return
        headers, info = kept(headers, keep), kept(headers["dispatch_info"], keep)
        corr = headers["correlation_id"]["internal"].astype(np.int64)
        dev, tid = self.kernel_rows(rec, self.stream_of(rec), corr, info["queue_id"], info["agent_id"])
        kernels = [demangle(rec.kernel_names.get(int(k), f"kernel {int(k)}")) for k in info["kernel_id"].tolist()]
        builder.add_per_kernel_metrics(
            kernel_names=kernels, start_ns=headers["start_timestamp"].astype(np.int64),
            end_ns=headers["end_timestamp"].astype(np.int64), pid=dev, tid=tid,
            metrics={k: kept(v, keep) for k, v in metrics.items()}, counter_name="rocm", vendor=VENDOR,
            extra_args={"correlation": corr, "dispatch_id": info["dispatch_id"].astype(np.int64)})
