"""XpuptiActivityScopeApi: the plain PTI views plus per-kernel hardware metrics (metrics scope).

Loaded only when the ``xpu_scope_profiler`` activity type is selected. Validation happens before
anything starts: against the device's PTI metric groups when a device answers, else against the
``metrics/xpu`` catalogs. Output goes through ``TraceBuilder.add_per_kernel_metrics`` and the
kernels' own X events gain the metric values through the ``kernel_extra_args`` hook.
"""
from __future__ import annotations

import numpy as np

from ... import catalogs
from ...config.options import ExperimentalConfig
from .activity_api import XpuptiActivityApi
from .metrics_scope import (KernelTable, MetricsScope, ScopeResults, bind_scope_functions, check_scope_request,
                            emit_scope_metrics, ensure_metrics_env, kernel_metric_args, validate_offline)


class XpuptiActivityScopeApi(XpuptiActivityApi):
    """XpuptiActivityApi + PTI metrics scope in per-kernel (AUTO_KERNEL) mode on the profiled device."""

    def __init__(self, *args, experimental: ExperimentalConfig, scope_functions: dict | None = None, **kwargs):
        self.metric_names = check_scope_request(experimental)
        self.max_scopes = experimental.effective_max_scopes
        self.metrics_device = experimental.metrics_device
        ensure_metrics_env()  # before the base class (and PTI) touch Level Zero
        super().__init__(*args, **kwargs)
        pti = getattr(self, "pti", None)
        fns = scope_functions if scope_functions is not None else bind_scope_functions(pti._lib)
        self.scope = MetricsScope(fns, result_name=getattr(pti, "result_name", lambda c: f"PTI result {c}"))
        self.results: ScopeResults | None = None
        self._kernels: list[KernelTable] = []
        self.metric_group = ""
        self.device_name = ""

    # ------------------------------------------------------------------ lifecycle
    def validate(self) -> str:
        """Check names against the device's groups (or the catalogs offline); returns the group."""
        try:
            devices = self.scope.devices()
        except MetricsScopeError:
            devices = []
        if devices:
            handle, self.device_name = devices[min(self.metrics_device, len(devices) - 1)]
            groups = self.scope.device_groups(handle) if self.scope.fns.get("ptiMetricsGetMetricGroups") else {}
            if groups:
                group, _ = catalogs.validate_selection(self.metric_names,
                                                       {g: [m for m, _u in ms] for g, ms in groups.items()},
                                                       where=self.device_name)
                return group or ""
        return validate_offline(self.metric_names, self.device_name)

    def start(self) -> None:
        self.metric_group = self.validate()
        devices = self.scope.devices()
        handles = [devices[min(self.metrics_device, len(devices) - 1)][0]] if devices else []
        self.scope.enable()
        self.scope.configure(self.metric_names, handles)
        self.scope.size_buffer(self.max_scopes)
        super().start()
        self.scope.start()

    def stop(self) -> None:
        try:
            self.scope.stop()
        finally:
            super().stop()

    def process(self, builder, window) -> None:
        self.results = self.scope.collect()
        try:
            super().process(builder, window)  # calls kernel_extra_args for its kernels
            kernels = _concat(self._kernels)
            emit_scope_metrics(builder, self.results, kernels)
            if self.metric_group:
                builder.set_metadata("xpu_scope_metric_group", self.metric_group)
        finally:
            self.scope.disable()

    # ------------------------------------------------------------------ hook called by XpuptiActivityApi
    def kernel_extra_args(self, kernel_ids, start_ns, end_ns, pid, tid, names) -> dict:
        self._kernels.append(KernelTable(np.asarray(kernel_ids, np.uint64), np.asarray(start_ns, np.int64),
                                         np.asarray(end_ns, np.int64), np.asarray(pid, dtype=object),
                                         np.asarray(tid, dtype=object), list(names)))
        return kernel_metric_args(self.results, np.asarray(kernel_ids, np.uint64))


def _concat(tables: list[KernelTable]) -> KernelTable:
    if not tables:
        return KernelTable.empty()
    return KernelTable(np.concatenate([t.kernel_ids for t in tables]), np.concatenate([t.start_ns for t in tables]),
                       np.concatenate([t.end_ns for t in tables]), np.concatenate([t.pid for t in tables]),
                       np.concatenate([t.tid for t in tables]), [n for t in tables for n in t.names])
