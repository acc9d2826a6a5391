"""The Pythonic configuration every front end (Python API, YAML, Kineto strings) turns into."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..activity import ActivityType, default_activity_types, parse_activity_types

# Kineto's XpuptiScopeProfilerConfig::setClientDefaults: scopes when MAX_SCOPES is unset (0).
DEFAULT_MAX_SCOPES_PER_KERNEL = 1500
DEFAULT_MAX_SCOPES_USER = 10


@dataclass
class ExperimentalConfig:
    """Per-kernel hardware metrics and other opt-in collection (torch's _ExperimentalConfig shape)."""

    profiler_metrics: list[str] = field(default_factory=list)
    profiler_measure_per_kernel: bool = True
    max_scopes: int = 0  # 0 = unset: Kineto's default applies (see effective_max_scopes)
    pm_sampling_interval_us: int = 1000  # CUPTI PM sampling period
    metrics_device: int = 0  # device whose metric groups are configured

    def __post_init__(self) -> None:
        if isinstance(self.profiler_metrics, str):
            self.profiler_metrics = [m.strip() for m in self.profiler_metrics.split(",") if m.strip()]
        else:
            self.profiler_metrics = [str(m) for m in self.profiler_metrics]
        if int(self.max_scopes) < 0:
            raise ValueError(f"max_scopes must be >= 0, got {self.max_scopes}")
        self.max_scopes = int(self.max_scopes)

    @property
    def effective_max_scopes(self) -> int:
        if self.max_scopes:
            return self.max_scopes
        return DEFAULT_MAX_SCOPES_PER_KERNEL if self.profiler_measure_per_kernel else DEFAULT_MAX_SCOPES_USER


@dataclass
class ProfilerConfig:
    """Everything a profile run needs to know. Backends read the fields that concern them."""

    activities: frozenset[ActivityType] = field(default_factory=default_activity_types)
    experimental: ExperimentalConfig = field(default_factory=ExperimentalConfig)
    record_shapes: bool = False
    with_stack: bool = False
    python_functions: bool = False  # python_function tracing is off unless asked for
    backends: list[str] | None = None  # explicit allow-list (e.g. ["sim"]); None = every available one
    disabled_backends: list[str] = field(default_factory=list)
    plugin_paths: list[str] = field(default_factory=list)
    devices: list[int] | None = None
    max_gpu_buffer_bytes: int = 128 * 1024 * 1024
    display_cuda_sync_wait_events: bool = True
    legacy_categories: bool = False
    trace_id: str = ""
    group_trace_id: str = ""
    raw_capture_path: str | None = None  # XPU: save drained PTI buffers for replay
    custom: dict[str, Any] = field(default_factory=dict)  # CUSTOM_CONFIG and backend-specific options

    def __post_init__(self) -> None:
        self.activities = parse_activity_types(self.activities) if self.activities else default_activity_types()
        if isinstance(self.experimental, dict):
            self.experimental = ExperimentalConfig(**self.experimental)

    def with_changes(self, **changes) -> "ProfilerConfig":
        return replace(self, **changes)
