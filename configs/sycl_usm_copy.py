"""A SYCL workload through dpctl alone (no dpnp): host -> USM device copies plus a device -> host
read back, on any SYCL device (``opencl:cpu`` without a GPU). Used by configs/dpctl_cpu.yaml."""
from __future__ import annotations


def usm_copy(size: int = 1 << 20, device: str = "opencl:cpu"):
    """Factory: the queue and buffers are made once (setup stays out of the loop); each step copies
    ``size`` bytes to the device and back."""
    import dpctl
    import dpctl.memory
    import numpy as np

    queue = dpctl.SyclQueue(device)
    host = np.arange(size, dtype=np.uint8)
    back = np.empty_like(host)
    usm = dpctl.memory.MemoryUSMDevice(size, queue=queue)

    def step():
        usm.copy_from_host(host)
        usm.copy_to_host(back)

    return step, queue.wait
