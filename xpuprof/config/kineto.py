"""Kineto on-demand config strings (``KEY = VALUE`` lines), parsed with Kineto's own semantics.

Follows ``AbstractConfig::parse`` / ``Config::handleOption`` on Kineto ``main`` plus the XPU
scope-profiler feature config, so text users paste from Kineto/dynolog means the same here:

* ``#`` starts a comment; blank lines (space, tab, newline only: ``\\r`` is *not* whitespace)
  are skipped; each other line must split into exactly two parts on ``=``.
* A malformed line or a value that fails to convert makes ``parse`` return ``False`` at once;
  lines before it stay applied and ``validate`` does not run.
* Unknown keys are accepted with a warning and listed in ``unknown_keys``.
"""
from __future__ import annotations

import logging
import os
import re
import time

from ..activity import ActivityType, default_activity_types, parse_activity_types

log = logging.getLogger("xpuprof.config.kineto")

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
_WHITESPACE = " \t\n"  # Kineto's trim set; carriage return deliberately absent
_TRUE = {"y", "yes", "t", "true", "1"}
_FALSE = {"n", "no", "f", "false", "0"}
_INT_RE = re.compile(r"\+?[0-9]+\Z")  # what strtoll accepts after trimming, consuming everything
START_TIME_MAX_AGE_MS = 10_000  # PROFILE_START_TIME more than 10 s in the past is rejected
DEFAULT_START_DELAY_MS = 2_000

# XpuptiScopeProfilerConfig::setDefaults
MAX_AUTO_SCOPES = 1500
MAX_USER_SCOPES = 10


class KinetoConfigError(ValueError):
    """A config value Kineto would reject (bad int/bool/activity type/start time)."""


def to_int(value: str, maximum: int = INT32_MAX) -> int:
    """Kineto's toInt32/toInt64: whole-string base-10, in [0, maximum]."""
    if not _INT_RE.match(value):
        raise KinetoConfigError(f"invalid integer {value!r} (expected base-10 digits in [0, {maximum}])")
    number = int(value)
    if number > maximum:
        raise KinetoConfigError(f"integer {value!r} out of range [0, {maximum}]")
    return number


def to_bool(value: str) -> bool:
    low = value.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise KinetoConfigError(f"invalid boolean {value!r} (expected one of: {', '.join(sorted(_TRUE | _FALSE))})")


def split_and_trim(value: str) -> list[str]:
    """Comma list, items trimmed; empty items dropped (an empty metric/type name means nothing)."""
    return [item for item in (part.strip(_WHITESPACE) for part in value.split(",")) if item]


