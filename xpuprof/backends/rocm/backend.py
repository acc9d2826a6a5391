"""RocmBackend: AMD GPUs through rocprofiler-sdk (ctypes; no Python bindings exist).

Decoding and the inter-stream dependency output work on records anywhere; collection
(RocprofActivityApi, RocprofCounterApi with ``profiler_metrics``) needs ``librocprofiler-sdk.so``
from a ROCm install and must be configured before HIP initializes.
"""
from __future__ import annotations

import os

from ...activity import ActivityType
from .. import system_facts
from ..base import Backend, BackendError, ProbeResult, Session
from ...vendors import rocprofiler as rocprof

LIBRARY_ENV = "ROCPROFILER_SDK_LIBRARY"  # an explicit library path (vendors.rocprofiler.library_candidates)
# The kernel fusion driver's node every HSA runtime opens (/dev/dxg under WSL2).
DEVICE_NODES = ("/dev/kfd", system_facts.WSL_GPU_NODE)

SUPPORTED = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.RUNTIME,
                       ActivityType.EXTERNAL_CORRELATION, ActivityType.CUDA_SYNC})


def ruled_out() -> ProbeResult | None:
    """The probe's answer from files alone (None: load the library to check): no rocprofiler-sdk on any
    path, or no AMD GPU device node. An explicit library (ROCPROFILER_SDK_LIBRARY) is always loaded, and its
    own error said; ``ctypes.util.find_library`` (ldconfig, gcc, ld: 30 ms and more) is not needed here."""
    if system_facts.full_probe_forced() or os.environ.get(LIBRARY_ENV):
        return None
    dirs = [os.path.join(os.environ[env], "lib") for env in ("ROCM_PATH", "ROCM_HOME") if os.environ.get(env)]
    if system_facts.find_library([rocprof.LIBRARY], extra_dirs=[*dirs, "/opt/rocm/lib"]) is None:
        return ProbeResult.unavailable(
            f"rocprofiler-sdk not found: no {rocprof.LIBRARY} in $ROCM_PATH/lib or /opt/rocm/lib. "
            f"{system_facts.WHERE_LIBRARIES_ARE_LOOKED_FOR}. Install ROCm's rocprofiler-sdk or set ROCM_PATH / "
            f"{LIBRARY_ENV}", stage="no_library", decided="in-process")
    if not system_facts.device_nodes(DEVICE_NODES):
        return ProbeResult.unavailable(
            "no AMD GPU visible: no /dev/kfd (or /dev/dxg under WSL2) on this machine (inside a container, pass "
            "--device /dev/kfd --device /dev/dri)", stage="no_device_node", decided="in-process")
    return None


class RocmBackend(Backend):
    name = "rocm"
    vendor = "rocm"
    description = "AMD GPUs through rocprofiler-sdk: HIP API, kernel dispatches, copies, per-kernel counters"

    @classmethod
    def probe(cls) -> ProbeResult:
        early = ruled_out()
        if early is not None:
            return early
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
