"""NVIDIA CUPTI through cupti-python and cuda-bindings (the optional ``[cuda]`` extra).

cupti-python is under NVIDIA's proprietary EULA, so xpuprof never bundles it: the user installs
it (``pip install 'xpuprof[cuda]'``), and it is imported here only, inside the function that
needs it. Also here: the CUpti_ActivityKind values xpuprof reads (stable CUPTI ABI, checked
against cupti-python's enum in the tests), the numpy dtype of each cupti-python record class,
and the CUDA device queries (cuda-bindings, a cupti-python dependency).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

# CUpti_ActivityKind values
KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_KERNEL = 3
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
KIND_MEMCPY2 = 22  # peer-to-peer copies (CUpti_ActivityMemcpyPtoP4 in cupti-python 13)
KIND_OVERHEAD = 17
KIND_CUDA_EVENT = 36
KIND_SYNCHRONIZATION = 38
KIND_EXTERNAL_CORRELATION = 39


def load():
    """cupti-python's ``cupti.cupti`` module (ImportError when it is not installed)."""
    from cupti import cupti

    return cupti


def load_pm_sampling():
    """cupti-python's PM sampling wrapper (``cupti.pm_sampling``)."""
    from cupti import pm_sampling

    return pm_sampling


def load_profiler_host():
    """cupti-python's Profiler Host wrapper (``cupti.profiler_host``): metric lists per chip."""
    from cupti import profiler_host

    return profiler_host


@lru_cache(maxsize=None)
def dtype_for_class(cls) -> np.dtype:
    """cupti-python's numpy dtype for one of its record classes (``ActivityKernel13`` -> its dtype)."""
    c = load()
    want = cls.__name__.lower()
    for name in dir(c):
        if name.endswith("_dtype") and name[:-6].replace("_", "") == want:
            return getattr(c, name)
    raise LookupError(f"cupti-python has no numpy dtype for record class {cls.__name__}")


def device_count() -> int:
    """NVIDIA GPUs the CUDA driver sees (cuInit + cuDeviceGetCount); raises when it does not answer."""
    from cuda.bindings import driver

    driver.cuInit(0)
    err, n = driver.cuDeviceGetCount()
    return n if int(err) == 0 else 0


def device_properties() -> list[dict[str, Any]]:
    """Kineto ``deviceProperties`` through cuda-bindings; [] without it or without a driver."""
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return []
    try:
        err, count = rt.cudaGetDeviceCount()
        if int(err) != 0:
            return []
        out = []
        for d in range(count):
            err, p = rt.cudaGetDeviceProperties(d)
            if int(err) != 0:
                continue
            out.append({
                "id": d, "name": p.name.split(b"\0", 1)[0].decode(), "totalGlobalMem": int(p.totalGlobalMem),
                "computeMajor": int(p.major), "computeMinor": int(p.minor), "maxThreadsPerBlock": int(p.maxThreadsPerBlock),
                "maxThreadsPerMultiprocessor": int(p.maxThreadsPerMultiProcessor),
                "regsPerBlock": int(p.regsPerBlock), "regsPerMultiprocessor": int(p.regsPerMultiprocessor),
                "warpSize": int(p.warpSize), "sharedMemPerBlock": int(p.sharedMemPerBlock),
                "sharedMemPerMultiprocessor": int(p.sharedMemPerMultiprocessor), "numSms": int(p.multiProcessorCount),
                "sharedMemPerBlockOptin": int(p.sharedMemPerBlockOptin),
                "maxBlocksPerMultiProcessor": int(p.maxBlocksPerMultiProcessor),
            })
        return out
    except Exception:  # no driver: properties are optional metadata
        return []
