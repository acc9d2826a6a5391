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


PAGE_BYTES = 4096


def _staggered(np, count: int, size: int, dt) -> list:
    """``count`` arrays of ``size`` elements carved from one buffer at page offsets 0, 1/count, 2/count... of a
    4 KiB page. Arrays allocated one by one land wherever the allocator puts them: large ones are mapped
    pages (the same offset in a page, so loads of one and stores to another alias in the CPU's 4 KiB
    store-forwarding check), smaller ones anywhere in the heap. The same loop then runs ~1.5x slower in
    some runs than in others (measured: 47 vs 69 us for size=65536 float32), a mode that depends on the
    allocator's state and that a benchmark history would read as a regression."""
    nbytes = size * dt.itemsize
    spans, start = [], 0
    for i in range(count):
        want = (i * PAGE_BYTES // count) // dt.itemsize * dt.itemsize
        start += (want - start) % PAGE_BYTES  # the next offset >= start that has the wanted page offset
        spans.append(start)
        start += nbytes
    raw = np.empty(start + PAGE_BYTES, dtype=np.uint8)
    base = (-raw.ctypes.data) % PAGE_BYTES  # the buffer's first page boundary
    return [raw[base + s: base + s + nbytes].view(dt) for s in spans]


def elementwise(np, device: str, *, size: int, dtype: str, alpha: float, seed: int) -> Workload:
    dt = _check(np, device, dtype)
    rng = np.random.default_rng(seed)
    x, y, out = _staggered(np, 3, size, dt)
    x[:] = rng.standard_normal(size)
    y[:] = rng.standard_normal(size)
    a = dt.type(alpha)

    def step():
        np.sin(x, out=out)
        np.multiply(out, a, out=out)
        np.add(out, y, out=out)
        return out

    return Workload(f"elementwise[numpy] size={size} {dtype}", step, device="cpu",
                    info={"library": "numpy", "flops": 3 * size, "bytes": 3 * size * dt.itemsize})
