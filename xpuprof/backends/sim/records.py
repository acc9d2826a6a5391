"""The simulated timeline as one vendor's records, written by that vendor's real emit stage.

``SIM_FLAVOURS`` (``sim_vendor`` picks one) says which vendor: the sim lays its timeline out as the
record columns that vendor's records stage produces (PTI's views, CUPTI's activity records,
rocprofiler-sdk's buffer records: ``xpu_records``, ``cuda_records``, ``hip_records``) and hands them to
the vendor's ``Emitter`` (``backends/<vendor>/emit.py``), with its per-kernel metrics as that vendor's
metric collection delivers them. This module writes no row itself: whatever our real backend for
the vendor writes, the sim's trace holds, row for row.

Shared here: the flavours, the simulated device's properties, and ``Calls`` (the timeline's runtime
calls as rows) with the correlation ids every flavour gives them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...activity import ActivityType
from .timeline import DEVICE_ID, Timeline

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


@dataclass(frozen=True)
class SimFlavour:
    """Which vendor's trace the sim writes. ``vendor`` is the vendor label of its rows; ``calls`` the
    runtime calls of each role (copy, launch, sync); ``call_ids`` the ids the vendor's records carry for
    them (CUPTI cbid, rocprofiler-sdk HIP operation); ``stream`` the compute stream, ``comm_stream``
    the collectives' (NCCL's and RCCL's own stream; XPU: its own queue)."""

    name: str
    vendor: str
    calls: dict
    call_ids: dict
    stream: int
    comm_stream: int


SIM_FLAVOURS = {
    "xpu": SimFlavour("xpu", "xpu", {"copy": "urEnqueueUSMMemcpy", "launch": "urEnqueueKernelLaunch",
                                     "sync": "urQueueFinish"}, {"copy": 1, "launch": 2, "sync": 3}, 1, 2),
    # cbids of cudaMemcpyAsync_v3020, cudaLaunchKernel_v7000, cudaStreamSynchronize_v3020
    "cuda": SimFlavour("cuda", "cuda", {"copy": "cudaMemcpyAsync", "launch": "cudaLaunchKernel",
                                        "sync": "cudaStreamSynchronize"}, {"copy": 41, "launch": 211, "sync": 131}, 7,
                       20),
    # rocprofiler-sdk's ROCPROFILER_HIP_RUNTIME_API_ID_* of these calls (hip/runtime_api_id.h)
    "hip": SimFlavour("hip", "rocm", {"copy": "hipMemcpyAsync", "launch": "hipLaunchKernel",
                                      "sync": "hipStreamSynchronize"}, {"copy": 268, "launch": 214, "sync": 346}, 1,
                      2),
}
ROLES = ("copy", "launch", "sync")
SYNC_TYPES = frozenset({ActivityType.CUDA_SYNC, ActivityType.XPU_SYNC})


@dataclass
class Calls:
    """The timeline's runtime calls, one row each: the copies, then the launches, then the syncs
    (each in launch order). ``launch``: the timeline row a call belongs to. Correlation ids are the
    simulated runtime's: 1 + 3 i for launch i's launch call, + 1 for its copy, + 2 for its sync."""

    role: np.ndarray  # index into ROLES
    launch: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray
    tid: np.ndarray
    ext: np.ndarray

    @classmethod
    def of(cls, t: Timeline) -> "Calls":
        rows = [np.flatnonzero(t.has_copy), np.arange(len(t)), np.flatnonzero(t.has_sync)]
        launch = np.concatenate(rows).astype(np.int64)
        role = np.concatenate([np.full(len(r), i, np.int64) for i, r in enumerate(rows)])
        ts = np.concatenate([t.copy_ts[rows[0]], t.launch_ts, t.sync_ts[rows[2]]]).astype(np.int64)
        end = np.concatenate([t.copy_ts[rows[0]] + t.copy_dur[rows[0]], t.launch_ts + t.launch_dur,
                              t.sync_end[rows[2]]]).astype(np.int64)
        corr = t.corr_launch[launch] + (role == 0) * 1 + (role == 2) * 2
        return cls(role, launch, ts, end - ts, corr.astype(np.int64), np.asarray(t.tid, np.int64)[launch],
                   np.asarray(t.ext, np.int64)[launch])

    def __len__(self) -> int:
        return len(self.role)


def emitted_types(types: frozenset[ActivityType]) -> frozenset[ActivityType]:
    """The session's selection as the vendor's emitter reads it: a sync selection under either
    name (``cuda_sync``, ``xpu_sync``) selects the syncs of every flavour."""
    return types | SYNC_TYPES if types & SYNC_TYPES else types


def kernel_streams(t: Timeline, flavour: SimFlavour) -> np.ndarray:
    """Each kernel's stream: the compute stream, or the communication stream for a collective."""
    return np.where(t.comm, flavour.comm_stream, flavour.stream).astype(np.int64)


def name_pointers(names: list[str], base: int) -> tuple[np.ndarray, dict[int, str]]:
    """A made-up pointer per distinct name (from ``base``, 16 bytes apart) and the table behind them,
    as a records stage resolves a record's name pointer."""
    uniq, codes = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True) if len(names) else (
        np.zeros(0, str), np.zeros(0, np.int64))
    ptrs = base + 16 * np.arange(len(uniq), dtype=np.int64)
    return ptrs[codes.reshape(-1)], {int(p): str(n) for p, n in zip(ptrs.tolist(), uniq.tolist())}
