"""XPU time-based metrics (PTI device metrics API): against a C double of pti_metrics.h's calls
and layouts, and against the real intel-pti 1.2.0 with the Level Zero null driver (subprocess)."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import counters, trace_of  # noqa: E402

import xpuprof
from xpuprof import CollectorError, ExperimentalConfig
from xpuprof.collectors import xpu_metrics
from xpuprof.collectors.base import CollectorUnavailable
from xpuprof.collectors.xpu_metrics import TimeBasedSession

HERE = Path(__file__).parent
REPO = HERE.parents[1]
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero")


@pytest.fixture(scope="module")
def pti_double(tmp_path_factory) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc/gcc) on PATH: the PTI metrics double is built with the system compiler")
    out = tmp_path_factory.mktemp("pti") / "libpti_metrics_double.so"
    # -Bsymbolic: the double's own calls to ptiViewGetTimestamp stay its own even when an XPU test loaded the
    # PTI view double RTLD_GLOBAL earlier in the process (its shifted clock put these samples 1e17 ns away).
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-o", str(out),
                    str(HERE / "pti_metrics_double.c")], check=True)
    return out


@pytest.fixture
def double_env(monkeypatch, pti_double):
    monkeypatch.setenv("XPUPROF_PTI_LIBRARY", str(pti_double))
    xpu_metrics._probe_cache.clear()
    yield ctypes.CDLL(str(pti_double))
    xpu_metrics._probe_cache.clear()


def _profile(names, **exp):
    return xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=names, **exp))


def test_bare_names_stay_per_kernel_and_qualified_names_reach_the_collector():
    prof = xpuprof.profile(activities=["cpu", "kernel"], experimental_config=ExperimentalConfig(
        profiler_metrics=["XVE_ACTIVE", "xpu_metrics:GPU_BUSY"]))
    assert prof._collector_plan == {"xpu_metrics": ["GPU_BUSY"]}
    assert prof.config.experimental.profiler_metrics == ["XVE_ACTIVE"]  # the scope profiler's, as before


def test_time_based_series_on_the_device_row(double_env, tmp_path):
    prof = _profile(["xpu_metrics:GPU_BUSY", "xpu_metrics:XVE_ACTIVE"], metrics_interval_ms=0.001)
    with prof:
        sum(range(20000))
    assert ctypes.c_uint32.in_dll(double_env, "pti_double_interval_ns").value == 1000  # ms -> ns
    trace = trace_of(prof, tmp_path)
    assert "collector_errors" not in trace, trace.get("collector_errors")
    ev = counters(trace, "xpu_metrics")
    assert len(ev) >= 1 and {e["pid"] for e in ev} == {0} and {e["cat"] for e in ev} == {"gpu_pm_counter"}
    busy = [e["args"]["GPU_BUSY"] for e in ev]
    assert busy == [float(10 * (i % 10)) for i in range(len(ev))]  # float32 decoded from its 4 bytes only
    assert {e["args"]["XVE_ACTIVE"] for e in ev} == {50.5}
    ts = [e["ts"] for e in ev]
    assert ts == sorted(ts)
    span = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["cat"] == "Trace"][0]
    assert span["ts"] <= ts[0] and ts[-1] <= span["ts"] + span["dur"] + 1  # PTI ns moved onto our clock
    rows = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
    assert rows[0] == "XPU 0 (Intel(R) Arc(TM) B580 Graphics)"
    assert trace["collectors"]["xpu_metrics"]["samples"] == len(ev)


def test_group_without_timestamp_gets_reconstructed_times_and_says_so(double_env):
    cdll = ctypes.CDLL(os.environ["XPUPROF_PTI_LIBRARY"])
    s = TimeBasedSession(cdll, ["GPU_MEMORY_BYTE_READ"], 1000)
    assert s.devices[0]["group"]["name"] == "MemoryProfile"
    s.start()
    s.stop()
    ts, vals, note = s.samples(0)
    assert list(vals[:3, 0]) == [1000.0, 2000.0, 3000.0][:len(vals)]
    assert "no TIMESTAMP metric" in note and (len(ts) < 2 or (ts[1] - ts[0]) == 1000)


def test_one_group_per_device_and_time_based_only(double_env):
    cdll = ctypes.CDLL(os.environ["XPUPROF_PTI_LIBRARY"])
    with pytest.raises(CollectorUnavailable, match="no time-based group holds all of GPU_BUSY, GPU_MEMORY_BYTE_READ"):
        TimeBasedSession(cdll, ["GPU_BUSY", "GPU_MEMORY_BYTE_READ"], 1000)
    with pytest.raises(CollectorUnavailable, match=r"TestEventOnly \(type 1, not time-based\)"):
        TimeBasedSession(cdll, ["TestEventMetric"], 1000)


def test_catalog_group_rule_is_checked_before_anything_starts(tmp_path, monkeypatch):
    """Two names from different time-based catalog groups: one error at profile(), nothing started."""
    (tmp_path / "xpu").mkdir()
    text = (REPO / "metrics" / "xpu" / "bmg.yaml").read_text()
    head, tail = text.split("\nderived:", 1)
    extra = ("\n  MemoryProfileDouble:\n    description: test-only second time-based group\n"
             "    collection: [time_based]\n    source: md-sets\n    metrics:\n"
             "      MEMORY_TEST_ONLY: {unit: bytes, type: throughput, value_type: uint64, description: read}\n")
    (tmp_path / "xpu" / "bmg.yaml").write_text(head + extra + "\nderived:" + tail)
    monkeypatch.setenv("XPUPROF_METRICS_DIR", str(tmp_path))
    assert xpu_metrics.catalog_groups_of(["GPU_BUSY"])["GPU_BUSY"] == {"ComputeBasic"}
    with pytest.raises(CollectorError, match="must come from one metric group per device.*GPU_BUSY: ComputeBasic; "
                                             "MEMORY_TEST_ONLY: MemoryProfileDouble"):
        _profile(["xpu_metrics:GPU_BUSY", "xpu_metrics:MEMORY_TEST_ONLY"])


_REAL = """
import json, xpuprof
from xpuprof import ExperimentalConfig
prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
    profiler_metrics=["xpu_metrics:Null Metric"]))
