"""The issue's "Done when": host telemetry counter tracks from the public API, on any machine,
with the real psutil; the shape of the counter events; the default interval; gaps and rates."""
from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import counters, series, trace_of  # noqa: E402

import xpuprof
from xpuprof import Collector, ExperimentalConfig, MetricInfo, Track
from xpuprof.collectors.sampler import HOST_COUNTER_CATEGORY

pytest.importorskip("psutil", reason="the host collector needs psutil (a core dependency of xpuprof)")


class _Gate(Collector):
    """Lets the test decide when enough samples exist (no sleeps): read() counts, the test waits."""
    name = "gate"
    scope = "host"
    seen = threading.Event()
    want = 3
    calls = 0

    @classmethod
    def metrics(cls):
        return [MetricInfo("gate_calls", "1", "read() calls so far")]

    def read(self):
        type(self).calls += 1
        if type(self).calls >= type(self).want:
            type(self).seen.set()
        return [float(type(self).calls)]


def _run_until_samples(metrics, n=3, **exp):
    _Gate.calls, _Gate.want = 0, n
    _Gate.seen.clear()
    xpuprof.register_collector(_Gate)
    prof = xpuprof.profile(activities=["cpu"],
                           experimental_config=ExperimentalConfig(profiler_metrics=[*metrics, "gate_calls"], **exp))
    with prof:
        assert _Gate.seen.wait(30), "the sampling thread never sampled"
    return prof


def test_done_when_host_telemetry_tracks(tmp_path):
    prof = _run_until_samples(["cpu_utilization", "process_rss"], n=4)
    trace = trace_of(prof, tmp_path)
    host = counters(trace, "host")
    assert {e["cat"] for e in host} == {HOST_COUNTER_CATEGORY}
    assert {e["pid"] for e in host} == {prof.builder.pid}  # the host's row
    rss = [e for e in host if "process_rss" in e["args"]]
    cpu = [e for e in host if "cpu_utilization" in e["args"]]  # every other sample or so: a rate needs its span
    assert len(rss) >= 4 and cpu
    for track, metric in ((rss, "process_rss"), (cpu, "cpu_utilization")):
        ts = [e["ts"] for e in track]
        assert ts == sorted(ts) and len(set(ts)) == len(ts)  # monotonic
        assert all(isinstance(e["args"][metric], (int, float)) and math.isfinite(e["args"][metric]) for e in track)
    assert all(0 <= e["args"]["cpu_utilization"] <= 100 for e in cpu)
    assert all(e["args"]["process_rss"] > 1e6 for e in rss)  # a Python process is megabytes
    meta = trace["collectors"]["host"]
    assert meta["interval_ms"] == 10.0 and meta["metrics"] == {"cpu_utilization": "%", "process_rss": "B"}
    assert meta["samples"] == len(rss)
    assert "collector_errors" not in trace
    # the window covers the samples
    ts = sorted(e["ts"] for e in host)
    span = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["cat"] == "Trace"][0]
    assert span["ts"] <= ts[0] and ts[-1] <= span["ts"] + span["dur"] + 1


def test_host_metric_names_do_not_reach_backends():
    prof = xpuprof.profile(activities=["cpu"],
                           experimental_config=ExperimentalConfig(profiler_metrics=["process_rss"]))
    assert prof.config.experimental.profiler_metrics == []


def test_interval_is_configurable_and_validated(tmp_path):
    prof = _run_until_samples(["memory_used"], n=2, metrics_interval_ms=2.5)
    assert trace_of(prof, tmp_path)["collectors"]["host"]["interval_ms"] == 2.5
    with pytest.raises(ValueError, match="metrics_interval_ms must be a positive"):
        ExperimentalConfig(metrics_interval_ms=0)


def test_every_host_metric_reads_a_number(monkeypatch):
    from xpuprof.collectors.host import HostCollector

    c = HostCollector([m.name for m in HostCollector.metrics()])
    c.open()
    try:
        real = time.monotonic_ns
        monkeypatch.setattr(time, "monotonic_ns", lambda: real() + 10**9)  # the rates' span has passed
        row = c.read()
    finally:
        c.close()
    assert len(row) == 5 and all(math.isfinite(v) for v in row[1:])


class _Energy(Collector):
    """A device collector with a cumulative energy counter and a reading that sometimes fails."""
    name = "energy"
    scope = "device"
    totals = iter([0.0, 1.0, 3.0, 6.0, 10.0] + [10.0] * 1000)
    gate = threading.Event()
    n = 0

    @classmethod
    def metrics(cls):
        return [MetricInfo("power", "W", "from energy", kind="cumulative"), MetricInfo("temp", "C")]

    def tracks(self):
        return [Track("energy dev 3", ("power", "temp"), device=3, device_label="Fake GPU 3")]

    def read(self):
        type(self).n += 1
        if type(self).n >= 5:
            type(self).gate.set()
        return [next(self.totals), math.nan if self.n == 2 else 40.0 + self.n]


