"""C plugins: ABI layout, the example cpufreq plugin in a real run, and every failure kind
(load, calls returning errors, malformed events), each reported once with file and reason."""
from __future__ import annotations

import ctypes
import logging
import re
import subprocess

import pytest
from plugintest_helpers import (EXAMPLES, GOOD_PY_BACKEND, HERE, INCLUDE, build_plugin, compiler, events,
                                python_plugin, run_profile)

from slice_tables import slice_table
from xpuprof.activity import ActivityType, default_activity_types
from xpuprof.backends import registry as core
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import c_abi, c_builder, c_structs, faults
from xpuprof.plugins import registry as plugin_registry

pytestmark = pytest.mark.slow

FAULT_SOURCE = HERE / "fault_plugin.c"
HEADER = INCLUDE / "xpuprof_plugin.h"


def test_header_enum_matches_the_binding():
    text = HEADER.read_text()
    found = {int(v): k for k, v in re.findall(r"XPUPROF_ACTIVITY_(\w+) = (\d+)", text)}
    assert found.pop(0) == "INVALID"
    assert {code: ActivityType[name] for code, name in found.items()} == c_structs.ACTIVITY_CODES
    assert f"#define XPUPROF_PLUGIN_ABI_VERSION {c_structs.ABI_VERSION}u" in text
    assert f'#define XPUPROF_PLUGIN_REGISTER_SYMBOL "{c_structs.REGISTER_SYMBOL}"' in text


STRUCTS = {
    "XpuprofSlice": c_structs.XpuprofSlice, "XpuprofCounter": c_structs.XpuprofCounter, "XpuprofFlow": c_structs.XpuprofFlow,
    "XpuprofDeviceRow": c_structs.XpuprofDeviceRow, "XpuprofResourceRow": c_structs.XpuprofResourceRow,
    "XpuprofTraceBuilderApi": c_structs.XpuprofTraceBuilderApi, "XpuprofPluginInterface": c_structs.XpuprofPluginInterface,
}


