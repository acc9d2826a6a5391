"""Running collectors through one recording cycle: open, sample on a thread, stop, emit counters.

Each collector gets its own daemon thread that calls ``read()`` every ``interval_s`` and appends
to flat ``array`` columns (no Python object per sample kept). The thread waits on its own
``Event`` between samples and takes no lock the profiled program could need. A read that raises or
returns no usable row is a gap, counted and named in ``collector_errors``, and sampling goes on;
one that hangs (in ``open``, ``read`` or ``close``) costs the
deadline of ``xpuprof.deadline`` and is reported; its samples so far are kept. Either way the
trace is still written, and its metadata says what is missing.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from array import array
from typing import Sequence

import numpy as np

from ..activity import ActivityType
from ..clock import MONOTONIC_TO_EPOCH_NS
from ..deadline import DeadlineExceeded, call_with_deadline, default_deadline_s
from .base import Collector, CollectorUnavailable, Track

log = logging.getLogger("xpuprof.collectors")

HOST_COUNTER_CATEGORY = "host_counter"
DEVICE_ROW_SORT_BASE = 5_000_000


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _SamplingThread(threading.Thread):
    def __init__(self, collector: Collector, width: int) -> None:
        super().__init__(name=f"xpuprof-collector:{collector.name}", daemon=True)
        self.collector = collector
        self.width = width
        self.stop_event = threading.Event()
        self.ts = array("q")
        self.values = array("d")
        self.count = 0  # rows complete in ts/values (a hung stop reads only these)
        self.bad_reads = 0  # reads that returned no usable row (left as gaps)
        self.first_bad = ""
        self.read_ns = 0  # time spent inside read() (the overhead per sample is read_ns / count)
        self.started_ns = 0
        self.stopped_ns = 0

    def _sample(self) -> None:
        """One reading; a bad one (an exception, None, the wrong count, a non-number) is counted and left
        as a gap, and sampling goes on (a sensor that fails once must not end the track)."""
        t0 = time.monotonic_ns()
        try:
            row = self.collector.read()
            t1 = time.monotonic_ns()
            problem = self._check(row)
        except Exception as exc:
            t1 = time.monotonic_ns()
            problem = f"raised {_describe(exc)}"
        self.read_ns += t1 - t0
        if problem is not None:
            if not self.bad_reads:
                self.first_bad = f"at sample {self.count + self.bad_reads + 1}: read() {problem}"
            self.bad_reads += 1
            return
        self.ts.append((t0 + t1) // 2)
        self.count += 1

    def _check(self, row) -> str | None:
        """Append ``row`` to the values, or say why it is not a reading (nothing appended then)."""
        try:
            n = len(row)
        except TypeError:
            return f"returned {type(row).__name__}, not a sequence of {self.width} numbers"
        if n != self.width:
            return f"returned {n} values, expected {self.width} (one per track metric)"
        try:
            self.values.extend(row)
        except (TypeError, ValueError, OverflowError) as exc:
            del self.values[self.count * self.width:]
            return f"returned a non-numeric value ({type(exc).__name__}: {exc})"
        return None

    @property
    def error(self) -> str:
        """The bad reads, said once (empty when every read was good)."""
        if not self.bad_reads:
            return ""
        total = self.bad_reads + self.count
        return (f"{self.bad_reads} of {total} reads failed, first {self.first_bad}; those samples are gaps in its "
                f"tracks and sampling went on")

    def run(self) -> None:
        interval_ns = int(self.collector.interval_s * 1e9)
        self.started_ns = time.monotonic_ns()
        # The first sample is one interval after open(): rates (CPU %) need a span to measure.
        next_ns = time.monotonic_ns() + interval_ns
        while not self.stop_event.wait(max(0, next_ns - time.monotonic_ns()) / 1e9):
            self._sample()
            next_ns += interval_ns
            now = time.monotonic_ns()
            if next_ns < now:  # read() took longer than the interval: skip, don't burst
                next_ns = now + interval_ns
        self._sample()  # the value at stop, so a short cycle still has its end point
        self.stopped_ns = time.monotonic_ns()

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.count
        ts = np.frombuffer(self.ts, dtype=np.int64, count=n).copy() if n else np.empty(0, np.int64)
        vals = (np.frombuffer(self.values, dtype=np.float64, count=n * self.width).copy().reshape(n, self.width)
                if n else np.empty((0, self.width)))
        return ts, vals


class CollectorRun:
    """The collectors of one recording cycle."""

    def __init__(self, plan: dict[str, list[str]], classes: dict[str, type[Collector]], interval_s: float | None,
                 origins: dict[str, str] | None = None) -> None:
        self.collectors = [classes[name](metrics, interval_s) for name, metrics in plan.items()]
        self.origins = origins or {}
        self.errors: dict[str, list[str]] = {}
        self._threads: dict[str, _SamplingThread] = {}
        self._tracks: dict[str, list[Track]] = {}
        self._opened: list[Collector] = []
        self._self_sampled: list[Collector] = []

    def _fail(self, collector: Collector, message: str) -> None:
        origin = self.origins.get(collector.name)
        self.errors.setdefault(collector.name, []).append(message)
        if origin:
            from .registry import report_fault
            report_fault(origin, "collector", message)
        else:
            log.warning("xpuprof: collector %s: %s", collector.name, message)

    def start(self) -> None:
        deadline = default_deadline_s()
        for c in self.collectors:
            try:
                call_with_deadline(c.open, timeout_s=deadline, what=f"collector {c.name} open()")
                self._opened.append(c)
                tracks = list(call_with_deadline(c.tracks, timeout_s=deadline, what=f"collector {c.name} tracks()"))
                if not tracks or not all(isinstance(t, Track) for t in tracks):
                    raise TypeError(f"tracks() must return a non-empty list of xpuprof.collectors.Track, got {tracks!r}")
            except CollectorUnavailable as exc:
                self._fail(c, f"cannot run here: {exc}; its metrics {', '.join(c.requested)} are not recorded")
                continue
            except Exception as exc:
                self._fail(c, f"open failed: {_describe(exc)}; its metrics {', '.join(c.requested)} are not recorded")
                continue
            self._tracks[c.name] = tracks
            if c.self_sampled:
                try:
                    call_with_deadline(c.start_sampling, timeout_s=deadline, what=f"collector {c.name} start_sampling()")
                    self._self_sampled.append(c)
                except Exception as exc:
                    self._fail(c, f"start failed: {_describe(exc)}; its metrics {', '.join(c.requested)} are not "
                                  f"recorded")
                continue
            thread = _SamplingThread(c, sum(len(t.metrics) for t in tracks))
            self._threads[c.name] = thread
            thread.start()

    def stop(self, *, abort: bool = False) -> None:
        """Stop sampling (and, when the cycle is aborted, close even what emit() would close)."""
        for thread in self._threads.values():
            thread.stop_event.set()
        deadline = default_deadline_s()
        for c in list(self._self_sampled):
            try:
                call_with_deadline(c.stop_sampling, timeout_s=deadline, what=f"collector {c.name} stop_sampling()")
            except Exception as exc:
                self._fail(c, f"stop failed: {_describe(exc)}")
                self._self_sampled.remove(c)
        end = time.monotonic() + deadline
        for name, thread in self._threads.items():
            thread.join(max(0.0, end - time.monotonic()))
            if thread.is_alive():
                self._fail(thread.collector, f"read() did not return within the {deadline:g} s deadline; "
                                             f"the {thread.count} samples taken before are kept")
            elif thread.error:
                self._fail(thread.collector, thread.error)
        for c in self._opened:
            if c in self._self_sampled and not abort:
                continue  # its samples are read in emit(), then it is closed there
            if c.name in self._threads and self._threads[c.name].is_alive():
                continue  # never close under a read() that is still running
            try:
                call_with_deadline(c.close, timeout_s=deadline, what=f"collector {c.name} close()")
            except (DeadlineExceeded, Exception) as exc:
                self._fail(c, f"close failed: {_describe(exc)}")

    def emit(self, builder) -> None:
        """Counter series for every sample taken, on the one builder counter path."""
        summary = {}
        for c in self.collectors:
            entry = {"metrics": {m: c.infos[m].unit for m in c.requested}, "interval_ms": c.interval_s * 1e3,
                     "scope": c.scope, "samples": 0}
            summary[c.name] = entry
            if c in self._self_sampled:
                self._emit_self_sampled(builder, c, entry)
                continue
            thread = self._threads.get(c.name)
            if thread is None:
                continue
            ts, vals = thread.snapshot()
            gaps = getattr(c, "unsupported", None)
            if gaps:  # readings the device refused: gaps in the track, said once
                self.errors.setdefault(c.name, []).extend(
                    f"{what} not recorded (left as gaps): {why}" for what, why in sorted(dict(gaps).items()))
            entry["samples"] = int(len(ts))
            if thread.stopped_ns and not thread.bad_reads:
                span_s = (thread.stopped_ns - thread.started_ns) / 1e9
                expected = int(span_s / c.interval_s)
                if expected >= 10 and len(ts) < expected // 2:  # sparser than asked: say so, never silently
                    self.errors.setdefault(c.name, []).append(
                        f"sampled {len(ts)} times in {span_s:.3f} s, asked every {c.interval_s * 1e3:g} ms "
                        f"(~{expected}): the sampling thread was starved, most likely by Python code holding the "
                        f"GIL; its tracks are sparser than asked")
            if thread.count:
                entry["mean_read_us"] = round(thread.read_ns / thread.count / 1e3, 3)
            if not len(ts):
                continue
            ts = ts + np.int64(MONOTONIC_TO_EPOCH_NS)
            col = 0
            for track in self._tracks[c.name]:
                width = len(track.metrics)
                self._emit_track(builder, c, track, ts, vals[:, col:col + width])
                col += width
        for c in self._self_sampled:
            try:
                call_with_deadline(c.close, timeout_s=default_deadline_s(), what=f"collector {c.name} close()")
            except Exception as exc:
                self._fail(c, f"close failed: {_describe(exc)}")
        builder.set_metadata("collectors", summary)
        errors = {k: v for k, v in self.errors.items() if v}
        if errors:
            builder.set_metadata("collector_errors", errors)
            for name, msgs in errors.items():
                for msg in msgs:
                    builder.warn(f"collector {name}: {msg}")

    def _emit_self_sampled(self, builder, c: Collector, entry: dict) -> None:
        deadline = default_deadline_s()
        for i, track in enumerate(self._tracks[c.name]):
            try:
                ts, vals, note = call_with_deadline(c.series, i, timeout_s=deadline, what=f"collector {c.name} series()")
                ts = np.asarray(ts, dtype=np.int64)
                vals = np.asarray(vals, dtype=np.float64).reshape(len(ts), len(track.metrics))
            except Exception as exc:
                self._fail(c, f"reading the samples of {track.name} (device {track.device}) failed: {_describe(exc)}")
                continue
            if note:
                entry.setdefault("notes", []).append(note)
            entry["samples"] += int(len(ts))
            if len(ts):
                order = np.argsort(ts, kind="stable")
                self._emit_track(builder, c, track, ts[order], vals[order])

    def _emit_track(self, builder, c: Collector, track: Track, ts: np.ndarray, vals: np.ndarray) -> None:
        if track.device is None:
            pid, cat = builder.pid, HOST_COUNTER_CATEGORY
        else:
            pid, cat = int(track.device), ActivityType.GPU_PM_COUNTER
            if pid not in builder.process_names:
                label = track.device_label or f"GPU {pid}"
                builder.set_process_name(pid, label, label=label, sort_index=DEVICE_ROW_SORT_BASE + pid)
        together: dict[str, np.ndarray] = {}
        for j, metric in enumerate(track.metrics):
            info = c.infos.get(metric)
            series, t = vals[:, j], ts
            if info is not None and info.kind == "cumulative":  # energy -> power: d(total)/dt per second
                dt = np.diff(t).astype(np.float64) / 1e9
                with np.errstate(divide="ignore", invalid="ignore"):
                    series = np.diff(series) / dt
                series[~(dt > 0)] = np.nan
                t = t[1:]
            ok = np.isfinite(series)
            if t is ts and ok.all():
                together[metric] = series
            elif ok.any():  # gaps are left out: counters carry numbers only
                builder.add_counters(name=track.name, ts=t[ok], pid=pid, tid=0, cat=cat, values={metric: series[ok]})
        if together:
            builder.add_counters(name=track.name, ts=ts, pid=pid, tid=0, cat=cat, values=together)


def interval_seconds(interval_ms) -> float | None:
    if interval_ms is None:
        return None
    value = float(interval_ms)
    if not value > 0 or math.isinf(value):
        raise ValueError(f"the metric sampling interval must be a positive number of ms, got {interval_ms!r}")
    return value / 1e3


__all__: Sequence[str] = ("CollectorRun", "HOST_COUNTER_CATEGORY", "interval_seconds")
