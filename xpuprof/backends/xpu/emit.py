"""Decoded PTI records -> TraceBuilder columns (Kineto XPU JSON, kineto-trace-format §3.3/§14.3).

Everything is columnar: one ``add_slices`` call per record kind, names interned once per distinct
pointer or API id. Rows: device work on pid = device index (position of the device UUID among
the Level Zero GPUs), tid = SYCL queue id; runtime/driver calls on PTI's process/thread ids
(a runtime record without one takes its thread from the driver calls it made, else from the range
that pushed its External id: see ``XpuEmitter.runtime_threads``); syncs and overhead on a process of
their own, ``OVERHEAD_PID`` (Kineto's -1 would merge into device 0's process in Perfetto).
``ac2g`` flows start only on runtime records and end once per correlation, on the first device
record (else the first driver record) that shares it.

``RecordContext`` carries what resolving needs (API names, C strings behind pointers, the clock
offset, device UUIDs), so live sessions and replayed captures share this code.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ... import diagnostics
from ...activity import ActivityType
from ...trace.builder.builder import TraceBuilder
from ...trace.builder.columns import ArgColumn, hex_column
from ...vendors import pti
from ..base import ProcessWindow, RangeThreads
# CorrelationSpace: the id tables FlowIds and CorrelationMap use (tests switch them to the sorting path here)
from ..common import OUT_OF_WINDOW, CorrelationMap, CorrelationSpace, FlowIds as _Flows, bandwidth, count_dropped  # noqa: F401
from ..common import keep_in_window, kept
from ..emitter import DEVICE_SORT_BASE, VENDOR_PROCESS_PIDS, EmitResult
from .context import RecordContext
from .kernel_columns import (INTERVALS_METADATA_KEY, KernelNameFilter, filter_kernels, submission_args,
                             submission_summary)
from .rows import VENDOR, XpuRows
from .records import DecodedRecords
from .sync_deps import sync_dependency_args

log = logging.getLogger("xpuprof")

UNKNOWN_THREAD_ROW = "thread unknown (PTI recorded no thread id)"
OVERHEAD_PID = VENDOR_PROCESS_PIDS["xpu"]  # Kineto: -1 (see VENDOR_PROCESS_PIDS)
OVERHEAD_SORT_INDEX = 1_048_576


@dataclass
class KernelTable:
    """Kernels written to the trace, sorted by kernel id: what per-kernel metrics join on."""

    kernel_id: np.ndarray  # uint64
    start_ns: np.ndarray  # int64 epoch
    end_ns: np.ndarray
    device: np.ndarray  # int64 device index (pid)
    queue: np.ndarray  # int64 sycl queue id (tid)
    name: np.ndarray  # object array of str

    @classmethod
    def empty(cls) -> "KernelTable":
        z = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.uint64), z, z, z, z, np.zeros(0, dtype=object))

    def __len__(self) -> int:
        return len(self.kernel_id)

    def find(self, kernel_ids) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, row index) for each requested kernel id (index is 0 where not found)."""
        ids = np.asarray(kernel_ids, dtype=np.uint64)
        if not len(self.kernel_id):
            return np.zeros(len(ids), bool), np.zeros(len(ids), np.intp)
        pos = np.searchsorted(self.kernel_id, ids)
        pos = np.minimum(pos, len(self.kernel_id) - 1)
        found = self.kernel_id[pos] == ids
        return found, np.where(found, pos, 0)


@dataclass
class XpuEmitResult(EmitResult):
    """``EmitResult`` plus the kernels written (what per-kernel metrics join on) and how runtime
    records without a thread got one (``XpuEmitter.runtime_threads``)."""

    kernels: KernelTable = field(default_factory=KernelTable.empty)
    thread_sources: dict[str, int] = field(default_factory=dict)


# The record kinds written, in the order their window is applied: (kind, name in messages, start, end).
_TIMES = ("_start_timestamp", "_end_timestamp")
WINDOWED = [(pti.ViewKind.RUNTIME_API, "runtime", *_TIMES), (pti.ViewKind.DRIVER_API, "driver", *_TIMES),
            (pti.ViewKind.DEVICE_GPU_KERNEL, "kernel", *_TIMES), (pti.ViewKind.DEVICE_GPU_MEM_COPY, "memcpy", *_TIMES),
            (pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P, "p2p", *_TIMES), (pti.ViewKind.DEVICE_GPU_MEM_FILL, "fill", *_TIMES),
            (pti.ViewKind.DEVICE_SYNCHRONIZATION, "synchronization", *_TIMES),
            (pti.ViewKind.COLLECTION_OVERHEAD, "overhead", "_overhead_start_timestamp_ns", "_overhead_end_timestamp_ns"),
            (pti.ViewKind.COMMUNICATION, "comms", *_TIMES)]


