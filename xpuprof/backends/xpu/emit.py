"""Decoded PTI records -> TraceBuilder columns (Kineto XPU JSON, kineto-trace-format §3.3/§14.3).

Everything is columnar: one ``add_slices`` call per record kind, names interned once per distinct
pointer or API id. Rows: device work on pid = device index (position of the device UUID among
the Level Zero GPUs), tid = SYCL queue id; runtime/driver calls on PTI's process/thread ids
(a runtime record without one takes its thread from the driver calls it made, else from the range
that pushed its External id: see ``RecordWriter.runtime_threads``); syncs and overhead on pid -1. ``ac2g`` flows start only on runtime records and end once per
correlation, on the first device record (else the first driver record) that shares it.

``RecordContext`` carries what resolving needs (API names, C strings behind pointers, the clock
offset, device UUIDs), so live sessions and replayed captures share this code.
"""
from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

from ... import diagnostics
from ...activity import ActivityType
from ...clock import BASE_TIME_NS
from ...trace.build.builder import TraceBuilder
from ...trace.build.columns import ArgColumn, hex_column
from ...trace.build.keyindex import factorize, pack_pairs
from ..base import ProcessWindow, RangeThreads
from . import pti
from .decode import DecodedRecords
from .sync_deps import sync_dependency_args

log = logging.getLogger("xpuprof")

VENDOR = "xpu"
UNKNOWN_THREAD_ROW = "thread unknown (PTI recorded no thread id)"
OVERHEAD_PID = -1
DEVICE_SORT_BASE = 5_000_000  # Kineto's kExceedMaxPid: device processes sort after host ones
OVERHEAD_SORT_INDEX = 1_048_576


class StringCache:
    """C strings behind record pointers, read once per distinct pointer; remembered for captures."""

    def __init__(self, known: dict[int, str] | None = None, reader: Callable[[int], str] | None = None) -> None:
        self.seen: dict[int, str] = dict(known or {})
        self._reader = reader

    @classmethod
    def live(cls) -> "StringCache":
        return cls(reader=lambda p: ctypes.string_at(p).decode("utf-8", "replace"))

    def __call__(self, ptr: int) -> str:
        ptr = int(ptr)
        if ptr == 0:
            return ""
        got = self.seen.get(ptr)
        if got is None:
            got = self._reader(ptr) if self._reader is not None else f"<unresolved 0x{ptr:x}>"
            self.seen[ptr] = got
        return got


class ApiNameCache:
    """(api group, api id) -> name, from ``ptiViewGetApiIdName`` live or a capture's table."""

    def __init__(self, known: dict[tuple[int, int], str] | None = None,
                 lookup: Callable[[int, int], str] | None = None) -> None:
        self.seen: dict[tuple[int, int], str] = dict(known or {})
        self._lookup = lookup

    def __call__(self, group: int, api_id: int) -> str:
        key = (int(group), int(api_id))
        got = self.seen.get(key)
        if got is None:
            got = self._lookup(*key) if self._lookup is not None else f"api_{key[0]}_{key[1]}"
            self.seen[key] = got
        return got


@dataclass
class RecordContext:
    pti_version: str
    clock_offset_ns: int  # epoch ns = PTI ns + offset
    device_uuids: list[bytes] = field(default_factory=list)  # index = device index (pid)
    device_names: dict[int, str] = field(default_factory=dict)
    strings: StringCache = field(default_factory=StringCache)
    api_names: ApiNameCache = field(default_factory=ApiNameCache)
    # Enum strings from the loaded PTI (its wording changes across releases); tables for replay.
    memory_type_name: Callable[[int], str] = partial(pti.table_name, pti.MEMORY_TYPES)
    memcpy_type_name: Callable[[int], str] = partial(pti.table_name, pti.MEMCPY_TYPES)


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
class EmitResult:
    kernels: KernelTable
    counts: dict[str, int]  # slices written by category
    errors: list[str]
    thread_sources: dict[str, int] = field(default_factory=dict)  # RecordWriter.runtime_threads


def _us(ns: np.ndarray) -> np.ndarray:
    """ns -> µs with 3 decimals (the trace's own time resolution)."""
    return np.round(ns.astype(np.float64) / 1000.0, 3)