def ondemand_trace_dir() -> str:
    """The directory on-demand log files must live in (``KINETO_ONDEMAND_TRACE_DIR``, default /tmp/)."""
    base = os.environ.get("KINETO_ONDEMAND_TRACE_DIR") or "/tmp/"
    return base if base.endswith("/") else base + "/"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KinetoConfig:
    """One Kineto config: defaults, then whatever ``parse`` applies on top."""

    def __init__(self) -> None:
        self.source = ""
        self.unknown_keys: list[str] = []
        self.errors: list[str] = []
        self._on_demand = False
        self._timestamp_ms: int | None = None
        # Config::handleOption keys and their Kineto defaults
        self.activities_enabled = True
        self.selected_activity_types: set[ActivityType] = set(default_activity_types())
        self.activity_types_explicit = False  # ACTIVITY_TYPES was given
        self.activities_duration_ms = 500
        self.activities_iterations = 0
        self.activities_warmup_ms = 5_000
        self.activities_warmup_iterations = 0
        self.activities_max_gpu_buffer_size = 128 * 1024 * 1024
        self.activities_display_cuda_sync_wait_events = True
        self.activities_log_file = f"/tmp/libkineto_activities_{os.getpid()}.json"
        self.activities_log_file_set = False  # ACTIVITIES_LOG_FILE was given and accepted
        self.activities_on_demand_timestamp_ms: int | None = None
        self.profile_start_time_ms = 0  # 0 = unset; validate fills it
        self.profile_start_time_explicit = False  # a non-zero PROFILE_START_TIME was given (validate did not fill it)
        self.profile_start_iteration = -1
        self.profile_start_iteration_roundup = -1
        self.request_trace_id = ""
        self.request_group_trace_id = ""
        self.custom_config = ""
        self.report_input_shapes = False
        self.profile_memory = False  # PROFILE_PROFILE_MEMORY: passed to the client
        self.with_stack = False
        self.with_flops = False
        self.with_modules = False
        self.memory_profiler_enabled = False  # PROFILE_MEMORY: memory-snapshot mode
        self.profile_memory_duration_ms = 1000
        self.cupti_per_thread_buffer_enabled = False
        self.cupti_pm_sampling_metrics: list[str] = []
        self.cupti_pm_sampling_device_id = -1
        self.roctracer_max_events = 5_000_000
        self.enable_ipc_fabric = "KINETO_USE_DAEMON" in os.environ
        self.on_demand_config_update_interval_s = 5
        self.verbose_log_level = -1
        self.verbose_log_modules: list[str] = []
        self.log_to_memory = False
        # XPU scope-profiler feature config (§14.4)
        self.xpupti_profiler_metrics: list[str] = []
        self.xpupti_profiler_enable_per_kernel = False
        self.xpupti_profiler_max_scopes = 0
        # xpuprof's XPU extension keys: EU stall sampling (PTI PC sampling), kernel name filters
        self.xpupti_stall_sampling = False
        self.xpupti_stall_sampling_period_ns = 0
        self.xpupti_include_kernels: list[str] = []  # unitrace's list syntax: a,"b,c"
        self.xpupti_exclude_kernels: list[str] = []

    # ------------------------------------------------------------------ public API
    def set_on_demand(self, on_demand: bool = True) -> None:
        """Daemon/on-demand configs: ACTIVITIES_LOG_FILE must stay inside ``ondemand_trace_dir()``."""
        self._on_demand = bool(on_demand)

    @property
    def on_demand(self) -> bool:
        return self._on_demand

    def parse(self, text: str) -> bool:
        """Apply ``text``; False (with earlier lines applied, no validate) on the first bad line."""
        self._timestamp_ms = _now_ms()
        for number, raw in enumerate(str(text).split("\n"), 1):
            line = raw.split("#", 1)[0]
            if not line.strip(_WHITESPACE):
                continue
            parts = [p.strip(_WHITESPACE) for p in line.split("=")]
            if len(parts) != 2:
                self._error(f"line {number}: expected KEY = VALUE with exactly one '=', got {raw!r}")
                return False
            key, value = parts
            try:
                handled = self._handle_option(key, value) or self._handle_xpu_option(key, value)
            except (KinetoConfigError, ValueError) as exc:
                self._error(f"line {number}: {key}: {exc}")
                return False
            if not handled:
                self.unknown_keys.append(key)
                log.warning("Unrecognized config line %d: %r (key %r ignored)", number, raw, key)
        self.validate(self._timestamp_ms)
        self.source = str(text)
        self._timestamp_ms = None
        return True

    def validate(self, fallback_start_ms: int | None = None) -> None:
        """Config::validate: fill the start time, fix roundup, default an empty type set."""
        if fallback_start_ms is None:
            fallback_start_ms = _now_ms()
        if not self.profile_start_time_ms:
            self.profile_start_time_ms = fallback_start_ms + self.activities_warmup_ms + DEFAULT_START_DELAY_MS
        if self.profile_start_iteration_roundup == 0:
            log.warning("PROFILE_START_ITERATION_ROUNDUP=0 is invalid; using -1 (no rounding)")
            self.profile_start_iteration_roundup = -1
        if self.profile_start_iteration_roundup > 0 and self.profile_start_iteration < 0:
            self.profile_start_iteration = 0
        if not self.selected_activity_types:
            self.selected_activity_types = set(default_activity_types())

    def set_client_defaults(self) -> None:
        """Sync (PyTorch) path: log to memory; scope-profiler max scopes when metrics are set and it is 0."""
        self.log_to_memory = True
        if self.xpupti_profiler_metrics and self.xpupti_profiler_max_scopes == 0:
            self.xpupti_profiler_max_scopes = (MAX_AUTO_SCOPES if self.xpupti_profiler_enable_per_kernel
                                               else MAX_USER_SCOPES)

    @property
    def iteration_mode(self) -> bool:
        return self.profile_start_iteration >= 0 and self.activities_iterations > 0

    @property
    def activities_log_url(self) -> str:
        """``file://`` URL with ``_<pid>`` before ``.pt.trace.json`` (or ``.json``), as Kineto writes it.
        The default file already names the pid and stays as it is (Kineto's default URL)."""
        path = self.activities_log_file
        if not self.activities_log_file_set:
            return f"file://{path}"
        pid = f"_{os.getpid()}"
        for suffix in (".pt.trace.json", ".json"):
            at = path.find(suffix)
            if at >= 0:
                path = path[:at] + pid + path[at:]
                break
        return f"file://{path}"

    # ------------------------------------------------------------------ handlers
    def _error(self, message: str) -> None:
        self.errors.append(message)
        log.error("Failed to parse config: %s", message)

    def _touch_request(self) -> None:
        self.activities_on_demand_timestamp_ms = self._timestamp_ms if self._timestamp_ms is not None else _now_ms()

    def _handle_option(self, key: str, value: str) -> bool:
        if key == "ACTIVITIES_ENABLED":
            self.activities_enabled = to_bool(value)
        elif key == "ACTIVITY_TYPES":
            try:  # type names, and the group names every activity list accepts (activity.ACTIVITY_GROUPS)
                selected = set(parse_activity_types(split_and_trim(value.lower())))
            except ValueError as exc:
                raise KinetoConfigError(str(exc)) from None
            self.selected_activity_types = selected  # replaces; empty -> defaults at validate
            self.activity_types_explicit = True
        elif key == "ACTIVITIES_DURATION_SECS":
            self.activities_duration_ms = to_int(value) * 1000
            self._touch_request()
        elif key == "ACTIVITIES_DURATION_MSECS":
            self.activities_duration_ms = to_int(value)
            self._touch_request()
        elif key == "ACTIVITIES_ITERATIONS":
            self.activities_iterations = to_int(value)
            self._touch_request()
        elif key == "ACTIVITIES_WARMUP_PERIOD_SECS":
            self.activities_warmup_ms = to_int(value) * 1000
        elif key == "ACTIVITIES_WARMUP_ITERATIONS":
            self.activities_warmup_iterations = to_int(value)
        elif key == "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB":
            self.activities_max_gpu_buffer_size = to_int(value) * 1024 * 1024
        elif key == "ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS":
            self.activities_display_cuda_sync_wait_events = to_bool(value)
        elif key == "ACTIVITIES_LOG_FILE":
            self._set_log_file(value)
            self._touch_request()
        elif key == "PROFILE_START_TIME":
            start = to_int(value, INT64_MAX)
            if start and start < _now_ms() - START_TIME_MAX_AGE_MS:
                raise KinetoConfigError(f"profile start time {start} ms is more than 10 s in the past")
            self.profile_start_time_ms = start
            self.profile_start_time_explicit = bool(start)
        elif key == "PROFILE_START_ITERATION":
            self.profile_start_iteration = to_int(value)
        elif key == "PROFILE_START_ITERATION_ROUNDUP":
            self.profile_start_iteration_roundup = to_int(value)
        elif key == "REQUEST_TRACE_ID":
            self.request_trace_id = value
        elif key == "REQUEST_GROUP_TRACE_ID":
            self.request_group_trace_id = value
        elif key == "CUSTOM_CONFIG":
            self.custom_config = value
        elif key in ("PROFILE_REPORT_INPUT_SHAPES", "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION"):
            self.report_input_shapes = to_bool(value)
        elif key == "PROFILE_PROFILE_MEMORY":
            self.profile_memory = to_bool(value)
        elif key in ("PROFILE_WITH_STACK", "PYTHON_STACK_TRACE"):
            self.with_stack = to_bool(value)
        elif key == "PROFILE_WITH_FLOPS":
            self.with_flops = to_bool(value)
        elif key == "PROFILE_WITH_MODULES":
            self.with_modules = to_bool(value)
        elif key == "PROFILE_MEMORY":
            self.memory_profiler_enabled = to_bool(value)
            if self.memory_profiler_enabled:
                self.activities_log_file = f"/tmp/memory_snapshot_{os.getpid()}.pickle"
        elif key == "PROFILE_MEMORY_DURATION_MSECS":
            self.profile_memory_duration_ms = to_int(value)
        elif key == "CUPTI_PER_THREAD_BUFFER_ENABLED":
            self.cupti_per_thread_buffer_enabled = to_bool(value)
        elif key == "CUPTI_PM_SAMPLING_METRICS":
            self.cupti_pm_sampling_metrics = split_and_trim(value)
        elif key == "CUPTI_PM_SAMPLING_DEVICE_ID":
            self.cupti_pm_sampling_device_id = to_int(value)
        elif key == "ROCTRACER_MAX_EVENTS":
            self.roctracer_max_events = to_int(value)
        elif key == "ENABLE_IPC_FABRIC":
            self.enable_ipc_fabric = to_bool(value)
        elif key == "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS":
            self.on_demand_config_update_interval_s = to_int(value)
        elif key == "VERBOSE_LOG_LEVEL":
            self.verbose_log_level = to_int(value)
        elif key == "VERBOSE_LOG_MODULES":
            self.verbose_log_modules = split_and_trim(value)
        else:
            return False
        return True

    def _handle_xpu_option(self, key: str, value: str) -> bool:
        if key == "XPUPTI_PROFILER_METRICS":
            self.xpupti_profiler_metrics = split_and_trim(value)
        elif key == "XPUPTI_PROFILER_ENABLE_PER_KERNEL":
            self.xpupti_profiler_enable_per_kernel = to_bool(value)
        elif key == "XPUPTI_PROFILER_MAX_SCOPES":
            self.xpupti_profiler_max_scopes = to_int(value, INT64_MAX)
        elif key == "XPUPTI_STALL_SAMPLING":
            self.xpupti_stall_sampling = to_bool(value)
        elif key == "XPUPTI_STALL_SAMPLING_PERIOD_NS":
            self.xpupti_stall_sampling_period_ns = to_int(value, 0xFFFFFFFF)
        elif key in ("XPUPTI_INCLUDE_KERNELS", "XPUPTI_EXCLUDE_KERNELS"):
            from .kernel_filter import KernelFilter, split_filter_list

            patterns = split_filter_list(value)
            KernelFilter(tuple(patterns))  # a bad pattern is this line's error
            setattr(self, key.lower(), patterns)
        else:
            return False
        return True

    def _set_log_file(self, value: str) -> None:
        if self._on_demand:
            allowed = ondemand_trace_dir()
            if not value.startswith(allowed) or ".." in value:
                # Kineto ignores the value with a warning; parse still succeeds.
                log.warning("ACTIVITIES_LOG_FILE %r ignored: on-demand traces must be under %s and contain no '..'",
                            value, allowed)
                self.errors.append(f"ACTIVITIES_LOG_FILE {value!r} outside {allowed}")
                return
        self.activities_log_file = value
        self.activities_log_file_set = True

    def __repr__(self) -> str:
        types = ",".join(sorted(t.value for t in self.selected_activity_types))
        return (f"KinetoConfig(activity_types={types}, duration_ms={self.activities_duration_ms}, "
                f"iterations={self.activities_iterations}, log_file={self.activities_log_file!r})")
