"""The subprocess probe helper, and each distinct reason the XPU probe gives."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.backends.base import ProbeResult
from xpuprof.backends.probe import run_probe
from xpuprof.backends.xpu import availability
from xpuprof.vendors import levelzero, pti

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


# ---------------------------------------------------------------- generic helper (probe targets live here)
def ok_target(word):
    return ProbeResult.ok(f"fine {word}", level=3)


def dict_target():
    return {"available": False, "reason": "nope", "details": {"why": 1}}


def abort_target():
    sys.stderr.write("vendor: Condition status == ZE_RESULT_SUCCESS Failed\n")
    sys.stderr.flush()
    os.abort()


def exit_target():
    sys.exit(3)


def hang_target():
    import threading

    threading.Event().wait()


MOD = "test_probe_targets"


@pytest.fixture
def probe_env(tmp_path):
    # The child imports the targets as a module on PYTHONPATH.
    (tmp_path / f"{MOD}.py").write_text(Path(__file__).read_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    return env


def test_probe_returns_the_child_result(probe_env):
    r = run_probe(MOD, "ok_target", ["x"], env=probe_env)
    assert r.available and r.reason == "fine x" and r.details == {"level": 3}
    r = run_probe(MOD, "dict_target", env=probe_env)
    assert not r.available and r.reason == "nope" and r.details["why"] == 1


def test_a_crashing_child_never_takes_the_parent_down(probe_env):
    r = run_probe(MOD, "abort_target", name="demo", env=probe_env)
    assert not r.available
    assert r.reason.startswith("demo probe was killed by SIGABRT") and "ZE_RESULT_SUCCESS Failed" in r.reason
    r = run_probe(MOD, "abort_target", env=probe_env, on_crash=lambda rc, err: f"custom {rc}")
    assert r.reason.startswith("custom -6")
    r = run_probe(MOD, "exit_target", name="demo", env=probe_env)
    assert r.reason == "demo probe exited with status 3 without a result"


def test_a_hanging_child_is_reported(probe_env):
    r = run_probe(MOD, "hang_target", name="demo", env=probe_env, timeout=1.0)
    assert not r.available and r.reason == "demo probe did not finish within 1 s (hung in the vendor library)"


# ---------------------------------------------------------------- XPU reasons
@pytest.fixture(scope="module")
def fake_loaders(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake_ze")
    cc = shutil.which("cc") or shutil.which("gcc")
    src = HERE / "fake_ze" / "fake_ze_loader.c"
    paths = {}
    for name, extra in (("new", []), ("old", ["-DNO_ZESINIT"])):
        lib = out / f"libze_loader_{name}.so.1"
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src), *extra], check=True)
        paths[name] = str(lib)
    return paths


@pytest.mark.parametrize("loader,mode,stage,words", [
    ("old", "gpu", "old_loader", "does not export zesInit"),
    ("new", "nodriver", "no_driver", "no driver initialized (zeInit failed with 0x78000001); PTI would abort"),
    ("new", "nogpu", "no_gpu", "1 driver(s) but no GPU device"),
])
def test_level_zero_stages_give_distinct_reasons(fake_loaders, monkeypatch, loader, mode, stage, words):
    monkeypatch.setenv(levelzero.LOADER_ENV, fake_loaders[loader])
    monkeypatch.setenv("FAKE_ZE_MODE", mode)
    res = availability.check_level_zero()
    assert not res["available"] and res["details"]["stage"] == stage
    assert words in res["reason"]


def test_level_zero_gpu_enumeration_and_kineto_properties(fake_loaders, monkeypatch):
    monkeypatch.setenv(levelzero.LOADER_ENV, fake_loaders["new"])
    monkeypatch.setenv("FAKE_ZE_MODE", "gpu")
    res = availability.check_level_zero()
    assert res["available"] and res["details"]["devices"][0]["name"] == "Fake Intel GPU"
    dev = levelzero.gpu_devices()[0]
    props = dev.kineto_properties()
    assert set(props) == {"id", "name", "totalGlobalMem", "maxComputeUnits", "maxWorkGroupSize", "maxClockFrequency",
                          "maxMemAllocSize", "localMemSize", "vendor", "driverVersion"}
    assert props["maxComputeUnits"] == 64 and props["totalGlobalMem"] == 64 << 30 and props["vendor"] == "0x8086"
    assert dev.uuid[:2] == b"\xa0\xa1" and props["maxWorkGroupSize"] == 1024 and props["driverVersion"] == "12345"


def test_no_loader_reason(monkeypatch):
    monkeypatch.setenv(levelzero.LOADER_ENV, "")
    monkeypatch.setattr(levelzero, "find_loader", lambda: None)
    res = availability.check_level_zero()
    assert res["details"]["stage"] == "no_loader" and "no Level Zero loader (libze_loader.so.1)" in res["reason"]


def test_no_pti_wheel_reason(monkeypatch):
    monkeypatch.delenv(pti.PTI_LIBRARY_ENV, raising=False)
    monkeypatch.setattr(pti, "_wheel_candidates", lambda: [Path("/nonexistent/lib/libpti_view.so")])
    monkeypatch.setattr(pti, "_oneapi_candidates", lambda: [])
    monkeypatch.setattr(pti.ctypes.util, "find_library", lambda name: None)
    r = availability.probe()
    assert not r.available and r.details["stage"] == "no_pti"
    assert "pip install --no-deps intel-pti intel-cmplr-lib-rt" in r.reason


def test_the_whole_probe_through_a_subprocess_with_a_fake_driver_crash(fake_loaders, monkeypatch, tmp_path):
    """PTI with a loader but no driver aborts; the probe child stands in for it with os.abort().
    Holds without the intel-pti wheel too: the wheel lookup is stood in for as well, and so are the files
    that let the child run (a loader on the library path, a GPU device node)."""
    monkeypatch.setattr(availability.pti, "find_pti_library", lambda: tmp_path / "libpti_view.so")
    monkeypatch.setattr(availability.system_facts, "find_library", lambda names, env=None: fake_loaders["new"])
    monkeypatch.setattr(availability.system_facts, "device_nodes", lambda patterns: ["/dev/dri/renderD128"])
    monkeypatch.delenv(availability.system_facts.FULL_PROBE_ENV, raising=False)
    monkeypatch.setattr(availability, "run_probe", lambda *a, **k: run_probe(
        "os", "abort", [], name="XPU (Intel PTI)", on_crash=k["on_crash"]))
    r = availability.probe()
    assert not r.available and "PTI aborted the probe process (SIGABRT)" in r.reason


def test_explicit_library_skips_level_zero_and_checks_the_core(pti_double_path, monkeypatch):
    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double_path))
    r = availability.probe()
    assert r.available, r.reason
    assert r.reason == "Intel PTI 0.99.0-xpuprof-double"
