"""Built-in workloads through dpnp (SYCL). ``device`` is a SYCL filter selector (``gpu``,
``level_zero:gpu``, ``opencl:cpu`` ...); ``auto`` is SYCL's default device. On a machine with no
GPU the pinned ``dpnp-cpu`` extra runs them on the OpenCL CPU device (set
``OCL_ICD_FILENAMES=<venv>/lib/libintelocl.so``)."""
from __future__ import annotations

from .base import Workload, WorkloadError


def import_library():
    import dpnp

    return dpnp


def _queue(device: str):
    import dpctl

    try:
        return dpctl.SyclQueue() if device == "auto" else dpctl.SyclQueue(device)
    except Exception as exc:  # dpctl raises SyclQueueCreationError / ValueError for unusable selectors
        devices = ", ".join(d.filter_string for d in dpctl.get_devices()) or "none"
        raise WorkloadError(f"no SYCL device for selector {device!r} ({exc}); SYCL devices here: {devices}. "
                            "Without a GPU, install the dpnp-cpu extra and set "
                            "OCL_ICD_FILENAMES=<venv>/lib/libintelocl.so") from None


def _device_name(queue) -> str:
    return queue.sycl_device.filter_string


def gemm(dpnp, device: str, *, n: int, dtype: str, seed: int) -> Workload:
    import numpy as np

    q = _queue(device)
    if dtype == "bfloat16":
        raise WorkloadError("dpnp has no bfloat16; use float16, float32 or float64")
    rng = np.random.default_rng(seed)
    a = dpnp.asarray(rng.standard_normal((n, n)).astype(dtype), sycl_queue=q)
    b = dpnp.asarray(rng.standard_normal((n, n)).astype(dtype), sycl_queue=q)

    def step():
        return dpnp.matmul(a, b)

    return Workload(f"gemm[dpnp:{_device_name(q)}] n={n} {dtype}", step, q.wait, device=_device_name(q),
                    info={"library": "dpnp", "flops": 2 * n ** 3, "bytes": 3 * n * n * a.itemsize})


def elementwise(dpnp, device: str, *, size: int, dtype: str, alpha: float, seed: int) -> Workload:
    import numpy as np

    q = _queue(device)
    if dtype == "bfloat16":
        raise WorkloadError("dpnp has no bfloat16; use float16, float32 or float64")
    rng = np.random.default_rng(seed)
    x = dpnp.asarray(rng.standard_normal(size).astype(dtype), sycl_queue=q)
    y = dpnp.asarray(rng.standard_normal(size).astype(dtype), sycl_queue=q)

    def step():
        return dpnp.sin(x) * alpha + y

    return Workload(f"elementwise[dpnp:{_device_name(q)}] size={size} {dtype}", step, q.wait,
                    device=_device_name(q), info={"library": "dpnp", "flops": 3 * size, "bytes": 3 * size * x.itemsize})
