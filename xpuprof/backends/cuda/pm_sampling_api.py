"""CuptiPmSamplingApi: CUPTI activity tracing plus device-wide PM sampling counter tracks.

cupti-python has no Range Profiler, so per-kernel CUDA metrics are not possible from Python;
PM sampling is what Kineto moved to as well. Samples become one "C" track per metric on pid
``"GPU <d> Counters"`` (Kineto's ``hardware_counters`` rows), category ``gpu_pm_counter``.

The hardware buffer is drained while the session runs, as Kineto does (every 10 ms), by a
``PmDecoder`` thread: one decode at stop would cap a session at ``max_samples`` (10,000 by
default: 10 s at 1 ms) and let the hardware buffer overflow. Each drain decodes until CUPTI
hands back fewer samples than the image holds. Samples that never arrive are counted from the
holes they leave in the sample timeline (PM sampling on a GPU-time interval produces back-to-back
windows) and, after a decode failure, from the time left uncovered; the count is reported as
dropped records and in the trace metadata. CUPTI (the collector and the activity session) is
released on every path, so a failed session never blocks the next one.
"""
from __future__ import annotations

import difflib
import threading
from typing import Callable, Iterable, Mapping

import numpy as np

from ...activity import ActivityType
from ..base import BackendError
from ..common import keep_in_window, kept
from .activity_api import CuptiActivityApi, cupti_call
from ...vendors import cupti
from .emit import VENDOR


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


DECODE_PERIOD_S = 0.010  # Kineto's CuptiPMSamplingProfiler decode period
DECODE_MAX_SAMPLES = 10_000  # counter-data image size per decode call (cupti-python's default)
MAX_OVERFLOW_RUN = 50  # consecutive overflowing drains before collection is declared failed