def test_device_track_energy_becomes_power_and_gaps_are_left_out(tmp_path):
    xpuprof.register_collector(_Energy)
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=["power", "temp"]))
    with prof:
        assert _Energy.gate.wait(30)
    trace = trace_of(prof, tmp_path)
    ev = counters(trace, "energy dev 3")
    assert {e["pid"] for e in ev} == {3} and {e["cat"] for e in ev} == {"gpu_pm_counter"}
    ts_all = [e["ts"] for e in ev if "power" in e["args"]]
    ts_t, temp = series(trace, "energy dev 3", "temp")
    assert 2 + 40.0 not in temp and all(math.isfinite(v) for v in temp)  # the NaN reading is a gap
    ts_p, power = series(trace, "energy dev 3", "power")
    assert ts_p == ts_all and len(power) >= 4
    assert all(v >= 0 for v in power)
    # energy 0,1,3,6,10 J: the first four rates are 1,2,3,4 J over each sample's interval
    every = sorted(set(ts_t) | set(ts_p))  # every sample's time (temp has the first one)
    joules = [p * (t - every[every.index(t) - 1]) / 1e6 for p, t in zip(power, ts_p)]
    assert joules[:4] == pytest.approx([1.0, 2.0, 3.0, 4.0], rel=1e-2)
    rows = [e for e in trace["traceEvents"] if e.get("ph") == "M" and e["pid"] == 3 and e["name"] == "process_name"]
    assert rows and rows[0]["args"]["name"] == "Fake GPU 3"


class _Slow(Collector):
    """A reader that takes 5 intervals per read: the samples are far sparser than asked."""
    name = "slow"
    scope = "host"
    clock = threading.Event()
    reads = 0

    @classmethod
    def metrics(cls):
        return [MetricInfo("slow_metric")]

    def read(self):
        type(self).reads += 1
        if type(self).reads >= 4:
            type(self).clock.set()
        threading.Event().wait(self.interval_s * 5)  # a slow sensor (not test synchronization)
        return [1.0]


def test_starved_sampling_is_reported_not_silent(tmp_path):
    xpuprof.register_collector(_Slow)
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=["slow_metric"], metrics_interval_ms=2))
    with prof:
        assert _Slow.clock.wait(30)
    trace = trace_of(prof, tmp_path)
    msg = trace["collector_errors"]["slow"][0]
    assert "asked every 2 ms" in msg and "sparser than asked" in msg


def test_cpu_rates_are_gaps_until_a_span_they_can_measure_has_passed(monkeypatch):
    """The kernel counts CPU time in clock ticks: a rate over a shorter span is not a measurement."""
    import psutil

    from xpuprof.collectors.host import HostCollector

    base = psutil.cpu_times()
    ticks = [0.0]  # busy and idle seconds added on every CPU-time read
    monkeypatch.setattr(psutil, "cpu_times", lambda: base._replace(user=base.user + ticks[0], idle=base.idle + 3 * ticks[0]))
    clock = [10_000_000_000]
    monkeypatch.setattr(time, "monotonic_ns", lambda: clock[0])
    c = HostCollector(["cpu_utilization", "process_cpu_utilization", "process_rss"], interval_s=0.010)
    c.open()
    try:
        first = c.read()  # right after open(): nothing elapsed
        clock[0] += 2_000_000  # two samples ~2 ms apart
        ticks[0] = 0.01
        close = c.read()
        clock[0] += 1_000_000_000  # a measurable span since the last rate
        ticks[0] = 0.25
        later = c.read()
    finally:
        c.close()
    for row in (first, close):
        assert math.isnan(row[0]) and math.isnan(row[1]), row  # gaps, never a made-up 0.0
        assert row[2] > 1e6  # the other metrics are read every sample
    assert later[0] == 25.0  # 0.25 s busy of 1.0 s counted, over the whole span since open()
    assert math.isfinite(later[1]) and later[1] >= 0


def test_a_span_without_ticks_is_a_gap_not_zero(monkeypatch):
    import psutil

    from xpuprof.collectors.host import HostCollector

    frozen = psutil.cpu_times()
    monkeypatch.setattr(psutil, "cpu_times", lambda: frozen)  # no tick counted on any CPU
    clock = [10_000_000_000]
    monkeypatch.setattr(time, "monotonic_ns", lambda: clock[0])
    c = HostCollector(["cpu_utilization"], interval_s=0.010)
    c.open()
    try:
        clock[0] += 1_000_000_000
        (value,) = c.read()
    finally:
        c.close()
    assert math.isnan(value)


def test_host_rates_in_a_trace_are_a_span_apart(tmp_path):
    import os

    prof = _run_until_samples(["cpu_utilization", "process_rss"], n=12)
    host = counters(trace_of(prof, tmp_path), "host")
    cpu = [e["ts"] for e in host if "cpu_utilization" in e["args"]]
    rss = [e for e in host if "process_rss" in e["args"]]
    assert len(rss) >= 12 and len(cpu) >= 2
    span_us = 0.9 * max(0.010, 2 / os.sysconf("SC_CLK_TCK")) * 1e6  # two clock ticks, or the interval
    assert min(b - a for a, b in zip(cpu, cpu[1:])) >= span_us * 0.99  # the read's midpoint, not its start
