"""xpuprof: a profiler for accelerator workloads (Intel XPU first; NVIDIA and AMD too).

Writes Kineto-compatible Chrome/Perfetto traces: host ops, runtime/driver calls, kernels,
copies, syncs and per-kernel hardware metrics as counter tracks. Importing xpuprof imports no
vendor package.
"""
from .activity import ActivityType, default_activity_types
from .config import ExperimentalConfig, ProfilerConfig

__version__ = "0.1.0"

__all__ = ["ActivityType", "ExperimentalConfig", "ProfilerConfig", "__version__", "default_activity_types"]
