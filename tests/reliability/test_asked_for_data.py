"""Asked-for data that cannot be collected is never silent. Metric names are checked even when no
device backend runs to check them (Python API, Kineto text, YAML): the
catalogs in metrics/ check them and one error names each unknown name with close matches. A
requested activity group (or a type outside the groups) that no backend in use records is warned
about once and listed in the trace (activities_not_collected). Plus the smaller item: a C
plugin's invalid UTF-8 name must not drop the whole event while the Python API replaced the bad
bytes; both now replace (U+FFFD) and count (invalid_utf8_names)."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the plugin tests' helpers

from plugintest_helpers import HERE as PLUGIN_TESTS, build_plugin, python_plugin, reset_plugins  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof import diagnostics  # noqa: E402
from xpuprof.backends.base import BackendError  # noqa: E402
from xpuprof.config.yamlconfig import parse_config  # noqa: E402

NO_DEVICE = "xpu,cuda,rocm"  # every built-in device backend off: nothing on this machine checks metric names

KERNEL_ONLY_PY = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof.plugins

class _S(Session):
    def start(self): pass
    def stop(self): pass
    def process(self, builder, window):
        builder.add_slice("kernel_only", window.start_ns + 10, 100, "konly", 0, cat=ActivityType.CONCURRENT_KERNEL)

@xpuprof.plugins.register_backend
class _B(Backend):
    name = "konly"
    @classmethod
    def probe(cls): return ProbeResult.ok("a test plugin")
    @classmethod
    def supported_activities(cls): return frozenset({ActivityType.CONCURRENT_KERNEL})
    def configure(self, activity_types, config): return _S()
'''


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for key in ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "KINETO_DISABLE_CUPTI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", NO_DEVICE)
    reset_plugins()
    yield
    reset_plugins()


def _start_fails_naming_unknown(config: xpuprof.ProfilerConfig) -> str:
    prof = xpuprof.profile(config=config)
    with pytest.raises(BackendError) as err:
        prof.start()
    text = str(err.value)
    assert "unknown metric name(s), checked against the catalogs" in text
    assert "'GpuTme': did you mean GpuTime (" in text
    assert "'NoSuchMetricAnywhere': no similar metric in any catalog" in text
    assert "'XVE_STALL'" not in text.split("metrics ")[0]  # a known name is not called unknown
    return text


def test_unknown_metric_names_are_refused_through_the_python_api():
    config = xpuprof.ProfilerConfig(activities=xpuprof.profiler.parse_activities(["cpu", "xpu"]),
                                    experimental=xpuprof.ExperimentalConfig(
                                        profiler_metrics=["GpuTme", "NoSuchMetricAnywhere", "XVE_STALL"]))
    _start_fails_naming_unknown(config)


def test_unknown_metric_names_are_refused_from_kineto_text():
    config = xpuprof.ProfilerConfig.from_kineto(
        "ACTIVITIES_ENABLED=true\nXPUPTI_PROFILER_METRICS=GpuTme,NoSuchMetricAnywhere,XVE_STALL\n")
    _start_fails_naming_unknown(config)


def test_unknown_metric_names_are_refused_from_yaml():
    cfg = parse_config("""
