"""Built-in workloads through torch on xpu, cuda or cpu (``device: auto`` picks xpu, then cuda, then cpu)."""
from __future__ import annotations

from .base import Workload, WorkloadError


def import_library():
    import torch

    return torch


def resolve_device(torch, device: str) -> str:
    """``auto`` -> the first available of xpu, cuda, cpu; an explicit device must be available."""
    if device == "auto":
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return "xpu"
        return "cuda" if torch.cuda.is_available() else "cpu"
    kind = device.split(":", 1)[0]
    if kind == "cpu":
        return device
    if kind not in ("xpu", "cuda"):
        raise WorkloadError(f"torch workloads run on xpu, cuda or cpu; device {device!r} is not valid")
    module = getattr(torch, kind, None)
    if module is None or not module.is_available():
        raise WorkloadError(f"torch device {device!r} is not available here "
                            f"(torch {torch.__version__} reports no {kind} device)")
    return device


def _sync(torch, device: str):
    kind = device.split(":", 1)[0]
    if kind == "cpu":
        return lambda: None
    module = getattr(torch, kind)
    return lambda: module.synchronize(device)


def _dtype(torch, dtype: str):
    return getattr(torch, dtype)


def gemm(torch, device: str, *, n: int, dtype: str, seed: int) -> Workload:
    dev = resolve_device(torch, device)
    dt = _dtype(torch, dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn((n, n), generator=gen).to(device=dev, dtype=dt)
    b = torch.randn((n, n), generator=gen).to(device=dev, dtype=dt)
    c = torch.empty((n, n), device=dev, dtype=dt)

    def step():
        torch.matmul(a, b, out=c)
        return c

    return Workload(f"gemm[torch:{dev}] n={n} {dtype}", step, _sync(torch, dev), device=dev,
                    info={"library": "torch", "flops": 2 * n ** 3, "bytes": 3 * n * n * a.element_size()})


def elementwise(torch, device: str, *, size: int, dtype: str, alpha: float, seed: int) -> Workload:
    dev = resolve_device(torch, device)
    dt = _dtype(torch, dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(size, generator=gen).to(device=dev, dtype=dt)
    y = torch.randn(size, generator=gen).to(device=dev, dtype=dt)
    out = torch.empty(size, device=dev, dtype=dt)

    def step():
        torch.sin(x, out=out)
        out.mul_(alpha).add_(y)
        return out

    return Workload(f"elementwise[torch:{dev}] size={size} {dtype}", step, _sync(torch, dev), device=dev,
                    info={"library": "torch", "flops": 3 * size, "bytes": 3 * size * x.element_size()})