class _ExternalIds(CorrelationMap):
    """The External id of each correlation id: profiler ops (CUSTOM_0) first; other kinds only fill
    in the ids it lacks; of several records of one kind, the first."""

    def __init__(self, ext: np.ndarray) -> None:
        super().__init__(ext["_correlation_id"], ext["_external_id"],
                         preferred=ext["_external_kind"] == pti.ExternalKind.CUSTOM_0)


class XpuEmitter(XpuRows):
    """Writes ``DecodedRecords`` (PTI's record columns) into a builder, one ``write`` per batch.
    Hooks: ``extra_kernel_args``; ``kernel_args``: f(records, name ids) -> args; ``kernel_filter``:
    the config's kernel name filter; ``range_threads``: the ranges' threads by correlation id (else
    the window's)."""

    def __init__(self, ctx: RecordContext, activities, *, range_threads: RangeThreads | None = None,
                 kernel_args=(), kernel_filter=None) -> None:
        super().__init__(ctx, activities)
        self.kernel_args = list(kernel_args)
        self.name_filter = KernelNameFilter(kernel_filter) if kernel_filter is not None else None
        self._range_threads = range_threads
        self.range_threads: RangeThreads | None = range_threads
        self.thread_sources: dict[str, int] = {}  # how runtime records without a thread got one
        self.kernels = KernelTable.empty()

    def start_batch(self) -> None:
        super().start_batch()
        self.range_threads = self._range_threads if self._range_threads is not None else getattr(
            self.window, "range_threads", None)
        self.thread_sources, self.kernels = {}, KernelTable.empty()
        self._ext = _ExternalIds(np.zeros(0, pti.record_dtype(pti.ViewKind.EXTERNAL_CORRELATION)))
        self._flow_end: dict[str, np.ndarray] = {}
        self._driver = None

    def result(self) -> XpuEmitResult:
        return XpuEmitResult(dict(self.counts), list(self.errors), self.kernels, self.thread_sources)

    def extra_kernel_args(self, k: np.ndarray, name_ids: np.ndarray) -> dict:
        """Hook: more arg columns for the kernel slices ``k`` (the scope profiler's metrics); here none."""
        return {}

    # ------------------------------------------------------------------ the whole batch
    def _windowed(self, records: DecodedRecords) -> list:
        """The records of every kind written, in ``WINDOWED`` order, inside the window; records the
        decode already windowed only have their counts reported."""
        if records.windowed:
            lost = sum(records.out_of_window.values())
            if lost:
                count_dropped(self.b, VENDOR, OUT_OF_WINDOW, lost)
            for kind, what, _start, _end in WINDOWED:
                if records.misordered.get(int(kind)):
                    self.errors.append(f"{records.misordered[int(kind)]} {what} records end before they start")
            rows = [records.get(kind) for kind, *_ in WINDOWED]
            if self.window is not None and self.window.paused:  # paused spans: the decode knows start/end only
                rows = [kept(r, keep_in_window(self.b, self.window, self._epoch(r[s]), VENDOR)) if s else r
                        for r, (_k, _w, s, _e) in zip(rows, WINDOWED)]
            return rows
        return [self._in_window(records.get(kind), start, end, what) for kind, what, start, end in WINDOWED]

    def write_batch(self, records: DecodedRecords, *, release: bool = False) -> None:
        for kind, n in records.unknown.items():
            count_dropped(self.b, VENDOR, f"unknown record kind {kind}", n)
        self._ext = _ExternalIds(records.get(pti.ViewKind.EXTERNAL_CORRELATION))
        want = self.activities
        rt, drv, kern, cpy, p2p, fill, sync, over, comm = self._windowed(records)
        kern = filter_kernels(self, kern, self.name_filter)  # before the flows: none ends on a dropped kernel
        if release:
            # This writer now holds the only references: each kind's records are freed once written,
            # so the decoded records and the builder's columns are not held whole together.
            records.by_kind.clear()

        device_corr = [kern["_correlation_id"], cpy["_correlation_id"], p2p["_correlation_id"],
                       fill["_correlation_id"], sync["_correlation_id"]]
        splits = np.cumsum([len(c) for c in device_corr])[:-1]
        # One flow end per id: the first device record carrying it, else the first driver record.
        dev_cat = np.concatenate(device_corr)
        del device_corr  # views of the records
        flows = _Flows(rt["_correlation_id"], np.concatenate([dev_cat, drv["_correlation_id"]]))
        owner = np.concatenate([np.zeros(len(dev_cat), np.int8), np.ones(len(drv), np.int8)])
        all_end = np.concatenate([dev_cat, drv["_correlation_id"]])
        end_first = flows.starts(all_end)
        self._flow_end = dict(zip(("kernel", "memcpy", "p2p", "fill", "sync"), np.split(end_first[owner == 0], splits)))
        self._flow_end["driver"] = end_first[owner == 1]
        self._flow_end["runtime"] = flows.starts(rt["_correlation_id"])  # where arrows start
        del dev_cat, owner, all_end, end_first, flows

        if ActivityType.CONCURRENT_KERNEL in want:
            self.write_kernels(kern)
        kern = None
        if ActivityType.GPU_MEMCPY in want:
            self.write_copies(cpy)
            self.write_p2p(p2p)
        cpy = p2p = None
        if ActivityType.GPU_MEMSET in want:
            self.write_fills(fill)
        fill = None
        if self.wants(ActivityType.XPU_SYNC, ActivityType.CUDA_SYNC):  # generic sync selection
            self.write_syncs(sync)
        sync = None
        self._driver = drv  # runtime records without a thread take it from their driver calls
        if ActivityType.RUNTIME in want:
            self.write_api(rt)
        rt = self._driver = None
        if ActivityType.DRIVER in want:
            self.write_api(drv, driver=True)
        drv = None
        if ActivityType.OVERHEAD in want:
            self.write_overhead(over)
        if ActivityType.COLLECTIVE_COMM in want:
            self.write_comms(comm)
        self._process_rows()
        self.b.set_metadata("xpupti_version", self.ctx.pti_version)

    def _flow(self, mask, ts, pid, tid, corr, start: bool) -> None:
        if mask.any():
            pid_arr = np.broadcast_to(np.asarray(pid), mask.shape)
            tid_arr = np.broadcast_to(np.asarray(tid), mask.shape)
            self.b.add_flows(flow_ids=corr[mask].astype(np.int64, copy=False), ts=ts[mask], pid=pid_arr[mask],
                             tid=tid_arr[mask], start=start, cat="ac2g")

    # ------------------------------------------------------------------ per kind
    def write_kernels(self, k: np.ndarray) -> KernelTable:
        """Kernel records -> ``kernel`` slices on (device, SYCL queue) rows; returns (and keeps in
        ``self.kernels``) the kernels written, sorted by kernel id."""
        if not len(k):
            return self.kernels
        start, end = self._epoch(k["_start_timestamp"]), self._epoch(k["_end_timestamp"])
        pid = self._device_index(k["_device_uuid"])
        tid = k["_sycl_queue_id"].astype(np.int64, copy=False)
        name_ids, _ = self._intern_ptrs(k["_name"])
        corr = k["_correlation_id"]
        src_ids, has_src = self._intern_ptrs(k["_source_file_name"])
        args = {"correlation": corr.astype(np.int64, copy=False)}
        args.update(self._time_args(k, start, [("appended", "_append_timestamp"), ("submitted", "_submit_timestamp"),
                                               ("sycl_task_begin", "_sycl_task_begin_timestamp"),
                                               ("sycl_enqk_begin", "_sycl_enqk_begin_timestamp")]))
        args.update({
            "device": pid, "context": hex_column(k["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(k["_queue_handle"]), "stream": tid,
        })
        if has_src.any():
            args["source_file_name"] = ArgColumn("str", src_ids, has_src)
            args["source_line_number"] = ArgColumn("num", k["_source_line_number"].astype(np.int64, copy=False), has_src)
        args.update({"kernel_id": k["_kernel_id"].astype(np.int64, copy=False), "sycl_node_id": k["_sycl_node_id"].astype(np.int64, copy=False),
                     "sycl_invocation_id": k["_sycl_invocation_id"].astype(np.int64, copy=False)})
        for extra in (self.extra_kernel_args, submission_args, *self.kernel_args):
            args.update(extra(k, name_ids))
        self._add(ActivityType.CONCURRENT_KERNEL, name_ids, start, end - start, pid, tid, args, self._ext.lookup(corr))
        intervals = submission_summary(k, name_ids, self.b.strings.strings.__getitem__)
        if intervals:
            self.b.set_metadata(INTERVALS_METADATA_KEY, intervals)
        self._device_rows(pid, tid)
        self._flow(self._flow_end["kernel"], start, pid, tid, corr, start=False)
        order = np.argsort(k["_kernel_id"], kind="stable")
        names = np.array(self.b.strings.strings, dtype=object)[name_ids]
        self.kernels = KernelTable(k["_kernel_id"][order], start[order], end[order], pid[order], tid[order],
                                   names[order])
        return self.kernels

    def _copy_common(self, m: np.ndarray, start: np.ndarray, corr: np.ndarray) -> dict:
        args = {"correlation": corr.astype(np.int64, copy=False)}
        args.update(self._time_args(m, start, [("appended", "_append_timestamp"), ("submitted", "_submit_timestamp")]))
        return args

    def write_copies(self, m: np.ndarray) -> None:
        if not len(m):
            return
        start, end = self._epoch(m["_start_timestamp"]), self._epoch(m["_end_timestamp"])
        pid = self._device_index(m["_device_uuid"])
        tid = m["_sycl_queue_id"].astype(np.int64, copy=False)
        code = (m["_memcpy_type"].astype(np.int64, copy=False) << 16) | (m["_mem_src"].astype(np.int64, copy=False) << 8) | m["_mem_dst"]
        mem, cpy = self.ctx.memory_type_name, self.ctx.memcpy_type_name
        names = self._table_names(code, lambda c: f"Memcpy {cpy(c >> 16)} ({mem((c >> 8) & 0xFF)} -> {mem(c & 0xFF)})")
        corr = m["_correlation_id"]
        call_ids, has_call = self._intern_ptrs(m["_name"])
        nbytes = m["_bytes"].astype(np.int64, copy=False)
        args = self._copy_common(m, start, corr)
        args.update({
            "device": pid, "context": hex_column(m["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(m["_queue_handle"]), "stream": tid, "l0 call": ArgColumn("str", call_ids, has_call),
            "memory opration id": m["_mem_op_id"].astype(np.int64, copy=False),  # sic: Kineto's key
            "src memory": self._memory_column(m["_mem_src"]),
            "dst memory": self._memory_column(m["_mem_dst"]),
            "bytes": nbytes, "memory bandwidth (GB/s)": bandwidth(nbytes, end - start),
        })
        self._add(ActivityType.GPU_MEMCPY, names, start, end - start, pid, tid, args, self._ext.lookup(corr))
        self._device_rows(pid, tid)
        self._flow(self._flow_end["memcpy"], start, pid, tid, corr, start=False)

    def write_p2p(self, m: np.ndarray) -> None:
        """Peer-to-peer copy records -> ``gpu_memcpy`` slices on the source device."""
        if not len(m):
            return
        start, end = self._epoch(m["_start_timestamp"]), self._epoch(m["_end_timestamp"])
        src = self._device_index(m["_src_uuid"])
        dst = self._device_index(m["_dst_uuid"])
        tid = m["_sycl_queue_id"].astype(np.int64, copy=False)
        names = self._table_names(m["_memcpy_type"], lambda c: f"Memcpy {self.ctx.memcpy_type_name(c)} (P2P)")
        corr = m["_correlation_id"]
        nbytes = m["_bytes"].astype(np.int64, copy=False)
        args = {"fromDevice": src, "toDevice": dst, "context": hex_column(m["_context_handle"]), "sycl queue": tid,
                "l0 queue": hex_column(m["_queue_handle"]), "stream": tid, "correlation": corr.astype(np.int64, copy=False),
                "memory opration id": m["_mem_op_id"].astype(np.int64, copy=False), "bytes": nbytes,
                "memory bandwidth (GB/s)": bandwidth(nbytes, end - start)}
        self._add(ActivityType.GPU_MEMCPY, names, start, end - start, src, tid, args, self._ext.lookup(corr))
        self._device_rows(src, tid)
        self._flow(self._flow_end["p2p"], start, src, tid, corr, start=False)

    def write_fills(self, f: np.ndarray) -> None:
        if not len(f):
            return
        start, end = self._epoch(f["_start_timestamp"]), self._epoch(f["_end_timestamp"])
        pid = self._device_index(f["_device_uuid"])
        tid = f["_sycl_queue_id"].astype(np.int64, copy=False)
        # Kineto's name: "Memset (<value> -> <memory type>)".
        code = (f["_value_for_set"].astype(np.uint64, copy=False) << np.uint64(8)) | f["_mem_type"].astype(np.uint64, copy=False)
        names = self._table_names(code, lambda c: f"Memset ({c >> 8} -> {self.ctx.memory_type_name(c & 0xFF)})")
        corr = f["_correlation_id"]
        call_ids, has_call = self._intern_ptrs(f["_name"])
        nbytes = f["_bytes"].astype(np.int64, copy=False)
        args = self._copy_common(f, start, corr)
        args.update({
            "device": pid, "context": hex_column(f["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(f["_queue_handle"]), "stream": tid, "l0 call": ArgColumn("str", call_ids, has_call),
            "memory opration id": f["_mem_op_id"].astype(np.int64, copy=False), "bytes": nbytes,
            "value": f["_value_for_set"].astype(np.int64, copy=False),
            "memory bandwidth (GB/s)": bandwidth(nbytes, end - start),
        })
        self._add(ActivityType.GPU_MEMSET, names, start, end - start, pid, tid, args, self._ext.lookup(corr))
        self._device_rows(pid, tid)
        self._flow(self._flow_end["fill"], start, pid, tid, corr, start=False)

    def write_syncs(self, s: np.ndarray) -> None:
        if not len(s):
            return
        start, end = self._epoch(s["_start_timestamp"]), self._epoch(s["_end_timestamp"])
        tid = s["_thread_id"].astype(np.int64, copy=False)
        names = self._api_name_ids(s["_api_group"], s["_api_id"])
        corr = s["_correlation_id"]
        # Event handles and correlation stay in args so inter-stream dependencies can be resolved later.
        args = {"correlation": corr.astype(np.int64, copy=False), "Type": self._str_column(list(pti.SYNC_TYPES), s["_synch_type"]),
                "Context_handle": hex_column(s["_context_handle"]), "Queue_handle": hex_column(s["_queue_handle"]),
                "Event_handle": hex_column(s["_event_handle"]),
                "Number_wait_events": s["_number_wait_events"].astype(np.int64, copy=False),
                "Return_code": s["_return_code"].astype(np.int64, copy=False)}
        args.update(sync_dependency_args(self.b, s, start, OVERHEAD_PID, tid))
        self._add(ActivityType.XPU_SYNC, names, start, end - start, OVERHEAD_PID, tid, args, self._ext.lookup(corr))
        self._flow(self._flow_end["sync"], start, OVERHEAD_PID, tid, corr, start=False)
        self._device_pids.add(OVERHEAD_PID)

    def runtime_threads(self, rt: np.ndarray, drv: np.ndarray) -> np.ndarray:
        """The calling thread of each runtime record. intel-pti 1.2.0 writes ``_thread_id`` 0 in its
        SYCL runtime records (its Level Zero driver records carry the real one), which would draw every
        ``ur*`` call on one made-up row. Such a record takes the thread of (1) a driver call sharing its
        correlation id (the calls the runtime call made), else (2) the range that pushed its External
        id; what neither tells stays on tid 0, a row named as unknown, and the trace's metadata counts
        each source (``xpu_runtime_threads``)."""
        tid = rt["_thread_id"].astype(np.int64)
        missing = np.flatnonzero(tid == 0)
        if not len(missing):
            return tid
        corr = rt["_correlation_id"][missing].astype(np.int64, copy=False)
        fill = np.zeros(len(corr), np.int64)
        drv_known = drv["_thread_id"] != 0
        if drv_known.any():  # every record of one id ran on one thread
            fill = CorrelationMap(drv["_correlation_id"][drv_known], drv["_thread_id"][drv_known]).lookup(corr)
            fill[corr == 0] = 0
        from_driver = int(np.count_nonzero(fill))
        left = np.flatnonzero(fill == 0)
        if len(left) and self.range_threads is not None:
            fill[left] = self.range_threads.lookup(self._ext.lookup(corr[left]))
        unknown = int(np.count_nonzero(fill == 0))
        tid[missing] = fill
        self.thread_sources = {"records_without_thread": len(missing), "from_driver_calls": from_driver,
                               "from_external_id": len(missing) - from_driver - unknown, "unknown": unknown}
        self.b.set_metadata("xpu_runtime_threads", dict(self.thread_sources))
        if unknown:
            if diagnostics.first("xpu-unknown-threads"):  # every trace's metadata counts them
                log.info("xpuprof: %d of %d SYCL runtime records carry no thread id (intel-pti %s writes 0) and "
                         "made no driver call and ran outside any record_function range: they are drawn on a "
                         "row named %r (counted in the trace metadata, xpu_runtime_threads)",
                         unknown, len(tid), self.ctx.pti_version, UNKNOWN_THREAD_ROW)
            pids = rt["_process_id"][missing][fill == 0]
            for pid in np.unique(pids).tolist():
                self.b.set_thread_name(int(pid), 0, UNKNOWN_THREAD_ROW)
        return tid

    def write_api(self, a: np.ndarray, *, driver: bool = False) -> None:
        """Runtime (SYCL/Unified Runtime) records, or with ``driver`` Level Zero records -> calls on
        their threads; arrows start at runtime calls (a driver call ends one whose id reached no
        device record)."""
        if not len(a):
            return
        ts, end = self._epoch(a["_start_timestamp"]), self._epoch(a["_end_timestamp"])
        pid = a["_process_id"].astype(np.int64, copy=False)
        if driver:
            tid = a["_thread_id"].astype(np.int64, copy=False)
        else:
            tid = self.runtime_threads(a, self._driver if self._driver is not None else a[:0])
        names = self._api_name_ids(a["_api_group"], a["_api_id"])
        corr = a["_correlation_id"]
        cat = ActivityType.DRIVER if driver else ActivityType.RUNTIME
        self._add(cat, names, ts, end - ts, pid, tid, {"correlation": corr.astype(np.int64, copy=False)},
                  self._ext.lookup(corr))
        self._flow(self._flow_end["driver" if driver else "runtime"], ts, pid, tid, corr, start=not driver)

    def write_overhead(self, o: np.ndarray) -> None:
        if not len(o):
            return
        ts, end = self._epoch(o["_overhead_start_timestamp_ns"]), self._epoch(o["_overhead_end_timestamp_ns"])
        names = self._table_names(o["_overhead_kind"], partial(pti.table_name, pti.OVERHEAD_NAMES))
        cost = o["_overhead_duration_ns"].astype(np.int64, copy=False)
        span = end - ts
        occ = np.divide(cost * 100.0, span, out=np.zeros(len(span)), where=span > 0)
        args = {"overhead cost": cost, "overhead occupancy": [f"{v:.0f}%" for v in occ.tolist()],
                "overhead count": o["_overhead_count"].astype(np.int64, copy=False)}
        self._add(ActivityType.OVERHEAD, names, ts, span, OVERHEAD_PID, o["_overhead_thread_id"].astype(np.int64, copy=False),
                  args)
        self._device_pids.add(OVERHEAD_PID)

    def write_comms(self, c: np.ndarray) -> None:
        if not len(c):
            return
        ts, end = self._epoch(c["_start_timestamp"]), self._epoch(c["_end_timestamp"])
        name_ids = self._interned(c["_name"], lambda p: f"xccl::{self.ctx.strings(p)}")
        args = {"Communicator_id": c["_communicator_id"].astype(np.int64, copy=False), "send bytes": c["_send_size"].astype(np.int64, copy=False),
                "recv bytes": c["_recv_size"].astype(np.int64, copy=False)}
        self._add(ActivityType.COLLECTIVE_COMM, name_ids, ts, end - ts,
                  c["_process_id"].astype(np.int64, copy=False), c["_thread_id"].astype(np.int64, copy=False), args)

    def _process_rows(self) -> None:
        for d in sorted(self._device_pids):
            if d == OVERHEAD_PID:
                self.b.set_process_name(d, "XPU Sync and Overhead", sort_index=OVERHEAD_SORT_INDEX)
            else:
                name = self.ctx.device_names.get(d, f"XPU {d}")
                self.b.set_process_name(d, name, label=f"XPU {d}", sort_index=DEVICE_SORT_BASE + d)


def write_records(records: DecodedRecords, ctx: RecordContext, builder: TraceBuilder,
                  window: ProcessWindow | None, types: frozenset[ActivityType], *,
                  release_records: bool = False, range_threads: RangeThreads | None = None, kernel_args=(),
                  kernel_filter=None) -> XpuEmitResult:
    """Write decoded PTI records into ``builder`` (see the module docstring for the conventions).
    ``release_records``: ``records`` is emptied as its kinds are written (the caller is done with it).
    ``range_threads``: the ranges' threads by correlation id (else the window's); ``kernel_args``, ``kernel_filter``:
    XpuEmitter's."""
    return XpuEmitter(ctx, types, range_threads=range_threads, kernel_args=kernel_args,
                      kernel_filter=kernel_filter).write(builder, window, records, release=release_records)
