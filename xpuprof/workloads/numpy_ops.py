"""Built-in workloads on the host CPU through numpy (runs on any machine)."""
from __future__ import annotations

from .base import Workload, WorkloadError


def import_library():
    import numpy

    return numpy


def _check(np, device: str, dtype: str):
    if device not in ("auto", "cpu"):
        raise WorkloadError(f"the numpy workloads run on the host CPU only; device {device!r} is not valid "
                            f"(use device: cpu or auto, or library: torch/dpnp for accelerators)")
    if dtype == "bfloat16":
        raise WorkloadError("numpy has no bfloat16; use float16, float32 or float64 (or library: torch)")
    return np.dtype(dtype)


def gemm(np, device: str, *, n: int, dtype: str, seed: int) -> Workload:
    dt = _check(np, device, dtype)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(dt)
    b = rng.standard_normal((n, n)).astype(dt)
    c = np.empty((n, n), dtype=dt)

    def step():
        np.matmul(a, b, out=c)
        return c

    return Workload(f"gemm[numpy] n={n} {dtype}", step, device="cpu",
                    info={"library": "numpy", "flops": 2 * n ** 3, "bytes": 3 * n * n * dt.itemsize})


def elementwise(np, device: str, *, size: int, dtype: str, alpha: float, seed: int) -> Workload:
    dt = _check(np, device, dtype)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size).astype(dt)
    y = rng.standard_normal(size).astype(dt)
    out = np.empty(size, dtype=dt)
    a = dt.type(alpha)

    def step():
        np.sin(x, out=out)
        np.multiply(out, a, out=out)
        np.add(out, y, out=out)
        return out

    return Workload(f"elementwise[numpy] size={size} {dtype}", step, device="cpu",
                    info={"library": "numpy", "flops": 3 * size, "bytes": 3 * size * dt.itemsize})