def test_ctypes_layout_matches_the_c_compiler(tmp_path):
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "xpuprof_plugin.h"', "int main(void) {"]
    for name, struct in STRUCTS.items():
        lines.append(f'printf("{name} size %zu\\n", sizeof({name}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([compiler(), f"-I{INCLUDE}", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    expected = []
    for name, struct in STRUCTS.items():
        expected.append(f"{name} size {ctypes.sizeof(struct)}")
        expected += [f"{name}.{field} {getattr(struct, field).offset}" for field, _ in struct._fields_]
    assert out[:-1] == expected


# ----------------------------------------------------------------------------- the example plugin
@pytest.fixture
def cpufreq_dir(plugin_dir):
    build_plugin(EXAMPLES / "cpufreq_plugin.c", plugin_dir / "libcpufreq_plugin.so")
    return plugin_dir


def test_example_cpufreq_plugin_in_a_real_run(cpufreq_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(cpufreq_dir))
    cls = core.get_backend_class("cpufreq")
    probe = cls.probe()
    if not probe.available:
        pytest.skip(f"no CPU frequency source here: {probe.reason}")
    assert plugin_registry.origin_of("cpufreq") == f"C plugin {cpufreq_dir / 'libcpufreq_plugin.so'}"
    assert cls.supported_activities() == {ActivityType.GPU_PM_COUNTER, ActivityType.USER_ANNOTATION}
    config = ProfilerConfig(custom={"cpufreq_interval_us": 500}, activities=["gpu_pm_counter", "user_annotation"])
    trace, _, _ = run_profile(["cpufreq"], tmp_path, config)
    samples = events(trace, "C", name="CPU frequency (MHz)")
    assert len(samples) >= 2  # at least the start and stop samples
    assert all(s["cat"] == "gpu_pm_counter" and s["args"]["cpu0"] > 0 for s in samples)
    (sl,) = events(trace, "X", name="cpufreq sampling")
    assert sl["cat"] == "user_annotation" and sl["args"]["samples"] == len(samples)
    assert sl["args"]["interval_us"] == 500
    assert trace["cpufreq_source"] in ("sysfs", "/proc/cpuinfo")
    rows = {e["args"]["name"] for e in events(trace, "M", name="process_name")}
    assert "CPU frequency" in rows


def test_enabled_types_reach_the_plugin_at_configure_time(cpufreq_dir, tmp_path):
    config = ProfilerConfig(plugin_paths=[str(cpufreq_dir)], activities=["gpu_pm_counter"])
    if not core.get_backend_class("cpufreq", config).probe().available:
        pytest.skip("no CPU frequency source here")
    trace, _, _ = run_profile(["cpufreq"], tmp_path, config)
    assert events(trace, "C", name="CPU frequency (MHz)")
    assert not events(trace, "X", name="cpufreq sampling")  # user_annotation was not enabled
    # none of its types enabled: the plugin is not even asked (no session)
    backend = core.get_backend_class("cpufreq")()
    assert backend.configure(frozenset({ActivityType.CONCURRENT_KERNEL}), config) is None


# ----------------------------------------------------------------------------- the test plugin
def _fault_dir(plugin_dir, name, *defines):
    build_plugin(FAULT_SOURCE, plugin_dir / f"lib{name}.so", f'PLUGIN_NAME="{name}"', *defines)
    return plugin_dir / f"lib{name}.so"


def test_every_builder_function(plugin_dir, tmp_path, monkeypatch):
    lib = _fault_dir(plugin_dir, "cgood")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    trace, builder, _ = run_profile(["cgood"], tmp_path, ProfilerConfig(generic_categories=True,
                                   activities=default_activity_types() | {ActivityType.GPU_PM_COUNTER}))
    (launch,) = events(trace, "X", name="synthLaunchKernel")
    (kernel,) = events(trace, "X", name="gemm_kernel")
    assert launch["cat"] == "runtime" and launch["args"] == {"External id": 42, "queue": 3}
    assert kernel["cat"] == "kernel" and kernel["pid"] == 77 and kernel["tid"] == 3
    assert kernel["args"] == {"External id": 42, "grid": [8, 1, 1], "note": 'quote " inside'}
    assert kernel["dur"] == 4.0
    s, f = events(trace, "s"), events(trace, "f")
    assert s[0]["id"] == f[0]["id"] == 42 and s[0]["cat"] == "ac2g" and f[0]["bp"] == "e"
    (counter,) = events(trace, "C")
    assert counter["args"] == {"busy_pct": 87.5, "power_w": 250.0} and counter["name"] == "synthetic utilization"
    assert {"name": "Synthetic device 0"} in [e["args"] for e in events(trace, "M", name="process_name")]
    assert {"labels": "cfault"} in [e["args"] for e in events(trace, "M", name="process_labels")]
    assert {"name": "queue 3"} in [e["args"] for e in events(trace, "M", name="thread_name")]
    assert trace["cfault_version"] == "1.0"
    bulk = events(trace, "X", name="bulk_kernel")  # the bulk path (add_slices)
    assert [e["dur"] for e in bulk] == [0.05, 0.05, 0.05] and [e["pid"] for e in bulk] == [77, 77, 77]
    assert [e.get("args") for e in bulk] == [None, {"index": 1}, None]
    assert bulk[1]["ts"] - bulk[0]["ts"] == pytest.approx(0.1, abs=2e-3)
    assert faults.faults() == []
    destroyed = ctypes.CDLL(str(lib)).cfault_destroyed
    assert destroyed() == 1  # destroy ran exactly once, after process


def test_vendor_categories_use_the_privateuse1_vendor(plugin_dir, tmp_path, monkeypatch):
    _fault_dir(plugin_dir, "clegacy")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    _, builder, _ = run_profile(["clegacy"], tmp_path)
    from xpuprof.trace.write.chrome import write_chrome_trace
    from plugintest_helpers import load_valid_trace
    trace = load_valid_trace(write_chrome_trace(builder, tmp_path / "legacy.json", vendor_categories=True))
    assert events(trace, "X", name="synthLaunchKernel")[0]["cat"] == "privateuse1_runtime"


@pytest.mark.parametrize("defines, reason", [
    (["FAULT_NO_SYMBOL"], "missing symbol 'xpuprof_plugin_register'"),
    (["FAULT_ABI_VERSION=7"], "plugin ABI version 7 is not supported; this xpuprof implements "
                              "XPUPROF_PLUGIN_ABI_VERSION 1"),
    (["FAULT_REGISTER_RC=-3"], "xpuprof_plugin_register() returned -3"),
    (["FAULT_MISSING_STOP"], "the table lacks required function(s): stop"),
    (["FAULT_SMALL_TABLE"], "table struct_size 24 is smaller than"),
])
def test_load_failures(plugin_dir, tmp_path, monkeypatch, caplog, defines, reason):
    bad = _fault_dir(plugin_dir, "a_cbad", *defines)
    python_plugin(plugin_dir, "b_fine.py", GOOD_PY_BACKEND.format(name="fine"))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    names = core.backend_names()
    assert "a_cbad" not in names and "fine" in names
    (fault,) = faults.faults()
    assert fault.origin == f"C plugin {bad}" and fault.stage == "load"
    assert fault.reason.startswith(reason), fault.reason
    assert len(caplog.records) == 1 and str(bad) in caplog.records[0].getMessage()
    trace, _, _ = run_profile(["fine"], tmp_path)
    assert events(trace, "X", name="fine_kernel")


def test_not_a_shared_library(plugin_dir, monkeypatch):
    junk = plugin_dir / "libjunk.so"
    junk.write_bytes(b"definitely not ELF")
    junk.chmod(0o644)
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    core.backend_names()
    (fault,) = faults.faults()
    assert fault.origin == f"C plugin {junk}" and fault.reason.startswith("cannot load the shared library:")


@pytest.mark.parametrize("stage, fault_stage, reason", [
    ("probe", "probe", "PluginCallError: probe() returned -1: injected failure in probe"),
    ("create", "configure", "PluginCallError: create() returned -1: injected failure in create"),
    ("start", "start", "PluginCallError: start() returned -1: injected failure in start"),
    ("stop", "stop", "PluginCallError: stop() returned -1: injected failure in stop"),
    ("process", "process", "PluginCallError: process_events() returned -1: injected failure in process_events"),
])
def test_call_errors_are_reported_once_and_the_trace_survives(plugin_dir, tmp_path, monkeypatch, stage, fault_stage,
                                                              reason):
    lib = _fault_dir(plugin_dir, "cfail", f'FAULT_STAGE="{stage}"')
    python_plugin(plugin_dir, "healthy.py", GOOD_PY_BACKEND.format(name="healthy"))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    for run in range(2):
        trace, _, sessions = run_profile(["healthy", "cfail"], tmp_path, file_name=f"t{run}.json")
        assert events(trace, "X", name="healthy_kernel")
    (fault,) = faults.faults()
    assert fault.origin == f"C plugin {lib}" and fault.stage == fault_stage
    assert fault.reason.startswith(reason), fault.reason
    if stage == "process":  # what the plugin wrote before failing is kept
        assert events(trace, "X", name="gemm_kernel")
    created = 0 if stage in ("probe", "create") else 2
    assert ctypes.CDLL(str(lib)).cfault_destroyed() == created  # never leaked, never destroyed twice


def test_probe_unavailable_is_not_a_fault(plugin_dir, monkeypatch):
    _fault_dir(plugin_dir, "cabsent", "FAULT_PROBE_NO")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    probe = core.probe_all()["cabsent"]
    assert not probe.available and probe.reason == "no synthetic device attached"
    assert faults.faults() == []


def test_malformed_events_are_dropped_counted_and_reported_once(plugin_dir, tmp_path, monkeypatch, caplog):
    lib = _fault_dir(plugin_dir, "cmal", "FAULT_MALFORMED")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    trace, _, sessions = run_profile(["cmal"], tmp_path)
    names = [e["name"] for e in events(trace, "X")]
    # the invalid UTF-8 name is kept with U+FFFD, not dropped
    assert sorted(names) == sorted(["synthLaunchKernel", "gemm_kernel", "after_bad", "bulk_survivor",
                                    "\ufffd\ufffd broken"] + ["bulk_kernel"] * 3)
    assert trace["invalid_utf8_names"] == 1
    assert len(events(trace, "C")) == 1 and len(events(trace, "s")) == 1
    assert trace["traceEvents"] and "x" not in trace
    assert trace["dropped_records"] == {"plugin cmal: malformed": 15}
    (fault,) = faults.faults()
    assert fault.origin == f"C plugin {lib}" and fault.stage == "events"
    assert fault.reason == "15 malformed item(s) dropped; first: add_slice: XpuprofSlice.name is NULL"
    assert [r.getMessage() for r in caplog.records] == [str(fault)]
    assert sessions[0].errors() == [str(fault)]


@pytest.mark.parametrize("mutate, message", [
    (lambda s: setattr(s, "end_ns", 5), "XpuprofSlice.end_ns 5 is before start_ns 10"),
    (lambda s: setattr(s, "activity_type", 99), "XpuprofSlice.activity_type 99 is not an XpuprofActivityType"),
    (lambda s: setattr(s, "args_json", b"[1]"), "args_json must be a JSON object, got list"),
    (lambda s: setattr(s, "start_ns", 0), "XpuprofSlice.start_ns is 0; timestamps are epoch nanoseconds > 0"),
])
def test_each_malformed_slice_reason(mutate, message):
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.trace.builder.builder import TraceBuilder

    builder = TraceBuilder()
    bridge = c_builder.BuilderBridge(builder, ProcessWindow(0, 100), "", frozenset(ActivityType))
    s = c_structs.XpuprofSlice(ctypes.sizeof(c_structs.XpuprofSlice), 6, 0, 10, 20, 1, 1, 0, b"k", None)
    mutate(s)
    assert bridge.api.add_slice(bridge.api.builder, ctypes.addressof(s)) == -1
    assert bridge.malformed == 1 and message in bridge.first_reason
    assert builder.event_count() == 0


def test_an_invalid_utf8_name_is_replaced_and_counted_not_dropped():
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.trace.builder.builder import TraceBuilder

    builder = TraceBuilder()
    bridge = c_builder.BuilderBridge(builder, ProcessWindow(0, 100), "", frozenset(ActivityType))
    s = c_structs.XpuprofSlice(ctypes.sizeof(c_structs.XpuprofSlice), 6, 0, 10, 20, 1, 1, 0, b"k\xff", None)
    assert bridge.api.add_slice(bridge.api.builder, ctypes.addressof(s)) == 0
    assert bridge.malformed == 0 and builder.event_count() == 1
    assert list(slice_table(builder)["name"]) == ["k\ufffd"] and builder.strings.invalid_utf8 == 1


def test_bulk_slice_reasons():
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.trace.builder.builder import TraceBuilder

    builder = TraceBuilder()
    bridge = c_builder.BuilderBridge(builder, ProcessWindow(0, 100), "", frozenset({ActivityType.CONCURRENT_KERNEL}),
                                  "t")
    size = ctypes.sizeof(c_structs.XpuprofSlice)
    arr = (c_structs.XpuprofSlice * 5)(*[c_structs.XpuprofSlice(size, 6, 0, 10 + i, 20 + i, 1, 2, 0, b"k", None)
                                      for i in range(5)])
    arr[1].name = b"\xff"  # kept as U+FFFD and counted, not malformed
    arr[2].args_json = b"[]"
    arr[3].activity_type = 8  # runtime: valid but not enabled -> dropped, not malformed
    arr[4].start_ns = -5
    assert bridge.api.add_slices(bridge.api.builder, ctypes.addressof(arr), 5) == -1
    assert bridge.malformed == 2
    assert bridge.first_reason == "add_slices: slices[4].start_ns is not epoch nanoseconds > 0"
    assert sorted(slice_table(builder)["name"]) == ["k", "\ufffd"]
    assert builder.strings.invalid_utf8 == 1
    assert builder.dropped == {"plugin t: runtime not enabled": 1}
