"""XpuptiActivityScopeApi: the plain PTI views plus per-kernel hardware metrics (PTI metrics scope).

Loaded only when the ``xpu_scope_profiler`` activity type is selected (``XpuBackend.create``). Kineto's
XpuptiScopeProfilerSession order: views first (PTI needs kernel/copy/fill tracing for the scope
callbacks to fire), then at configure time the metric names are validated - against the device's
PTI metric groups when a device answers, else the ``metrics/xpu`` catalogs - and the scope is
enabled, configured (AUTO_KERNEL, one device) and its collection buffer sized from max_scopes, so a
bad request fails before anything starts. ``start``/``stop`` bracket the collection; ``process``
calculates the metrics, writes the kernels with the metric values in their args, then the counter
tracks and ``metrics: <kernel>`` slices through ``TraceBuilder.add_per_kernel_metrics``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...activity import ActivityType
from ...config.options import ExperimentalConfig
from . import emit
from .activity_api import XpuptiActivityApi
from .metrics_scope import (KernelTable, MetricsScope, MetricsScopeError, ScopeResults, bind_scope_functions,
                            check_scope_request, emit_scope_metrics, ensure_metrics_env, kernel_metric_args,
                            validate_offline)
from ... import catalogs
from ...vendors.levelzero import NULL_DEVICE_NAME
from ...vendors.pti_metrics import null_device_metrics_message

# PTI's sample enables these views for the scope callbacks to fire; kernels are also what records join on.
SCOPE_VIEW_TYPES = frozenset({ActivityType.CONCURRENT_KERNEL})


class MetricArgsEmitter(emit.XpuEmitter):
    """XpuEmitter whose kernel slices also carry their ``"<metric>::<unit>"`` values."""

    def __init__(self, results: ScopeResults | None, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.results = results

    def extra_kernel_args(self, k: np.ndarray, name_ids: np.ndarray) -> dict:
        return {} if self.results is None else kernel_metric_args(self.results, k["_kernel_id"].astype(np.uint64))


class XpuptiActivityScopeApi(XpuptiActivityApi):
    """XpuptiActivityApi + PTI metrics scope in per-kernel (AUTO_KERNEL) mode on one device."""

    def __init__(self, activity_types, config: Any = None, *, experimental: ExperimentalConfig | None = None,
                 scope_functions: dict | None = None, **kwargs) -> None:
        exp = experimental if experimental is not None else getattr(config, "experimental", None)
        self.experimental = exp if exp is not None else ExperimentalConfig()
        self.metric_names = check_scope_request(self.experimental)
        self.max_scopes = self.experimental.effective_max_scopes
        self.metrics_device = self.experimental.metrics_device
        ensure_metrics_env()  # before the base class (and PTI) touch Level Zero
        self._scope_functions = scope_functions
        self.scope: MetricsScope | None = None
        self.results: ScopeResults | None = None
        self.metric_group = ""
        self.device_name = ""
        self.buffer_bytes = 0
        self.unmatched = 0
        super().__init__(frozenset(activity_types) | SCOPE_VIEW_TYPES, config, **kwargs)  # calls enable()

    # ------------------------------------------------------------------ configure time
    def enable(self) -> None:
        super().enable()
        try:
            fns = self._scope_functions if self._scope_functions is not None else bind_scope_functions(self.lib._lib)
            self.scope = MetricsScope(fns, result_name=self.lib.result_name)
            handle = self._choose_device()
            self.metric_group = self._validate(handle)
            self.scope.enable()
            self.scope.configure(self.metric_names, [handle] if handle else [])
            self.buffer_bytes = self.scope.size_buffer(self.max_scopes)
        except BaseException:
            if self.scope is not None:
                self.scope.disable()
            if self.stall is not None:
                self.stall.abandon()
            self.disable()
            raise

    def _choose_device(self) -> int:
        """Handle of the metrics device (``metrics_device``), or 0 when PTI lists none."""
        try:
            devices = self.scope.devices()
        except MetricsScopeError:
            return 0  # no device enumeration: PTI's configure decides, names checked offline
        if not devices:
            return 0
        if self.metrics_device >= len(devices):
            raise MetricsScopeError(
                f"metrics_device {self.metrics_device} does not exist: PTI lists {len(devices)} metrics device(s): "
                + ", ".join(f"{i}: {name}" for i, (_h, name) in enumerate(devices)))
        handle, self.device_name = devices[self.metrics_device]
        if self.device_name == NULL_DEVICE_NAME:  # it lists a metric group, but has no counters behind it
            raise MetricsScopeError(null_device_metrics_message(
                f"per-kernel metrics {', '.join(map(repr, self.metric_names))} cannot be collected: "
                f"metrics_device {self.metrics_device} is"))
        return handle

    def _validate(self, handle: int) -> str:
        """The one metric group holding every requested name (device groups, else catalogs)."""
        groups: dict[str, list[tuple[str, str]]] = {}
        if handle and self.scope.fns.get("ptiMetricsGetMetricGroups") and self.scope.fns.get(
                "ptiMetricsGetMetricsProperties"):
            try:
                groups = self.scope.device_groups(handle)
            except MetricsScopeError:
                groups = {}
        if groups:
            group, _ = catalogs.validate_selection(self.metric_names, {g: [m for m, _u in ms] for g, ms in groups.items()},
                                                   where=self.device_name or "the device")
            return group or ""
        return validate_offline(self.metric_names, self.device_name)

    # ------------------------------------------------------------------ collection
    def start(self) -> None:
        super().start()
        self.scope.start()

    def stop(self) -> None:
        try:
            self.scope.stop()
        finally:
            super().stop()

    def process_records(self, records, builder, window) -> None:
        writer = MetricArgsEmitter(self.results, self.context(), self.types,
                                   kernel_args=self.kernel_arg_sources(builder), kernel_filter=self.kernel_filter)
        result = writer.write(builder, window, records)
        self.kernels = result.kernels
        self._errors.extend(result.errors)

    def process(self, builder, window) -> None:
        try:
            try:
                self.results = _without_filtered(self.scope.collect(), self.kernel_filter)
            except MetricsScopeError as exc:
                self.results = None
                self._errors.append(f"per-kernel metrics not collected: {exc}")
            super().process(builder, window)  # kernels, with metric args (process_records)
            if self.results is not None:
                self.unmatched = emit_scope_metrics(builder, self.results, join_table(self.kernels))
                builder.set_metadata("xpu_scope_metric_group", self.results.group or self.metric_group)
        finally:
            self.scope.disable()

    def metadata(self) -> dict[str, Any]:
        out = super().metadata()
        out["xpu_scope_metrics"] = list(self.metric_names)
        return out


def _without_filtered(results: ScopeResults, kernel_filter) -> ScopeResults:
    """The metric records of the kernels the name filter keeps (the others have no kernel slice)."""
    if kernel_filter is None or not len(results):
        return results
    names = np.asarray(results.kernel_names, dtype=object)
    uniq, inverse = np.unique(names, return_inverse=True)
    keep = np.array([kernel_filter.keep(str(n)) for n in uniq.tolist()], bool)[inverse.reshape(-1)]
    if keep.all():
        return results
    return ScopeResults(results.kernel_ids[keep], results.queues[keep], names[keep].tolist(),
                        {m: v[keep] for m, v in results.values.items()}, results.metadata, results.group,
                        results.warnings)


def join_table(k: emit.KernelTable) -> KernelTable:
    """The written kernels in the shape ``emit_scope_metrics`` joins on."""
    return KernelTable(kernel_ids=np.asarray(k.kernel_id, np.uint64), start_ns=np.asarray(k.start_ns, np.int64),
                       end_ns=np.asarray(k.end_ns, np.int64), pid=np.asarray(k.device, np.int64),
                       tid=np.asarray(k.queue, np.int64), names=[str(n) for n in k.name])
