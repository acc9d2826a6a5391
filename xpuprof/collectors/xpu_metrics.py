"""XPU time-based hardware metrics through PTI's device metrics API (``pti_metrics.h``).

PTI samples the GPU's OA counters itself (no thread of ours): per device,
``ptiMetricsConfigureCollection`` with one time-based group (``_type`` bit 2) and the sampling
interval in ns, ``ptiMetricsStartCollection`` / ``ptiMetricsStopCollection``, then
``ptiMetricsGetCalculatedData`` returns ``pti_value_t`` values, sample-major, ``_metric_count``
per sample. Each sample's time is the group's TIMESTAMP-typed metric (PTI ns, moved to our clock
with the offset measured against ``ptiViewGetTimestamp``); a group without one gets times
reconstructed from the interval, and the trace says so.

Names: these metrics share names with the per-kernel ones (``XVE_ACTIVE`` ...), which keep their
bare spelling (Kineto's ``XPUPTI_PROFILER_METRICS``); the time-based stream is asked for as
``xpu_metrics:XVE_ACTIVE``. All names must be in one group on each device (PTI's rule).
"""
from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from ..vendors.pti_metrics import (GROUP_TYPE_TIME_BASED, METRIC_TYPE_TIMESTAMP, PTI_SUCCESS, TIME_BASED_SIGNATURES,
                                   VALUE_DTYPES, CollectionParams, MetricProperties, MetricsGroupProperties,
                                   PtiDeviceProperties)
from .base import Collector, CollectorAvailability, CollectorError, CollectorUnavailable, MetricInfo, Track


def catalog_time_based_metrics() -> dict[str, MetricInfo]:
    """Every metric of a catalog group marked ``time_based`` (metrics/xpu/*.yaml)."""
    from .. import catalogs

    out: dict[str, MetricInfo] = {}
    try:
        cats = catalogs.load_catalogs("xpu")
    except Exception:  # no catalogs: the device still validates names at open()
        return out
    for cat in cats:
        for group in cat.groups.values():
            if "time_based" not in (getattr(group, "collection", ()) or ()):
                continue
            for m in group.metrics.values():
                out.setdefault(m.name, MetricInfo(m.name, m.unit, m.description))
    return out


def catalog_groups_of(names: Sequence[str]) -> dict[str, set[str]]:
    """metric -> the time-based catalog groups (any family) that hold it."""
    from .. import catalogs

    where: dict[str, set[str]] = {n: set() for n in names}
    try:
        cats = catalogs.load_catalogs("xpu")
    except Exception:
        return where
    for cat in cats:
        for group in cat.groups.values():
            if "time_based" in (getattr(group, "collection", ()) or ()):
                for n in names:
                    if n in group.metrics:
                        where[n].add(group.name)
    return where


class PtiError(RuntimeError):
    def __init__(self, call: str, code: int, hint: str = "") -> None:
        super().__init__(f"{call} returned {code}" + (f" ({hint})" if hint else ""))
        self.code = code


_HINTS = {2: "PTI_ERROR_NOT_IMPLEMENTED", 3: "PTI_ERROR_BAD_ARGUMENT", 50: "PTI_ERROR_DRIVER: set ZET_ENABLE_METRICS=1",
          100: "METRICS_COLLECTION_NOT_ENABLED", 104: "METRICS_COLLECTION_ALREADY_ENABLED",
          105: "METRICS_BAD_COLLECTION_CONFIGURATION", 106: "METRICS_NO_DATA_COLLECTED"}