name: m
workload: {builtin: elementwise, library: numpy, kwargs: {size: 64}}
device: cpu
activities: [cpu_op, user_annotation, kernel, runtime]
metrics: {names: [GpuTme, NoSuchMetricAnywhere, XVE_STALL]}
""")
    _start_fails_naming_unknown(cfg.points[0].profiler_config())


def test_known_names_with_no_device_still_say_why_nothing_collects_them():
    prof = xpuprof.profile(activities=["cpu", "xpu"], experimental_config=xpuprof.ExperimentalConfig(
        profiler_metrics=["GpuTime"]))
    with pytest.raises(BackendError, match="metrics 'GpuTime' were requested but nothing can collect them") as err:
        prof.start()
    assert "unknown metric" not in str(err.value)


def test_activities_no_backend_in_use_records_are_warned_once_and_listed(tmp_path, caplog, monkeypatch):
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(0o755)
    python_plugin(d, "konly.py", KERNEL_ONLY_PY)
    config = xpuprof.ProfilerConfig(plugin_paths=[str(d)])
    traces = []
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            with xpuprof.profile(activities=["cpu", "kernel", "gpu_memcpy", "collective_comm", "gpu_pm_counter"],
                                 config=config) as prof:
                pass
            traces.append(json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text()))
    for trace in traces:
        assert trace["backends"] == ["konly"]
        missing = trace["activities_not_collected"]
        assert set(missing) == {"collective_comm", "metric activities (gpu_pm_counter)"}, missing
        assert all("no backend in use records it (in use: konly)" == why for why in missing.values())
    warned = [r for r in caplog.records if "requested activities that nothing in this run records" in r.getMessage()]
    assert len(warned) == 1


def test_the_defaults_alone_list_nothing_as_missing(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(0o755)
    python_plugin(d, "konly.py", KERNEL_ONLY_PY)
    with xpuprof.profile(config=xpuprof.ProfilerConfig(plugin_paths=[str(d)])) as prof:
        pass
    assert "activities_not_collected" not in prof.builder.metadata


def test_defaults_plus_more_never_list_a_default_nobody_named(caplog):
    """use_cuda=True (or the defaults plus anything) warned 'mtia_insight: no backend in use records it', an
    activity in Kineto's defaults nobody asked for by name."""
    with caplog.at_level(logging.WARNING), pytest.warns(FutureWarning, match="use_cuda"):
        with xpuprof.profile(use_cuda=True, backends=["sim"]) as prof:
            with xpuprof.record_function("r"):
                pass
    assert "mtia_insight" not in json.dumps(prof.builder.metadata.get("activities_not_collected") or {})
    assert not any("mtia_insight" in r.getMessage() for r in caplog.records)


def test_invalid_utf8_names_are_replaced_and_counted_from_c_and_python(tmp_path, monkeypatch):
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(0o755)
    build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / "libutf8.so", 'PLUGIN_NAME="utf8c"', "FAULT_BAD_UTF8")
    with xpuprof.profile(activities=["cpu", "kernel"], config=xpuprof.ProfilerConfig(plugin_paths=[str(d)])) as prof:
        with xpuprof.record_function("py \udcff name"):  # a lone surrogate: what bad bytes decode to in Python
            pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text(encoding="utf-8"))
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert "bad \ufffd\ufffd name" in names  # single add_slice: kept, bytes replaced
    assert "bulk \ufffd( name" in names  # add_slices: kept, bytes replaced
    assert "py \ufffd name" in names
    assert trace["invalid_utf8_names"] == 3
    assert "dropped_records" not in trace or not any("malformed" in k for k in trace["dropped_records"])


# A first-contact script: host work plus a per-kernel XPU metric, on a machine without an XPU.
GPU_METRIC_EXAMPLE = """\
import numpy as np
import xpuprof

a = np.random.default_rng(0).random((256, 256))

with xpuprof.profile(
    activities=["cpu", "xpu"],
    schedule=xpuprof.schedule(wait=1, warmup=1, active=3, repeat=1),
    on_trace_ready=xpuprof.trace_handler("traces"),
    experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime"]),
) as prof:
    for step in range(6):
        with xpuprof.record_function("matmul"):
            a = a @ a / 256
        xpuprof.instant("step done", {"step": step})
        prof.step()
"""


