"""XpuBackend: Intel GPUs through Intel PTI (``intel-pti``) and Level Zero.

Choosing backends imports this module, probes and asks ``supported_activities`` on every machine, with an
Intel GPU or not: so it imports only the probe (``availability``) and the activity table (``views``); the
session's modules (record decoding, emit, stall sampling) load in ``configure``."""
from __future__ import annotations

import os
import threading
from typing import ClassVar

from ...activity import ActivityType
from ..base import Backend, BackendError, ProbeResult, Session
from ...vendors import pti
from . import availability
from .views import SUPPORTED_TYPES


class XpuBackend(Backend):
    name: ClassVar[str] = "xpu"
    vendor: ClassVar[str] = "xpu"
    description: ClassVar[str] = "Intel GPUs via Intel PTI (kernels, copies, fills, SYCL/UR and Level Zero calls)"

    _probe_lock = threading.Lock()
    _probe_cache: ClassVar[ProbeResult | None] = None

    @classmethod
    def probe(cls) -> ProbeResult:
        with cls._probe_lock:
            if cls._probe_cache is None:
                cls._probe_cache = availability.probe()
            return cls._probe_cache

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return SUPPORTED_TYPES

    def configure(self, activity_types, config) -> Session | None:
        selected = frozenset(activity_types) & SUPPORTED_TYPES
        if not selected:
            return None
        from .activity_api import XpuptiActivityApi
        from .stall_session import prepare_metrics_env, wants_stall_sampling

        if ActivityType.XPU_SCOPE_PROFILER in selected:
            from ...config.options import ExperimentalConfig
            from .metrics_scope import check_scope_request, ensure_metrics_env

            # A request without metric names is said as such, before anything about the environment.
            check_scope_request(getattr(config, "experimental", None) or ExperimentalConfig())
            ensure_metrics_env()  # ZET_ENABLE_METRICS=1 before levelzero.gpu_devices() initializes Level Zero
        if wants_stall_sampling(config):
            # PTI samples the kernels its kernel view sees, and stalls are joined to kernel slices by name
            selected |= {ActivityType.CONCURRENT_KERNEL}
            prepare_metrics_env()  # ZET_ENABLE_METRICS=1 while Level Zero is not initialized yet
        explicit = bool(os.environ.get(pti.PTI_LIBRARY_ENV))
        devices = []
        if not explicit:
            # Loading PTI with a loader but no driver aborts the process: only after the probe said yes.
            result = self.probe()
            if not result:
                raise BackendError(f"the XPU backend cannot run here: {result.reason}")
            missing = pti.library_path_missing(pti.find_pti_library())
            if missing is not None:
                raise BackendError(f"Intel PTI needs LD_LIBRARY_PATH to include {missing} when the process starts; "
                                   "run through the `xpuprof` command (it re-executes itself) or export it first")
            from ...vendors import levelzero

            devices = levelzero.gpu_devices()
        kwargs = dict(device_uuids=[d.uuid for d in devices], device_names={d.index: d.name for d in devices},
                      device_properties=[d.kineto_properties() for d in devices])
        if ActivityType.XPU_SCOPE_PROFILER in selected:
            from .scope_api import XpuptiActivityScopeApi  # per-kernel metrics, only when asked for

            return XpuptiActivityScopeApi(selected, config, **kwargs)
        return XpuptiActivityApi(selected, config, **kwargs)
