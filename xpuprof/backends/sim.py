"""A deterministic simulated accelerator, for demos and end-to-end pipeline tests.

Every innermost host range (``record_function``) recorded while the session runs "launches"
work: a runtime call on the host thread, a kernel (every 4th range also a host-to-device copy
first, every 8th a stream synchronize after) on a simulated device that runs one stream in
order. Device timing, kernel names and per-kernel metrics come from a seeded generator, so the
same host activity always gives the same device activity. Traces say ``"backend": "sim"``;
the registry never selects this backend unless it is named (``backends=["sim"]``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
import time
from typing import Any

import numpy as np

from ..activity import ActivityType
from ..clock import MONOTONIC_TO_EPOCH_NS
from ..host.annotations import Int64Log, log_array
from .base import Backend, BackendError, ProbeResult, ProcessWindow, Session

DEVICE_ID = 0
COMPUTE_STREAM = 1
# Copies run on the kernels' in-order queue (the model below): on a row of their own, a kernel would
# wait for a copy on another stream with no recorded dependency, which HTA's critical path cannot explain.
COPY_STREAM = COMPUTE_STREAM
SYNC_TID_OFFSET = 1_000_000  # Kineto's Stream Sync rows: tid = stream + 1000000
LAUNCH_LATENCY_NS = 4_000
QUEUE_GAP_NS = 800
COPY_EVERY = 4
SYNC_EVERY = 8

# (kernel name, base duration ns, grid x, bytes read per launch)
KERNELS = (
    ("sim_gemm_f32_128x128", 48_000, 512, 6 << 20),
    ("sim_elementwise_add_f32", 9_000, 1024, 8 << 20),
    ("sim_softmax_f32", 14_000, 256, 2 << 20),
    ("sim_layernorm_f32", 12_000, 256, 2 << 20),
    ("sim_reduce_sum_f32", 7_000, 128, 4 << 20),
)

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

_METRIC_ACTIVITIES = frozenset({ActivityType.GPU_PM_COUNTER, ActivityType.XPU_SCOPE_PROFILER,
                                ActivityType.HARDWARE_COUNTERS})


@dataclass(frozen=True)
class SimFlavour:
    """Which vendor's trace the sim writes: its runtime call names and (through ``vendor``) the
    categories our real backend for that vendor writes (xpu_runtime, cuda_runtime, ...)."""

    name: str
    vendor: str
    calls: dict


SIM_FLAVOURS = {
    "xpu": SimFlavour("xpu", "xpu", {"copy": "urEnqueueUSMMemcpy", "launch": "urEnqueueKernelLaunch",
                                     "sync": "urQueueFinish"}),
    "cuda": SimFlavour("cuda", "cuda", {"copy": "cudaMemcpyAsync", "launch": "cudaLaunchKernel",
                                        "sync": "cudaStreamSynchronize"}),
    "hip": SimFlavour("hip", "rocm", {"copy": "hipMemcpyAsync", "launch": "hipLaunchKernel",
                                      "sync": "hipStreamSynchronize"}),
}


class SimSession(Session):
    """Collects host range enter/exit marks; ``process`` turns them into simulated device work."""

    def __init__(self, activity_types: frozenset[ActivityType], metrics: list[str], seed: int,
                 flavour: "SimFlavour | None" = None) -> None:
        self.flavour = flavour or SIM_FLAVOURS["xpu"]
        self.types = activity_types
        self.metrics = metrics
        self.seed = seed
        # Marks (+cid on enter, -1 on exit, native tid, monotonic ns), written by record_function in C
        # while the recorder is installed (between this session's start and stop): no call per range.
        self.correlation_log = Int64Log(3)
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
        if self._running:
            self.correlation_log.append(int(correlation_id), threading.get_native_id(), time.monotonic_ns())

    def pop_correlation_id(self, user: bool = False) -> None:
        if self._running:
            self.correlation_log.append(-1, threading.get_native_id(), time.monotonic_ns())

    # ------------------------------------------------------------------ processing
    def _leaf_ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(external id, tid, enter ns, exit ns) of ranges with no nested range, in enter order."""
        marks = log_array(self.correlation_log).ravel().tolist()
        stacks: dict[int, list] = {}
        leaves = []
        end_default = self._stop_ns - MONOTONIC_TO_EPOCH_NS
        for i in range(0, len(marks), 3):
            cid, tid, t = marks[i], marks[i + 1], marks[i + 2]
            stack = stacks.setdefault(tid, [])
            if cid > 0:
                if stack:
                    stack[-1][3] = False  # the enclosing range has a child: not a leaf
                stack.append([cid, tid, t, True])
            elif stack:
                c, tt, t0, leaf = stack.pop()
                if leaf:
                    leaves.append((c, tt, t0, t))
        for stack in stacks.values():  # ranges still open at stop end there
            for c, tt, t0, leaf in stack:
                if leaf:
                    leaves.append((c, tt, t0, end_default))
        if not leaves:
            e = np.array([], np.int64)
            return e, e, e, e
        leaves.sort(key=lambda r: r[2])
        arr = np.array(leaves, dtype=np.int64)
        return arr[:, 0], arr[:, 1], arr[:, 2] + MONOTONIC_TO_EPOCH_NS, arr[:, 3] + MONOTONIC_TO_EPOCH_NS

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
        pid, vendor = builder.pid, self.flavour.vendor
        idx = np.arange(n)
        kind = idx % len(KERNELS)
        base = np.array([k[1] for k in KERNELS], np.int64)[kind]
        k_dur = (base * rng.uniform(0.85, 1.15, n)).astype(np.int64)
        names = [KERNELS[k][0] for k in kind.tolist()]
        has_copy = idx % COPY_EVERY == 0
        has_sync = idx % SYNC_EVERY == SYNC_EVERY - 1
        span = np.maximum(exit_ - enter, 4)
        # Host side: runtime calls spread over the range (copy call, launch call, sync call).
        copy_call = enter + span // 8
        launch_call = enter + span // 4
        call_dur = np.maximum(np.minimum(span // 8, 2_000), 1)
        sync_call = enter + span // 2
        # Correlation ids of the simulated runtime: consecutive per record (copy, launch, sync).
        corr_launch = 1 + 3 * idx
        corr_copy, corr_sync = corr_launch + 1, corr_launch + 2
        # Device side: copies and kernels run in order on one queue, each submitted by its own call:
        # start_j = max(call_j + latency, end_{j-1}) + gap. Nothing waits for a later call (causality)
        # and an item only ever waits for the one before it on its stream.
        copy_bytes = (np.array([k[3] for k in KERNELS], np.int64)[kind] // 4) * has_copy
        copy_dur = np.where(has_copy, 2_000 + copy_bytes // 20, 0)  # ~20 GB/s
        k_pos = idx + np.cumsum(has_copy)  # queue position of each kernel; its copy (if any) just before
        c_pos = (k_pos - 1)[has_copy]
        ready = np.empty(n + int(has_copy.sum()), np.int64)
        dur = np.empty_like(ready)
        ready[k_pos], dur[k_pos] = launch_call + LAUNCH_LATENCY_NS, k_dur
        ready[c_pos], dur[c_pos] = copy_call[has_copy] + LAUNCH_LATENCY_NS, copy_dur[has_copy]
        work = QUEUE_GAP_NS + dur  # a small idle gap before each op, as on real queues
        csum = np.cumsum(work)
        item_end = csum + np.maximum.accumulate(ready - (csum - work))
        item_start = item_end - dur
        k_start, end = item_start[k_pos], item_end[k_pos]
        c_start = np.zeros(n, np.int64)
        c_start[has_copy] = item_start[c_pos]
        want = self.types

        def host_calls(mask, ts, corr, name):
            if not mask.any() or ActivityType.RUNTIME not in want:
                return
            builder.add_slices(names=[name] * int(mask.sum()), ts=ts[mask], dur=call_dur[mask], pid=pid,
                               tid=tid[mask], cat=ActivityType.RUNTIME, external_id=ext[mask], vendor=vendor,
                               args={"correlation": corr[mask]})
            builder.add_flows(flow_ids=corr[mask], ts=ts[mask], pid=pid, tid=tid[mask], start=True)

        all_rows = np.ones(n, bool)
        calls = self.flavour.calls
        host_calls(has_copy, copy_call, corr_copy, calls["copy"])
        host_calls(all_rows, launch_call, corr_launch, calls["launch"])
        host_calls(has_sync, sync_call, corr_sync, calls["sync"])
        flows = ActivityType.RUNTIME in want

        if ActivityType.GPU_MEMCPY in want and has_copy.any():
            m = has_copy
            builder.add_slices(names=["Memcpy HtoD (Host -> Device)"] * int(m.sum()), ts=c_start[m], dur=copy_dur[m],
                               pid=DEVICE_ID, tid=COPY_STREAM, cat=ActivityType.GPU_MEMCPY, external_id=ext[m],
                               vendor=vendor, args={"device": np.full(int(m.sum()), DEVICE_ID), "stream": np.full(
                                   int(m.sum()), COPY_STREAM), "correlation": corr_copy[m], "bytes": copy_bytes[m],
                                   "memory bandwidth (GB/s)": np.round(copy_bytes[m] / np.maximum(copy_dur[m], 1), 3)})
            if flows:
                builder.add_flows(flow_ids=corr_copy[m], ts=c_start[m], pid=DEVICE_ID, tid=COPY_STREAM, start=False)

        if ActivityType.GPU_MEMCPY in want or ActivityType.CONCURRENT_KERNEL in want:
            builder.set_thread_name(DEVICE_ID, COMPUTE_STREAM, f"stream {COMPUTE_STREAM} ", sort_index=COMPUTE_STREAM)
        if ActivityType.CONCURRENT_KERNEL in want:
            grid = np.array([k[2] for k in KERNELS], np.int64)[kind]
            builder.add_slices(
                names=names, ts=k_start, dur=k_dur, pid=DEVICE_ID, tid=COMPUTE_STREAM,
                cat=ActivityType.CONCURRENT_KERNEL, external_id=ext, vendor=vendor,
                args={"queued": np.zeros(n, np.int64), "device": np.full(n, DEVICE_ID), "context": np.ones(n, np.int64),
                      "stream": np.full(n, COMPUTE_STREAM), "correlation": corr_launch,
                      "registers per thread": np.full(n, 64), "shared memory": np.full(n, 0),
                      "grid": np.stack([grid, np.ones(n, np.int64), np.ones(n, np.int64)], axis=1),
                      "block": np.tile(np.array([256, 1, 1], np.int64), (n, 1))})
            if flows:
                builder.add_flows(flow_ids=corr_launch, ts=k_start, pid=DEVICE_ID, tid=COMPUTE_STREAM, start=False)
            if self.metrics:
                self._add_metrics(builder, names, k_start, k_start + k_dur, k_dur, kind, rng)

        sync_type = next((t for t in (ActivityType.CUDA_SYNC, ActivityType.XPU_SYNC) if t in want), None)
        if sync_type is not None and has_sync.any():
            m = has_sync
            s_ts = sync_call[m]
            s_dur = np.maximum(end[m] - s_ts, 1_000)
            sync_tid = COMPUTE_STREAM + SYNC_TID_OFFSET
            cnt = int(m.sum())
            builder.add_slices(names=["Stream Sync"] * cnt, ts=s_ts, dur=s_dur, pid=DEVICE_ID, tid=sync_tid,
                               cat=sync_type, external_id=ext[m], vendor=vendor,
                               args={"sync_kind": ["Stream Sync"] * cnt, "stream": np.full(cnt, COMPUTE_STREAM),
                                     "correlation": corr_sync[m], "device": np.full(cnt, DEVICE_ID)})
            if flows:
                builder.add_flows(flow_ids=corr_sync[m], ts=s_ts, pid=DEVICE_ID, tid=sync_tid, start=False)
            builder.set_thread_name(DEVICE_ID, sync_tid, f"stream {COMPUTE_STREAM} (sync)", sort_index=COMPUTE_STREAM)
        builder.set_process_name(DEVICE_ID, f"GPU {DEVICE_ID}", label="sim", sort_index=0x1000000 + DEVICE_ID)

    def _add_metrics(self, builder, names, start, end, dur, kind, rng) -> None:
        n = len(names)
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
        cat = next((t for t in (ActivityType.XPU_SCOPE_PROFILER, ActivityType.GPU_PM_COUNTER,
                                ActivityType.HARDWARE_COUNTERS) if t in self.types), ActivityType.GPU_PM_COUNTER)
        builder.add_per_kernel_metrics(kernel_names=names, start_ns=start, end_ns=end, pid=DEVICE_ID,
                                       tid=COMPUTE_STREAM, metrics={m: values[m] for m in self.metrics},
                                       units={m: METRICS[m] for m in self.metrics}, counter_name="sim", cat=cat,
                                       vendor=self.flavour.vendor)

    def device_properties(self) -> list[dict[str, Any]]:
        return [dict(DEVICE_PROPERTIES)]

    def metadata(self) -> dict[str, Any]:
        return {"backend": "sim", "sim_seed": self.seed, "sim_vendor": self.flavour.name}

    def errors(self) -> list[str]:
        return list(self._errors)

    def dropped_records(self) -> dict[str, int]:
        return dict(self._dropped)


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
