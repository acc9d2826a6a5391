"""The Pythonic configuration every front end (Python API, YAML, Kineto strings) turns into."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..activity import ActivityType, default_activity_types, parse_activity_types

if TYPE_CHECKING:
    from .kineto import KinetoConfig

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
    metrics_interval_ms: float = 10.0  # sampling interval of metric collectors (host/device telemetry)
    stall_sampling: bool = False  # XPU: EU stall sampling (PTI PC sampling), per kernel and instruction
    stall_sampling_period_ns: int = 0  # its sampling period; 0 = PTI's default (100000 ns)

    def __post_init__(self) -> None:
        if isinstance(self.profiler_metrics, str):
            self.profiler_metrics = [m.strip() for m in self.profiler_metrics.split(",") if m.strip()]
        else:
            self.profiler_metrics = [str(m) for m in self.profiler_metrics]
        if int(self.max_scopes) < 0:
            raise ValueError(f"max_scopes must be >= 0, got {self.max_scopes}")
        self.max_scopes = int(self.max_scopes)
        interval = float(self.metrics_interval_ms)
        if not 0 < interval < float("inf"):
            raise ValueError(f"metrics_interval_ms must be a positive number of milliseconds, got {self.metrics_interval_ms!r}")
        self.metrics_interval_ms = interval
        if not isinstance(self.stall_sampling, bool):
            raise ValueError(f"stall_sampling must be True or False, got {self.stall_sampling!r}")
        period = self.stall_sampling_period_ns
        if isinstance(period, bool) or not isinstance(period, int) or not 0 <= period <= 0xFFFFFFFF:
            raise ValueError("stall_sampling_period_ns must be an integer number of ns from 0 (PTI's default, "
                             f"100000) to {0xFFFFFFFF}, got {period!r}")

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
    # torch.profiler's: [memory] events of every allocator torch reports (and Level Zero allocations without
    # torch), torch's FLOP estimate on the ops it counts, module hierarchy on ops
    profile_memory: bool = False
    with_flops: bool = False
    with_modules: bool = False
    # fields of torch's _ExperimentalConfig that torch's own op recorder honours (verbose, profile_all_threads,
    # capture_overload_names, expose_kineto_event_metadata, trace_only): passed to it as given
    torch_experimental: dict[str, Any] = field(default_factory=dict)
    python_functions: bool = False  # python_function tracing is off unless asked for
    backends: list[str] | None = None  # explicit allow-list (e.g. ["sim"]); None = every available one
    disabled_backends: list[str] = field(default_factory=list)
    plugin_paths: list[str] = field(default_factory=list)
    devices: list[int] | None = None
    max_gpu_buffer_bytes: int = 128 * 1024 * 1024
    display_cuda_sync_wait_events: bool = True
    # Category names: Kineto main's / torch.profiler's vendor names (cuda_runtime, xpu_runtime, ...) by
    # default, which HTA and TensorBoard key on; the generic proposal's names (runtime, driver) on request.
    generic_categories: bool = False
    legacy_categories: bool = False  # accepted for compatibility: vendor names are now the default
    trace_id: str = ""
    group_trace_id: str = ""
    raw_capture_path: str | None = None  # XPU: save drained PTI buffers for replay
    # Kernel name filters (regexes searched in the name; unitrace's --include-kernels/--exclude-kernels):
    # kept = (no include or one matches) and no exclude matches. Applied as device records are decoded.
    include_kernels: list[str] = field(default_factory=list)
    exclude_kernels: list[str] = field(default_factory=list)
    # The filters matched with RE2 (linear time): set for on-demand requests, whose patterns come from whoever
    # can reach the daemon (config.kernel_filter)
    linear_kernel_filters: bool = False
    custom: dict[str, Any] = field(default_factory=dict)  # CUSTOM_CONFIG and backend-specific options

    def __post_init__(self) -> None:
        self.activities = parse_activity_types(self.activities) if self.activities else default_activity_types()
        if isinstance(self.experimental, dict):
            self.experimental = ExperimentalConfig(**self.experimental)
        from .kernel_filter import KernelFilter, normalize_patterns

        self.include_kernels = normalize_patterns(self.include_kernels, "include_kernels")
        self.exclude_kernels = normalize_patterns(self.exclude_kernels, "exclude_kernels")
        # a bad pattern fails here, naming it
        KernelFilter.of(self.include_kernels, self.exclude_kernels, linear=self.linear_kernel_filters)

    @property
    def records_python_functions(self) -> bool:
        """Whether our Python-function tracer runs: asked for (``python_functions``) and its activity selected."""
        return self.python_functions and ActivityType.PYTHON_FUNCTION in self.activities

    @property
    def traces_python_calls(self) -> bool:
        """Whether Python calls made while recording land in the trace: by our tracer, or by torch's stacks
        (``with_stack``). Work a tool adds beside the user's (the gate's machine probe) stays out of the window then."""
        return self.records_python_functions or self.with_stack

    @property
    def kernel_filter(self):
        """The compiled ``KernelFilter``, or None when no kernel is filtered."""
        from .kernel_filter import KernelFilter

        return KernelFilter.of(self.include_kernels, self.exclude_kernels, linear=self.linear_kernel_filters)

    def with_changes(self, **changes) -> "ProfilerConfig":
        return replace(self, **changes)

    @classmethod
    def from_kineto(cls, kc: "KinetoConfig | str", **overrides) -> "ProfilerConfig":
        """The ProfilerConfig a Kineto config (object or config text) means.

        Text is parsed first; a malformed line raises ``ValueError`` naming it (the parse result
        Kineto's callers ignore is an error here, since a Python caller can act on it).
        """
        from .kineto import KinetoConfig

        if isinstance(kc, str):
            text, kc = kc, KinetoConfig()
            if not kc.parse(text):
                raise ValueError(f"invalid Kineto config: {'; '.join(kc.errors)}")
        elif not isinstance(kc, KinetoConfig):
            raise TypeError(f"from_kineto takes a KinetoConfig or config text, not {type(kc).__name__}")
        custom: dict[str, Any] = {}
        if kc.custom_config:
            custom["CUSTOM_CONFIG"] = kc.custom_config
        activities = frozenset(kc.selected_activity_types) or default_activity_types()
        fields = dict(
            activities=activities,
            experimental=ExperimentalConfig(
                profiler_metrics=list(kc.xpupti_profiler_metrics),
                profiler_measure_per_kernel=kc.xpupti_profiler_enable_per_kernel,
                max_scopes=kc.xpupti_profiler_max_scopes,
                stall_sampling=kc.xpupti_stall_sampling,
                stall_sampling_period_ns=kc.xpupti_stall_sampling_period_ns,
            ),
            record_shapes=kc.report_input_shapes,
            with_stack=kc.with_stack,
            profile_memory=kc.profile_memory,
            with_flops=kc.with_flops,
            with_modules=kc.with_modules,
            # python_function is in Kineto's default set; tracing Python calls stays opt-in here
            python_functions=kc.activity_types_explicit and ActivityType.PYTHON_FUNCTION in activities,
            max_gpu_buffer_bytes=kc.activities_max_gpu_buffer_size,
            display_cuda_sync_wait_events=kc.activities_display_cuda_sync_wait_events,
            include_kernels=list(kc.xpupti_include_kernels),
            exclude_kernels=list(kc.xpupti_exclude_kernels),
            trace_id=kc.request_trace_id,
            group_trace_id=kc.request_group_trace_id,
            custom=custom,
        )
        fields.update(overrides)
        return cls(**fields)
