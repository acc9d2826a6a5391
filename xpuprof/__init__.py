"""xpuprof: a profiler for accelerator workloads (Intel XPU first; NVIDIA and AMD too).

Writes Kineto-compatible Chrome/Perfetto traces: host ops, runtime/driver calls, kernels,
copies, syncs and per-kernel hardware metrics as counter tracks. Importing xpuprof imports no
vendor package.
"""
from .activity import ActivityType, default_activity_types
from .collectors import Collector, CollectorError, MetricInfo, Track, register_collector
from .config import ExperimentalConfig, KinetoConfig, ProfilerConfig
from .host.annotations import current_correlation_id, instant, record_function, set_thread_name
from .plugins import register_backend
from .profiler import ProfilerAction, profile, schedule, trace_handler

__version__ = "0.1.0"

__all__ = [
    "ActivityType",
    "Collector",
    "CollectorError",
    "MetricInfo",
    "Track",
    "ExperimentalConfig",
    "KinetoConfig",
    "ProfilerAction",
    "ProfilerConfig",
    "__version__",
    "current_correlation_id",
    "default_activity_types",
    "instant",
    "profile",
    "record_function",
    "register_backend",
    "register_collector",
    "schedule",
    "set_thread_name",
    "trace_handler",
]
