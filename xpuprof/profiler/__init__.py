"""``xpuprof.profile``: torch.profiler's shape, driving backend sessions into one TraceBuilder.

A profile run selects backends once (registry, explicit names, probes), then for every
recording cycle of its schedule: configures one session per backend (warmup), starts them with
the host recorder (active), stops them, and builds the trace: each session's ``process``, the
host ranges and instants, thread/process rows, a span row, device properties, metadata,
dropped-record counts and errors. ``on_trace_ready`` is called at the end of each active cycle.

Stages, one module each: ``api`` (profile, schedule, handlers, the action state machine),
``selection`` (backends, metric checks, why nothing ran), ``cycle`` (start/stop/abort of every
source of one recording cycle), ``assemble`` (the trace of a finished cycle).
"""
from __future__ import annotations

# DEVICE_GROUP and ACTIVITY_GROUPS (torch's groups) live in activity.py, with the one parser of activity lists.
from ..activity import ACTIVITY_GROUPS, DEVICE_GROUP, ActivityType, default_activity_types
from .api import ProfilerAction, profile, schedule, trace_file_name, trace_handler
from .events import FinishedCycle
from .selection import (HOST_ACTIVITIES, METRIC_ACTIVITIES, parse_activities, plan_collectors, select_backends,
                        with_metric_activities)

__all__ = ["ACTIVITY_GROUPS", "DEVICE_GROUP", "HOST_ACTIVITIES", "METRIC_ACTIVITIES", "SPAN_NAME", "ActivityType",
           "FinishedCycle", "ProfilerAction", "default_activity_types", "parse_activities", "plan_collectors", "profile", "schedule",
           "select_backends", "trace_file_name", "trace_handler", "with_metric_activities"]


def __getattr__(name: str):
    # assemble (and with it the trace builder) loads when a profile first records, not at `import xpuprof`
    if name == "SPAN_NAME":
        from .assemble import SPAN_NAME
        return SPAN_NAME
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
