"""RocmBackend: AMD GPUs through rocprofiler-sdk (ctypes; no Python bindings exist).

Decoding and the inter-stream dependency output work on records anywhere; collection
(RocprofActivityApi, RocprofCounterApi with ``profiler_metrics``) needs ``librocprofiler-sdk.so``
from a ROCm install and must be configured before HIP initializes.
"""
from __future__ import annotations

from ...activity import ActivityType
from ..base import Backend, BackendError, ProbeResult, Session
from ...vendors import rocprofiler as rocprof

SUPPORTED = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.RUNTIME,
                       ActivityType.EXTERNAL_CORRELATION, ActivityType.CUDA_SYNC})


class RocmBackend(Backend):
    name = "rocm"
    vendor = "rocm"
    description = "AMD GPUs through rocprofiler-sdk: HIP API, kernel dispatches, copies, per-kernel counters"

    @classmethod
    def probe(cls) -> ProbeResult:
        # Loading the library runs no HIP/HSA code, so it is safe in-process.
        try:
            lib = rocprof.load_library()
        except rocprof.RocprofNotFound as exc:
            return ProbeResult.unavailable(str(exc))
        if not hasattr(lib, "rocprofiler_force_configure"):
            return ProbeResult.unavailable("librocprofiler-sdk.so lacks rocprofiler_force_configure (ROCm too old)")
        return ProbeResult.ok("rocprofiler-sdk found")

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return SUPPORTED

    def configure(self, activity_types, config) -> Session | None:
        wanted = frozenset(activity_types) & SUPPORTED
        if not wanted:
            return None
        probe = self.probe()
        if not probe:
            raise BackendError(f"the rocm backend cannot run here: {probe.reason}")
        if config is not None and config.experimental.profiler_metrics:
            from .counter_api import RocprofCounterApi

            return RocprofCounterApi(wanted, config)
        from .activity_api import RocprofActivityApi

        return RocprofActivityApi(wanted, config)
