"""What starting a profile pays for backends: probes ruled out in-process from files (no child interpreter
where a library or a device node is missing), the rest all at once, each once per process.

Before (issue 41): ``xpuprof.profile()`` with no backends named started a child interpreter per vendor, one
after the other, on every machine (CUDA's with cupti-python absent too): 8.3 s in ``__enter__`` under load.
"""
from __future__ import annotations

import os
import sys
import threading

import pytest

import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.backends import probe as probe_module
from xpuprof.backends import registry, system_facts
from xpuprof.backends.base import Backend, ProbeResult
from xpuprof.backends.cuda import backend as cuda_backend
from xpuprof.backends.rocm import backend as rocm_backend
from xpuprof.backends.xpu import availability
from xpuprof.backends.xpu.backend import XpuBackend
from xpuprof.config.options import ProfilerConfig
from xpuprof.profiler import selection


# ----------------------------------------------------------------------------- the facts
def test_a_library_on_ld_library_path_is_found_in_any_version(tmp_path):
    (tmp_path / "libfakevendor.so.3.2").write_bytes(b"")
    env = {"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"}
    assert system_facts.find_library(["libfakevendor.so.1"], env) == str(tmp_path / "libfakevendor.so.3.2")
    assert system_facts.find_library(["libfakevendor.so.1"], {"LD_LIBRARY_PATH": ""}) is None
    assert system_facts.find_library(["libfakevendor.so"], {}, extra_dirs=[str(tmp_path)]) is not None


def test_the_linker_cache_and_this_process_s_own_libraries_count_as_found(tmp_path, monkeypatch):
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(b"glibc-ld.so.cache1.1\0libvendorx.so.1\0/usr/lib/wsl/lib/libvendorx.so.1\0")
    monkeypatch.setattr(system_facts, "LD_CACHE", str(cache))
    assert "ld.so.cache" in system_facts.find_library(["libvendorx.so.1"], {})
    assert system_facts.find_library(["libvendory.so.1"], {}) is None
    # a library already loaded here (libc's resolved path: /lib/.../libc.so.6) is found by its stem
    monkeypatch.setattr(system_facts, "LD_CACHE", str(tmp_path / "absent"))
    monkeypatch.setattr(system_facts, "_default_dirs", lambda: [])
    assert "already loaded" in system_facts.find_library(["libc.so.6"], {})


def test_device_nodes_modules_and_the_switch(tmp_path):
    (tmp_path / "renderD128").write_bytes(b"")
    assert system_facts.device_nodes([str(tmp_path / "renderD*"), str(tmp_path / "card*")]) == \
        [str(tmp_path / "renderD128")]
    assert system_facts.module_installed("json") and not system_facts.module_installed("no_such_module_xyz")
    assert system_facts.full_probe_forced({"XPUPROF_FULL_PROBE": "1"})
    assert not system_facts.full_probe_forced({"XPUPROF_FULL_PROBE": "0"}) and not system_facts.full_probe_forced({})


