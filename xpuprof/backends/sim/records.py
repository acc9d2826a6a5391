"""Vendor-shaped rows of a simulated timeline: the call names, categories, rows and args our real
backend for each vendor writes (``SIM_FLAVOURS``; ``sim_vendor`` picks one)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ...activity import ActivityType
from ...clock import BASE_TIME_NS
from ...trace.builder.columns import hex_column
from ..cuda.occupancy import occupancy_args
from .timeline import DEVICE_ID, METRICS, SYNC_ROW_INSET_NS, Timeline

BLOCK = (256, 1, 1)
REGISTERS_PER_THREAD = 64

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
    comm_stream: int  # the collectives' stream (NCCL's own stream; XPU: its own queue)


SIM_FLAVOURS = {
    "xpu": SimFlavour("xpu", "xpu", {"copy": "urEnqueueUSMMemcpy", "launch": "urEnqueueKernelLaunch",
                                     "sync": "urQueueFinish"}, {}, 1, 2),
    # cbids of cudaMemcpyAsync_v3020, cudaLaunchKernel_v7000, cudaStreamSynchronize_v3020
    "cuda": SimFlavour("cuda", "cuda", {"copy": "cudaMemcpyAsync", "launch": "cudaLaunchKernel",
                                        "sync": "cudaStreamSynchronize"}, {"copy": 41, "launch": 211, "sync": 131}, 7,
                       20),
    # rocprofiler-sdk's ROCPROFILER_HIP_RUNTIME_API_ID_* of these calls (hip/runtime_api_id.h)
    "hip": SimFlavour("hip", "rocm", {"copy": "hipMemcpyAsync", "launch": "hipLaunchKernel",
                                      "sync": "hipStreamSynchronize"}, {"copy": 268, "launch": 214, "sync": 346}, 1,
                      2),
}


# ---------------------------------------------------------------------------------- vendors' rows
class _Writer(ABC):
    """Writes a timeline as one vendor's backend does; subclasses give the rows and args."""

    def __init__(self, session, builder, timeline: Timeline, metrics: dict[str, np.ndarray]) -> None:
        self.session, self.builder, self.timeline, self.metrics = session, builder, timeline, metrics
        self.flavour = session.flavour
        self.want = session.types
        self.vendor = session.flavour.vendor
        self.flows = ActivityType.RUNTIME in self.want

    # the parts every vendor shares -------------------------------------------------------
    def write(self) -> None:
        t = self.timeline
        corr = t.corr_launch
        self.calls("copy", t.has_copy, t.copy_ts, t.copy_dur, corr + 1)
        self.calls("launch", np.ones(len(t), bool), t.launch_ts, t.launch_dur, corr)
        self.calls("sync", t.has_sync, t.sync_ts, t.sync_end - t.sync_ts, corr + 2)
        if ActivityType.GPU_MEMCPY in self.want and t.has_copy.any():
            m = t.has_copy
            self.copies(m, corr[m] + 1)
            self.flow_ends(corr[m] + 1, t.copy_start[m], DEVICE_ID, self.flavour.stream)
        if ActivityType.CONCURRENT_KERNEL in self.want:
            self.kernels(corr)
            self.flow_ends(corr, t.k_start, DEVICE_ID, self.kernel_streams())
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
        self.builder.add_slices(names=[self.flavour.calls[role]] * k, ts=ts[mask], dur=dur[mask], pid=self.builder.pid,
                                tid=self.timeline.tid[mask], cat=ActivityType.RUNTIME,
                                external_id=self.timeline.ext[mask], vendor=self.vendor,
                                args=self.call_args(role, corr[mask]))
        self.builder.add_flows(flow_ids=corr[mask], ts=ts[mask], pid=self.builder.pid, tid=self.timeline.tid[mask],
                               start=True)

    def flow_ends(self, corr, ts, pid, tid) -> None:
        if self.flows and len(corr):
            self.builder.add_flows(flow_ids=corr, ts=ts, pid=pid, tid=tid, start=False)

    def slices(self, names, ts, end, pid, tid, cat, args, mask=None) -> None:
        m = np.ones(len(self.timeline), bool) if mask is None else mask
        self.builder.add_slices(names=names, ts=ts, dur=end - ts, pid=pid, tid=tid, cat=cat,
                                external_id=self.timeline.ext[m], vendor=self.vendor, args=args)

    def launch_geometry(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.timeline)
        grid = np.stack([np.asarray(self.timeline.grid_x, np.int64), np.ones(n, np.int64), np.ones(n, np.int64)],
                        axis=1)
        return grid, np.tile(np.array(BLOCK, np.int64), (n, 1))

    def kernel_streams(self) -> np.ndarray:
        """Each kernel's stream: the compute stream, or the communication stream for a collective."""
        return np.where(self.timeline.comm, self.flavour.comm_stream, self.flavour.stream).astype(np.int64)

    def stream_rows(self) -> list[int]:
        """The streams this timeline's device work uses (named in the device rows)."""
        return [self.flavour.stream] + ([self.flavour.comm_stream] if self.timeline.comm.any() else [])

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

    def _handles(self, k, streams=None) -> dict:
        q = np.full(k, self.flavour.stream) if streams is None else streams
        return {"device": np.full(k, DEVICE_ID), "context": hex_column(np.full(k, self.CONTEXT)),
                "sycl queue": q, "l0 queue": hex_column(self.L0_QUEUE + (q - self.flavour.stream)), "stream": q}

    def copies(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"correlation": corr, **self._queue_args(t.copy_ts[m], t.copy_dur[m], start), **self._handles(k),
                "l0 call": ["zeCommandListAppendMemoryCopy"] * k, "memory opration id": np.flatnonzero(m) + 1,
                "src memory": [self.HOST_MEMORY] * k, "dst memory": [self.DEVICE_MEMORY] * k, "bytes": nbytes,
                "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start)}
        self.slices([f"Memcpy H2D ({self.HOST_MEMORY} -> {self.DEVICE_MEMORY})"] * k, start, end, DEVICE_ID,
                    self.flavour.stream, ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.timeline, len(self.timeline)
        ids = np.arange(1, n + 1)  # PTI's kernel ids, which the scope profiler's records join on
        streams = self.kernel_streams()
        args = {"correlation": corr, **self._queue_args(t.launch_ts, t.launch_dur, t.k_start),
                **self._handles(n, streams), "kernel_id": ids, "sycl_node_id": ids, "sycl_invocation_id": ids}
        # the submission intervals (unitrace -s) as backends/xpu/kernel_columns writes them
        appended = np.minimum(t.launch_ts + t.launch_dur // 2, t.k_start)
        submitted = np.minimum(appended + t.launch_dur // 4, t.k_start)
        args.update({"queued (us)": (submitted - appended) / 1000.0, "submit to start (us)": (t.k_start - submitted) / 1000.0})
        args.update({f"{m}::{METRICS[m]}": v for m, v in self.metrics.items()})  # as the scope profiler's writer
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, streams, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        ts, end = t.sync_ts[m] + SYNC_ROW_INSET_NS, t.sync_end[m] - SYNC_ROW_INSET_NS
        args = {"correlation": corr, "Type": ["HOST_COMMAND_LIST"] * k,
                "Context_handle": hex_column(np.full(k, self.CONTEXT)),
                "Queue_handle": hex_column(np.full(k, self.L0_QUEUE)),
                "Event_handle": hex_column(np.zeros(k)), "Number_wait_events": np.zeros(k, np.int64),
                "Return_code": np.zeros(k, np.int64)}
        self.slices([self.SYNC_CALL] * k, ts, end, self.SYNC_PID, t.tid[m], ActivityType.XPU_SYNC, args, m)
        self.flow_ends(corr, ts, self.SYNC_PID, t.tid[m])
        self.builder.set_process_name(self.SYNC_PID, "XPU Sync and Overhead", sort_index=1_048_576)

    def device_rows(self) -> None:
        for q in self.stream_rows():
            self.builder.set_thread_name(DEVICE_ID, q, f"Stream {q}", sort_index=q)
        self.builder.set_process_name(DEVICE_ID, f"XPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        t = self.timeline
        self.builder.add_per_kernel_metrics(kernel_names=t.kernel_names, start_ns=t.k_start, end_ns=t.k_end,
                                            pid=DEVICE_ID, tid=self.kernel_streams(), metrics=self.metrics,
                                            units={m: METRICS[m] for m in self.metrics}, counter_name="xpu",
                                            vendor=self.vendor,
                                            extra_args={"kernel_id": np.arange(1, len(t) + 1),
                                                        "queue": hex_column(self.L0_QUEUE + self.kernel_streams()
                                                                            - self.flavour.stream)})


class _CudaWriter(_Writer):
    """As backends/cuda/emit.py writes CUPTI's records: cbid on calls, Kineto's kernel args with
    occupancy, Stream Sync rows at tid stream + 1000000, metrics as PM-sampling counter tracks."""

    CONTEXT = 1
    SYNC_TID_OFFSET = 1_000_000

    def call_args(self, role, corr) -> dict:
        return {"cbid": np.full(len(corr), self.flavour.call_ids[role]), "correlation": corr}

    def _graph_args(self, k) -> dict:
        z = np.zeros(k, np.int64)
        return {"graph id": z, "graph node id": z, "channel": z, "channel_type": z}

    def copies(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"device": np.full(k, DEVICE_ID), "context": np.full(k, self.CONTEXT),
                "stream": np.full(k, self.flavour.stream), "correlation": corr, "bytes": nbytes,
                "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start), **self._graph_args(k)}
        self.slices(["Memcpy HtoD (Pinned -> Device)"] * k, start, end, DEVICE_ID, self.flavour.stream,
                    ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.timeline, len(self.timeline)
        grid, block = self.launch_geometry()
        dev, regs, smem = np.full(n, DEVICE_ID), np.full(n, REGISTERS_PER_THREAD), np.zeros(n, np.int64)
        streams = self.kernel_streams()
        args = {"queued": np.zeros(n, np.int64), "device": dev, "context": np.full(n, self.CONTEXT),
                "stream": streams, "correlation": corr, "registers per thread": regs, "shared memory": smem,
                **occupancy_args(dev, grid, block, regs, smem, smem, {DEVICE_ID: CUDA_DEVICE_PROPERTIES}),
                "grid": grid, "block": block, **self._graph_args(n), "priority": np.zeros(n, np.int64)}
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, streams, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        ts, end = t.sync_ts[m] + SYNC_ROW_INSET_NS, t.sync_end[m] - SYNC_ROW_INSET_NS
        row = self.flavour.stream + self.SYNC_TID_OFFSET
        args = {"cuda_sync_kind": ["Stream Sync"] * k, "stream": np.full(k, self.flavour.stream), "correlation": corr,
                "device": np.full(k, DEVICE_ID), "context": np.full(k, self.CONTEXT)}
        self.slices(["Stream Sync"] * k, ts, end, DEVICE_ID, row, ActivityType.CUDA_SYNC, args, m)
        self.flow_ends(corr, ts, DEVICE_ID, row)
        self.builder.set_thread_name(DEVICE_ID, row, f"stream {self.flavour.stream} (sync)",
                                     sort_index=self.flavour.stream)

    def device_rows(self) -> None:
        for s in self.stream_rows():
            self.builder.set_thread_name(DEVICE_ID, s, f"stream {s} ", sort_index=s)
        self.builder.set_process_name(DEVICE_ID, f"GPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        """PM sampling's shape: one counter track per metric on pid "GPU <d> Counters", args {"": v};
        a sample when each kernel starts (its values) and one when it ends (0)."""
        t = self.timeline
        ts = np.concatenate([t.k_start, t.k_end])
        order = np.argsort(ts, kind="stable")
        pid = f"GPU {DEVICE_ID} Counters"
        for metric, v in self.metrics.items():
            self.builder.add_counters(name=metric, ts=ts[order], pid=pid, tid=0, cat=ActivityType.GPU_PM_COUNTER,
                                      values={"": np.concatenate([v, np.zeros(len(v))])[order]}, vendor=self.vendor)
        self.builder.set_process_name(pid, pid, label=pid, sort_index=5_000_000 + 1000 + DEVICE_ID)


class _HipWriter(_Writer):
    """As backends/rocm/emit.py writes rocprofiler-sdk's records: cid and hip_stream on calls,
    dispatch args (hsa_queue, kind) on kernels, Stream Sync rows spanning the call, counters as
    RocprofCounterApi writes them."""

    HSA_QUEUE = 0x7F0000
    SYNC_TID_OFFSET = 1_000_000

    def call_args(self, role, corr) -> dict:
        args = {"cid": np.full(len(corr), self.flavour.call_ids[role]), "correlation": corr,
                "hip_stream": np.full(len(corr), self.flavour.stream)}
        if role == "sync":
            args["sync_type"] = ["Stream Sync"] * len(corr)
        return args

    def copies(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        start, end, nbytes = t.copy_start[m], t.copy_end[m], t.copy_bytes[m]
        args = {"device": np.full(k, DEVICE_ID), "stream": np.full(k, self.flavour.stream), "correlation": corr,
                "kind": ["HtoD"] * k, "bytes": nbytes, "memory bandwidth (GB/s)": self.bandwidth(nbytes, end - start)}
        self.slices(["Memcpy HtoD (Host -> Device)"] * k, start, end, DEVICE_ID, self.flavour.stream,
                    ActivityType.GPU_MEMCPY, args, m)

    def kernels(self, corr) -> None:
        t, n = self.timeline, len(self.timeline)
        grid, block = self.launch_geometry()
        streams = self.kernel_streams()
        args = {"device": np.full(n, DEVICE_ID), "stream": streams,
                "hsa_queue": hex_column(self.HSA_QUEUE + streams - self.flavour.stream), "correlation": corr,
                "kind": ["Dispatch Kernel"] * n, "grid": grid, "block": block, "shared memory": np.zeros(n, np.int64)}
        self.slices(t.kernel_names, t.k_start, t.k_end, DEVICE_ID, streams, ActivityType.CONCURRENT_KERNEL, args)

    def syncs(self, m, corr) -> None:
        t, k = self.timeline, int(m.sum())
        row = self.flavour.stream + self.SYNC_TID_OFFSET
        args = {"sync_type": ["Stream Sync"] * k, "hip_stream": np.full(k, self.flavour.stream), "correlation": corr,
                "device": np.full(k, DEVICE_ID)}
        self.slices(["Stream Sync"] * k, t.sync_ts[m], t.sync_end[m], DEVICE_ID, row, ActivityType.CUDA_SYNC, args, m)
        self.flow_ends(corr, t.sync_ts[m], DEVICE_ID, row)
        self.builder.set_thread_name(DEVICE_ID, row, f"stream {self.flavour.stream} (sync)", sort_index=row)

    def device_rows(self) -> None:
        for s in self.stream_rows():
            self.builder.set_thread_name(DEVICE_ID, s, f"stream {s} ", sort_index=s)
        self.builder.set_process_name(DEVICE_ID, f"GPU {DEVICE_ID}", label="sim", sort_index=5_000_000 + DEVICE_ID)

    def write_metrics(self) -> None:
        t = self.timeline
        self.builder.add_per_kernel_metrics(kernel_names=t.kernel_names, start_ns=t.k_start, end_ns=t.k_end,
                                            pid=DEVICE_ID, tid=self.kernel_streams(), metrics=self.metrics,
                                            counter_name="rocm", vendor=self.vendor,
                                            extra_args={"correlation": t.corr_launch,
                                                        "dispatch_id": np.arange(1, len(t) + 1)})


_WRITERS = {"xpu": _XpuWriter, "cuda": _CudaWriter, "hip": _HipWriter}


def write_timeline(session, builder, timeline: Timeline, metrics: dict[str, np.ndarray]) -> None:
    """Write ``timeline`` into ``builder`` as the session's flavour's backend would."""
    _WRITERS[session.flavour.name](session, builder, timeline, metrics).write()
