"""CudaBackend: NVIDIA GPUs through CUPTI (cupti-python, the optional ``[cuda]`` extra).

cupti-python is under NVIDIA's proprietary EULA, so xpuprof never bundles it: the user
installs it (``pip install 'xpuprof[cuda]'``); it is imported only through ``vendors.cupti``, after the probe.
Choosing backends imports this module on every machine: it imports the probe and the activity table
(``kinds``) only; the session's modules load in ``configure``.
"""
from __future__ import annotations

import threading

from ...activity import ActivityType
from ...vendors import cupti
from .. import system_facts
from ..base import Backend, ProbeResult, Session
from ..probe import run_probe
from .kinds import SUPPORTED

DRIVER_LIBRARY = "libcuda.so.1"
# /dev/nvidiactl and /dev/nvidia<N> (Linux); /dev/dxg (WSL2)
DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", system_facts.WSL_GPU_NODE)


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


def ruled_out() -> ProbeResult | None:
    """The CUDA probe's answer when files alone show it cannot succeed (None: the child must check): no
    cupti-python, no CUDA driver library, no NVIDIA device node. Nothing is imported or loaded."""
    if system_facts.full_probe_forced():
        return None
    if not system_facts.module_installed("cupti"):
        return ProbeResult.unavailable("cupti-python is not installed (pip install 'xpuprof[cuda]')",
                                       stage="no_cupti", decided="in-process")
    if system_facts.find_library([DRIVER_LIBRARY]) is None:
        return ProbeResult.unavailable(
            f"CUPTI cannot run here: the NVIDIA driver library {DRIVER_LIBRARY} is not installed (no NVIDIA GPU "
            f"driver). {system_facts.WHERE_LIBRARIES_ARE_LOOKED_FOR}", stage="no_driver", decided="in-process")
    if not system_facts.device_nodes(DEVICE_NODES):
        return ProbeResult.unavailable(
            "no NVIDIA GPU visible: no device node (/dev/nvidiactl, /dev/nvidia<N>, or /dev/dxg under WSL2) on "
            "this machine (inside a container, run it with the NVIDIA container runtime or --gpus)",
            stage="no_device_node", decided="in-process")
    return None


def probe_cuda(timeout: float = 60.0) -> ProbeResult:
    early = ruled_out()
    if early is not None:
        return early
    return run_probe(__name__, "probe_child", name="CUDA (CUPTI)", timeout=timeout)


class CudaBackend(Backend):
    name = "cuda"
    vendor = "cuda"
    description = "NVIDIA GPUs through CUPTI (cupti-python): kernels, copies, syncs, events, PM sampling counters"

    _probe_lock = threading.Lock()  # probes run in parallel threads (backends.registry.probe_many)
    _probe_cache: ProbeResult | None = None

    @classmethod
    def probe(cls) -> ProbeResult:
        with cls._probe_lock:
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
        from .activity_api import CuptiActivityApi  # the session's modules load only when it is made

        if ActivityType.GPU_PM_COUNTER in wanted and config.experimental.profiler_metrics:
            from .pm_sampling_api import CuptiPmSamplingApi

            return CuptiPmSamplingApi(wanted, config)
        if wanted == {ActivityType.GPU_PM_COUNTER}:
            return None  # counters asked for without metric names: nothing to sample
        return CuptiActivityApi(wanted, config)