class CorrelationSpace:
    """Correlation ids as offsets into one dense range (PTI's ids are a per-process counter), so
    set tests, first occurrences and id lookups are table reads instead of sorts. ``None`` from
    ``over`` when the ids span too wide a range for a table; callers then take the sorting path."""

    def __init__(self, lo: int, span: int) -> None:
        self.lo, self.span = lo, span

    @classmethod
    def over(cls, *columns: np.ndarray) -> "CorrelationSpace | None":
        lo = hi = None
        total = 0
        for c in columns:
            total += len(c)
            if len(c):
                a, b = int(c.min()), int(c.max())
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        if lo is None:
            return cls(0, 1)
        span = hi - lo + 1
        return cls(lo, span) if span <= max(4 * total, 1 << 20) else None

    def offsets(self, corr: np.ndarray) -> np.ndarray:
        return corr.astype(np.intp) - self.lo

    def members(self, corr: np.ndarray) -> np.ndarray:
        """Table: offset -> True for every non-zero id in ``corr``."""
        table = np.zeros(self.span, bool)
        table[self.offsets(corr[corr != 0])] = True
        return table

    def first_rows(self, corr: np.ndarray) -> np.ndarray:
        """Mask: the rows holding their id's first occurrence in ``corr``."""
        n = len(corr)
        off = self.offsets(corr)
        first_at = np.full(self.span, n, np.intp)
        rows = np.arange(n, dtype=np.intp)
        np.minimum.at(first_at, off, rows)  # well defined for repeated ids, unlike a plain assignment
        return first_at[off] == rows


class _Flows:
    """Correlation ids that get an ac2g arrow: started by runtime, ended by device/driver work."""

    def __init__(self, runtime_corr: np.ndarray, end_corr: np.ndarray) -> None:
        self.space = CorrelationSpace.over(runtime_corr, end_corr)
        if self.space is not None:
            self.table = self.space.members(runtime_corr) & self.space.members(end_corr)
            return
        rt = np.unique(runtime_corr[runtime_corr != 0])
        ends = np.unique(end_corr[end_corr != 0])
        self.ids = np.intersect1d(rt, ends, assume_unique=True)

    def starts(self, corr: np.ndarray) -> np.ndarray:
        """Mask: the first record of each flow id among ``corr``."""
        if self.space is not None:
            if not len(corr):
                return np.zeros(0, bool)
            return self.table[self.space.offsets(corr)] & self.space.first_rows(corr)
        return self._first(corr)

    def _first(self, corr: np.ndarray) -> np.ndarray:
        mask = np.zeros(len(corr), bool)
        if not len(corr) or not len(self.ids):
            return mask
        _, first = np.unique(corr, return_index=True)
        first = first[np.isin(corr[first], self.ids, assume_unique=False)]
        mask[first] = True
        return mask


class _ExternalIds:
    def __init__(self, ext: np.ndarray) -> None:
        # CUSTOM_0 (profiler ops) first; other kinds only fill in correlations it lacks.
        kinds = ext["_external_kind"]
        corr_all = ext["_correlation_id"]
        user = kinds == pti.ExternalKind.CUSTOM_1
        self.user_corr = corr_all[user].astype(np.int64)
        self.space = CorrelationSpace.over(corr_all)
        if self.space is not None:
            # Two table writes, other kinds first, then CUSTOM_0 over them; within each, only the
            # first record of an id is written, so no write order is left to numpy.
            table = np.zeros(self.space.span, np.int64)
            found = np.zeros(self.space.span, bool)
            profiler_ops = kinds == pti.ExternalKind.CUSTOM_0
            for sel in (~profiler_ops, profiler_ops):
                corr, ids = corr_all[sel], ext["_external_id"][sel]
                if not len(corr):
                    continue
                first = self.space.first_rows(corr)
                off = self.space.offsets(corr[first])
                table[off] = ids[first].astype(np.int64)
                found[off] = True
            self.table, self.found = table, found
            return
        order = np.argsort(kinds != pti.ExternalKind.CUSTOM_0, kind="stable")
        corr = corr_all[order].astype(np.int64)
        ids = ext["_external_id"][order].astype(np.int64)
        uniq, first = np.unique(corr, return_index=True)
        self.corr, self.ids = uniq, ids[first]

    def lookup(self, corr: np.ndarray) -> np.ndarray:
        out = np.zeros(len(corr), np.int64)
        if not len(corr):
            return out
        if self.space is not None:
            off = self.space.offsets(corr)
            inside = (off >= 0) & (off < self.space.span)
            if inside.all():
                return np.where(self.found[off], self.table[off], 0)
            hit = np.zeros(len(corr), bool)
            hit[inside] = self.found[off[inside]]
            out[hit] = self.table[off[hit]]
            return out
        if not len(self.corr):
            return out
        c = corr.astype(np.int64)
        pos = np.minimum(np.searchsorted(self.corr, c), len(self.corr) - 1)
        hit = self.corr[pos] == c
        out[hit] = self.ids[pos[hit]]
        return out


