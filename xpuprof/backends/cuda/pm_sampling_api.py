"""CuptiPmSamplingApi: CUPTI activity tracing plus device-wide PM sampling counter tracks.

cupti-python has no Range Profiler, so per-kernel CUDA metrics are not possible from Python;
PM sampling is what Kineto moved to as well. Samples become one "C" track per metric on pid
``"GPU <d> Counters"`` (Kineto's ``hardware_counters`` rows), category ``gpu_pm_counter``.
"""
from __future__ import annotations

import difflib
from typing import Callable, Iterable, Mapping

import numpy as np

from ...activity import ActivityType
from ..base import BackendError
from .activity_api import CuptiActivityApi, cupti_call
from .decode import VENDOR


def counters_pid(device: int) -> str:
    return f"GPU {device} Counters"


def validate_metrics(requested: Iterable[str], base_metrics: Iterable[str],
                     sub_metrics: Callable[[str], Iterable[str]], *, chip: str) -> list[str]:
    """Every requested ``base.rollup`` name must be one CUPTI lists for the chip; one error names all bad ones."""
    base = set(base_metrics)
    names = [m.strip() for m in requested if m and m.strip()]
    if not names:
        raise BackendError("PM sampling needs at least one metric (ExperimentalConfig.profiler_metrics)")
    bad = []
    for name in names:
        root, _, rollup = name.partition(".")
        if root not in base:
            bad.append(name)
            continue
        if rollup:
            subs = {s.lstrip(".") for s in sub_metrics(root)}
            if subs and rollup not in subs:
                bad.append(name)
    if bad:
        hints = []
        for name in bad:
            close = difflib.get_close_matches(name.partition(".")[0], sorted(base), n=3)
            hints.append(f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise BackendError(f"unknown PM sampling metric(s) for {chip}: {'; '.join(hints)}. "
                           f"{len(base)} base metrics exist on this chip; list them with `xpuprof metrics --vendor cuda`")
    return names


def validate_offline(requested: Iterable[str], chip: str | None = None) -> list[str]:
    """Check names against the ``metrics/cuda`` catalogs when CUPTI cannot list the device's metrics.

    The catalog matching ``chip`` (all cuda catalogs when the chip is unknown) decides. A partial
    catalog cannot prove a name absent, so there only names that look like typos of a catalogued
    metric are rejected (a close match on the same hardware unit, the part before ``__``: ``smsp__x``
    is a different unit from ``sm__x``, not a typo); a complete catalog rejects every unknown name.
    """
    from ...catalogs import CatalogError, find_catalog, load_catalogs

    names = [m.strip() for m in requested if m and m.strip()]
    if not names:
        raise BackendError("PM sampling needs at least one metric (ExperimentalConfig.profiler_metrics)")
    try:
        catalogs = [find_catalog(chip, "cuda")] if chip else load_catalogs("cuda")
    except CatalogError:
        catalogs = load_catalogs("cuda")
    if not catalogs:
        return names
    known = {m: c.groups_of(m) for c in catalogs for m in c.all_metric_names()}
    complete = all(c.complete for c in catalogs)
    bad = []
    for name in names:
        if name in known:
            continue
        unit = name.partition("__")[0]
        close = [c for c in difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.8)
                 if c.partition("__")[0] == unit]
        if complete or close:
            bad.append(f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if bad:
        where = chip or "any catalogued NVIDIA GPU"
        raise BackendError(f"unknown PM sampling metric(s) for {where} (offline check against metrics/cuda, "
                           f"CUPTI's device metric list was unavailable): {'; '.join(bad)}. "
                           f"List them with `xpuprof metrics --vendor cuda`")
    return names


def emit_samples(builder, device: int, metrics: list[str], start_ns: np.ndarray, values: np.ndarray) -> None:
    """One "C" track per metric (args ``{"": value}``, Kineto's layout) on pid ``GPU <d> Counters``."""
    pid = counters_pid(device)
    ts = np.asarray(start_ns, dtype=np.int64)
    vals = np.asarray(values, dtype=np.float64).reshape(len(ts), len(metrics))
    for j, metric in enumerate(metrics):
        builder.add_counters(name=metric, ts=ts, pid=pid, tid=0, cat=ActivityType.GPU_PM_COUNTER,
                             values={"": vals[:, j]}, vendor=VENDOR)
    builder.set_process_name(pid, pid, label=pid, sort_index=5_000_000 + 1000 + device)


class CuptiPmSamplingApi(CuptiActivityApi):
    """Activity tracing (the parent) plus a PM sampling collector on one device."""

    def __init__(self, activity_types, config, *, cupti_module=None, pm_sampling_module=None) -> None:
        super().__init__(activity_types, config, cupti_module=cupti_module)
        exp = config.experimental
        self.device = int(exp.metrics_device)
        self.metrics = list(exp.profiler_metrics)
        self.interval_ns = int(exp.pm_sampling_interval_us) * 1000
        self._pm = pm_sampling_module
        self._collector = None
        self._samples: tuple[np.ndarray, np.ndarray] | None = None

    def _pm_sampling(self):
        if self._pm is None:
            try:
                from cupti import pm_sampling
            except ImportError as exc:
                raise BackendError(f"PM sampling needs cupti-python's pm_sampling module: {exc}") from exc
            self._pm = pm_sampling
        return self._pm

    def chip_name(self) -> str:
        c = self._cupti()
        params = c.DeviceGetChipNameParams()
        params.struct_size = c.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
        params.device_index = self.device
        cupti_call(c, c.device_get_chip_name, params.ptr)
        return params.p_chip_name

    def validated_metrics(self) -> list[str]:
        """Against CUPTI's metric list for the chip; the offline catalogs when CUPTI cannot list it."""
        try:
            chip = self.chip_name()
        except Exception:  # no driver/device: CUPTI cannot even name the chip
            return validate_offline(self.metrics)
        try:
            from cupti import profiler_host as ph

            host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
            host.initialize()
        except Exception:  # profiler host (nvperf) unavailable: fall back to the catalogs
            return validate_offline(self.metrics, chip)
        try:
            types = list(ph.MetricType) if hasattr(ph, "MetricType") else []
            base = [m for t in types if not t.name.startswith("_") for m in host.get_base_metrics(t)]

            def subs(root: str):
                for t in types:
                    if t.name.startswith("_"):
                        continue
                    try:
                        return host.get_sub_metrics(root, t)
                    except ValueError:
                        continue
                return []

            return validate_metrics(self.metrics, base, subs, chip=chip)
        finally:
            host.deinitialize()

    def start(self) -> None:
        metrics = self.validated_metrics()
        super().start()
        collector = None
        try:
            pm = self._pm_sampling()
            collector = pm.Collector(self.device)
            collector.enable()
            collector.configure(metrics=metrics, sampling_interval=self.interval_ns)
            collector.start()
        except BaseException as exc:
            # Release what started (the collector, then CUPTI's subscriber) whatever went wrong.
            if collector is not None and hasattr(collector, "disable"):
                try:
                    collector.disable()
                except Exception:  # keep the original error
                    pass
            self.stop()
            if isinstance(exc, PermissionError):
                raise BackendError("GPU performance counters need admin rights or the driver option "
                                   f"NVreg_RestrictProfilingToAdminUsers=0: {exc}") from exc
            if isinstance(exc, ValueError):
                raise BackendError(f"CUPTI rejected the PM sampling configuration {metrics}: {exc}") from exc
            if isinstance(exc, Exception):  # RuntimeError (nvperf missing, already enabled), cuptiError
                raise BackendError(f"CUPTI PM sampling could not start on device {self.device}: {exc}") from exc
            raise
        self.metrics = metrics
        self._collector = collector

    def stop(self) -> None:
        collector, self._collector = self._collector, None
        if collector is not None:
            try:
                collector.stop()
                data = collector.decode()
                starts = np.fromiter((s.start_timestamp for s in data), np.int64, len(data))
                values = np.array([s.metric_values for s in data], dtype=np.float64).reshape(len(starts), -1)
                self._samples = (starts, values)
            finally:
                collector.disable()
        super().stop()

    def process(self, builder, window) -> None:
        super().process(builder, window)
        if self._samples is None or not len(self._samples[0]):
            return
        starts, values = self._samples
        starts = starts + self._offset_ns  # same CUPTI time domain as the activity records
        m = np.asarray(window.contains(starts), bool) if window is not None else np.ones(len(starts), bool)
        builder.count_dropped("cuda PM sample out of window", int((~m).sum()))
        emit_samples(builder, self.device, self.metrics, starts[m], values[m])

    def metadata(self) -> Mapping[str, object]:
        return {"CUPTI_PM_SAMPLING_METRICS": ",".join(self.metrics), "CUPTI_PM_SAMPLING_DEVICE_ID": self.device}
