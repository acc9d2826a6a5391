"""Kernel occupancy args as Kineto writes them (``blocks per SM``, ``warps per SM``,
``est. achieved occupancy %``), which TensorBoard's kernel and occupancy views read.

Kineto (libkineto/src/DeviceProperties.cpp, pytorch/kineto 114171df) computes
``blocks per SM = grid blocks / SMs``, ``warps per SM = blocks per SM * block threads / 32`` and
the occupancy from ``cudaOccMaxActiveBlocksPerMultiprocessor`` (NVIDIA's header-only
``cuda_occupancy.h``): ``min(active blocks per SM, blocks per SM) * block threads /
max threads per SM``. Here the active-block limit is the same calculator's four limits, vectorized:
warps, blocks, registers (allocated per warp in units of 256) and shared memory (static + dynamic
+ the 1 KiB the driver reserves per block on compute capability >= 8.0, in units of 128 bytes),
against the device's own limits. It leaves out the per-architecture shared-memory carveout table
(it assumes the whole of ``sharedMemPerMultiprocessor`` is available), so like Kineto's it is
an estimate of theoretical occupancy, not a measurement.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

WARP = 32  # Kineto's threads_per_warp
REG_UNIT = 256
SMEM_UNIT = 128


def _col(props: Mapping[int, Mapping], dev: np.ndarray, key: str, default: float = 0.0) -> np.ndarray:
    hi = int(dev.max()) + 1 if len(dev) else 0
    table = np.array([float(props.get(d, {}).get(key, default) or default) for d in range(hi)], np.float64)
    return table[dev] if len(dev) else np.zeros(0)


def occupancy_args(dev: np.ndarray, grid: np.ndarray, block: np.ndarray, regs: np.ndarray, static_smem: np.ndarray,
                   dynamic_smem: np.ndarray, props: Mapping[int, Mapping]) -> dict[str, np.ndarray]:
    """The three args for kernels whose device's properties are known (empty dict when none are)."""
    sms = _col(props, dev, "numSms")
    if not len(dev) or not (sms > 0).all():
        return {}
    threads = block.prod(1).astype(np.float64)
    blocks_per_sm = grid.prod(1).astype(np.float64) / sms
    out = {"blocks per SM": blocks_per_sm, "warps per SM": blocks_per_sm * threads / WARP}
    max_threads = _col(props, dev, "maxThreadsPerMultiprocessor")
    warp_size = _col(props, dev, "warpSize", WARP)
    if not (max_threads > 0).all():
        return out
    warps_per_block = np.ceil(threads / warp_size)
    limit_warps = np.floor(max_threads / warp_size / np.maximum(warps_per_block, 1))
    max_blocks = _col(props, dev, "maxBlocksPerMultiProcessor")
    limit_blocks = np.where(max_blocks > 0, max_blocks, np.inf)
    regs_sm = _col(props, dev, "regsPerMultiprocessor")
    regs_per_warp = np.ceil(regs.astype(np.float64) * warp_size / REG_UNIT) * REG_UNIT
    with np.errstate(divide="ignore", invalid="ignore"):
        limit_regs = np.where((regs > 0) & (regs_sm > 0),
                              np.floor(np.floor(regs_sm / regs_per_warp) / np.maximum(warps_per_block, 1)), np.inf)
        major = _col(props, dev, "computeMajor")
        smem = static_smem.astype(np.float64) + dynamic_smem.astype(np.float64)
        smem = np.where(smem > 0, np.ceil((smem + np.where(major >= 8, 1024, 0)) / SMEM_UNIT) * SMEM_UNIT, 0)
        smem_sm = _col(props, dev, "sharedMemPerMultiprocessor")
        limit_smem = np.where((smem > 0) & (smem_sm > 0), np.floor(smem_sm / smem), np.inf)
    active = np.minimum.reduce([limit_warps, limit_blocks, limit_regs, limit_smem])
    occ = np.minimum(active, blocks_per_sm) * threads / max_threads
    out["est. achieved occupancy %"] = np.rint(np.where(np.isfinite(occ), occ, 0) * 100).astype(np.int64)
    return out
