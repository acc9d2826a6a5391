"""The Level Zero Sysman collector: against a C double with zes_api.h's layouts (every reading,
domain choice and stype), and against the real loader + null driver in ../shared/level-zero
(in a subprocess) to pin what the real stack answers."""
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
from xpuprof import ExperimentalConfig
from xpuprof.collectors.sysman import SysmanCollector

HERE = Path(__file__).parent
REPO = HERE.parents[1]
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero")


@pytest.fixture(scope="module")
def zes_double(tmp_path_factory) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc/gcc) on PATH: the Sysman double is built with the system compiler")
    out = tmp_path_factory.mktemp("zes") / "libzes_double.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "zes_double.c")], check=True)
    return out


@pytest.fixture
def sysman_only(monkeypatch, zes_double):
    monkeypatch.setenv("XPUPROF_ZE_LOADER", str(zes_double))
    for mod in ("pynvml", "amdsmi"):
        monkeypatch.setitem(sys.modules, mod, None)
    return ctypes.CDLL(str(zes_double))


ALL = ["gpu_power", "gpu_utilization", "gpu_frequency", "gpu_temperature", "gpu_memory_used"]


def test_readings_and_domain_choice(sysman_only):
    probe = SysmanCollector.probe()
    assert probe.available and probe.reason == "2 device(s)"
    c = SysmanCollector(ALL)
    c.open()
    try:
        tracks = c.tracks()
        assert [(t.device, t.metrics) for t in tracks] == [(0, tuple(ALL)), (1, tuple(ALL))]
        first, second = c.read(), c.read()
    finally:
        c.close()
    dev0 = dict(zip(ALL, second[:5]))
    assert dev0["gpu_power"] - first[0] == pytest.approx(2.0)  # energy counter: 2 J per read (µJ -> J)
    assert dev0["gpu_utilization"] - first[1] == pytest.approx(0.1)  # 1000 µs active per read / 1e4
    assert dev0["gpu_frequency"] == 1950.0  # the GPU domain, not the memory domain
    assert dev0["gpu_temperature"] == 71.5  # the GPU sensor, not the (hotter) global one
    assert dev0["gpu_memory_used"] == 4 * 2**30  # device module only: size - free
    dev1 = dict(zip(ALL, second[5:]))
    assert dev1["gpu_utilization"] - first[6] == pytest.approx(0.2)  # COMPUTE_ALL when there is no ALL group
    assert all(v != v for k, v in dev1.items() if k != "gpu_utilization")  # NaN: no such domain
    assert any("gpu_power@1" in k for k in c.unsupported)
    assert "the device exposes no power domain" in c.unsupported["gpu_power@1"]
    assert ctypes.c_int.in_dll(sysman_only, "zes_double_bad_stype").value == 0  # every struct's stype was right


def test_profile_run_writes_device_tracks_and_reports_gaps(sysman_only, tmp_path):
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=["gpu_temperature", "gpu_frequency"]))
    assert prof._collector_plan == {"sysman": ["gpu_temperature", "gpu_frequency"]}
    with prof:
        pass
    trace = trace_of(prof, tmp_path)
    ev = counters(trace, "sysman")
    assert ev and {e["pid"] for e in ev} == {0} and {e["cat"] for e in ev} == {"gpu_pm_counter"}
    assert ev[-1]["args"] == {"gpu_temperature": 71.5, "gpu_frequency": 1950.0}
    errs = trace["collector_errors"]["sysman"]
    assert any("gpu_temperature@1 not recorded" in m and "no GPU or global temperature sensor" in m for m in errs)


def test_no_driver_is_one_clear_reason(sysman_only):
    ctypes.c_int.in_dll(sysman_only, "zes_double_fail_init").value = 1
    try:
        reason = SysmanCollector.probe().reason
    finally:
        ctypes.c_int.in_dll(sysman_only, "zes_double_fail_init").value = 0
    assert reason == "zesInit returned 0x78000001 (ZE_RESULT_ERROR_UNINITIALIZED: no Level Zero driver is loaded)"


def test_missing_loader_is_one_clear_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("XPUPROF_ZE_LOADER", str(tmp_path / "nope.so"))
    reason = SysmanCollector.probe().reason
    assert reason.startswith(f"no Level Zero loader (XPUPROF_ZE_LOADER={tmp_path / 'nope.so'})")


_REAL_PROBE = """
import json, sys
from xpuprof.collectors.sysman import SysmanCollector
from xpuprof.collectors.base import CollectorUnavailable
p = SysmanCollector.probe()
c = SysmanCollector(["gpu_power"])
try:
    c.open()
    opened = "opened"
except CollectorUnavailable as exc:
    opened = str(exc)
print(json.dumps({"available": p.available, "reason": p.reason, "open": opened}))
"""


@pytest.mark.skipif(not (LEVEL_ZERO / "lib" / "libze_loader.so.1").exists(),
                    reason=f"the real Level Zero loader + null driver is not at {LEVEL_ZERO}")
@pytest.mark.parametrize("null_driver", [True, False])
def test_real_loader_and_null_driver(null_driver):
    """What the real stack answers: the null driver has no Sysman device; no driver fails zesInit."""
    lib = LEVEL_ZERO / "lib"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZE_", "ZES_", "XPUPROF_"))}
    env.update(XPUPROF_ZE_LOADER=str(lib / "libze_loader.so.1"),
               LD_LIBRARY_PATH=os.pathsep.join([str(lib), env.get("LD_LIBRARY_PATH", "")]))
    if null_driver:
        env["ZE_ENABLE_NULL_DRIVER"] = "1"
    out = subprocess.run([sys.executable, "-c", _REAL_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["available"] is False
    if null_driver:
        assert got["reason"] == "Level Zero Sysman sees no device (zesDeviceGet listed none)"
        assert got["open"] == got["reason"]
    else:
        assert got["reason"].startswith("zesInit returned 0x78000001 (ZE_RESULT_ERROR_UNINITIALIZED")
        assert got["open"].startswith("Level Zero Sysman: zesInit returned 0x78000001")
