"""A user collector registered three ways (call/decorator, entry point, plugin directory), name
resolution and its errors, and fault isolation (raising, hanging) with the trace still written."""
from __future__ import annotations

import os
import sys
import textwrap
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import counters, trace_of  # noqa: E402

import xpuprof
from xpuprof import Collector, CollectorError, ExperimentalConfig, MetricInfo
from xpuprof.collectors import registry
from xpuprof.collectors.resolve import resolve_metrics
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import faults

USER_COLLECTOR = '''
import itertools
import xpuprof

@xpuprof.register_collector
class QueueDepth(xpuprof.Collector):
    name = "{name}"
    scope = "host"

    @classmethod
    def metrics(cls):
        return [xpuprof.MetricInfo("{metric}", "items", "work items waiting")]

    def open(self):
        self.counter = itertools.count(1)

    def read(self):
        return [float(next(self.counter))]
'''


def _profile_once(metrics, config=None, activities=("cpu",)):
    """A cycle that ends after the collectors' first sample at stop (no waiting needed)."""
    prof = xpuprof.profile(activities=list(activities), config=config,
                           experimental_config=ExperimentalConfig(profiler_metrics=list(metrics)))
    with prof:
        pass
    return prof


def test_registered_by_call_and_decorator(tmp_path):
    ns: dict = {}
    exec(USER_COLLECTOR.format(name="queue", metric="queue_depth"), ns)
    assert registry.plugin_collectors()["queue"].startswith("register_collector(")
    trace = trace_of(_profile_once(["queue_depth"]), tmp_path)
    ev = counters(trace, "queue")
    assert ev and [e["args"]["queue_depth"] for e in ev] == [float(i) for i in range(1, len(ev) + 1)]


def test_registered_by_entry_point(tmp_path, monkeypatch):
    pkg = tmp_path / "site"
    (pkg / "qdepth_pkg").mkdir(parents=True)
    (pkg / "qdepth_pkg" / "__init__.py").write_text(
        USER_COLLECTOR.format(name="qdepth", metric="qdepth_items").replace("@xpuprof.register_collector\n", ""))
    dist = pkg / "qdepth_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: qdepth-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[xpuprof.collectors]\nqdepth = qdepth_pkg:QueueDepth\n")
    monkeypatch.syspath_prepend(str(pkg))
    trace = trace_of(_profile_once(["qdepth_items"]), tmp_path)
    assert counters(trace, "qdepth")
    assert "entry point qdepth = qdepth_pkg:QueueDepth from qdepth-pkg 1.0" == registry.plugin_collectors()["qdepth"]


def test_registered_by_plugin_directory(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "queue_plugin.py").write_text(USER_COLLECTOR.format(name="dirqueue", metric="dir_queue_depth"))
    config = ProfilerConfig(plugin_paths=[str(d)])
    trace = trace_of(_profile_once(["dir_queue_depth"], config=config), tmp_path)
    assert counters(trace, "dirqueue")
    assert registry.plugin_collectors()["dirqueue"] == f"python plugin {d / 'queue_plugin.py'}"
    rows = {r["name"]: r for r in registry.describe_collectors(config)}
    assert rows["dirqueue"]["source"] == "plugin" and rows["dirqueue"]["metrics"][0][:2] == ("dir_queue_depth", "items")


