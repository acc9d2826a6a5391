"""xpuprof: a profiler for accelerator workloads (Intel XPU first; NVIDIA and AMD too).

Writes Kineto-compatible Chrome/Perfetto traces: host ops, runtime/driver calls, kernels,
copies, syncs and per-kernel hardware metrics as counter tracks. Importing xpuprof imports no
vendor package.
"""
import os as _os
import sys as _sys

from .backends.xpu.early_load import preload_view_library as _preload_pti_view

# Before anything else: SYCL reads PTI's hooks only when it starts, so PTI's view library (not its
# core) is loaded now, while SYCL has not started (see backends/xpu/early_load.py).
_preload_pti_view()

from .activity import ActivityType, default_activity_types  # noqa: E402
from .collectors import Collector, CollectorError, MetricInfo, Track, register_collector  # noqa: E402
from .config import ExperimentalConfig, KinetoConfig, ProfilerConfig  # noqa: E402
from .host.recorder import current_correlation_id, instant, record_function, set_thread_name  # noqa: E402
from .plugins import register_backend  # noqa: E402
from .profiler import ProfilerAction, profile, schedule, trace_handler  # noqa: E402

from .version import __version__  # noqa: E402


def step() -> None:
    """Mark the end of one iteration, for captures asked for by iterations (``dyno gputrace --iterations``,
    ``xpuprof trigger --iterations``, ``xpuprof exec --iterations``) in programs that do not step a torch
    optimizer. Counted with torch's optimizer steps as Kineto counts them (the maximum, never twice).
    Costs nothing when no on-demand agent runs. (A profile's own schedule steps with ``prof.step()``.)"""
    steps = _sys.modules.get("xpuprof.ondemand.steps")
    if steps is not None:
        steps.step()


# Kineto's opt-in: with KINETO_USE_DAEMON set, this process registers with the on-demand daemon (dynolog)
# as torch's Kineto would (torch's own client is kept off in this process: one process, one client; the variable
# stays set for child processes); without it, nothing of xpuprof.ondemand is imported.
if "KINETO_USE_DAEMON" in _os.environ:
    from .ondemand import activate as _activate_ondemand

    _activate_ondemand()

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
    "step",
    "trace_handler",
]
