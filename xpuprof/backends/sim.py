"""A deterministic simulated accelerator, for demos and end-to-end pipeline tests.

Every innermost host range (``record_function``) recorded while the session runs "launches"
work: runtime calls on the host thread inside the range (a launch; every 4th range a
host-to-device copy first, every 8th a stream synchronize after) and a kernel (and the copy) on a
simulated device with one in-order queue. Device timing, kernel names and per-kernel metrics come
from a seeded generator, so the same host activity always gives the same device activity. Traces
say ``"backend": "sim"``; the registry never selects this backend unless it is named
(``backends=["sim"]``).

The timeline is physically plausible, whatever the threads and range lengths:
- every call lies inside the range it was made in (the ranges are the user's real timestamps);
  calls last what real ones do (``LAUNCH_CALL_NS``, ...) where the range has room and share a
  shorter range equally; a range too short to give each call ``MIN_CALL_NS`` drops its copy, then
  its sync; the launch stays (a range under ``MIN_CALL_NS`` gets a shorter launch call);
- the queue runs work in the order the calls were made, across threads, and no item starts before
  the call that submitted it;
- a sync call returns after everything submitted before it (any thread's) has finished. When the
  queue could not drain before the sync's range ends, the device work since the previous sync is
  compressed (durations, gaps and launch latency scaled down together) until it does.

``sim_vendor`` picks which vendor's trace this is (``SIM_FLAVOURS``): call names, categories,
rows and args as our real backend for that vendor writes them.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..activity import ActivityType
from ..clock import BASE_TIME_NS, MONOTONIC_TO_EPOCH_NS
from ..host.annotations import Int64Log, log_array
from ..trace.builder import ArgColumn, hex_column
from .base import Backend, BackendError, ProbeResult, ProcessWindow, Session
from .cuda.occupancy import occupancy_args

DEVICE_ID = 0
COPY_EVERY = 4
SYNC_EVERY = 8

# Host calls, as long as real ones (a cudaLaunchKernel takes a few µs); a range too short for them
# shares its time equally between its calls, each at least MIN_CALL_NS (else the copy, then the sync
# is left out): HTA rounds a call's start up and its end down to whole µs, so a shorter call can
# become 0 µs there, and HTA leaves its kernel off the critical-path graph.
COPY_CALL_NS = 5_000
LAUNCH_CALL_NS = 4_000
SYNC_CALL_NS = 2_000  # a synchronize on a queue that is already empty
MIN_CALL_NS = 2_000
# Device side: an item may start LAUNCH_LATENCY_NS after its call returns (an idle device), with a
# small idle gap before each item, as on real queues; a sync call returns SYNC_RETURN_NS after the
# last item it waits for ends. Compression keeps items at least MIN_ITEM_NS long.
LAUNCH_LATENCY_NS = 2_000
QUEUE_GAP_NS = 800
SYNC_RETURN_NS = 400
SYNC_ROW_INSET_NS = 100  # the device-side sync row lies this far inside its call at both ends
MIN_ITEM_NS = 1
_NEVER = np.iinfo(np.int64).min // 4  # "no work yet": far before any timestamp, safe to add to

# (kernel name, base duration ns, grid x, bytes read per launch)
KERNELS = (
    ("sim_gemm_f32_128x128", 48_000, 512, 6 << 20),
    ("sim_elementwise_add_f32", 9_000, 1024, 8 << 20),
    ("sim_softmax_f32", 14_000, 256, 2 << 20),
    ("sim_layernorm_f32", 12_000, 256, 2 << 20),
    ("sim_reduce_sum_f32", 7_000, 128, 4 << 20),
)
BLOCK = (256, 1, 1)
REGISTERS_PER_THREAD = 64

# The metrics this device can count, with units (ExperimentalConfig.profiler_metrics picks some).
METRICS: dict[str, str] = {
    "GpuTime": "ns",
    "GpuCoreClocks": "cycles",
    "AvgGpuCoreFrequencyMHz": "MHz",
    "XVE_ACTIVE": "percent",
    "XVE_STALL": "percent",
    "GPU_MEMORY_BYTE_READ": "bytes",
    "GPU_MEMORY_BYTE_WRITE": "bytes",
}

DEVICE_PROPERTIES = {
    "id": DEVICE_ID, "name": "xpuprof simulated accelerator", "backend": "sim",
    "totalGlobalMem": 16 << 30, "numSms": 64, "maxThreadsPerBlock": 1024, "warpSize": 16,
    "sharedMemPerBlock": 64 << 10, "maxComputeUnits": 512, "clockRateMHz": 1600,
}
# What the CUDA flavour's occupancy args are computed from (Kineto's DeviceProperties keys).
CUDA_DEVICE_PROPERTIES = {
    **DEVICE_PROPERTIES, "warpSize": 32, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
    "sharedMemPerMultiprocessor": 228 << 10, "maxBlocksPerMultiProcessor": 32, "computeMajor": 9, "computeMinor": 0,
    "regsPerBlock": 65536,
}

_METRIC_ACTIVITIES = frozenset({ActivityType.GPU_PM_COUNTER, ActivityType.XPU_SCOPE_PROFILER,
                                ActivityType.HARDWARE_COUNTERS})


@dataclass(frozen=True)
class SimFlavour:
    """Which vendor's trace the sim writes. ``vendor`` picks the categories our real backend for that
    vendor writes (xpu_runtime, cuda_runtime, ...); ``call_ids`` are the ids that backend writes in
    the calls' args (CUPTI cbid, rocprofiler HIP operation); ``stream`` the device row."""

    name: str
    vendor: str
    calls: dict
    call_ids: dict
    stream: int