class TimeBasedSession:
    """PTI's device metrics collection for one request on every metrics device (one group each)."""

    def __init__(self, cdll: ctypes.CDLL, names: Sequence[str], interval_ns: int) -> None:
        self.lib = cdll
        for fn, args in TIME_BASED_SIGNATURES.items():
            f = getattr(cdll, fn)
            f.argtypes, f.restype = args, (ctypes.c_uint64 if fn == "ptiViewGetTimestamp" else ctypes.c_uint32)
        for fn in ("ptiMetricsGetDevices", "ptiMetricsGetMetricGroups", "ptiMetricsGetMetricsProperties"):
            getattr(cdll, fn).restype = ctypes.c_uint32
        self.names = list(names)
        self.interval_ns = int(interval_ns)
        n = ctypes.c_uint32(0)
        self._check("ptiMetricsGetDevices", cdll.ptiMetricsGetDevices(None, ctypes.byref(n)))
        devs = (PtiDeviceProperties * n.value)()
        if n.value:
            self._check("ptiMetricsGetDevices", cdll.ptiMetricsGetDevices(devs, ctypes.byref(n)))
        if not n.value:
            raise CollectorUnavailable("PTI lists no metrics device (time-based metrics need an Intel GPU driver)")
        self.devices: list[dict] = []
        problems = []
        for d in devs[:n.value]:
            handle = ctypes.c_void_p(d._handle)
            label = (d._model_name or b"").decode(errors="replace")
            g = ctypes.c_uint32(0)
            self._check("ptiMetricsGetMetricGroups", cdll.ptiMetricsGetMetricGroups(handle, None, ctypes.byref(g)))
            groups = (MetricsGroupProperties * g.value)()
            if g.value:
                self._check("ptiMetricsGetMetricGroups", cdll.ptiMetricsGetMetricGroups(handle, groups, ctypes.byref(g)))
            chosen, seen = None, []
            for grp in groups[:g.value]:
                props = (MetricProperties * grp._metric_count)()
                self._check("ptiMetricsGetMetricsProperties",
                            cdll.ptiMetricsGetMetricsProperties(ctypes.c_void_p(grp._handle), props))
                gname = (grp._name or b"").decode(errors="replace")
                metrics = [((p._name or b"").decode(errors="replace"), p._metric_type, p._value_type,
                            (p._units or b"").decode(errors="replace")) for p in props]
                time_based = bool(grp._type & GROUP_TYPE_TIME_BASED)
                seen.append(f"{gname} ({'time-based' if time_based else f'type {grp._type}, not time-based'})")
                if time_based and chosen is None and set(self.names) <= {m[0] for m in metrics}:
                    chosen = {"handle": grp._handle, "name": gname, "metrics": metrics}
            if chosen is None:
                problems.append(f"device {len(self.devices) + len(problems)} ({label}): no time-based group holds all "
                                f"of {', '.join(self.names)}; its groups: {', '.join(seen) or 'none'}")
                continue
            self.devices.append({"handle": handle, "label": label, "group": chosen})
        if problems:
            raise CollectorUnavailable("; ".join(problems))

    @staticmethod
    def _check(call: str, code: int) -> None:
        if code != PTI_SUCCESS:
            raise PtiError(call, code, _HINTS.get(code, ""))

    def start(self) -> None:
        for d in self.devices:
            params = CollectionParams(ctypes.sizeof(CollectionParams), d["group"]["handle"], self.interval_ns, 0)
            self._check("ptiMetricsConfigureCollection",
                        self.lib.ptiMetricsConfigureCollection(d["handle"], ctypes.byref(params), 1))
        self.offset_ns = self._clock_offset()
        self.start_pti_ns = int(self.lib.ptiViewGetTimestamp())
        for d in self.devices:
            self._check("ptiMetricsStartCollection", self.lib.ptiMetricsStartCollection(d["handle"]))

    def _clock_offset(self) -> int:
        from ..clock import now_ns

        best = None
        for _ in range(5):
            a = now_ns()
            t = int(self.lib.ptiViewGetTimestamp())
            b = now_ns()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - t)
        return best[1]

    def stop(self) -> None:
        self.stop_pti_ns = int(self.lib.ptiViewGetTimestamp())
        errors = []
        for d in self.devices:
            code = self.lib.ptiMetricsStopCollection(d["handle"])
            if code != PTI_SUCCESS:
                errors.append(str(PtiError("ptiMetricsStopCollection", code, _HINTS.get(code, ""))))
        if errors:
            raise RuntimeError("; ".join(errors))

    def samples(self, device: int) -> tuple[np.ndarray, np.ndarray, str]:
        """(epoch ns per sample, values [samples x requested metrics], note) for one device."""
        d = self.devices[device]
        group = d["group"]
        count = ctypes.c_uint32(0)
        code = self.lib.ptiMetricsGetCalculatedData(d["handle"], ctypes.c_void_p(group["handle"]), None,
                                                    ctypes.byref(count))
        if code == 106:  # METRICS_NO_DATA_COLLECTED: a real, empty answer
            return np.empty(0, np.int64), np.empty((0, len(self.names))), ""
        self._check("ptiMetricsGetCalculatedData", code)
        buf = (ctypes.c_uint64 * count.value)()
        if count.value:
            self._check("ptiMetricsGetCalculatedData", self.lib.ptiMetricsGetCalculatedData(
                d["handle"], ctypes.c_void_p(group["handle"]), buf, ctypes.byref(count)))
        m = len(group["metrics"])
        n = count.value // m if m else 0
        raw = np.frombuffer(buf, dtype=np.uint8, count=n * m * 8).reshape(n, m, 8)

        def column(k: int) -> np.ndarray:
            dtype = VALUE_DTYPES.get(group["metrics"][k][2])
            if dtype is None:
                return np.full(n, np.nan)
            return np.ascontiguousarray(raw[:, k, :dtype.itemsize]).view(dtype).ravel().astype(np.float64)

        index = {name: k for k, (name, *_rest) in enumerate(group["metrics"])}
        values = np.column_stack([column(index[name]) for name in self.names]) if n else np.empty((0, len(self.names)))
        ts_k = next((k for k, meta in enumerate(group["metrics"]) if meta[1] == METRIC_TYPE_TIMESTAMP), None)
        if ts_k is not None:
            dtype = VALUE_DTYPES[group["metrics"][ts_k][2]]
            ts = np.ascontiguousarray(raw[:, ts_k, :dtype.itemsize]).view(dtype).ravel().astype(np.int64)
            note = ""
        else:
            ts = self.start_pti_ns + (np.arange(1, n + 1, dtype=np.int64) * self.interval_ns)
            note = (f"group {group['name']} has no TIMESTAMP metric: sample times are reconstructed from the "
                    f"start and the {self.interval_ns} ns interval")
        return ts + np.int64(self.offset_ns), values, note


