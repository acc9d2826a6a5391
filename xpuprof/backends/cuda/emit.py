"""CUPTI activity records -> TraceBuilder columns, vectorized, with Kineto's rows and args (``CudaEmitter``).

Rows (Kineto §3.3): kernels, copies, memsets and CUDA events at pid = device, tid = stream;
runtime/driver calls at pid = process, tid = thread; ``Stream Sync`` at tid stream + 1000000
with its ``stream N (sync)`` row; syncs without a stream at tid 1 (Kineto's sanitized -1); CUPTI overhead on a process of its own,
``OVERHEAD_PID`` (Kineto's -1 would merge into device 0's process in Perfetto).
Flows: ``ac2g`` with id = correlation id, ``s`` on the host call and ``f`` on the device row,
drawn only when both ends are in the trace. Event waits resolve their producer through the
shared ``DependencyResolver``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...activity import ActivityType
from ...trace.builder.columns import ArgColumn, stored_once
from ...trace.builder.keyindex import distinct_rows, factorize
from ..demangle import demangle
from ..common import CorrelationMap, bandwidth, count_dropped, intern_keys, keep_in_window, kept
from ..dependencies import DependencyResolver
from ..emitter import VENDOR_PROCESS_PIDS, Emitter
from .occupancy import occupancy_args
from .records import (KIND_CONCURRENT_KERNEL, KIND_CUDA_EVENT, KIND_DRIVER, KIND_EXTERNAL_CORRELATION, KIND_KERNEL,
                      KIND_MEMCPY, KIND_MEMCPY2, KIND_MEMSET, KIND_OVERHEAD, KIND_RUNTIME, KIND_SYNCHRONIZATION,
                      CuptiRecords)

VENDOR = "cuda"
OVERHEAD_PID = VENDOR_PROCESS_PIDS["cuda"]  # Kineto: -1 (see VENDOR_PROCESS_PIDS)
STREAM_SYNC_TID_OFFSET = 1_000_000
NO_STREAM = 0xFFFFFFFF  # CUPTI_SYNCHRONIZATION_INVALID_VALUE
EXTERNAL_KIND_CUSTOM0 = 3  # CUpti_ExternalCorrelationKind: the CPU-op correlation (Kineto's Domain0)

# Labels as Kineto's cupti_strings.cpp writes them (pytorch/kineto 114171df), unknown values included:
# a memcpy kind outside the table is "<unknown>", a memory kind or overhead kind "Unrecognized", a
# sync type "Unknown Sync". Never the nearest known label.
FORCE_INT = 0x7FFFFFFF
MEMCPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
                10: "PtoP"}
MEMORY_KINDS = {0: "Unknown", 1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static",
                7: "Managed Static", FORCE_INT: "Force Int"}
SYNC_KINDS = ["Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync"]
SYNC_EVENT, SYNC_WAIT_EVENT, SYNC_STREAM, SYNC_CONTEXT = 1, 2, 3, 4
# UVM_ACTIVITY_INIT (CUDA 13) has no case in Kineto's table (it would print "Unrecognized"); it is
# a known kind, so it gets its name, spelled like the others.
OVERHEAD_KINDS = {0: "Unknown", 1: "Driver Compiler", 65536: "Buffer Flush", 131072: "Instrumentation",
                  196608: "Resource", 262144: "Runtime Triggered Module Loading", 327680: "Lazy Function Loading",
                  393216: "Command Buffer Full", 458752: "Activity Buffer Request", 524288: "UVM Activity Init",
                  FORCE_INT: "Force Int"}
OBJECT_KIND_THREAD = 2  # CUpti_ActivityObjectKind: object_id.pt.thread_id is valid only for threads


def memcpy_label(copy_kind: int, src: int, dst: int) -> str:
    """Kineto's memcpyName: ``Memcpy HtoD (Pinned -> Device)``."""
    return (f"Memcpy {MEMCPY_KINDS.get(copy_kind, '<unknown>')} ({MEMORY_KINDS.get(src, 'Unrecognized')} -> "
            f"{MEMORY_KINDS.get(dst, 'Unrecognized')})")

# Kineto drops these runtime calls (noise) and keeps only these driver calls.
DROPPED_RUNTIME = frozenset({"cudaGetDevice", "cudaSetDevice", "cudaGetLastError", "cudaEventCreate",
                             "cudaEventCreateWithFlags", "cudaEventDestroy"})