def test_xpu_metrics_without_a_device_backend_say_why_at_start(tmp_path, monkeypatch, caplog):
    """xpu + GpuTime with no device backend stops at start with the reason; without the metrics the
    same script records host ranges, warns once and says why in the trace."""
    monkeypatch.chdir(tmp_path)
    # "warns once" is per process: an earlier test in the same run may already have said it
    diagnostics.reset()
    code = GPU_METRIC_EXAMPLE
    assert 'profiler_metrics=["GpuTime"]' in code
    namespace: dict = {}
    with pytest.raises(BackendError, match="metrics 'GpuTime' were requested but nothing can collect them"):
        exec(compile(code, "example", "exec"), namespace)
    assert "step" not in namespace, "the example's loop ran before the error (it must fail at start)"
    assert not list(tmp_path.rglob("*.json"))
    host_only = code.replace('    experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime"]),\n', "")
    assert host_only != code
    with caplog.at_level(logging.WARNING):
        exec(compile(host_only, "example", "exec"), {})
    (trace_path,) = (tmp_path / "traces").glob("*.pt.trace.json")
    trace = json.loads(trace_path.read_text())
    assert set(trace["device_backends_unavailable"]) >= {"xpu", "cuda", "rocm"}
    assert any(e.get("name") == "matmul" for e in trace["traceEvents"])
    assert any("no device backend can run here" in r.getMessage() for r in caplog.records)


def test_metric_names_are_checked_at_start_not_after_the_wait_steps():
    """With schedule(wait=3) the check ran only when the first cycle was prepared: steps 0-2 of the
    user's loop ran first and the error came from prof.step()."""
    ran = []
    prof = xpuprof.profile(activities=["cpu", "xpu"], schedule=xpuprof.schedule(wait=3, warmup=1, active=1),
                           experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["NotAMetric"]))
    with pytest.raises(BackendError, match="'NotAMetric': no similar metric in any catalog"):
        with prof:
            for step in range(6):
                ran.append(step)
                prof.step()
    assert ran == []
    # refused cleanly: nothing half-started, and a second start checks again
    assert xpuprof.host.recorder.active_recorder() is None
    with pytest.raises(BackendError, match="NotAMetric"):
        prof.start()


def test_run_dry_run_checks_metric_names(tmp_path, capsys):
    from xpuprof.cli import main

    cfg = tmp_path / "m.yaml"
    cfg.write_text("name: m\nworkload: {builtin: elementwise, library: numpy, kwargs: {size: 64}}\ndevice: cpu\n"
                   f"iterations: 3\nactivities: [user_annotation, kernel]\nmetrics: {{names: [GpuTme]}}\n"
                   f"output: {{dir: {tmp_path / 'out'}}}\n")
    assert main(["run", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"xpuprof run: {cfg}:6: metrics.names: point 'm': unknown metric name(s)")  # the line
    assert "'GpuTme': did you mean GpuTime" in err
    assert not (tmp_path / "out").exists()
    good = tmp_path / "ok.yaml"  # what the sim backend collects passes the same check
    good.write_text("name: ok\nworkload: {builtin: elementwise, library: numpy, kwargs: {size: 64}}\ndevice: cpu\n"
                    "iterations: 1\nbackends: [sim]\nmetrics: {names: [GpuTime]}\n")
    assert main(["run", str(good), "--dry-run"]) == 0, capsys.readouterr().err


def test_run_dry_run_checks_metric_names_with_the_sim(tmp_path, capsys):
    """The sim checks its own metric names: --dry-run asks it, with the close match."""
    from xpuprof.cli import main

    cfg = tmp_path / "s.yaml"
    cfg.write_text("name: s\nworkload: {builtin: elementwise, library: numpy, kwargs: {size: 64}}\ndevice: cpu\n"
                   "iterations: 1\nbackends: [sim]\nmetrics: {names: [GpuTimme, XVE_ACTIVE]}\n"
                   f"output: {{dir: {tmp_path / 'out'}}}\n")
    assert main(["run", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "point 's'" in err and "'GpuTimme'" in err and "did you mean 'GpuTime'" in err
    assert not (tmp_path / "out").exists()


def test_profile_start_names_the_close_sim_metric(tmp_path):
    prof = xpuprof.profile(activities=["cpu", "kernel"], backends=["sim"],
                           experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["xve_active"]))
    with pytest.raises(BackendError, match="did you mean 'XVE_ACTIVE'"):
        prof.start()
