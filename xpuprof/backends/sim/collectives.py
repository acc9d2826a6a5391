"""The kernels a collective launches, named as each vendor's collective library names them.

Which host activity is a collective (``COLLECTIVE_OP``: torch's ``c10d::*`` ops; ``COLLECTIVE_RANGE``:
gloo's and NCCL's own ``gloo:*``/``nccl:*`` ranges), which collective it is, and its kernel's name for
the flavour the sim writes:

- **CUDA, NCCL**: ``ncclKernel_<Coll>_RING_LL_Sum_<type>``, NCCL's names up to 2.18: the form HTA's
  straggler analysis looks for (NCCL >= 2.19 writes ``ncclDevKernel_...``, which HTA 0.5 does not match).
- **HIP, RCCL**: RCCL runs every collective in its generic kernel,
  ``ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)`` (ROCm 6.x); the collective is not in the name.
- **XPU, oneCCL**: oneCCL's SYCL kernels are named by its kernel-name class templates
  (``oneccl_reduce_base<float, 2, 16, 1, 1, 2>`` is an all-reduce in a torch XCCL trace;
  ``oneccl_reduce_scatter_large_read``, ``oneccl_alltoall_write_aligned``, ``oneccl_kernel_memcpy_typed``
  for the copying collectives, ``oneccl_invoke_barrier``), with the element type as SYCL spells it.

Every name is one the cluster analyses classify as communication (``analysis/cluster/frame.kernel_type``:
``^nccl.*Kernel`` or ``^oneccl_``); HTA 0.5 knows only NCCL's and RCCL's (``^nccl``).
"""
from __future__ import annotations

import re

COLLECTIVE_OP = re.compile(r"^c10d::")
COLLECTIVE_RANGE = re.compile(r"^(gloo|nccl):")
# c10d op / gloo range name (without namespace, trailing _ and _base/_coalesced) -> the collective
_COLLECTIVES = {"allreduce": "AllReduce", "all_reduce": "AllReduce", "broadcast": "Broadcast",
                "allgather": "AllGather", "all_gather": "AllGather", "allgather_into_tensor": "AllGather",
                "reduce_scatter": "ReduceScatter", "reduce_scatter_tensor": "ReduceScatter", "reduce": "Reduce",
                "barrier": "Barrier", "alltoall": "AllToAll", "all_to_all": "AllToAll", "send": "SendRecv",
                "recv": "SendRecv", "gather": "SendRecv", "scatter": "SendRecv"}
_NCCL_DTYPE = {"float": "float", "double": "double", "c10::Half": "half", "c10::BFloat16": "bfloat16",
               "long int": "int64_t", "int": "int32_t"}
# NCCL's kernels: a barrier is an all-reduce of one value, all-to-all a batch of sends/receives.
_NCCL_COLLECTIVE = {"Barrier": "AllReduce", "AllToAll": "SendRecv"}
RCCL_KERNEL = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
_SYCL_DTYPE = {"float": "float", "double": "double", "c10::Half": "sycl::detail::half_impl::half",
               "c10::BFloat16": "sycl::ext::oneapi::bfloat16", "long int": "long", "int": "int"}
_ONECCL_KERNEL = {"AllReduce": "oneccl_reduce_base<{t}, 2, 16, 1, 1, 2>",
                  "Reduce": "oneccl_reduce_base<{t}, 2, 16, 1, 1, 2>",
                  "ReduceScatter": "oneccl_reduce_scatter_large_read<{t}, 2, 2>",
                  "AllGather": "oneccl_kernel_memcpy_typed<{t}>", "Broadcast": "oneccl_kernel_memcpy_typed<{t}>",
                  "SendRecv": "oneccl_kernel_memcpy_typed<{t}>", "AllToAll": "oneccl_alltoall_write_aligned<{t}, 2>",
                  "Barrier": "oneccl_invoke_barrier"}


def is_collective(name: str) -> bool:
    """A c10d op or a gloo/NCCL range: the host side of a collective."""
    return bool(COLLECTIVE_OP.match(name) or COLLECTIVE_RANGE.match(name))


def collective(name: str) -> str:
    """The collective a c10d op or gloo/NCCL range runs (``AllReduce`` ...; ``Generic`` when unknown)."""
    base = name.split("::", 1)[-1].split(":", 1)[-1].strip("_")
    for suffix in ("_base", "_coalesced"):
        base = base.removesuffix(suffix).strip("_")
    return _COLLECTIVES.get(base, "Generic")


def kernel_name(vendor: str, name: str, element_type: str) -> str:
    """The kernel the collective ``name`` (of tensors of torch's ``element_type``) launches on ``vendor``'s
    device (a sim flavour: xpu, cuda, hip)."""
    coll = collective(name)
    if vendor == "hip":
        return RCCL_KERNEL
    if vendor == "xpu":
        return _ONECCL_KERNEL.get(coll, _ONECCL_KERNEL["SendRecv"]).format(t=_SYCL_DTYPE.get(element_type, "float"))
    return f"ncclKernel_{_NCCL_COLLECTIVE.get(coll, coll)}_RING_LL_Sum_{_NCCL_DTYPE.get(element_type, 'float')}"
