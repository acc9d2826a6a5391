"""Plugins through the real front end, ``xpuprof.profiler.profile``: a C plugin and a Python
plugin in one run, and a broken plugin that does not spoil the trace."""
from __future__ import annotations

import shutil

import pytest
from plugintest_helpers import EXAMPLES, HERE, build_plugin, events, load_valid_trace, python_plugin

from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import faults

profiler = pytest.importorskip("xpuprof.profiler", reason="xpuprof.profiler (issue #3) is not in this checkout")


@pytest.fixture
def plugins(plugin_dir):
    build_plugin(HERE / "fault_plugin.c", plugin_dir / "libsynth.so", 'PLUGIN_NAME="synth"')
    build_plugin(HERE / "fault_plugin.c", plugin_dir / "libsynthbad.so", 'PLUGIN_NAME="synthbad"',
                 'FAULT_STAGE="process"', "FAULT_MALFORMED")
    shutil.copy(EXAMPLES / "host_memory_plugin.py", plugin_dir)
    (plugin_dir / "host_memory_plugin.py").chmod(0o644)
    return plugin_dir


def _run(tmp_path, **kwargs):
    with profiler.profile(activities=["cpu", "kernel", "runtime", "gpu_pm_counter"], **kwargs) as prof:
        from xpuprof.host.recorder import record_function
        with record_function("user block"):
            sum(range(1000))
    return load_valid_trace(prof.export_chrome_trace(tmp_path / "e2e.json"))


def test_plugins_take_part_in_a_profile_run(plugins, tmp_path, monkeypatch):
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugins))
    trace = _run(tmp_path, backends=["synth", "synthbad", "host_memory"])
    assert sorted(trace["backends"]) == ["host_memory", "synth", "synthbad"]
    kernels = [e["name"] for e in events(trace, "X", cat="kernel")]
    assert kernels.count("gemm_kernel") == 2 and "after_bad" in kernels and kernels.count("bulk_kernel") == 6  # synthbad's events before its error stay
    assert events(trace, "X", name="user block")
    assert len(events(trace, "C", name="Resident memory (MiB)")) == 2
    assert events(trace, "C", name="synthetic utilization")
    assert trace["dropped_records"] == {"plugin synthbad: malformed": 15}  # + one invalid UTF-8 name kept
    assert trace["invalid_utf8_names"] == 1
    errors = trace["backend_errors"]["synthbad"]
    assert any("injected failure in process_events" in e for e in errors)
    assert any("15 malformed item(s) dropped" in e for e in errors)
    stages = sorted(f.stage for f in faults.faults())
    assert stages == ["events", "process"]


def test_automatic_selection_includes_plugins_and_honours_env_switch(plugins, tmp_path, monkeypatch):
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugins))
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "synthbad")
    trace = _run(tmp_path)
    assert "synth" in trace["backends"] and "host_memory" in trace["backends"]
    assert "synthbad" not in trace["backends"]
    assert faults.faults() == []


def test_config_plugin_paths_reach_the_profiler(plugins, tmp_path):
    trace = _run(tmp_path, config=ProfilerConfig(plugin_paths=[str(plugins)], disabled_backends=["synthbad"]),
                 backends=["synth"])
    assert trace["backends"] == ["synth"]
    assert events(trace, "X", name="gemm_kernel")
