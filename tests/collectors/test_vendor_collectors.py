"""NVML and AMD SMI collectors against fake modules of the real packages' shapes; their absence is
one clear reason; ``gpu_power`` resolves to whichever vendor can run here."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_vendors import fake_amdsmi, fake_pynvml  # noqa: E402
from helpers import counters, series, trace_of  # noqa: E402

import xpuprof
from xpuprof import CollectorError, ExperimentalConfig
from xpuprof.collectors.amdsmi import AmdSmiCollector
from xpuprof.collectors.nvml import NvmlCollector
from xpuprof.collectors.resolve import resolve_metrics


@pytest.fixture
def no_vendor_packages(monkeypatch):
    for mod in ("pynvml", "amdsmi"):
        monkeypatch.setitem(sys.modules, mod, None)  # import raises ImportError, as when not installed


def _profile(metrics):
    return xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=metrics))


def test_absent_packages_are_one_clear_reason(no_vendor_packages, tmp_path):
    assert "nvidia-ml-py package is not installed" in NvmlCollector.probe().reason
    assert "pip install nvidia-ml-py" in NvmlCollector.probe().reason
    assert "amdsmi package is not installed" in AmdSmiCollector.probe().reason
    prof = _profile(["gpu_power"])  # nobody can run it: both are asked, both say why in the trace
    with prof:
        pass
    trace = trace_of(prof, tmp_path)
    errs = trace["collector_errors"]
    assert "cannot run here: the nvidia-ml-py package is not installed" in errs["nvml"][0]
    assert "its metrics gpu_power are not recorded" in errs["nvml"][0]
    assert "amdsmi package is not installed" in errs["amdsmi"][0]
    assert not counters(trace)


def test_nvml_tracks_per_device(monkeypatch, tmp_path):
    nv = fake_pynvml(devices=2)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    assert NvmlCollector.probe().available and NvmlCollector.probe().reason == "2 GPU(s), driver 580.65.06"
    prof = _profile(["gpu_power", "gpu_utilization", "gpu_temperature", "gpu_memory_used", "gpu_frequency"])
    assert prof._collector_plan == {"nvml": ["gpu_power", "gpu_utilization", "gpu_temperature", "gpu_memory_used",
                                             "gpu_frequency"]}
    with prof:
        assert nv.state.enough.wait(30)
    trace = trace_of(prof, tmp_path)
    ev = counters(trace, "nvml")
    assert {e["pid"] for e in ev} == {0, 1} and {e["cat"] for e in ev} == {"gpu_pm_counter"}
    for pid in (0, 1):
        ts = [e["ts"] for e in ev if e["pid"] == pid and "gpu_utilization" in e["args"]]
        assert ts == sorted(ts) and len(ts) >= 4
        util = [e["args"]["gpu_utilization"] for e in ev if e["pid"] == pid and "gpu_utilization" in e["args"]]
        assert set(util) == {37.0 + pid}
    temps0 = [e["args"]["gpu_temperature"] for e in ev if e["pid"] == 0 and "gpu_temperature" in e["args"]]
    assert set(temps0) == {60.0}
    assert not [e for e in ev if e["pid"] == 1 and "gpu_temperature" in e["args"]]  # unsupported: a gap
    assert any("gpu_temperature@1 not recorded (left as gaps): NVMLError_NotSupported: Not Supported" in m
               for m in trace["collector_errors"]["nvml"])
    power1 = [e["args"]["gpu_power"] for e in ev if e["pid"] == 1 and "gpu_power" in e["args"]]
    assert power1 and all(v > 0 and math.isfinite(v) for v in power1)  # J/s from the mJ counter
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e["name"] == "process_name" and e["pid"] in (0, 1)}
    assert names == {0: "GPU 0 (NVIDIA H100 80GB HBM3 #0)", 1: "GPU 1 (NVIDIA H100 80GB HBM3 #1)"}
    assert nv.state.inits == nv.state.shutdowns  # every init has its shutdown (probes and the run)


def test_nvml_without_driver_says_so(monkeypatch):
    nv = fake_pynvml()
    nv_err = nv.NVMLError_LibraryNotFound()
    nv = fake_pynvml(init_error=nv_err)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    reason = NvmlCollector.probe().reason
    assert "NVML cannot start" in reason and "NVML Shared Library Not Found" in reason


def test_amdsmi_tracks_and_na_values(monkeypatch, tmp_path):
    smi = fake_amdsmi(devices=1)
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    prof = _profile(["gpu_power", "gpu_utilization", "gpu_memory_activity", "gpu_memory_used"])
    assert list(prof._collector_plan) == ["amdsmi"]
    with prof:
        assert smi.state.enough.wait(30)
    trace = trace_of(prof, tmp_path)
    _, power = series(trace, "amdsmi", "gpu_power")
    _, used = series(trace, "amdsmi", "gpu_memory_used")
    assert set(used) == {1024.0 * 1024 * 1024}
    assert power and all(v > 0 for v in power)
    assert not series(trace, "amdsmi", "gpu_memory_activity")[1]  # "N/A" -> gap, said once
    assert any("umc_activity is 'N/A'" in m for m in trace["collector_errors"]["amdsmi"])
    assert smi.state.shut == 1 + 1  # the resolution probe and the run


def test_shared_names_ambiguous_only_when_two_vendors_can_run():
    offered = {"nvml": NvmlCollector.metrics(), "amdsmi": AmdSmiCollector.metrics()}
    with pytest.raises(CollectorError, match="'gpu_power' is ambiguous.*nvml:gpu_power, amdsmi:gpu_power"):
        resolve_metrics(["gpu_power"], device_activities=False, offered=offered, available=lambda c: True)
    plan = resolve_metrics(["gpu_power", "amdsmi:gpu_temperature"], device_activities=False, offered=offered,
                           available=lambda c: c == "nvml")
    assert plan.collectors == {"nvml": ["gpu_power"], "amdsmi": ["gpu_temperature"]}