_probe_cache: dict[str, tuple[bool, str]] = {}


class XpuMetricsCollector(Collector):
    name = "xpu_metrics"
    description = "Intel GPU time-based hardware metrics (PTI device metrics API), one group per device"
    scope = "device"
    qualified_only = True  # bare names stay per-kernel metrics (scope profiler); ask for xpu_metrics:NAME
    self_sampled = True  # PTI samples on its own; no sampling thread of ours

    @classmethod
    def metrics(cls):
        return tuple(catalog_time_based_metrics().values()) or (
            MetricInfo("GPU_BUSY", "percent", "GPU busy (ComputeBasic)"),)

    @classmethod
    def accepts(cls, name: str) -> bool:
        """Any name: the device validates it at open (the catalogs cover known families only)."""
        return bool(name) and ":" not in name

    @classmethod
    def probe(cls) -> CollectorAvailability:
        try:
            from ..vendors import pti
            from ..vendors.pti_metrics import probe_metrics
            path = pti.find_pti_library()
        except Exception as exc:
            return CollectorAvailability(False, str(exc))
        key = str(path)
        if key not in _probe_cache:  # PTI may abort without a driver: probed in a child process, once
            _probe_cache[key] = probe_metrics(path)
        ok, reason = _probe_cache[key]
        return CollectorAvailability(ok, reason)

    def __init__(self, metrics: Sequence[str], interval_s: float | None = None) -> None:
        bad = [m for m in metrics if not self.accepts(m)]
        if bad:
            raise CollectorError(f"collector 'xpu_metrics': invalid metric name(s) {bad!r}")
        self.requested = list(dict.fromkeys(metrics))
        known = catalog_time_based_metrics()
        self.infos = {m: known.get(m, MetricInfo(m)) for m in self.requested}
        self.interval_s = float(interval_s if interval_s is not None else self.default_interval_s)
        if not self.interval_s > 0:
            raise CollectorError(f"collector 'xpu_metrics': sampling interval must be > 0 s, got {interval_s!r}")
        self.validate()

    def validate(self) -> None:
        where = catalog_groups_of(self.requested)
        listed = {n: g for n, g in where.items() if g}
        if len(listed) > 1 and not set.intersection(*listed.values()):
            detail = "; ".join(f"{n}: {', '.join(sorted(g))}" for n, g in listed.items())
            raise CollectorError(f"time-based XPU metrics must come from one metric group per device (PTI's rule), "
                                 f"and no time-based group has all of {', '.join(listed)} ({detail})")

    def open(self) -> None:
        probe = self.probe()
        if not probe.available:
            raise CollectorUnavailable(probe.reason)
        from ..vendors import pti

        cdll = pti.load_cdll()
        try:
            self.session = TimeBasedSession(cdll, self.requested, int(self.interval_s * 1e9))
        except PtiError as exc:
            raise CollectorUnavailable(str(exc)) from None

    def tracks(self):
        return [Track(self.name, tuple(self.requested), device=i, device_label=f"XPU {i} ({d['label']})")
                for i, d in enumerate(self.session.devices)]

    def start_sampling(self) -> None:
        self.session.start()

    def stop_sampling(self) -> None:
        self.session.stop()

    def series(self, track_index: int):
        return self.session.samples(track_index)

    def read(self):  # never called: self_sampled
        raise CollectorError("xpu_metrics is sampled by PTI (series()), not by read()")