SIM_FLAVOURS = {
    "xpu": SimFlavour("xpu", "xpu", {"copy": "urEnqueueUSMMemcpy", "launch": "urEnqueueKernelLaunch",
                                     "sync": "urQueueFinish"}, {}, 1),
    # cbids of cudaMemcpyAsync_v3020, cudaLaunchKernel_v7000, cudaStreamSynchronize_v3020
    "cuda": SimFlavour("cuda", "cuda", {"copy": "cudaMemcpyAsync", "launch": "cudaLaunchKernel",
                                        "sync": "cudaStreamSynchronize"}, {"copy": 41, "launch": 211, "sync": 131}, 7),
    # rocprofiler-sdk's ROCPROFILER_HIP_RUNTIME_API_ID_* of these calls (hip/runtime_api_id.h)
    "hip": SimFlavour("hip", "rocm", {"copy": "hipMemcpyAsync", "launch": "hipLaunchKernel",
                                      "sync": "hipStreamSynchronize"}, {"copy": 268, "launch": 214, "sync": 346}, 1),
}


# ---------------------------------------------------------------------------------- the model
@dataclass
class HostCalls:
    """Per range: which calls it makes and when (epoch ns). ``sync_return`` is the earliest the sync
    call may return (its own length on an empty queue); the queue may keep it longer."""

    has_copy: np.ndarray
    has_sync: np.ndarray
    copy_ts: np.ndarray
    copy_dur: np.ndarray
    launch_ts: np.ndarray
    launch_dur: np.ndarray
    sync_ts: np.ndarray
    sync_return: np.ndarray