def test_docs_collector_example_runs(tmp_path):
    """docs/collectors.md's 20-line user collector, executed as written."""
    page = (Path(__file__).parents[2] / "docs" / "collectors.md").read_text()
    start = page.index("<!-- collector-example -->")
    block = page[start:].split("```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) <= 20
    ns: dict = {"__name__": "docs_collector_example"}
    exec(compile(block, "docs/collectors.md", "exec"), ns)
    trace = trace_of(ns["prof"], tmp_path)
    assert counters(trace)


def test_registration_errors_are_precise():
    class NoRead(Collector):
        name = "noread"

        @classmethod
        def metrics(cls):
            return [MetricInfo("x")]

    with pytest.raises(TypeError, match="does not implement read"):
        xpuprof.register_collector(NoRead)

    class BadName(Collector):
        name = "Bad Name"

    with pytest.raises(TypeError, match="must be a non-empty lowercase"):
        xpuprof.register_collector(BadName)

    class Clash(Collector):
        name = "host"

        @classmethod
        def metrics(cls):
            return [MetricInfo("x")]

        def read(self):
            return [0.0]

    with pytest.raises(registry.CollectorRegistrationError, match="already provided by the built-in collectors"):
        xpuprof.register_collector(Clash)


# ----------------------------------------------------------------------------- resolution
def _offer(**collectors):
    return {c: [MetricInfo(m) for m in ms] for c, ms in collectors.items()}


def test_unknown_name_in_host_only_run_lists_close_matches_and_offers():
    with pytest.raises(CollectorError) as info:
        xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=["cpu_utilisation"]))
    msg = str(info.value)
    assert "unknown metric 'cpu_utilisation'" in msg and "did you mean 'cpu_utilization'" in msg
    assert "host: cpu_utilization" in msg and "xpuprof metrics" in msg


@pytest.mark.parametrize("selector", ["GpuTime", "GpuTime::ns"])
def test_a_per_kernel_metric_in_a_host_only_run_says_it_needs_device_activities(selector):
    """Not "unknown metric 'GpuTime' ... did you mean 'GpuTime'?": the name is known, the activities are not."""
    with pytest.raises(CollectorError) as info:
        xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=[selector]))
    msg = str(info.value)
    assert "unknown" not in msg and "did you mean" not in msg, msg
    assert "'GpuTime' is a per-kernel device metric (xpu/" in msg
    assert "needs device activities selected, e.g. activities=['cpu', 'xpu']" in msg
    assert "'xpu_metrics:GpuTime'" in msg  # the time-based collector samples it without kernels


def test_a_close_misspelling_is_not_suggested_as_itself():
    with pytest.raises(CollectorError) as info:
        xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=["GpuTim"]))
    assert "unknown metric 'GpuTim'" in str(info.value) and "did you mean 'GpuTime'" in str(info.value)


def test_ambiguous_name_and_qualified_choice():
    offered = _offer(a=["power", "x"], b=["power"])
    with pytest.raises(CollectorError, match=r"'power' is ambiguous: collectors a, b can all .* a:power, b:power"):
        resolve_metrics(["power"], device_activities=True, offered=offered, available=lambda c: True)
    plan = resolve_metrics(["b:power", "x", "XVE_ACTIVE", "GpuTime::ns"], device_activities=True, offered=offered,
                           available=lambda c: True)
    assert plan.collectors == {"b": ["power"], "a": ["x"]}
    assert plan.device == ["XVE_ACTIVE", "GpuTime::ns"]  # per-kernel names stay with the device backends
    with pytest.raises(CollectorError, match="collector 'b' does not offer 'pwr'.*did you mean 'power'"):
        resolve_metrics(["b:pwr"], device_activities=True, offered=offered, available=lambda c: True)


def test_names_for_backends_keep_their_order_and_sim_metrics_still_work():
    prof = xpuprof.profile(backends=["sim"], activities=["cpu", "kernel"],
                           experimental_config=ExperimentalConfig(profiler_metrics=["process_rss"]))
    assert prof.config.experimental.profiler_metrics == []


# ----------------------------------------------------------------------------- fault isolation
class _Raising(Collector):
    name = "raising"

    @classmethod
    def metrics(cls):
        return [MetricInfo("boom_metric")]

    def read(self):
        raise RuntimeError("sensor unplugged")


class _Hanging(Collector):
    name = "hanging"
    release = threading.Event()
    entered = threading.Event()

    @classmethod
    def metrics(cls):
        return [MetricInfo("hang_metric")]

    def read(self):
        type(self).entered.set()
        type(self).release.wait()  # hangs until the test lets it go
        return [1.0]


