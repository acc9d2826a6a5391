"""torch.profiler.profile's arguments, as torch defines them, turned into our configuration.

Every keyword torch.profiler.profile accepts is accepted by ``xpuprof.profile`` (docs/torch-profiler-compat.md
lists them side by side): implemented, or refused in one line naming it. This module holds the parts that
read torch's objects: ``torch._C._profiler._ExperimentalConfig`` (its fields mapped to ours where they mean
the same, passed to torch's own op recorder where torch honours them, the rest one error naming the field),
the deprecated ``use_cuda``, per-cycle trace ids (``custom_trace_id_callback``) and ``distributedInfo`` read
from ``torch.distributed``. torch is never imported here: its objects are recognised by their type names.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

from ..activity import DEVICE_GROUP, ActivityType
from ..config.options import ExperimentalConfig

# torch._C._profiler._ExperimentalConfig's fields in the order of its constructor and of its pickled state
# (torch 2.13: __getstate__ returns them as one tuple), with their defaults.
TORCH_EXPERIMENTAL_FIELDS = (
    ("profiler_metrics", []), ("profiler_measure_per_kernel", False), ("verbose", False),
    ("performance_events", []), ("enable_cuda_sync_events", False), ("adjust_profiler_step", False),
    ("disable_external_correlation", False), ("profile_all_threads", False), ("capture_overload_names", False),
    ("record_python_gc_info", False), ("expose_kineto_event_metadata", False), ("custom_profiler_config", ""),
    ("adjust_timestamps", False), ("trace_only", False),
)
# Honoured by torch's own op recorder (xpuprof runs it for the ops): passed to it as given.
TORCH_RECORDER_FIELDS = ("verbose", "profile_all_threads", "capture_overload_names", "expose_kineto_event_metadata",
                         "adjust_timestamps", "trace_only")
# What xpuprof cannot honour, and what to do instead (a set value is refused with this line).
TORCH_REFUSED_FIELDS = {
    "performance_events": "CPU performance counters (perf events) are not collected by xpuprof; host telemetry "
                          "comes from its collectors (ExperimentalConfig(profiler_metrics=['cpu_utilization', ...]))",
    "adjust_profiler_step": "xpuprof's ProfilerStep ranges are the steps as prof.step() marks them; it does not "
                            "move them to the enclosing Python frame",
    "record_python_gc_info": "Python garbage-collection events are not recorded by xpuprof",
}


def is_torch_experimental_config(value: Any) -> bool:
    return type(value).__name__ == "_ExperimentalConfig" and type(value).__module__.startswith("torch")


def torch_experimental_fields(cfg: Any) -> dict[str, Any]:
    """The fields of a torch ``_ExperimentalConfig`` by name (pybind exposes most only through its state)."""
    state = cfg.__getstate__()
    if len(state) < len(TORCH_EXPERIMENTAL_FIELDS):
        raise TypeError(f"this torch's _ExperimentalConfig has {len(state)} fields, xpuprof reads torch 2.13's "
                        f"{len(TORCH_EXPERIMENTAL_FIELDS)}: pass xpuprof.ExperimentalConfig instead")
    fields = {}
    for (name, _default), value in zip(TORCH_EXPERIMENTAL_FIELDS, state):
        if isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else str(v) for v in value]
        fields[name] = value
    return fields


def experimental_changes(cfg: Any, activities: frozenset[ActivityType]) -> dict[str, Any]:
    """The ProfilerConfig changes a torch ``_ExperimentalConfig`` means; a field xpuprof cannot honour, set,
    is one ``ValueError`` naming it."""
    fields = torch_experimental_fields(cfg)
    defaults = dict(TORCH_EXPERIMENTAL_FIELDS)
    for name, why in TORCH_REFUSED_FIELDS.items():
        if fields[name] != defaults[name]:
            raise ValueError(f"torch _ExperimentalConfig({name}={fields[name]!r}) is not supported by xpuprof.profile: "
                             f"{why}. Leave {name} at its default ({defaults[name]!r}), or profile with torch.profiler")
    changes: dict[str, Any] = {
        "experimental": ExperimentalConfig(profiler_metrics=fields["profiler_metrics"],
                                           profiler_measure_per_kernel=bool(fields["profiler_measure_per_kernel"])),
        "torch_experimental": {name: fields[name] for name in TORCH_RECORDER_FIELDS if fields[name] != defaults[name]},
    }
    types = set(activities)
    if fields["enable_cuda_sync_events"] and types & DEVICE_GROUP:
        types.add(ActivityType.CUDA_SYNC)
    if fields["disable_external_correlation"]:
        types.discard(ActivityType.EXTERNAL_CORRELATION)
    if types != set(activities):
        changes["activities"] = frozenset(types)
    if fields["custom_profiler_config"]:
        changes["custom"] = {"CUSTOM_CONFIG": fields["custom_profiler_config"]}  # Kineto's CUSTOM_CONFIG
    return changes


def use_cuda_activities(use_cuda: bool, activities: frozenset[ActivityType]) -> frozenset[ActivityType]:
    """torch's deprecated ``use_cuda``: True adds the device group, False takes it away (with torch's warning)."""
    warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning, stacklevel=3)
    return activities | DEVICE_GROUP if use_cuda else activities - DEVICE_GROUP


def new_trace_id(callback: Callable[[], str] | None, configured: str = "") -> str:
    """A cycle's trace id: the user's ``custom_trace_id_callback()``, else ``configured`` (a Kineto config's
    REQUEST_TRACE_ID: a daemon's request names its traces), else a random UUID as torch writes it (32
    upper-case hex digits)."""
    if callback is None and configured:
        return configured
    if callback is None:
        import uuid

        return f"{uuid.uuid4().int:032X}"
    value = callback()
    if not isinstance(value, str):
        raise TypeError(f"custom_trace_id_callback must return a str, it returned {type(value).__name__} {value!r}")
    return value


def torch_distributed_info() -> dict | None:
    """``distributedInfo`` as torch.profiler writes it (backend, rank, world_size, pg_count, pg_config and
    nccl_version) when the program initialized torch.distributed; None otherwise (torch never imported)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        backend = dist.get_backend()
        info = {"backend": backend, "rank": dist.get_rank(), "world_size": dist.get_world_size(),
                "pg_count": dist.get_pg_count(), "pg_config": dist.distributed_c10d._get_all_pg_configs()}
        if backend == "nccl":
            info["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # a half-torn-down process group: the launcher's variables still name the rank
        return None
    return info


def execution_trace_observer_from_env():
    """torch.profiler's ``ExecutionTraceObserver.build_execution_trace_obs_from_env()`` (ENABLE_PYTORCH_EXECUTION_TRACE)
    when the program uses torch, else None."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "_C"):
        return None
    from torch.profiler import ExecutionTraceObserver

    return ExecutionTraceObserver.build_execution_trace_obs_from_env()