with prof:
    pass
b = prof.builder
print(json.dumps({"errors": b.metadata.get("collector_errors", {}), "summary": b.metadata.get("collectors", {}),
                  "counters": sum(len(x) for x in b.counters)}))
"""


@pytest.mark.skipif(not (LEVEL_ZERO / "lib" / "libze_loader.so.1").exists(),
                    reason=f"the real Level Zero loader + null driver is not at {LEVEL_ZERO}")
def test_real_pti_with_the_null_driver():
    """Real intel-pti 1.2.0 lists the null devices (and a "Null Metric Group" with one "Null Metric"),
    then refuses to configure a time-based collection (ptiMetricsConfigureCollection -> 2,
    NOT_IMPLEMENTED). The collector's probe now reads the devices' names and says up front that
    they are the null driver's test devices, which cannot collect metrics: reported, no counters."""
    try:
        from xpuprof.vendors import pti
        path = pti.find_pti_library()
    except Exception as exc:
        pytest.skip(f"intel-pti is not installed: {exc}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZE_", "ZET_", "XPUPROF_"))}
    env.update(ZE_ENABLE_NULL_DRIVER="1", ZET_ENABLE_METRICS="1",
               LD_LIBRARY_PATH=os.pathsep.join([str(LEVEL_ZERO / "lib"), str(Path(path).parent),
                                                env.get("LD_LIBRARY_PATH", "")]))
    out = subprocess.run([sys.executable, "-c", _REAL], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["counters"] == 0
    errs = got["errors"]["xpu_metrics"]
    (err,) = errs
    assert err.startswith("cannot run here: each of the 2 metrics device(s) PTI lists here is the Level Zero null "
                          "driver's test device ('Null Device', ZE_ENABLE_NULL_DRIVER=1)"), err
    assert "cannot collect metrics" in err and err.endswith("its metrics Null Metric are not recorded"), err