# ----------------------------------------------------------------------------- each vendor's rule-out
@pytest.fixture
def no_child(monkeypatch):
    """Fails the test if any probe starts a child interpreter."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a probe child was started: {args[:2]}")

    monkeypatch.setattr(probe_module, "run_probe", refuse)
    monkeypatch.setattr(availability, "run_probe", refuse)
    monkeypatch.setattr(cuda_backend, "run_probe", refuse)
    monkeypatch.delenv(system_facts.FULL_PROBE_ENV, raising=False)


def _facts(monkeypatch, *, libraries=(), nodes=(), modules=("cupti",)):
    monkeypatch.setattr(system_facts, "find_library",
                        lambda names, environ=None, extra_dirs=(): next((n for n in names if n in libraries), None))
    monkeypatch.setattr(system_facts, "device_nodes",
                        lambda patterns: [p for p in patterns if p in nodes])
    monkeypatch.setattr(system_facts, "module_installed", lambda name: name in modules)


def test_cuda_is_ruled_out_by_each_missing_fact_without_a_child(no_child, monkeypatch):
    _facts(monkeypatch, modules=())
    r = cuda_backend.probe_cuda()
    assert not r and r.details == {"stage": "no_cupti", "decided": "in-process"}
    assert "cupti-python is not installed" in r.reason
    _facts(monkeypatch)
    r = cuda_backend.probe_cuda()
    assert r.details["stage"] == "no_driver" and "libcuda.so.1 is not installed" in r.reason
    _facts(monkeypatch, libraries=("libcuda.so.1",))
    r = cuda_backend.probe_cuda()
    assert r.details["stage"] == "no_device_node" and "/dev/nvidiactl" in r.reason


def test_cuda_with_every_fact_present_or_forced_runs_the_child(monkeypatch):
    ran = []
    monkeypatch.setattr(cuda_backend, "run_probe", lambda *a, **k: ran.append(a) or ProbeResult.unavailable("child"))
    _facts(monkeypatch, libraries=("libcuda.so.1",), nodes=("/dev/nvidiactl",))
    assert cuda_backend.probe_cuda().reason == "child" and len(ran) == 1
    _facts(monkeypatch, modules=())
    monkeypatch.setenv(system_facts.FULL_PROBE_ENV, "1")
    assert cuda_backend.probe_cuda().reason == "child" and len(ran) == 2


def test_xpu_is_ruled_out_by_a_missing_loader_or_device_node_without_a_child(no_child, monkeypatch, tmp_path):
    monkeypatch.setattr(availability.pti, "find_pti_library", lambda: tmp_path / "libpti_view.so")
    for name in (availability.pti.PTI_LIBRARY_ENV, availability.levelzero.LOADER_ENV,
                 *availability.NODELESS_DRIVER_ENV):
        monkeypatch.delenv(name, raising=False)
    _facts(monkeypatch)
    r = availability.probe()
    assert (r.details["stage"], r.details["decided"]) == ("no_loader", "in-process")
    assert "no Level Zero loader (libze_loader.so.1) found" in r.reason and r.details["pti_library"]
    _facts(monkeypatch, libraries=("libze_loader.so.1",))
    r = availability.probe()
    assert r.details["stage"] == "no_device_node" and "/dev/dri/renderD*" in r.reason


@pytest.mark.parametrize("env", [{"ZE_ENABLE_NULL_DRIVER": "1"}, {"ZE_ENABLE_ALT_DRIVERS": "libze_fake.so"},
                                 {"XPUPROF_ZE_LOADER": "/opt/l0/libze_loader.so.1"}, {"XPUPROF_FULL_PROBE": "1"}])
def test_xpu_leaves_nodeless_drivers_and_explicit_paths_to_the_child(monkeypatch, tmp_path, env):
    monkeypatch.setattr(availability.pti, "find_pti_library", lambda: tmp_path / "libpti_view.so")
    ran = []
    monkeypatch.setattr(availability, "run_probe", lambda *a, **k: ran.append(a) or ProbeResult.unavailable("child"))
    _facts(monkeypatch, libraries=("libze_loader.so.1",) if "XPUPROF_FULL_PROBE" not in env else ())
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert availability.probe().reason == "child" and ran


def test_rocm_is_ruled_out_from_files_unless_a_library_is_named(no_child, monkeypatch, tmp_path):
    monkeypatch.delenv(rocm_backend.LIBRARY_ENV, raising=False)
    loaded = []
    monkeypatch.setattr(rocm_backend.rocprof, "load_library", lambda: loaded.append(1) or (_ for _ in ()).throw(
        rocm_backend.rocprof.RocprofNotFound("rocprofiler-sdk not found (loaded)")))
    _facts(monkeypatch)
    r = rocm_backend.RocmBackend.probe()
    assert r.details == {"stage": "no_library", "decided": "in-process"} and r.reason.startswith("rocprofiler-sdk not found")
    _facts(monkeypatch, libraries=("librocprofiler-sdk.so",))
    r = rocm_backend.RocmBackend.probe()
    assert r.details["stage"] == "no_device_node" and "/dev/kfd" in r.reason and not loaded
    monkeypatch.setenv(rocm_backend.LIBRARY_ENV, str(tmp_path / "librocprofiler-sdk.so"))
    assert rocm_backend.RocmBackend.probe().reason == "rocprofiler-sdk not found (loaded)" and loaded


# ----------------------------------------------------------------------------- all at once, once each
class _BarrierBackend(Backend):
    """Its probe returns only when every _BarrierBackend probe is running at the same time."""

    barrier: threading.Barrier
    calls: list

    @classmethod
    def probe(cls):
        cls.calls.append(cls.name)
        cls.barrier.wait()  # BrokenBarrierError (after its timeout) when the probes run one after another
        return ProbeResult.unavailable(f"{cls.name}: no device")

    @classmethod
    def supported_activities(cls):
        return frozenset({ActivityType.CONCURRENT_KERNEL})

    def configure(self, activity_types, config):
        return None


@pytest.fixture
def barrier_backends(monkeypatch):
    _BarrierBackend.barrier = threading.Barrier(3, timeout=10)
    _BarrierBackend.calls = []
    classes = [type(_BarrierBackend)(f"BarrierBackend{i}", (_BarrierBackend,), {"name": f"barrier{i}"})
               for i in range(3)]
    for cls in classes:
        registry.register(cls, replace=True)
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "xpu,cuda,rocm")
    yield classes
    for cls in classes:
        registry.unregister(cls.name)


def test_probes_run_at_the_same_time_and_each_once_per_start(barrier_backends):
    config = ProfilerConfig(activities=["cpu", "kernel"])
    probes: dict = {}
    assert selection.select_backends(config, probes) == []
    assert sorted(probes) == ["barrier0", "barrier1", "barrier2"]
    reasons = selection.explain_host_only(config, [], probes)
    assert reasons["barrier1"] == "barrier1: no device" and reasons["xpu"] == "disabled by XPUPROF_DISABLE_BACKENDS"
    assert sorted(_BarrierBackend.calls) == ["barrier0", "barrier1", "barrier2"]  # explaining asked no probe again


def test_probe_all_runs_them_at_the_same_time_too(barrier_backends):
    probes = registry.probe_all()
    assert [probes[f"barrier{i}"].reason for i in range(3)] == [f"barrier{i}: no device" for i in range(3)]
    assert list(probes) == registry.backend_names()


def test_a_failing_probe_among_parallel_ones_is_reported_not_raised(monkeypatch, caplog):
    class Broken(_BarrierBackend):
        name = "brokenprobe"

        @classmethod
        def probe(cls):
            raise OSError("vendor library exploded")

    registry.register(Broken, replace=True)
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "xpu,cuda,rocm")
    try:
        with caplog.at_level("WARNING", logger="xpuprof"):
            assert selection.select_backends(ProfilerConfig(activities=["cpu", "kernel"])) == []
        assert "backend brokenprobe could not be probed: OSError: vendor library exploded" in caplog.text
        assert registry.probe_all()["brokenprobe"].reason == "probe failed: OSError: vendor library exploded"
    finally:
        registry.unregister("brokenprobe")


def test_the_cuda_probe_runs_once_per_process_even_when_asked_at_once(monkeypatch):
    calls = []
    gate = threading.Event()

    def slow_probe():
        calls.append(1)
        gate.wait(10)
        return ProbeResult.unavailable("no GPU")

    monkeypatch.setattr(cuda_backend, "probe_cuda", slow_probe)
    monkeypatch.setattr(cuda_backend.CudaBackend, "_probe_cache", None)
    threads = [threading.Thread(target=cuda_backend.CudaBackend.probe) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert cuda_backend.CudaBackend.probe().reason == "no GPU" and calls == [1]


# ----------------------------------------------------------------------------- end to end
def test_starting_a_profile_here_starts_no_probe_child(no_child, monkeypatch):
    """This machine has no GPU device node, no Level Zero loader or no CUDA driver library: whatever the
    installed Python packages, every vendor probe is decided from files (an unsure fact would start a child,
    which the fixture refuses)."""
    import glob

    if any(glob.glob(p) for p in ("/dev/dri/renderD*", "/dev/nvidia*", "/dev/kfd", "/dev/dxg")):
        pytest.skip("this machine has a GPU device node: a vendor probe may need its child here")
    monkeypatch.setattr(XpuBackend, "_probe_cache", None)
    monkeypatch.setattr(cuda_backend.CudaBackend, "_probe_cache", None)
    for name in ("ZE_ENABLE_NULL_DRIVER", "ZE_ENABLE_ALT_DRIVERS", "XPUPROF_ZE_LOADER", "XPUPROF_PTI_LIBRARY",
                 "XPUPROF_DISABLE_BACKENDS", "ROCPROFILER_SDK_LIBRARY"):
        monkeypatch.delenv(name, raising=False)
    with xpuprof.profile() as prof:
        pass
    reasons = prof.builder.metadata["device_backends_unavailable"]
    assert {"xpu", "cuda", "rocm"} <= set(reasons), reasons


CHOOSE = """
import json, sys
from xpuprof.config.options import ProfilerConfig
from xpuprof.profiler import selection
probes = {}
chosen = selection.select_backends(ProfilerConfig(), probes)
print(json.dumps({"chosen": [b.name for b in chosen], "probed": sorted(probes),
                  "sessions": sorted(m for m in sys.modules if m.startswith("xpuprof.backends.") and
                                    m.endswith(("activity_api", ".emit", ".records")))}))
"""


def test_choosing_backends_imports_no_session_code():
    """Every machine imports each backend's module to choose (and probe) it: that must not load record
    decoding, emit or stall-sampling code for a vendor that then takes no part (it cost 50-130 ms)."""
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("XPUPROF_DISABLE_BACKENDS", "XPUPROF_FULL_PROBE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", CHOOSE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["chosen"]:
        pytest.skip(f"a device backend is available here ({res['chosen']}): its session code loads")
    assert {"xpu", "cuda", "rocm"} <= set(res["probed"]) and res["sessions"] == [], res