def _threads_by_correlation(corr: np.ndarray, tids: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The thread of a record carrying each id in ``want`` (0 where none does)."""
    out = np.zeros(len(want), np.int64)
    space = CorrelationSpace.over(corr, want)
    if space is not None:
        table = np.zeros(space.span, np.int64)
        table[space.offsets(corr)] = tids  # every record of one id ran on one thread
        out[:] = table[space.offsets(want)]
    else:
        order = np.argsort(corr, kind="stable")
        corr, tids = corr[order], tids[order]
        pos = np.minimum(np.searchsorted(corr, want), len(corr) - 1)
        hit = corr[pos] == want
        out[hit] = tids[pos[hit]]
    out[want == 0] = 0
    return out


class RecordWriter:
    """Writes one ``DecodedRecords`` into a builder. Subclass hooks: ``write_<kind>`` methods."""

    def __init__(self, ctx: RecordContext, builder: TraceBuilder, window: ProcessWindow | None,
                 types: frozenset[ActivityType], *, release_records: bool = False,
                 range_threads: RangeThreads | None = None) -> None:
        self.ctx, self.b, self.window, self.types = ctx, builder, window, types
        self.range_threads = range_threads if range_threads is not None else getattr(window, "range_threads", None)
        self.thread_sources: dict[str, int] = {}  # how runtime records without a thread got one
        self.release_records = release_records  # empty the DecodedRecords given to write() as it goes
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self._device_pids: set[int] = set()
        self._streams: set[tuple[int, int]] = set()

    # ------------------------------------------------------------------ shared helpers
    def _epoch(self, a: np.ndarray) -> np.ndarray:
        return a.astype(np.int64) + np.int64(self.ctx.clock_offset_ns)

    def _in_window(self, rec: np.ndarray, start_field: str, end_field: str, what: str) -> np.ndarray:
        start = rec[start_field]
        bad = rec[end_field] < start
        if bad.any():
            self.errors.append(f"{int(bad.sum())} {what} records end before they start")
        if self.window is None:
            return rec
        keep = self.window.contains(self._epoch(start))
        lost = len(keep) - int(np.count_nonzero(keep))
        if not lost:
            return rec  # the usual case: no copy of the whole record array
        self.b.count_dropped("xpu: out of window", lost)
        return rec[keep]

    def _device_index(self, uuids: np.ndarray) -> np.ndarray:
        """(n, 16) uint8 UUIDs -> device index; unseen UUIDs get the next free index."""
        if not len(uuids):
            return np.zeros(0, np.int64)
        words = np.ascontiguousarray(uuids).view(np.uint64).reshape(-1, 2)
        high, low = factorize(words[:, 0]), factorize(words[:, 1])
        pairs = factorize(high.codes.astype(np.uint64) * np.uint64(len(low.uniq)) + low.codes.astype(np.uint64))
        known = self.ctx.device_uuids
        raws = [np.ascontiguousarray(uuids[row]).tobytes() for row in pairs.first.tolist()]
        for raw in sorted(raws):  # unseen UUIDs take the next indices in byte order
            if raw not in known:
                known.append(raw)
        return np.array([known.index(raw) for raw in raws], np.int64)[pairs.codes]

    def _interned(self, keys: np.ndarray, text_of: Callable[[int], str]) -> np.ndarray:
        """String id per row: ``text_of`` once per distinct key, interned once."""
        f = factorize(keys)
        ids = np.fromiter((self.b.strings.intern(text_of(k)) for k in f.uniq.tolist()), np.int32, len(f.uniq))
        return ids[f.codes]

    def _intern_ptrs(self, ptrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pointers -> (string ids, present mask)."""
        return self._interned(ptrs, self.ctx.strings), ptrs != 0

    def _api_name_ids(self, group: np.ndarray, api_id: np.ndarray) -> np.ndarray:
        key = (group.astype(np.uint64) << np.uint64(32)) | api_id.astype(np.uint64)
        return self._interned(key, lambda k: self.ctx.api_names(k >> 32, k & 0xFFFFFFFF))

    def _table_names(self, codes: np.ndarray, fmt: Callable[[int], str]) -> np.ndarray:
        if codes.dtype.kind == "i" and len(codes) and int(codes.min()) < 0:
            uniq, inverse = np.unique(codes, return_inverse=True)  # negative codes: keep their sign
            ids = np.fromiter((self.b.strings.intern(fmt(int(c))) for c in uniq.tolist()), np.int32, len(uniq))
            return ids[inverse.reshape(-1)]
        return self._interned(codes, fmt)

    def _str_column(self, texts: list[str], codes: np.ndarray) -> ArgColumn:
        """Arg column of strings chosen by small integer codes (enum values)."""
        ids = np.array([self.b.strings.intern(t) for t in texts], np.int32)
        return ArgColumn("str", ids[np.clip(codes.astype(np.int64), 0, len(ids) - 1)])

    def extra_kernel_args(self, kernel_ids: np.ndarray) -> dict:
        """Hook: more arg columns for the kernel slices, one row per kernel (the scope profiler's
        per-kernel metric values). The base writer adds none."""
        return {}

    def _memory_column(self, codes: np.ndarray) -> ArgColumn:
        """Memory-type arg column named by the context (PTI's strings when loaded)."""
        return ArgColumn("str", self._table_names(codes, self.ctx.memory_type_name))

    def _add(self, cat: ActivityType, name_ids, ts, dur, pid, tid, args, external_id=None) -> None:
        # add_slices stores columns that hold one value in every row once (stride-0 views).
        self.b.add_slices(names=None, name_ids=name_ids, ts=ts, dur=dur, pid=pid, tid=tid,
                          cat=cat, args=args, external_id=external_id, vendor=VENDOR)
        key = cat.value
        self.counts[key] = self.counts.get(key, 0) + len(ts)

    def _device_rows(self, pid: np.ndarray, queue: np.ndarray) -> None:
        if not len(pid):
            return
        packed = pack_pairs(pid, queue)
        if packed is None:
            pairs = np.unique(np.stack([pid, queue], axis=1), axis=0).tolist()
        else:
            first = factorize(packed).first
            pairs = sorted(zip(pid[first].tolist(), queue[first].tolist()))
        for d, q in pairs:
            if (d, q) not in self._streams:
                self._streams.add((d, q))
                self.b.set_thread_name(d, q, f"Stream {q}", sort_index=q)
            self._device_pids.add(d)

    def _time_args(self, rec: np.ndarray, start: np.ndarray, fields: list[tuple[str, str]]) -> dict:
        args = {}
        for key, f in fields:
            raw = rec[f]
            present = raw != 0
            if not present.any():
                continue
            t = self._epoch(raw)
            args[key] = ArgColumn("num", _us(t - BASE_TIME_NS), present)
            args[f"{key}_rel_to_start"] = ArgColumn("num", _us(t - start), present)
        return args

    # ------------------------------------------------------------------ the whole batch
    def write(self, records: DecodedRecords) -> EmitResult:
        for kind, n in records.unknown.items():
            self.b.count_dropped(f"xpu: unknown record kind {kind}", n)
        ext = _ExternalIds(records.get(pti.ViewKind.EXTERNAL_CORRELATION))
        want = self.types
        recs = {k: records.get(k) for k in pti.RECORD_STRUCTS}
        rt = self._in_window(recs[pti.ViewKind.RUNTIME_API], "_start_timestamp", "_end_timestamp", "runtime")
        drv = self._in_window(recs[pti.ViewKind.DRIVER_API], "_start_timestamp", "_end_timestamp", "driver")
        kern = self._in_window(recs[pti.ViewKind.DEVICE_GPU_KERNEL], "_start_timestamp", "_end_timestamp", "kernel")
        cpy = self._in_window(recs[pti.ViewKind.DEVICE_GPU_MEM_COPY], "_start_timestamp", "_end_timestamp", "memcpy")
        p2p = self._in_window(recs[pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P], "_start_timestamp", "_end_timestamp", "p2p")
        fill = self._in_window(recs[pti.ViewKind.DEVICE_GPU_MEM_FILL], "_start_timestamp", "_end_timestamp", "fill")
        sync = self._in_window(recs[pti.ViewKind.DEVICE_SYNCHRONIZATION], "_start_timestamp", "_end_timestamp",
                               "synchronization")
        over = self._in_window(recs[pti.ViewKind.COLLECTION_OVERHEAD], "_overhead_start_timestamp_ns",
                               "_overhead_end_timestamp_ns", "overhead")
        comm = self._in_window(recs[pti.ViewKind.COMMUNICATION], "_start_timestamp", "_end_timestamp", "comms")
        del recs
        if self.release_records:
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
        dev_masks = np.split(end_first[owner == 0], splits)
        drv_mask = end_first[owner == 1]
        del dev_cat, owner, all_end, end_first

        kernels = KernelTable.empty()
        if ActivityType.CONCURRENT_KERNEL in want:
            kernels = self.write_kernels(kern, ext, dev_masks[0])
        kern = None
        if ActivityType.GPU_MEMCPY in want:
            self.write_memcpy(cpy, ext, dev_masks[1])
            self.write_p2p(p2p, ext, dev_masks[2])
        cpy = p2p = None
        if ActivityType.GPU_MEMSET in want:
            self.write_fill(fill, ext, dev_masks[3])
        fill = None
        if ActivityType.XPU_SYNC in want or ActivityType.CUDA_SYNC in want:  # generic sync selection
            self.write_sync(sync, ext, dev_masks[4])
        sync = None
        if ActivityType.RUNTIME in want:
            self.write_api(rt, ext, ActivityType.RUNTIME, flows.starts(rt["_correlation_id"]), start=True,
                           tid=self.runtime_threads(rt, drv, ext))
        rt = None
        if ActivityType.DRIVER in want:
            self.write_api(drv, ext, ActivityType.DRIVER, drv_mask, start=False)
        drv = None
        if ActivityType.OVERHEAD in want:
            self.write_overhead(over)
        if ActivityType.COLLECTIVE_COMM in want:
            self.write_comms(comm)
        self._process_rows()
        self.b.set_metadata("xpupti_version", self.ctx.pti_version)
        return EmitResult(kernels, self.counts, self.errors, self.thread_sources)

    def _flow(self, mask, ts, pid, tid, corr, start: bool) -> None:
        if mask.any():
            pid_arr = np.broadcast_to(np.asarray(pid), mask.shape)
            tid_arr = np.broadcast_to(np.asarray(tid), mask.shape)
            self.b.add_flows(flow_ids=corr[mask].astype(np.int64), ts=ts[mask], pid=pid_arr[mask],
                             tid=tid_arr[mask], start=start, cat="ac2g")

    # ------------------------------------------------------------------ per kind
    def write_kernels(self, k: np.ndarray, ext: _ExternalIds, flow_end: np.ndarray) -> KernelTable:
        if not len(k):
            return KernelTable.empty()
        start, end = self._epoch(k["_start_timestamp"]), self._epoch(k["_end_timestamp"])
        pid = self._device_index(k["_device_uuid"])
        tid = k["_sycl_queue_id"].astype(np.int64)
        name_ids, _ = self._intern_ptrs(k["_name"])
        corr = k["_correlation_id"]
        src_ids, has_src = self._intern_ptrs(k["_source_file_name"])
        args = {"correlation": corr.astype(np.int64)}
        args.update(self._time_args(k, start, [("appended", "_append_timestamp"), ("submitted", "_submit_timestamp"),
                                               ("sycl_task_begin", "_sycl_task_begin_timestamp"),
                                               ("sycl_enqk_begin", "_sycl_enqk_begin_timestamp")]))
        args.update({
            "device": pid, "context": hex_column(k["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(k["_queue_handle"]), "stream": tid,
        })
        if has_src.any():
            args["source_file_name"] = ArgColumn("str", src_ids, has_src)
            args["source_line_number"] = ArgColumn("num", k["_source_line_number"].astype(np.int64), has_src)
        args.update({"kernel_id": k["_kernel_id"].astype(np.int64), "sycl_node_id": k["_sycl_node_id"].astype(np.int64),
                     "sycl_invocation_id": k["_sycl_invocation_id"].astype(np.int64)})
        args.update(self.extra_kernel_args(k["_kernel_id"].astype(np.uint64)))
        self._add(ActivityType.CONCURRENT_KERNEL, name_ids, start, end - start, pid, tid, args, ext.lookup(corr))
        self._device_rows(pid, tid)
        self._flow(flow_end, start, pid, tid, corr, start=False)
        order = np.argsort(k["_kernel_id"], kind="stable")
        names = np.array(self.b.strings.strings, dtype=object)[name_ids]
        return KernelTable(k["_kernel_id"][order], start[order], end[order], pid[order], tid[order], names[order])

    def _copy_common(self, m: np.ndarray, start: np.ndarray, corr: np.ndarray) -> dict:
        args = {"correlation": corr.astype(np.int64)}
        args.update(self._time_args(m, start, [("appended", "_append_timestamp"), ("submitted", "_submit_timestamp")]))
        return args

    def _bandwidth(self, nbytes: np.ndarray, dur: np.ndarray) -> ArgColumn:
        ok = dur > 0
        gbps = np.divide(nbytes.astype(np.float64), dur, out=np.zeros(len(dur)), where=ok)  # bytes/ns == GB/s
        return ArgColumn("num", gbps, ok)

    def write_memcpy(self, m: np.ndarray, ext: _ExternalIds, flow_end: np.ndarray) -> None:
        if not len(m):
            return
        start, end = self._epoch(m["_start_timestamp"]), self._epoch(m["_end_timestamp"])
        pid = self._device_index(m["_device_uuid"])
        tid = m["_sycl_queue_id"].astype(np.int64)
        code = (m["_memcpy_type"].astype(np.int64) << 16) | (m["_mem_src"].astype(np.int64) << 8) | m["_mem_dst"]
        mem, cpy = self.ctx.memory_type_name, self.ctx.memcpy_type_name
        names = self._table_names(code, lambda c: f"Memcpy {cpy(c >> 16)} ({mem((c >> 8) & 0xFF)} -> {mem(c & 0xFF)})")
        corr = m["_correlation_id"]
        call_ids, has_call = self._intern_ptrs(m["_name"])
        nbytes = m["_bytes"].astype(np.int64)
        args = self._copy_common(m, start, corr)
        args.update({
            "device": pid, "context": hex_column(m["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(m["_queue_handle"]), "stream": tid, "l0 call": ArgColumn("str", call_ids, has_call),
            "memory opration id": m["_mem_op_id"].astype(np.int64),  # sic: Kineto's key
            "src memory": self._memory_column(m["_mem_src"]),
            "dst memory": self._memory_column(m["_mem_dst"]),
            "bytes": nbytes, "memory bandwidth (GB/s)": self._bandwidth(nbytes, end - start),
        })
        self._add(ActivityType.GPU_MEMCPY, names, start, end - start, pid, tid, args, ext.lookup(corr))
        self._device_rows(pid, tid)
        self._flow(flow_end, start, pid, tid, corr, start=False)

    def write_p2p(self, m: np.ndarray, ext: _ExternalIds, flow_end: np.ndarray) -> None:
        if not len(m):
            return
        start, end = self._epoch(m["_start_timestamp"]), self._epoch(m["_end_timestamp"])
        src = self._device_index(m["_src_uuid"])
        dst = self._device_index(m["_dst_uuid"])
        tid = m["_sycl_queue_id"].astype(np.int64)
        names = self._table_names(m["_memcpy_type"], lambda c: f"Memcpy {self.ctx.memcpy_type_name(c)} (P2P)")
        corr = m["_correlation_id"]
        nbytes = m["_bytes"].astype(np.int64)
        args = {"fromDevice": src, "toDevice": dst, "context": hex_column(m["_context_handle"]), "sycl queue": tid,
                "l0 queue": hex_column(m["_queue_handle"]), "stream": tid, "correlation": corr.astype(np.int64),
                "memory opration id": m["_mem_op_id"].astype(np.int64), "bytes": nbytes,
                "memory bandwidth (GB/s)": self._bandwidth(nbytes, end - start)}
        self._add(ActivityType.GPU_MEMCPY, names, start, end - start, src, tid, args, ext.lookup(corr))
        self._device_rows(src, tid)
        self._flow(flow_end, start, src, tid, corr, start=False)

    def write_fill(self, f: np.ndarray, ext: _ExternalIds, flow_end: np.ndarray) -> None:
        if not len(f):
            return
        start, end = self._epoch(f["_start_timestamp"]), self._epoch(f["_end_timestamp"])
        pid = self._device_index(f["_device_uuid"])
        tid = f["_sycl_queue_id"].astype(np.int64)
        # Kineto's name: "Memset (<value> -> <memory type>)".
        code = (f["_value_for_set"].astype(np.uint64) << np.uint64(8)) | f["_mem_type"].astype(np.uint64)
        names = self._table_names(code, lambda c: f"Memset ({c >> 8} -> {self.ctx.memory_type_name(c & 0xFF)})")
        corr = f["_correlation_id"]
        call_ids, has_call = self._intern_ptrs(f["_name"])
        nbytes = f["_bytes"].astype(np.int64)
        args = self._copy_common(f, start, corr)
        args.update({
            "device": pid, "context": hex_column(f["_context_handle"]), "sycl queue": tid,
            "l0 queue": hex_column(f["_queue_handle"]), "stream": tid, "l0 call": ArgColumn("str", call_ids, has_call),
            "memory opration id": f["_mem_op_id"].astype(np.int64), "bytes": nbytes,
            "value": f["_value_for_set"].astype(np.int64),
            "memory bandwidth (GB/s)": self._bandwidth(nbytes, end - start),
        })
        self._add(ActivityType.GPU_MEMSET, names, start, end - start, pid, tid, args, ext.lookup(corr))
        self._device_rows(pid, tid)
        self._flow(flow_end, start, pid, tid, corr, start=False)

    def write_sync(self, s: np.ndarray, ext: _ExternalIds, flow_end: np.ndarray) -> None:
        if not len(s):
            return
        start, end = self._epoch(s["_start_timestamp"]), self._epoch(s["_end_timestamp"])
        tid = s["_thread_id"].astype(np.int64)
        names = self._api_name_ids(s["_api_group"], s["_api_id"])
        corr = s["_correlation_id"]
        # Event handles and correlation stay in args so inter-stream dependencies can be resolved later.
        args = {"correlation": corr.astype(np.int64), "Type": self._str_column(list(pti.SYNC_TYPES), s["_synch_type"]),
                "Context_handle": hex_column(s["_context_handle"]), "Queue_handle": hex_column(s["_queue_handle"]),
                "Event_handle": hex_column(s["_event_handle"]),
                "Number_wait_events": s["_number_wait_events"].astype(np.int64),
                "Return_code": s["_return_code"].astype(np.int64)}
        args.update(sync_dependency_args(self.b, s, start, OVERHEAD_PID, tid))
        self._add(ActivityType.XPU_SYNC, names, start, end - start, OVERHEAD_PID, tid, args, ext.lookup(corr))
        self._flow(flow_end, start, OVERHEAD_PID, tid, corr, start=False)
        self._device_pids.add(OVERHEAD_PID)

    def runtime_threads(self, rt: np.ndarray, drv: np.ndarray, ext: _ExternalIds) -> np.ndarray:
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
        corr = rt["_correlation_id"][missing].astype(np.int64)
        fill = np.zeros(len(corr), np.int64)
        drv_known = drv["_thread_id"] != 0
        if drv_known.any():
            fill = _threads_by_correlation(drv["_correlation_id"][drv_known].astype(np.int64),
                                           drv["_thread_id"][drv_known].astype(np.int64), corr)
        from_driver = int(np.count_nonzero(fill))
        left = np.flatnonzero(fill == 0)
        if len(left) and self.range_threads is not None:
            fill[left] = self.range_threads.lookup(ext.lookup(corr[left]))
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

    def write_api(self, a: np.ndarray, ext: _ExternalIds, cat: ActivityType, flow_mask: np.ndarray,
                  start: bool, tid: np.ndarray | None = None) -> None:
        if not len(a):
            return
        ts, end = self._epoch(a["_start_timestamp"]), self._epoch(a["_end_timestamp"])
        pid = a["_process_id"].astype(np.int64)
        tid = a["_thread_id"].astype(np.int64) if tid is None else tid
        names = self._api_name_ids(a["_api_group"], a["_api_id"])
        corr = a["_correlation_id"]
        self._add(cat, names, ts, end - ts, pid, tid, {"correlation": corr.astype(np.int64)}, ext.lookup(corr))
        self._flow(flow_mask, ts, pid, tid, corr, start=start)

    def write_overhead(self, o: np.ndarray) -> None:
        if not len(o):
            return
        ts, end = self._epoch(o["_overhead_start_timestamp_ns"]), self._epoch(o["_overhead_end_timestamp_ns"])
        names = self._table_names(o["_overhead_kind"], partial(pti.table_name, pti.OVERHEAD_NAMES))
        cost = o["_overhead_duration_ns"].astype(np.int64)
        span = end - ts
        occ = np.divide(cost * 100.0, span, out=np.zeros(len(span)), where=span > 0)
        args = {"overhead cost": cost, "overhead occupancy": [f"{v:.0f}%" for v in occ.tolist()],
                "overhead count": o["_overhead_count"].astype(np.int64)}
        self._add(ActivityType.OVERHEAD, names, ts, span, OVERHEAD_PID, o["_overhead_thread_id"].astype(np.int64),
                  args)
        self._device_pids.add(OVERHEAD_PID)

    def write_comms(self, c: np.ndarray) -> None:
        if not len(c):
            return
        ts, end = self._epoch(c["_start_timestamp"]), self._epoch(c["_end_timestamp"])
        name_ids = self._interned(c["_name"], lambda p: f"xccl::{self.ctx.strings(p)}")
        args = {"Communicator_id": c["_communicator_id"].astype(np.int64), "send bytes": c["_send_size"].astype(np.int64),
                "recv bytes": c["_recv_size"].astype(np.int64)}
        self._add(ActivityType.COLLECTIVE_COMM, name_ids, ts, end - ts,
                  c["_process_id"].astype(np.int64), c["_thread_id"].astype(np.int64), args)

    def _process_rows(self) -> None:
        for d in sorted(self._device_pids):
            if d == OVERHEAD_PID:
                self.b.set_process_name(d, "XPU Sync and Overhead", sort_index=OVERHEAD_SORT_INDEX)
            else:
                name = self.ctx.device_names.get(d, f"XPU {d}")
                self.b.set_process_name(d, name, label=f"XPU {d}", sort_index=DEVICE_SORT_BASE + d)


def write_records(records: DecodedRecords, ctx: RecordContext, builder: TraceBuilder,
                  window: ProcessWindow | None, types: frozenset[ActivityType], *,
                  release_records: bool = False, range_threads: RangeThreads | None = None) -> EmitResult:
    """Write decoded PTI records into ``builder`` (see the module docstring for the conventions).
    ``release_records``: ``records`` is emptied as its kinds are written (the caller is done with it).
    ``range_threads``: the ranges' threads by correlation id (else the window's)."""
    return RecordWriter(ctx, builder, window, types, release_records=release_records,
                        range_threads=range_threads).write(records)