class PmDecoder:
    """Drains one started ``pm_sampling.Collector`` into columnar arrays, periodically and at stop."""

    def __init__(self, collector, n_metrics: int, interval_ns: int, *, period_s: float = DECODE_PERIOD_S,
                 max_samples: int = DECODE_MAX_SAMPLES, start_ns: int | None = None) -> None:
        self.collector = collector
        self.start_ns = start_ns  # CUPTI clock when sampling started (bounds the loss after an early failure)
        self.n_metrics = n_metrics
        self.interval_ns = max(int(interval_ns), 1)
        self.period_s = period_s
        self.max_samples = max_samples
        self._starts: list[np.ndarray] = []
        self._ends: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self.lost = 0  # samples known to be missing
        self.overflows = 0  # decode calls that found the hardware buffer overflowed
        self.error: str | None = None  # first decode failure; decoding stops there
        self.decodes = 0
        self._overflow_run = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- thread
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="xpuprof-pm-decode", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s) and self.error is None:
            self.drain()

    def stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # -------------------------------------------------------------- decoding
    def drain(self, final: bool = False) -> None:
        """Decode until CUPTI returns a partly filled image (the hardware buffer is empty). An
        overflow ends a periodic drain (the next one retries); the final drain retries at once."""
        with self._lock:
            while self.error is None:
                try:
                    data = self.collector.decode(self.max_samples)
                except MemoryError as exc:  # cupti-python: ERROR_OUT_OF_MEMORY = hardware buffer overflow
                    self.overflows += 1
                    self._overflow_run += 1
                    if self._overflow_run >= MAX_OVERFLOW_RUN:
                        self.error = f"PM sampling hardware buffer overflowed on {self._overflow_run} drains in a row: {exc}"
                    if final:
                        continue
                    return  # try again next period (and at stop)
                except Exception as exc:  # noqa: BLE001 - kept, reported, and collection stops cleanly
                    self.error = f"PM sampling decode failed: {type(exc).__name__}: {exc}"
                    return
                self.decodes += 1
                self._overflow_run = 0
                n = len(data)
                if n:
                    self._starts.append(np.fromiter((x.start_timestamp for x in data), np.int64, n))
                    self._ends.append(np.fromiter((x.end_timestamp for x in data), np.int64, n))
                    self._values.append(np.array([x.metric_values for x in data], np.float64).reshape(n, -1))
                total = getattr(data, "num_total_samples", self.max_samples)
                if n < min(total, self.max_samples):
                    return

    def samples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            if not self._starts:
                return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, self.n_metrics))
            starts, ends = np.concatenate(self._starts), np.concatenate(self._ends)
            values = np.concatenate(self._values)
        order = np.argsort(starts, kind="stable")
        return starts[order], ends[order], values[order]

    def count_lost(self, session_end_ns: int | None = None) -> int:
        """Samples missing from the timeline: holes between consecutive windows, plus (after a
        failure) the stretch from the last sample to the end of the session."""
        starts, ends, _ = self.samples()
        lost = 0
        if len(starts) > 1:
            gap = starts[1:] - ends[:-1]
            lost += int(np.maximum(np.round(gap / self.interval_ns), 0).sum())
        if self.error is not None and session_end_ns is not None:
            last = int(ends[-1]) if len(ends) else self.start_ns
            if last is not None and session_end_ns > last:
                lost += int((session_end_ns - last) // self.interval_ns)
        self.lost = lost
        return lost


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
        self._decoder: PmDecoder | None = None
        self._samples: tuple[np.ndarray, np.ndarray] | None = None
        self._lost = 0

    def _pm_sampling(self):
        if self._pm is None:
            try:
                self._pm = cupti.load_pm_sampling()
            except ImportError as exc:
                raise BackendError(f"PM sampling needs cupti-python's pm_sampling module: {exc}") from exc
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
            ph = cupti.load_profiler_host()
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
        self._samples, self._lost = None, 0
        self._decoder = PmDecoder(collector, len(metrics), self.interval_ns, start_ns=self._cupti_now())
        self._decoder.start()

    def stop(self) -> None:
        collector, self._collector = self._collector, None
        decoder, self._decoder = self._decoder, None
        try:
            if collector is not None:
                try:
                    if decoder is not None:
                        decoder.stop_thread()
                    try:
                        collector.stop()
                    except Exception as exc:  # noqa: BLE001 - keep releasing; the error is reported
                        self._errors.append(f"PM sampling stop failed: {type(exc).__name__}: {exc}")
                    if decoder is not None:
                        decoder.drain(final=True)  # what the hardware buffer still holds
                        self._finish(decoder)
                finally:
                    collector.disable()
        finally:
            super().stop()  # flush and release CUPTI whatever happened above

    def _cupti_now(self) -> int | None:
        try:
            return int(self._c.get_timestamp()) if self._c is not None else None
        except Exception:  # noqa: BLE001 - without a clock a failure's tail stays uncounted (the error is still reported)
            return None

    def _finish(self, decoder: PmDecoder) -> None:
        starts, _ends, values = decoder.samples()
        self._samples = (starts, values)
        self._lost = decoder.count_lost(self._cupti_now())
        if decoder.error:
            self._errors.append(f"{decoder.error}; samples after the failure were not collected")
        if decoder.overflows:
            self._errors.append(f"PM sampling hardware buffer overflowed {decoder.overflows} time(s): raise "
                                "pm_sampling_interval_us or the hardware buffer size")
        if self._lost:
            with self._lock:
                self._dropped.set("lost", self._lost, kind="PM samples")

    def process(self, builder, window) -> None:
        super().process(builder, window)
        if self._samples is None or not len(self._samples[0]):
            return
        starts, values = self._samples
        starts = starts + self._offset_ns  # same CUPTI time domain as the activity records
        m = keep_in_window(builder, window, starts, VENDOR, "PM sample")
        emit_samples(builder, self.device, self.metrics, kept(starts, m), kept(values, m))

    def metadata(self) -> Mapping[str, object]:
        meta = {"CUPTI_PM_SAMPLING_METRICS": ",".join(self.metrics), "CUPTI_PM_SAMPLING_DEVICE_ID": self.device}
        if self._samples is not None:
            meta["CUPTI_PM_SAMPLING_SAMPLES"] = int(len(self._samples[0]))
            meta["CUPTI_PM_SAMPLING_SAMPLES_LOST"] = int(self._lost)
        return meta
