"""A collector's bad reads (None, an exception, the wrong count, a non-number) are gaps: named in
``collector_errors`` with how many failed and the first reason, and sampling goes on."""
from __future__ import annotations

import threading

import orjson
import pytest

import xpuprof
from xpuprof import Collector, ExperimentalConfig, MetricInfo
from xpuprof.collectors import registry as collector_registry
from xpuprof.plugins import faults, loader
from xpuprof.plugins import registry as plugin_registry

GOOD_READS = 12


def _reset() -> None:
    collector_registry.reset()
    plugin_registry.reset()
    loader.reset()
    faults.clear()


@pytest.fixture(autouse=True)
def clean():
    _reset()
    yield
    _reset()


BAD = {
    "none": None,
    "raises": RuntimeError("sensor unplugged"),
    "short": [],
    "text": ["n/a"],
}


def _flaky(kind: str):
    class Flaky(Collector):
        name = f"flaky_{kind}"
        scope = "host"
        enough = threading.Event()

        @classmethod
        def metrics(cls):
            return [MetricInfo(f"flaky_{kind}_depth", "items")]

        def open(self):
            self.calls = 0
            self.good = 0

        def read(self):
            self.calls += 1
            if self.calls in (4, 5, 6):  # a sensor that drops out for three readings, then recovers
                bad = BAD[kind]
                if isinstance(bad, Exception):
                    raise bad
                return bad
            self.good += 1
            if self.good >= GOOD_READS:
                type(self).enough.set()
            return [float(self.calls)]

    return Flaky


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_reads_are_gaps_named_in_the_trace_and_sampling_goes_on(kind, tmp_path):
    cls = _flaky(kind)
    xpuprof.register_collector(cls)
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=[f"flaky_{kind}_depth"], metrics_interval_ms=1))
    with prof:
        assert cls.enough.wait(60), "the collector stopped being sampled"
    trace = orjson.loads(prof.export_chrome_trace(tmp_path / "t.json").read_bytes())
    values = [e["args"][f"flaky_{kind}_depth"] for e in trace["traceEvents"]
              if e.get("ph") == "C" and f"flaky_{kind}_depth" in e.get("args", {})]
    assert values[:3] == [1.0, 2.0, 3.0] and values[3] == 7.0 and len(values) >= GOOD_READS
    (error,) = trace["collector_errors"][f"flaky_{kind}"]
    assert error.startswith("3 of ") and "first at sample 4: read() " in error and "sampling went on" in error
    reason = {"none": "returned NoneType, not a sequence of 1 numbers",
              "raises": "raised RuntimeError: sensor unplugged",
              "short": "returned 0 values, expected 1",
              "text": "returned a non-numeric value"}[kind]
    assert reason in error
