"""Telemetry counter tracks read back from traces: one series per (row, track, metric) of the
"C" events that metric collectors (and PM sampling) write, with mean / peak / min, for
``xpuprof report`` (small time-series plots) and ``xpuprof diff`` (mean and peak per metric).

Per-kernel metric tracks (``xpu_scope_profiler``, stepping with each kernel) are not telemetry
and are left to the kernel table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

TELEMETRY_CATEGORIES = frozenset({"gpu_pm_counter", "host_counter"})


@dataclass
class TelemetrySeries:
    track: str
    pid: object
    metric: str
    ts_ms: np.ndarray  # ms since the first event of the trace
    values: np.ndarray
    unit: str = ""  # from the trace's "collectors" metadata, when a collector wrote the track

    @property
    def key(self) -> str:
        return f"{self.track} [{self.pid}] {self.metric}"

    @property
    def mean(self) -> float:
        return float(self.values.mean()) if len(self.values) else float("nan")

    @property
    def peak(self) -> float:
        return float(self.values.max()) if len(self.values) else float("nan")

    @property
    def low(self) -> float:
        return float(self.values.min()) if len(self.values) else float("nan")

    def to_dict(self) -> dict:
        return {"track": self.track, "pid": self.pid, "metric": self.metric, "samples": int(len(self.values)),
                "mean": self.mean, "peak": self.peak, "min": self.low, "unit": self.unit}


def collector_units(headers: Iterable[dict]) -> dict[tuple[str, str], str]:
    """(track, metric) -> unit, from the "collectors" metadata of traces (``{name: {"metrics": {m: unit}}}``)."""
    out: dict[tuple[str, str], str] = {}
    for header in headers:
        collectors = header.get("collectors") if isinstance(header, dict) else None
        for name, info in (collectors.items() if isinstance(collectors, dict) else ()):
            metrics = info.get("metrics") if isinstance(info, dict) else None
            for metric, unit in (metrics.items() if isinstance(metrics, dict) else ()):
                if isinstance(unit, str):
                    out.setdefault((str(name), str(metric)), unit)
    return out


def telemetry_series(table) -> list[TelemetrySeries]:
    """Every telemetry series of a TraceTable's traces, in first-seen order (file order, trace after trace):
    one per (track, row, metric) of the counters that metric collectors (and PM sampling) write, its times
    in ms since its trace's first event. A host row is keyed "host", not by its process id, so two runs'
    host tracks match."""
    keys: dict[tuple, int] = {}
    codes, times, values = [], [], []
    for trace, info in enumerate(table.traces):
        c = table.columns("counters", trace)
        if not len(c):
            continue
        strings = list(c.strings)
        cat_ok = np.array([t in TELEMETRY_CATEGORIES for t in strings] + [False], bool)
        value = np.asarray(c.value, np.float64)
        rows = np.flatnonzero(cat_ok[c.cat] & np.isfinite(value))
        if not len(rows):
            continue
        rows = rows[np.argsort(np.asarray(c.order)[rows], kind="stable")]  # file order; an event's metrics in order
        sub = c.take(rows)
        host = np.array([t == "host_counter" for t in strings] + [False], bool)[sub.cat]
        for row, name, metric in zip(("host" if h else w for h, w in zip(host.tolist(), sub.where("pid"))),
                                     sub.text("name"), sub.text("metric")):
            codes.append(keys.setdefault((name or "", row, metric or ""), len(keys)))
        times.append((np.asarray(sub.ts, np.int64) - (info.first_ts_ns or 0)) / 1e6)
        values.append(np.asarray(sub.value, np.float64))
    if not keys:
        return []
    code = np.asarray(codes, np.int64)
    ts, vals = np.concatenate(times), np.concatenate(values)
    by_key = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[by_key], np.arange(len(keys) + 1))
    out = []
    for (track, pid, metric), k in keys.items():
        sel = by_key[bounds[k]:bounds[k + 1]]
        order = np.argsort(ts[sel], kind="stable")
        out.append(TelemetrySeries(track, pid, metric, ts[sel][order], vals[sel][order]))
    return out