def plan_host_calls(enter: np.ndarray, exit_: np.ndarray, want_copy: np.ndarray, want_sync: np.ndarray) -> HostCalls:
    """Calls inside each range, one after the other: copy, launch, sync. A range long enough for
    their real lengths spreads its spare time around them (an eighth before the first call, an eighth
    between copy and launch, a quarter before the sync, the rest after); a shorter one splits its time
    equally between them, back to back."""
    span = np.maximum(exit_ - enter, 0)
    has_copy = want_copy & (span >= MIN_CALL_NS * (2 + want_sync))  # left out first: the copy, then the sync
    has_sync = want_sync & (span >= MIN_CALL_NS * (2 + has_copy))
    calls = 1 + has_copy + has_sync
    nominal = LAUNCH_CALL_NS + COPY_CALL_NS * has_copy + SYNC_CALL_NS * has_sync
    roomy = span >= nominal
    spare = np.where(roomy, span - nominal, 0)
    share = span // calls
    copy_dur = np.where(roomy, COPY_CALL_NS, share) * has_copy
    launch_dur = np.where(roomy, LAUNCH_CALL_NS, share)
    sync_dur = np.where(roomy, SYNC_CALL_NS, share) * has_sync
    copy_ts = enter + spare // 8
    launch_ts = copy_ts + copy_dur + (spare // 8) * has_copy
    sync_ts = launch_ts + launch_dur + (spare // 4) * has_sync
    return HostCalls(has_copy, has_sync, copy_ts, copy_dur, launch_ts, launch_dur, sync_ts,
                     sync_ts + sync_dur)


def _in_order(submit, latency, dur, gap, free_at: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of items on an in-order queue: start_j = max(submit_j + latency_j,
    end_{j-1}) + gap_j, the first not before ``free_at``. ``scale`` shrinks latency, duration and gap."""
    if scale != 1.0:
        latency = (latency * scale).astype(np.int64)
        dur = np.maximum((dur * scale).astype(np.int64), MIN_ITEM_NS)
        gap = (gap * scale).astype(np.int64)
    work = gap + dur
    done = np.cumsum(work)
    end = done + np.maximum(free_at, np.maximum.accumulate(submit + latency - (done - work)))
    return end - dur, end


def run_queue(submit, latency, dur, gap, sync_ts, sync_deadline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items (sorted by submission) on one in-order queue, each sync waiting for everything submitted
    at or before its call (``sync_ts`` sorted). Returns (start, end, drained): ``drained[s]`` is when
    the last item sync ``s`` waits for ends (``_NEVER``: none), at most ``sync_deadline[s]`` when the
    queue can be compressed that far (see the module docstring)."""
    waits_for = np.searchsorted(submit, sync_ts, side="right")  # items submitted at or before each sync
    # A later sync (another thread's) with an earlier deadline bounds this one too, leaving its own
    # items room to run: deadline_s = min over s' >= s of (deadline_s' - MIN_ITEM_NS * items between).
    key = sync_deadline - MIN_ITEM_NS * waits_for
    deadline = np.minimum.accumulate(key[::-1])[::-1] + MIN_ITEM_NS * waits_for
    start, end = _in_order(submit, latency, dur, gap, _NEVER)
    last = np.maximum(waits_for - 1, 0)
    if len(end) and ((waits_for > 0) & (end[last] > deadline)).any():
        start, end = _compressed(submit, latency, dur, gap, waits_for, deadline)
    drained = np.where(waits_for > 0, end[last] if len(end) else _NEVER, _NEVER)
    return start, end, drained


def _compressed(submit, latency, dur, gap, waits_for, deadline) -> tuple[np.ndarray, np.ndarray]:
    """The queue segment by segment (the items each sync waits for beyond the previous one's), each
    scaled as little as needed (bisection on the scale) to end by its sync's deadline."""
    start, end = np.empty_like(submit), np.empty_like(submit)
    free, pos = _NEVER, 0
    for stop, limit in zip(waits_for.tolist() + [len(submit)], deadline.tolist() + [None]):
        if stop <= pos:
            continue
        seg = slice(pos, stop)
        args = (submit[seg], latency[seg], dur[seg], gap[seg], free)
        st, en = _in_order(*args)
        if limit is not None and en[-1] > limit:
            lo, hi = 0.0, 1.0
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _in_order(*args, mid)[1][-1] <= limit else (lo, mid)
            st, en = _in_order(*args, lo)
        start[seg], end[seg] = st, en
        free, pos = int(en[-1]), stop
    return start, end


# ---------------------------------------------------------------------------------- the session
class SimSession(Session):
    """Collects host range enter/exit marks; ``process`` turns them into simulated device work."""

    def __init__(self, activity_types: frozenset[ActivityType], metrics: list[str], seed: int,
                 flavour: "SimFlavour | None" = None) -> None:
        self.flavour = flavour or SIM_FLAVOURS["xpu"]
        self.types = activity_types
        self.metrics = metrics
        self.seed = seed
        # Marks (cid, native tid, monotonic ns, parent cid) on enter and (-cid, tid, ns, 0) on exit,
        # written by record_function in C while the recorder is installed (between this session's
        # start and stop): no call per range. The parent is the enclosing range of the entering
        # context (an asyncio task's, a thread's), so leaves are found whatever the interleaving.
        self.correlation_log = Int64Log(4)
        self._pushed = threading.local()  # push/pop_correlation_id callers: each thread's open ids
        self._start_ns = 0
        self._stop_ns = 0
        self._running = False
        self._dropped: dict[str, int] = {}
        self._errors: list[str] = []

    def start(self) -> None:
        self.correlation_log.clear()
        self._dropped = {}
        self._start_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS
        self._running = True

    def stop(self) -> None:
        self._running = False
        self._stop_ns = time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS

    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        stack = self._pushed.__dict__.setdefault("ids", [])
        if self._running:
            self.correlation_log.append(int(correlation_id), threading.get_native_id(), time.monotonic_ns(),
                                        stack[-1] if stack else 0)
        stack.append(int(correlation_id))

    def pop_correlation_id(self, user: bool = False) -> None:
        stack = self._pushed.__dict__.setdefault("ids", [])
        cid = stack.pop() if stack else 0
        if self._running and cid:
            self.correlation_log.append(-cid, threading.get_native_id(), time.monotonic_ns(), 0)

    # ------------------------------------------------------------------ processing
    def _leaf_ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(external id, tid, enter ns, exit ns) of ranges no other range names as its parent, in enter
        order; a range exited out of order, on another thread or never (still open at stop: it ends
        there) is paired by its id."""
        marks = log_array(self.correlation_log)
        if not len(marks):
            e = np.array([], np.int64)
            return e, e, e, e
        v = marks[:, 0]
        enters = marks[v > 0]
        exits = marks[v < 0]
        cid, tid, t0, parent = enters[:, 0], enters[:, 1], enters[:, 2], enters[:, 3]
        t1 = np.full(len(cid), self._stop_ns - MONOTONIC_TO_EPOCH_NS, np.int64)
        order = np.argsort(cid, kind="stable")
        at = np.searchsorted(cid[order], -exits[:, 0])
        found = at < len(cid)
        found[found] = cid[order][at[found]] == -exits[found, 0]
        t1[order[at[found]]] = exits[found, 2]
        leaf = ~np.isin(cid, parent[parent > 0])
        rows = np.flatnonzero(leaf)
        rows = rows[np.lexsort((cid[rows], t0[rows]))]
        return (cid[rows], tid[rows], t0[rows] + MONOTONIC_TO_EPOCH_NS,
                np.maximum(t1[rows], t0[rows]) + MONOTONIC_TO_EPOCH_NS)

    def process(self, builder, window: ProcessWindow) -> None:
        ext, tid, enter, exit_ = self._leaf_ranges()
        inside = window.contains(enter)
        if (~inside).any():
            self._dropped["out of window"] = int((~inside).sum())
            ext, tid, enter, exit_ = ext[inside], tid[inside], enter[inside], exit_[inside]
        n = len(ext)
        if n == 0:
            return
        rng = np.random.default_rng(self.seed)
        idx = np.arange(n)
        kind = idx % len(KERNELS)
        k_dur = (np.array([k[1] for k in KERNELS], np.int64)[kind] * rng.uniform(0.85, 1.15, n)).astype(np.int64)
        host = plan_host_calls(enter, exit_, idx % COPY_EVERY == 0, idx % SYNC_EVERY == SYNC_EVERY - 1)
        copy_bytes = (np.array([k[3] for k in KERNELS], np.int64)[kind] // 4) * host.has_copy
        copy_dur = np.where(host.has_copy, 2_000 + copy_bytes // 20, 0)  # ~20 GB/s

        # The queue: copies and kernels in the order their calls were made (any thread).
        c_rows = np.flatnonzero(host.has_copy)
        submit = np.concatenate([host.copy_ts[c_rows], host.launch_ts])
        latency = np.concatenate([host.copy_dur[c_rows], host.launch_dur]) + LAUNCH_LATENCY_NS
        dur = np.concatenate([copy_dur[c_rows], k_dur])
        order = np.lexsort((np.arange(len(submit)), submit))
        s_rows = np.flatnonzero(host.has_sync)
        s_order = s_rows[np.lexsort((s_rows, host.sync_ts[s_rows]))]
        start, end, drained = run_queue(submit[order], latency[order], dur[order], np.full(len(order), QUEUE_GAP_NS),
                                        host.sync_ts[s_order], exit_[s_order] - SYNC_RETURN_NS)
        item_start, item_end = np.empty_like(start), np.empty_like(end)
        item_start[order], item_end[order] = start, end
        nc = len(c_rows)
        c_start = np.zeros(n, np.int64)
        c_end = np.zeros(n, np.int64)
        c_start[c_rows], c_end[c_rows] = item_start[:nc], item_end[:nc]
        k_start, k_end = item_start[nc:], item_end[nc:]
        sync_end = host.sync_return.copy()
        sync_end[s_order] = np.maximum(host.sync_return[s_order], drained + SYNC_RETURN_NS)

        timeline = Timeline(ext=ext, tid=tid, kind=kind, has_copy=host.has_copy, has_sync=host.has_sync,
                            copy_ts=host.copy_ts, copy_dur=host.copy_dur, launch_ts=host.launch_ts,
                            launch_dur=host.launch_dur, sync_ts=host.sync_ts, sync_end=sync_end,
                            copy_start=c_start, copy_end=c_end, copy_bytes=copy_bytes, k_start=k_start, k_end=k_end)
        metrics = self._metric_values(kind, k_end - k_start, rng) if self.metrics else {}
        _WRITERS[self.flavour.name](self, builder, timeline, metrics).write()

    def _metric_values(self, kind, dur, rng) -> dict[str, np.ndarray]:
        n = len(kind)
        freq = 1600.0 * rng.uniform(0.95, 1.0, n)
        active = np.clip(np.array([85.0, 55.0, 62.0, 60.0, 45.0])[kind] + rng.normal(0, 3, n), 0, 100)
        read = np.array([k[3] for k in KERNELS], np.float64)[kind]
        values = {
            "GpuTime": dur.astype(np.float64),
            "GpuCoreClocks": np.round(dur * freq / 1000.0),
            "AvgGpuCoreFrequencyMHz": np.round(freq, 1),
            "XVE_ACTIVE": np.round(active, 2),
            "XVE_STALL": np.round(np.clip(100.0 - active - rng.uniform(5, 15, n), 0, 100), 2),
            "GPU_MEMORY_BYTE_READ": read,
            "GPU_MEMORY_BYTE_WRITE": np.round(read * 0.5),
        }
        return {m: values[m] for m in self.metrics}

    def device_properties(self) -> list[dict[str, Any]]:
        return [dict(CUDA_DEVICE_PROPERTIES if self.flavour.name == "cuda" else DEVICE_PROPERTIES)]

    def metadata(self) -> dict[str, Any]:
        return {"backend": "sim", "sim_seed": self.seed, "sim_vendor": self.flavour.name}

    def errors(self) -> list[str]:
        return list(self._errors)

    def dropped_records(self) -> dict[str, int]:
        return dict(self._dropped)


@dataclass
class Timeline:
    """Everything the writers need, one row per range (epoch ns)."""

    ext: np.ndarray
    tid: np.ndarray
    kind: np.ndarray
    has_copy: np.ndarray
    has_sync: np.ndarray
    copy_ts: np.ndarray
    copy_dur: np.ndarray
    launch_ts: np.ndarray
    launch_dur: np.ndarray
    sync_ts: np.ndarray
    sync_end: np.ndarray
    copy_start: np.ndarray
    copy_end: np.ndarray
    copy_bytes: np.ndarray
    k_start: np.ndarray
    k_end: np.ndarray

    def __len__(self) -> int:
        return len(self.ext)

    @property
    def corr_launch(self) -> np.ndarray:  # the simulated runtime's ids: consecutive per range
        return 1 + 3 * np.arange(len(self.ext))

    @property
    def kernel_names(self) -> list[str]:
        return [KERNELS[k][0] for k in self.kind.tolist()]


# ---------------------------------------------------------------------------------- vendors' rows
class _Writer(ABC):
    """Writes a timeline as one vendor's backend does; subclasses give the rows and args."""

    def __init__(self, session: SimSession, builder, t: Timeline, metrics: dict[str, np.ndarray]) -> None:
        self.s, self.b, self.t, self.metrics = session, builder, t, metrics
        self.f = session.flavour
        self.want = session.types
        self.vendor = session.flavour.vendor
        self.flows = ActivityType.RUNTIME in self.want

    # the parts every vendor shares -------------------------------------------------------
    def write(self) -> None:
        t = self.t
        corr = t.corr_launch
        self.calls("copy", t.has_copy, t.copy_ts, t.copy_dur, corr + 1)
        self.calls("launch", np.ones(len(t), bool), t.launch_ts, t.launch_dur, corr)
        self.calls("sync", t.has_sync, t.sync_ts, t.sync_end - t.sync_ts, corr + 2)
        if ActivityType.GPU_MEMCPY in self.want and t.has_copy.any():
            m = t.has_copy
            self.copies(m, corr[m] + 1)
            self.flow_ends(corr[m] + 1, t.copy_start[m], DEVICE_ID, self.f.stream)
        if ActivityType.CONCURRENT_KERNEL in self.want:
            self.kernels(corr)
            self.flow_ends(corr, t.k_start, DEVICE_ID, self.f.stream)
            if self.metrics:
                self.write_metrics()
        if (ActivityType.GPU_MEMCPY in self.want and t.has_copy.any()) or ActivityType.CONCURRENT_KERNEL in self.want:
            self.device_rows()
        # Sync rows whenever syncs are asked for, under either name (as the XPU backend reads them).
        if (ActivityType.CUDA_SYNC in self.want or ActivityType.XPU_SYNC in self.want) and t.has_sync.any():
            self.syncs(t.has_sync, corr[t.has_sync] + 2)

    def calls(self, role, mask, ts, dur, corr) -> None:
        if not mask.any() or ActivityType.RUNTIME not in self.want:
            return
        k = int(mask.sum())
        self.b.add_slices(names=[self.f.calls[role]] * k, ts=ts[mask], dur=dur[mask], pid=self.b.pid,
                          tid=self.t.tid[mask], cat=ActivityType.RUNTIME, external_id=self.t.ext[mask],
                          vendor=self.vendor, args=self.call_args(role, corr[mask]))
        self.b.add_flows(flow_ids=corr[mask], ts=ts[mask], pid=self.b.pid, tid=self.t.tid[mask], start=True)

    def flow_ends(self, corr, ts, pid, tid) -> None:
        if self.flows and len(corr):
            self.b.add_flows(flow_ids=corr, ts=ts, pid=pid, tid=tid, start=False)

    def slices(self, names, ts, end, pid, tid, cat, args, mask=None) -> None:
        m = np.ones(len(self.t), bool) if mask is None else mask
        self.b.add_slices(names=names, ts=ts, dur=end - ts, pid=pid, tid=tid, cat=cat, external_id=self.t.ext[m],
                          vendor=self.vendor, args=args)

    def launch_geometry(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.t)
        grid = np.stack([np.array([k[2] for k in KERNELS], np.int64)[self.t.kind], np.ones(n, np.int64),
                         np.ones(n, np.int64)], axis=1)
        return grid, np.tile(np.array(BLOCK, np.int64), (n, 1))

    @staticmethod
    def bandwidth(nbytes, dur) -> np.ndarray:
        return nbytes / np.maximum(dur, 1)  # bytes/ns == GB/s

    # per vendor ----------------------------------------------------------------------------
    @abstractmethod
    def call_args(self, role: str, corr: np.ndarray) -> dict:
        """The args of the runtime calls of one role (copy, launch, sync)."""

    @abstractmethod
    def copies(self, m: np.ndarray, corr: np.ndarray) -> None:
        """The copy slices of the ranges in mask ``m``."""

    @abstractmethod
    def kernels(self, corr: np.ndarray) -> None:
        """The kernel slices, one per range (with the metric values in their args where the vendor does)."""

    @abstractmethod
    def syncs(self, m: np.ndarray, corr: np.ndarray) -> None:
        """The sync rows of the ranges in mask ``m`` and their flow ends."""

    @abstractmethod
    def device_rows(self) -> None:
        """Names and order of the device's process and stream rows."""

    @abstractmethod
    def write_metrics(self) -> None:
        """The per-kernel metrics (``self.metrics``) as the vendor's metric collection writes them."""


class _XpuWriter(_Writer):
    """As backends/xpu/emit.py writes PTI's records: rows by SYCL queue, appended/submitted times,
    handles in hex, syncs as Level Zero host synchronizations on pid -1 at the calling thread."""

    CONTEXT, L0_QUEUE = 0x5100000, 0x5200000
    SYNC_CALL = "zeCommandListHostSynchronize"  # urQueueFinish on an immediate command list
    SYNC_PID = -1
    HOST_MEMORY, DEVICE_MEMORY = "Host (Driver Allocated)", "Device"  # intel-pti 1.2.0's wording

    def call_args(self, role, corr) -> dict:
        return {"correlation": corr}

    def _queue_args(self, call_ts, call_dur, start) -> dict:
        # appended to the command list inside the call, submitted right after; never after the item starts
        appended = np.minimum(call_ts + call_dur // 2, start)
        submitted = np.minimum(appended + call_dur // 4, start)
        us = lambda ns: np.round(ns.astype(np.float64) / 1000.0, 3)  # noqa: E731
        return {"appended": us(appended - BASE_TIME_NS), "appended_rel_to_start": us(appended - start),
                "submitted": us(submitted - BASE_TIME_NS), "submitted_rel_to_start": us(submitted - start)}

    def _handles(self, k) -> dict:
        return {"device": np.full(k, DEVICE_ID), "context": hex_column(np.full(k, self.CONTEXT)),
                "sycl queue": np.full(k, self.f.stream), "l0 queue": hex_column(np.full(k, self.L0_QUEUE)),
                "stream": np.full(k, self.f.stream)}

    def copies(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"correlation": corr, **self._queue_args(t.copy_ts[m], t.copy_dur[m], start), **self._handles(k),
                "l0 call": ["zeCommandListAppendMemoryCopy"] * k, "memory opration id": np.flatnonzero(m) + 1,
                "src memory": [self.HOST_MEMORY] * k, "dst memory": [self.DEVICE_MEMORY] * k, "bytes": nbytes,
                "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start)}
        self.slices([f"Memcpy H2D ({self.HOST_MEMORY} -> {self.DEVICE_MEMORY})"] * k, start, end, DEVICE_ID,
                    self.f.stream, ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.t, len(self.t)
        ids = np.arange(1, n + 1)  # PTI's kernel ids, which the scope profiler's records join on
        args = {"correlation": corr, **self._queue_args(t.launch_ts, t.launch_dur, t.k_start), **self._handles(n),
                "kernel_id": ids, "sycl_node_id": ids, "sycl_invocation_id": ids}
        args.update({f"{m}::{METRICS[m]}": v for m, v in self.metrics.items()})  # as the scope profiler's writer
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, self.f.stream, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        ts, end = t.sync_ts[m] + SYNC_ROW_INSET_NS, t.sync_end[m] - SYNC_ROW_INSET_NS
        args = {"correlation": corr, "Type": ["HOST_COMMAND_LIST"] * k,
                "Context_handle": hex_column(np.full(k, self.CONTEXT)),
                "Queue_handle": hex_column(np.full(k, self.L0_QUEUE)),
                "Event_handle": hex_column(np.zeros(k)), "Number_wait_events": np.zeros(k, np.int64),
                "Return_code": np.zeros(k, np.int64)}
        self.slices([self.SYNC_CALL] * k, ts, end, self.SYNC_PID, t.tid[m], ActivityType.XPU_SYNC, args, m)
        self.flow_ends(corr, ts, self.SYNC_PID, t.tid[m])
        self.b.set_process_name(self.SYNC_PID, "XPU Sync and Overhead", sort_index=1_048_576)

    def device_rows(self) -> None:
        q = self.f.stream
        self.b.set_thread_name(DEVICE_ID, q, f"Stream {q}", sort_index=q)
        self.b.set_process_name(DEVICE_ID, f"XPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        t = self.t
        self.b.add_per_kernel_metrics(kernel_names=t.kernel_names, start_ns=t.k_start, end_ns=t.k_end, pid=DEVICE_ID,
                                      tid=self.f.stream, metrics=self.metrics,
                                      units={m: METRICS[m] for m in self.metrics}, counter_name="xpu",
                                      vendor=self.vendor,
                                      extra_args={"kernel_id": np.arange(1, len(t) + 1),
                                                  "queue": hex_column(np.full(len(t), self.L0_QUEUE))})


class _CudaWriter(_Writer):
    """As backends/cuda/decode.py writes CUPTI's records: cbid on calls, Kineto's kernel args with
    occupancy, Stream Sync rows at tid stream + 1000000, metrics as PM-sampling counter tracks."""

    CONTEXT = 1
    SYNC_TID_OFFSET = 1_000_000

    def call_args(self, role, corr) -> dict:
        return {"cbid": np.full(len(corr), self.f.call_ids[role]), "correlation": corr}

    def _graph_args(self, k) -> dict:
        z = np.zeros(k, np.int64)
        return {"graph id": z, "graph node id": z, "channel": z, "channel_type": z}

    def copies(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"device": np.full(k, DEVICE_ID), "context": np.full(k, self.CONTEXT),
                "stream": np.full(k, self.f.stream), "correlation": corr, "bytes": nbytes,
                "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start), **self._graph_args(k)}
        self.slices(["Memcpy HtoD (Pinned -> Device)"] * k, start, end, DEVICE_ID, self.f.stream,
                    ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.t, len(self.t)
        grid, block = self.launch_geometry()
        dev, regs, smem = np.full(n, DEVICE_ID), np.full(n, REGISTERS_PER_THREAD), np.zeros(n, np.int64)
        args = {"queued": np.zeros(n, np.int64), "device": dev, "context": np.full(n, self.CONTEXT),
                "stream": np.full(n, self.f.stream), "correlation": corr, "registers per thread": regs,
                "shared memory": smem,
                **occupancy_args(dev, grid, block, regs, smem, smem, {DEVICE_ID: CUDA_DEVICE_PROPERTIES}),
                "grid": grid, "block": block, **self._graph_args(n), "priority": np.zeros(n, np.int64)}
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, self.f.stream, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        ts, end = t.sync_ts[m] + SYNC_ROW_INSET_NS, t.sync_end[m] - SYNC_ROW_INSET_NS
        row = self.f.stream + self.SYNC_TID_OFFSET
        args = {"cuda_sync_kind": ["Stream Sync"] * k, "stream": np.full(k, self.f.stream), "correlation": corr,
                "device": np.full(k, DEVICE_ID), "context": np.full(k, self.CONTEXT)}
        self.slices(["Stream Sync"] * k, ts, end, DEVICE_ID, row, ActivityType.CUDA_SYNC, args, m)
        self.flow_ends(corr, ts, DEVICE_ID, row)
        self.b.set_thread_name(DEVICE_ID, row, f"stream {self.f.stream} (sync)", sort_index=self.f.stream)

    def device_rows(self) -> None:
        s = self.f.stream
        self.b.set_thread_name(DEVICE_ID, s, f"stream {s} ", sort_index=s)
        self.b.set_process_name(DEVICE_ID, f"GPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        """PM sampling's shape: one counter track per metric on pid "GPU <d> Counters", args {"": v};
        a sample when each kernel starts (its values) and one when it ends (0)."""
        t = self.t
        ts = np.concatenate([t.k_start, t.k_end])
        order = np.argsort(ts, kind="stable")
        pid = f"GPU {DEVICE_ID} Counters"
        for metric, v in self.metrics.items():
            self.b.add_counters(name=metric, ts=ts[order], pid=pid, tid=0, cat=ActivityType.GPU_PM_COUNTER,
                                values={"": np.concatenate([v, np.zeros(len(v))])[order]}, vendor=self.vendor)
        self.b.set_process_name(pid, pid, label=pid, sort_index=5_000_000 + 1000 + DEVICE_ID)


class _HipWriter(_Writer):
    """As backends/rocm/decode.py writes rocprofiler-sdk's records: cid and hip_stream on calls,
    dispatch args (hsa_queue, kind) on kernels, Stream Sync rows spanning the call, counters as
    RocprofCounterApi writes them."""

    HSA_QUEUE = 0x7F0000
    SYNC_TID_OFFSET = 1_000_000

    def call_args(self, role, corr) -> dict:
        args = {"cid": np.full(len(corr), self.f.call_ids[role]), "correlation": corr,
                "hip_stream": np.full(len(corr), self.f.stream)}
        if role == "sync":
            args["sync_type"] = ["Stream Sync"] * len(corr)
        return args

    def copies(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"device": np.full(k, DEVICE_ID), "stream": np.full(k, self.f.stream), "correlation": corr,
                "kind": ["HtoD"] * k, "bytes": nbytes, "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start)}
        self.slices(["Memcpy HtoD (Host -> Device)"] * k, start, end, DEVICE_ID, self.f.stream,
                    ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.t, len(self.t)
        grid, block = self.launch_geometry()
        args = {"device": np.full(n, DEVICE_ID), "stream": np.full(n, self.f.stream),
                "hsa_queue": hex_column(np.full(n, self.HSA_QUEUE)), "correlation": corr,
                "kind": ["Dispatch Kernel"] * n, "grid": grid, "block": block, "shared memory": np.zeros(n, np.int64)}
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, self.f.stream, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.t, int(m.sum())
        row = self.f.stream + self.SYNC_TID_OFFSET
        args = {"sync_type": ["Stream Sync"] * k, "hip_stream": np.full(k, self.f.stream), "correlation": corr,
                "device": np.full(k, DEVICE_ID)}
        self.slices(["Stream Sync"] * k, t.sync_ts[m], t.sync_end[m], DEVICE_ID, row, ActivityType.CUDA_SYNC, args, m)
        self.flow_ends(corr, t.sync_ts[m], DEVICE_ID, row)
        self.b.set_thread_name(DEVICE_ID, row, f"stream {self.f.stream} (sync)", sort_index=row)

    def device_rows(self) -> None:
        s = self.f.stream
        self.b.set_thread_name(DEVICE_ID, s, f"stream {s} ", sort_index=s)
        self.b.set_process_name(DEVICE_ID, f"GPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        t = self.t
        self.b.add_per_kernel_metrics(kernel_names=t.kernel_names, start_ns=t.k_start, end_ns=t.k_end, pid=DEVICE_ID,
                                      tid=self.f.stream, metrics=self.metrics, counter_name="rocm", vendor=self.vendor,
                                      extra_args={"correlation": t.corr_launch,
                                                  "dispatch_id": np.arange(1, len(t) + 1)})


_WRITERS = {"xpu": _XpuWriter, "cuda": _CudaWriter, "hip": _HipWriter}


class SimBackend(Backend):
    name = "sim"
    vendor = "sim"
    description = "deterministic simulated accelerator (demos and pipeline tests; only when named)"

    @classmethod
    def probe(cls) -> ProbeResult:
        return ProbeResult.ok("simulated device (always available; used only when named)")

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return frozenset({ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY,
                          ActivityType.CUDA_SYNC, ActivityType.XPU_SYNC, ActivityType.EXTERNAL_CORRELATION}
                         | _METRIC_ACTIVITIES)

    def configure(self, activity_types, config) -> SimSession | None:
        types = frozenset(activity_types) & self.supported_activities()
        if not types:
            return None
        metrics: list[str] = []
        requested = list(config.experimental.profiler_metrics)
        if requested and types & _METRIC_ACTIVITIES:
            unknown = [m for m in requested if m not in METRICS]
            if unknown:
                raise BackendError(f"the sim backend cannot count {', '.join(map(repr, unknown))}. "
                                   f"Valid metrics: {', '.join(METRICS)}")
            metrics = requested
        seed = config.custom.get("sim_seed", 0)
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise BackendError(f"sim_seed must be an integer, got {seed!r}") from None
        flavour = str(config.custom.get("sim_vendor", "xpu")).strip().lower()
        if flavour not in SIM_FLAVOURS:
            raise BackendError(f"sim_vendor {flavour!r} is not known; valid: {', '.join(SIM_FLAVOURS)}")
        return SimSession(types, metrics, seed, SIM_FLAVOURS[flavour])
