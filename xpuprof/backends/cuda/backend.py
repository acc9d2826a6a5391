"""CudaBackend: NVIDIA GPUs through CUPTI (cupti-python, the optional ``[cuda]`` extra).

cupti-python is under NVIDIA's proprietary EULA, so xpuprof never bundles it: the user
installs it (``pip install 'xpuprof[cuda]'``); it is imported only through ``vendors.cupti``, after the probe.
"""
from __future__ import annotations

from ...activity import ActivityType
from ...vendors import cupti
from ..base import Backend, ProbeResult, Session
from ..probe import run_probe
from .activity_api import SUPPORTED, CuptiActivityApi


def probe_child() -> dict:
    """Runs in a child process (``backends.probe.run_probe``): a broken driver can crash or hang it, never the caller."""
    try:
        c = cupti.load()
    except ImportError as exc:
        return {"available": False, "reason": f"cupti-python is not installed (pip install 'xpuprof[cuda]'): {exc}"}
    try:
        c.get_timestamp()
    except Exception as exc:  # any CUPTI/driver failure means "not usable here", with its message
        return {"available": False, "reason": f"CUPTI cannot run here: {type(exc).__name__} {exc}"}
    try:
        n = cupti.device_count()
    except Exception as exc:
        return {"available": False, "reason": f"the CUDA driver does not answer: {exc}"}
    if n == 0:
        return {"available": False, "reason": "no NVIDIA GPU visible (cuDeviceGetCount returned 0)"}
    return {"available": True, "reason": f"{n} NVIDIA GPU(s)", "details": {"devices": n}}


def probe_cuda(timeout: float = 60.0) -> ProbeResult:
    return run_probe(__name__, "probe_child", name="CUDA (CUPTI)", timeout=timeout)


class CudaBackend(Backend):
    name = "cuda"
    vendor = "cuda"
    description = "NVIDIA GPUs through CUPTI (cupti-python): kernels, copies, syncs, events, PM sampling counters"

    _probe_cache: ProbeResult | None = None

    @classmethod
    def probe(cls) -> ProbeResult:
        if cls._probe_cache is None:
            cls._probe_cache = probe_cuda()
        return cls._probe_cache

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return SUPPORTED

    def configure(self, activity_types, config) -> Session | None:
        wanted = frozenset(activity_types) & SUPPORTED
        if not wanted:
            return None
        if ActivityType.GPU_PM_COUNTER in wanted and config.experimental.profiler_metrics:
            from .pm_sampling_api import CuptiPmSamplingApi

            return CuptiPmSamplingApi(wanted, config)
        if wanted == {ActivityType.GPU_PM_COUNTER}:
            return None  # counters asked for without metric names: nothing to sample
        return CuptiActivityApi(wanted, config)