class _OpenFails(Collector):
    name = "openfails"

    @classmethod
    def metrics(cls):
        return [MetricInfo("never_metric")]

    def open(self):
        raise OSError("no such device")

    def read(self):
        return [0.0]


def test_raising_and_failing_collectors_are_reported_and_the_trace_comes_out(tmp_path):
    for cls in (_Raising, _OpenFails):
        xpuprof.register_collector(cls)
    trace = trace_of(_profile_once(["boom_metric", "never_metric", "process_rss"]), tmp_path)
    errs = trace["collector_errors"]
    assert "first at sample 1: read() raised RuntimeError: sensor unplugged" in errs["raising"][0]
    assert "open failed: OSError: no such device; its metrics never_metric are not recorded" in errs["openfails"][0]
    assert counters(trace, "host")  # the healthy collector's track is there
    assert {f.stage for f in faults.faults()} == {"collector"}  # user collectors are plugin faults, reported once


def test_hanging_collector_costs_the_deadline_and_keeps_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("XPUPROF_PLUGIN_DEADLINE_S", "0.2")
    _Hanging.release.clear()
    xpuprof.register_collector(_Hanging)
    try:
        prof = xpuprof.profile(activities=["cpu"],
                               experimental_config=ExperimentalConfig(profiler_metrics=["hang_metric", "process_rss"]))
        with prof:
            assert _Hanging.entered.wait(30)
        trace = trace_of(prof, tmp_path)
    finally:
        _Hanging.release.set()
    assert "did not return within the 0.2 s deadline" in trace["collector_errors"]["hanging"][0]
    assert counters(trace, "host")


def test_cli_metrics_and_devices_list_collectors(capsys):
    import orjson

    from xpuprof.cli import main

    assert main(["metrics", "--collectors", "--format", "json"]) == 0
    rows = {r["name"]: r for r in orjson.loads(capsys.readouterr().out)["collectors"]}
    assert rows["host"]["status"] == "available" and ("process_rss", "B") in [tuple(m[:2]) for m in rows["host"]["metrics"]]
    assert main(["devices", "--json"]) == 0
    dev = {r["backend"]: r for r in orjson.loads(capsys.readouterr().out)}
    assert dev["collector host"]["available"] and "process_rss" in dev["collector host"]["notes"][0]


def test_yaml_metrics_block_reaches_collectors(tmp_path):
    from xpuprof.config.yamlconfig import parse_config

    text = ("name: t\nworkload: {builtin: elementwise, library: numpy}\nactivities: [cpu_op, user_annotation]\n"
            "metrics: {names: [cpu_utilization, process_rss], interval_ms: 5}\n")
    cfg = parse_config(text, base_dir=tmp_path).points[0].profiler_config()
    assert cfg.experimental.metrics_interval_ms == 5.0
    prof = xpuprof.profile(config=cfg)
    assert prof._collector_plan == {"host": ["cpu_utilization", "process_rss"]}
    assert prof.config.experimental.profiler_metrics == []


def test_kineto_metric_key_reaches_collectors():
    cfg = ProfilerConfig.from_kineto("ACTIVITY_TYPES=cpu_op\nXPUPTI_PROFILER_METRICS=cpu_utilization,process_rss\n")
    prof = xpuprof.profile(config=cfg)
    assert prof._collector_plan == {"host": ["cpu_utilization", "process_rss"]}
    with pytest.raises(CollectorError, match="did you mean 'process_rss'"):
        xpuprof.profile(config=ProfilerConfig.from_kineto("ACTIVITY_TYPES=cpu_op\nXPUPTI_PROFILER_METRICS=proces_rss\n"))


def test_import_xpuprof_loads_no_collector_package():
    import subprocess

    code = ("import sys, xpuprof; print(sorted(m for m in ('psutil', 'pynvml', 'amdsmi', 'xpuprof.collectors.host', "
            "'xpuprof.collectors.nvml', 'xpuprof.collectors.amdsmi', 'xpuprof.collectors.sysman', "
            "'xpuprof.collectors.xpu_metrics') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