KEPT_DRIVER = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
                         "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle"})
_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")


def api_display_name(raw: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (short suffixes such as ``_v2`` stay)."""
    return _VERSION_SUFFIX.sub("", raw)


@dataclass
class DecodeOptions:
    activities: frozenset = field(default_factory=lambda: frozenset(ActivityType))
    display_sync_wait_events: bool = True
    sm_count: dict = field(default_factory=dict)  # device -> SM count ("blocks per SM")
    device_props: dict = field(default_factory=dict)  # device -> Kineto deviceProperties entry (occupancy)


def _ints(rows: np.ndarray, name: str) -> np.ndarray:
    """One record field as an int64 column, stored once when every row holds one value."""
    return stored_once(rows[name], np.int64)


def _triple(rows: np.ndarray, prefix: str) -> np.ndarray:
    """``grid``/``block``: (n, 3) int64, stored once when every row holds one (x, y, z)."""
    xyz = [_ints(rows, f"{prefix}_{a}") for a in "xyz"]
    if len(rows) and all(c.strides[0] == 0 for c in xyz):
        return np.broadcast_to(np.array([c[:1] for c in xyz], np.int64).reshape(1, 3), (len(rows), 3))
    return np.stack(xyz, 1)


class CudaEmitter(Emitter):
    """CUPTI's records (``records.CuptiRecords``) -> slices, flows and dependency args, one ``write``
    per batch. Made once per session: ``callback_name`` resolves (kind, cbid) to CUPTI's API name,
    ``dependencies`` is the session's event-record history."""

    vendor = VENDOR

    def __init__(self, callback_name: Callable[[int, int], str], dependencies: DependencyResolver | None = None,
                 options: DecodeOptions | None = None) -> None:
        self.options = options or DecodeOptions()
        super().__init__(self.options.activities)
        self.callback_name = callback_name  # (KIND_RUNTIME or KIND_DRIVER, cbid) -> CUPTI's name
        # `is None`, never `or`: the resolver has __len__, so an empty (fresh) session resolver is
        # falsy and `or` would swap in a private one that no session ever resets.
        self.dependencies = dependencies if dependencies is not None else DependencyResolver(VENDOR)

    def start_batch(self) -> None:
        self._names: dict[int, str] = {}
        self._busy: list[np.ndarray] = []  # (device << 32 | stream) that ran work in the window
        self._api_start = self._ext = self._ctx_dev = _empty_map()

    # ------------------------------------------------------------------ the batch
    def write_batch(self, records: CuptiRecords, *, release: bool = False) -> None:
        """Device rows first (they tell which streams ran work), then host rows; each kind's records
        are dropped from ``records`` once written when ``release``."""
        get = records.by_kind if release else dict(records.by_kind)
        self._names = records.names
        kernels = [r for r in (get.pop(KIND_KERNEL, None), get.pop(KIND_CONCURRENT_KERNEL, None)) if r is not None]

        # Pass 1 (independent of record order): external ids, context -> device, event records.
        self._ext = self._external_map(get.get(KIND_EXTERNAL_CORRELATION))
        self._ctx_dev = self._context_map([*kernels, get.get(KIND_MEMCPY), get.get(KIND_MEMCPY2), get.get(KIND_MEMSET)])
        self._api_start = self._api_start_map(get.get(KIND_RUNTIME), get.get(KIND_DRIVER))
        events = get.get(KIND_CUDA_EVENT)
        if events is not None:
            self._record_events(events)

        # Pass 2: device rows (collect which correlation ids and streams exist), then host rows.
        while kernels:
            self.write_kernels(kernels.pop(0))
        if (rows := get.pop(KIND_MEMCPY, None)) is not None:
            self.write_copies(rows)
        if (rows := get.pop(KIND_MEMCPY2, None)) is not None:
            self.write_p2p(rows)
        if (rows := get.pop(KIND_MEMSET, None)) is not None:
            self.write_fills(rows)
        rows = None
        if events is not None and self.wants(ActivityType.CUDA_EVENT):
            self.write_events(events)
        if get.get(KIND_SYNCHRONIZATION) is not None and self.wants(ActivityType.CUDA_SYNC):
            self.write_syncs(get.pop(KIND_SYNCHRONIZATION))
        get.pop(KIND_EXTERNAL_CORRELATION, None)  # its map is built
        events = get[KIND_CUDA_EVENT] = None
        for kind, t in ((KIND_RUNTIME, ActivityType.RUNTIME), (KIND_DRIVER, ActivityType.DRIVER)):
            if (rows := get.pop(kind, None)) is not None and self.wants(t):
                self.write_api(rows, driver=kind == KIND_DRIVER)
            rows = None
        if get.get(KIND_OVERHEAD) is not None and self.wants(ActivityType.OVERHEAD):
            self.write_overhead(get[KIND_OVERHEAD])

    # ------------------------------------------------------------------ pass 1
    @staticmethod
    def _external_map(rows) -> CorrelationMap:
        """correlation id -> External id of the CPU op (CUSTOM0) that launched it."""
        if rows is None:
            return _empty_map()
        m = rows["external_kind"] == EXTERNAL_KIND_CUSTOM0
        return CorrelationMap(rows["correlation_id"][m], rows["external_id"][m])

    def _external_ids(self, corr: np.ndarray) -> np.ndarray:
        return self._ext.lookup(corr)

    @staticmethod
    def _context_map(parts) -> CorrelationMap:
        """context id -> its device (the first record naming the context)."""
        parts = [p for p in parts if p is not None]
        if not parts:
            return _empty_map()
        return CorrelationMap(np.concatenate([p["context_id"].astype(np.int64) for p in parts]),
                              np.concatenate([p["device_id"].astype(np.int64) for p in parts]))

    def _devices_of(self, ctx: np.ndarray) -> np.ndarray:
        return self._ctx_dev.lookup(ctx)

    @staticmethod
    def _api_start_map(*parts) -> CorrelationMap:
        """correlation id -> start of the runtime/driver call carrying it."""
        parts = [p for p in parts if p is not None]
        if not parts:
            return _empty_map()
        return CorrelationMap(np.concatenate([p["correlation_id"].astype(np.int64) for p in parts]),
                              np.concatenate([p["start"].astype(np.int64) for p in parts]))

    @staticmethod
    def _event_handles(ctx: np.ndarray, event_id: np.ndarray) -> np.ndarray:
        # CUDA event ids are unique per context (Kineto keys its map by (ctx, eventId)).
        return (ctx.astype(np.uint64) << np.uint64(32)) | event_id.astype(np.uint64)

    def _event_ts(self, rows) -> np.ndarray:
        # Device timestamp when CUPTI gives one (CUDA >= 12.8 with device timestamps on),
        # else the cudaEventRecord call's start.
        dts = rows["device_timestamp"].astype(np.int64) if "device_timestamp" in rows.dtype.names else \
            np.zeros(len(rows), np.int64)
        return np.where(dts > 0, dts, self._api_start.lookup(rows["correlation_id"]))

    def _event_device(self, rows) -> np.ndarray:
        if "device_id" in rows.dtype.names:
            return rows["device_id"].astype(np.int64)
        return self._devices_of(rows["context_id"])

    def _record_events(self, rows) -> None:
        self.dependencies.add_records(self._event_handles(rows["context_id"], rows["event_id"]),
                                      rows["correlation_id"], rows["stream_id"].astype(np.int64),
                                      ts=self._event_ts(rows), pid=self._event_device(rows),
                                      tid=rows["stream_id"].astype(np.int64))

    # ------------------------------------------------------------------ helpers
    def _keep(self, start, kind: str) -> np.ndarray | None:
        return keep_in_window(self.b, self.window, start, VENDOR, kind)

    @staticmethod
    def _field(rows, name, default=0):
        return rows[name].astype(np.int64) if name in rows.dtype.names else np.full(len(rows), default, np.int64)

    def _graph_channel_args(self, rows) -> dict:
        out = {}
        for arg, fld in (("graph id", "graph_id"), ("graph node id", "graph_node_id"), ("channel", "channel_id"),
                         ("channel_type", "channel_type")):
            if fld in rows.dtype.names:
                out[arg] = _ints(rows, fld)
        return out

    # ------------------------------------------------------------------ device rows
    def _recorded(self, rows, kind: str, activity: ActivityType | None = None):
        """``rows`` of ``kind`` whose start lies in the window (the others counted as out of window), or None
        where none does or ``activity`` (when given) was not selected."""
        if activity is not None and not self.wants(activity):
            return None
        rows = self.in_window(rows, rows["start"], kind)
        return rows if len(rows) else None

    def write_kernels(self, rows) -> None:
        if (rows := self._recorded(rows, "kernel", ActivityType.CONCURRENT_KERNEL)) is None:
            return
        b = self.b
        ptrs = factorize(rows["name"])  # one pass; demangled once per distinct name
        label = ["Kernel" if (n := demangle(self._names.get(int(p), "") or "unknown")) == "kernel" else n
                 for p in ptrs.uniq.tolist()]
        name_ids = np.fromiter((b.strings.intern(s) for s in label), np.int32, len(label))[ptrs.codes]
        # Each column is stored once where all rows agree, as soon as it is made: kernels carry
        # ~20 args, and full temporaries of all of them would double the decode's peak memory.
        start, end = rows["start"].astype(np.int64), rows["end"].astype(np.int64)
        dev, stream, corr = _ints(rows, "device_id"), _ints(rows, "stream_id"), rows["correlation_id"].astype(np.int64)
        grid, block = _triple(rows, "grid"), _triple(rows, "block")
        regs, static_smem, dynamic_smem = (_ints(rows, f) for f in ("registers_per_thread", "static_shared_memory",
                                                                    "dynamic_shared_memory"))
        args = {
            "queued": stored_once(self._field(rows, "queued")),
            "device": dev, "context": _ints(rows, "context_id"), "stream": stream, "correlation": corr,
            "registers per thread": regs, "shared memory": stored_once(static_smem + dynamic_smem),
        }
        props = self.options.device_props or {d: {"numSms": n} for d, n in self.options.sm_count.items()}
        args.update(occupancy_args(dev, grid, block, regs, static_smem, dynamic_smem, props))
        args["grid"] = grid
        args["block"] = block
        args.update(self._graph_channel_args(rows))
        if "priority" in rows.dtype.names:
            args["priority"] = _ints(rows, "priority")
        self._device_slices(ActivityType.CONCURRENT_KERNEL, name_ids, start, end, dev, stream, corr, args)

    def write_copies(self, rows) -> None:
        if (rows := self._recorded(rows, "memcpy", ActivityType.GPU_MEMCPY)) is None:
            return
        labels, inv = self._memcpy_labels(rows)
        self._copy_like(rows, labels, inv, ActivityType.GPU_MEMCPY)

    @staticmethod
    def _memcpy_labels(rows) -> tuple[list[str], np.ndarray]:
        # copy/src/dst kinds are u8 in every memcpy record: one label per distinct triple.
        combo = (rows["copy_kind"].astype(np.int64) << 16) | (rows["src_kind"].astype(np.int64) << 8) | \
            rows["dst_kind"].astype(np.int64)
        f = factorize(combo)  # linear: np.unique would sort the whole column
        labels = [memcpy_label(c >> 16, (c >> 8) & 0xFF, c & 0xFF) for c in f.uniq.tolist()]
        return labels, f.codes

    def write_p2p(self, rows) -> None:
        """Peer-to-peer copies (MEMCPY2) with Kineto's args: from/in/to device and context."""
        if (rows := self._recorded(rows, "memcpy", ActivityType.GPU_MEMCPY)) is None:
            return
        labels, inv = self._memcpy_labels(rows)
        self._copy_like(rows, labels, inv, ActivityType.GPU_MEMCPY, peers=True)

    def write_fills(self, rows) -> None:
        if (rows := self._recorded(rows, "memset", ActivityType.GPU_MEMSET)) is None:
            return
        f = factorize(rows["memory_kind"])
        labels = [f"Memset ({MEMORY_KINDS.get(k, 'Unrecognized')})" for k in f.uniq.tolist()]
        self._copy_like(rows, labels, f.codes, ActivityType.GPU_MEMSET)

    def _copy_like(self, rows, labels, inv, cat, *, peers: bool = False) -> None:
        """Copy or fill rows named ``labels[inv]``; ``peers``: peer-to-peer copies, whose device and context args
        are Kineto's from/in/to triples."""
        name_ids = np.fromiter((self.b.strings.intern(s) for s in labels), np.int32, len(labels))[inv]
        start, end = rows["start"].astype(np.int64), rows["end"].astype(np.int64)
        dev, stream, corr = rows["device_id"].astype(np.int64), rows["stream_id"].astype(np.int64), \
            rows["correlation_id"].astype(np.int64)
        nbytes = rows["bytes"].astype(np.int64)
        if peers:
            args = {"fromDevice": rows["src_device_id"].astype(np.int64), "inDevice": dev,
                    "toDevice": rows["dst_device_id"].astype(np.int64),
                    "fromContext": rows["src_context_id"].astype(np.int64),
                    "inContext": rows["context_id"].astype(np.int64), "toContext": rows["dst_context_id"].astype(np.int64)}
        else:
            args = {"device": dev, "context": rows["context_id"].astype(np.int64)}
        args.update({"stream": stream, "correlation": corr, "bytes": nbytes,
                     "memory bandwidth (GB/s)": bandwidth(nbytes, end - start)})
        args.update(self._graph_channel_args(rows))
        self._device_slices(cat, name_ids, start, end, dev, stream, corr, args)

    def _device_slices(self, cat, name_ids, start, end, dev, stream, corr, args) -> None:
        """Device rows of one kind on their (device, stream) rows; their ids end arrows, their
        streams are the busy ones."""
        self.slices(cat, start, end - start, dev, stream, name_ids=name_ids, args=args,
                    external_id=self._external_ids(corr))
        self._stream_rows(dev, stream)
        self.flow_ends(corr, start, stored_once(dev), stored_once(stream), host=False)
        self._busy.append(factorize((dev << 32) | stream).uniq.astype(np.int64))  # the distinct pairs only

    def write_events(self, rows) -> None:
        """CUDA event records -> ``cuda_event`` markers (1 ns) on their stream rows."""
        ts = self._event_ts(rows)
        m = self._keep(ts, "cuda event")
        rows, ts = kept(rows, m), kept(ts, m)
        if not len(rows):
            return
        dev, stream, corr = self._event_device(rows), rows["stream_id"].astype(np.int64), \
            rows["correlation_id"].astype(np.int64)
        self.slices(ActivityType.CUDA_EVENT, ts, np.ones(len(rows), np.int64), dev, stream,
                    names=["cudaEvent"] * len(rows), external_id=self._external_ids(corr),
                    args={"event_id": rows["event_id"].astype(np.int64), "stream": stream, "correlation": corr,
                          "device": dev, "context": rows["context_id"].astype(np.int64)})
        self.flow_ends(corr, ts, stored_once(dev), stored_once(stream), host=False)

    def write_syncs(self, rows) -> None:
        busy = np.unique(np.concatenate(self._busy)) if self._busy else np.empty(0, np.int64)
        self._busy = []
        rows = self.in_window(rows, rows["start"], "sync")
        kind = rows["type"].astype(np.int64)
        ctx = rows["context_id"].astype(np.int64)
        dev = self._devices_of(ctx)
        raw_stream = rows["stream_id"].astype(np.int64)
        stream = np.where(raw_stream == NO_STREAM, -1, raw_stream)
        keep = np.ones(len(rows), bool)
        waits = kind == SYNC_WAIT_EVENT
        if not self.options.display_sync_wait_events:
            keep &= ~waits
        else:  # Kineto #908: a wait is shown only where its stream ran work in the window
            keep &= ~waits | np.isin((dev << 32) | np.maximum(stream, 0), busy)
        count_dropped(self.b, VENDOR, "on idle stream", int((~keep & waits).sum()), kind="stream wait event")
        rows, kind, ctx, dev, stream = rows[keep], kind[keep], ctx[keep], dev[keep], stream[keep]
        if not len(rows):
            return
        b = self.b
        corr = rows["correlation_id"].astype(np.int64)
        start, end = rows["start"].astype(np.int64), rows["end"].astype(np.int64)
        tid = np.where(kind == SYNC_STREAM, stream + STREAM_SYNC_TID_OFFSET, np.where(stream < 0, 1, stream))
        event_based = (kind == SYNC_EVENT) | (kind == SYNC_WAIT_EVENT)
        event_id = rows["cuda_event_id"].astype(np.int64)
        dep = self.dependencies
        res = dep.resolve(self._event_handles(ctx, event_id), corr)
        kinds = np.where((kind >= 0) & (kind < len(SYNC_KINDS)), kind, 0)  # anything else: "Unknown Sync"
        kind_ids = np.fromiter((b.strings.intern(s) for s in SYNC_KINDS), np.int32, len(SYNC_KINDS))[kinds]
        args = {dep.sync_kind_arg: ArgColumn("str", kind_ids)}
        args.update(dep.wait_args(event_id, res, event_based))
        args.update({"stream": stream, "correlation": corr, "device": dev, "context": ctx})
        self.slices(ActivityType.CUDA_SYNC, start, end - start, dev, tid, name_ids=kind_ids, args=args,
                    external_id=self._external_ids(corr))
        res.found &= event_based
        dep.add_flows(b, res, wait_corr_ids=corr, wait_ts=start, wait_pid=dev, wait_tid=tid)
        ss = kind == SYNC_STREAM
        for d, s in distinct_rows(dev[ss], stream[ss]):
            b.set_thread_name(d, s + STREAM_SYNC_TID_OFFSET, f"stream {s} (sync)", sort_index=s)
        for d in np.unique(dev[stream < 0]).tolist():
            b.set_thread_name(d, 1, f"Device {d}", sort_index=-1)
        self._stream_rows(dev[(stream >= 0) & ~ss], stream[(stream >= 0) & ~ss])
        self.flow_ends(corr, start, stored_once(dev), stored_once(tid), host=False)

    def _stream_rows(self, dev: np.ndarray, stream: np.ndarray) -> None:
        pairs = self.name_streams(dev, stream, "stream {} ".format)
        self.name_devices(np.array([d for d, _ in pairs], np.int64), "GPU {}".format)

    # ------------------------------------------------------------------ host rows
    def write_api(self, rows, *, driver: bool = False) -> None:
        """Runtime (``driver``: driver) API records -> calls on their threads, Kineto's noisy
        runtime calls left out and only its driver calls kept."""
        kind = KIND_DRIVER if driver else KIND_RUNTIME
        if (rows := self._recorded(rows, "driver" if driver else "runtime")) is None:
            return
        cbids = factorize(rows["cbid"])
        labels = [api_display_name(self.callback_name(kind, int(c))) for c in cbids.uniq.tolist()]
        if driver:
            keep_u = np.array([lbl in KEPT_DRIVER for lbl in labels], bool)
        else:
            keep_u = np.array([lbl not in DROPPED_RUNTIME for lbl in labels], bool)
        keep = keep_u[cbids.codes]
        rows, inv = kept(rows, keep), kept(cbids.codes, keep)
        if not len(rows):
            return
        name_ids = np.fromiter((self.b.strings.intern(s) for s in labels), np.int32, len(labels))[inv]
        start, end = rows["start"].astype(np.int64), rows["end"].astype(np.int64)
        pid, tid = rows["process_id"].astype(np.int64), rows["thread_id"].astype(np.int64)
        corr = rows["correlation_id"].astype(np.int64)
        self.slices(ActivityType.DRIVER if driver else ActivityType.RUNTIME, start, end - start, pid, tid,
                    name_ids=name_ids, args={"cbid": rows["cbid"].astype(np.int64), "correlation": corr},
                    external_id=self._external_ids(corr))
        self.flow_ends(corr, start, stored_once(pid), stored_once(tid), host=True)

    def write_overhead(self, rows) -> None:
        """CUPTI overhead records -> ``overhead`` slices on the "CUPTI Overhead" process."""
        if (rows := self._recorded(rows, "overhead")) is None:
            return
        name_ids = intern_keys(self.b, rows["overhead_kind"], lambda k: OVERHEAD_KINDS.get(k, "Unrecognized"))
        start, end = rows["start"].astype(np.int64), rows["end"].astype(np.int64)
        # object_id is a union: {process_id, thread_id} only for process/thread objects, {device,
        # context, stream} otherwise. Only a thread object names a thread; the rest go to tid 0,
        # Kineto's OverheadActivity default.
        tid = np.where(rows["object_kind"].astype(np.int64) == OBJECT_KIND_THREAD,
                       rows["object_id"]["pt"]["thread_id"].astype(np.int64), 0)
        self.slices(ActivityType.OVERHEAD, start, end - start, OVERHEAD_PID, tid, name_ids=name_ids)
        self.b.set_process_name(OVERHEAD_PID, "CUPTI Overhead", sort_index=1048576)


def _empty_map() -> CorrelationMap:
    return CorrelationMap(np.empty(0, np.int64), np.empty(0, np.int64))
