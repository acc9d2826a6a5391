"""XpuBackend.configure: which session it builds, and the clear errors when it cannot."""
from __future__ import annotations

import logging
import sys
import types

import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends import registry
from xpuprof.backends.base import BackendError, ProbeResult
from xpuprof.backends.xpu import activity_api, metrics_scope
from xpuprof.vendors import pti
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.backends.xpu.backend import XpuBackend
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig


def test_registry_finds_the_backend():
    cls = registry.get_backend_class("xpu")
    assert cls is XpuBackend and cls.name == "xpu" and cls.vendor == "xpu"
    assert ActivityType.CONCURRENT_KERNEL in cls.supported_activities()
    assert ActivityType.XPU_SCOPE_PROFILER in cls.supported_activities()


def test_declines_types_it_does_not_produce():
    assert XpuBackend().configure(frozenset({ActivityType.CPU_OP, ActivityType.PYTHON_FUNCTION}), None) is None


def test_explicit_library_builds_a_view_session(pti_double, monkeypatch):
    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double.path))
    s = XpuBackend().configure(frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.CPU_OP}), None)
    assert type(s) is XpuptiActivityApi
    assert s.types == frozenset({ActivityType.CONCURRENT_KERNEL}) and s.wants_correlation
    assert s.metadata() == {"xpupti_version": "0.99.0-xpuprof-double"}
    s.start()
    s.stop()


def test_scope_profiler_selects_the_scope_session_lazily(pti_double, monkeypatch):
    made = {}

    class FakeScope(XpuptiActivityApi):
        def __init__(self, types_, config, **kw):
            made["types"] = types_
            super().__init__(types_, config, **kw)

    fake = types.ModuleType("xpuprof.backends.xpu.scope_api")
    fake.XpuptiActivityScopeApi = FakeScope
    monkeypatch.setitem(sys.modules, "xpuprof.backends.xpu.scope_api", fake)
    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double.path))
    monkeypatch.delenv("ZET_ENABLE_METRICS", raising=False)  # the scope request sets it: restored after
    monkeypatch.setattr(metrics_scope, "_level_zero_mapped", lambda: False)
    plain = XpuBackend().configure(frozenset({ActivityType.CONCURRENT_KERNEL}), None)
    assert type(plain) is XpuptiActivityApi and not made
    s = XpuBackend().configure(frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.XPU_SCOPE_PROFILER}),
                               ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["GpuTime"])))
    assert type(s) is FakeScope and ActivityType.XPU_SCOPE_PROFILER in made["types"]


def test_configure_refuses_when_the_probe_says_no(monkeypatch):
    monkeypatch.delenv(pti.PTI_LIBRARY_ENV, raising=False)
    monkeypatch.setattr(XpuBackend, "_probe_cache", ProbeResult.unavailable("no Level Zero loader found"))
    with pytest.raises(BackendError, match="the XPU backend cannot run here: no Level Zero loader found"):
        XpuBackend().configure(frozenset({ActivityType.CONCURRENT_KERNEL}), None)


def test_missing_c_extension_is_a_clear_error(pti_double, monkeypatch):
    import xpuprof._native

    monkeypatch.delattr(xpuprof._native, "ptibuf", raising=False)
    monkeypatch.setitem(sys.modules, "xpuprof._native.ptibuf", None)
    with pytest.raises(BackendError, match=r"xpuprof._native.ptibuf cannot be imported \(its import is blocked.*deadlock"):
        activity_api.load_ptibuf()


def test_pti_without_its_core_explains_the_library_path(pti_double, monkeypatch, tmp_path):
    lib = pti_double.lib
    monkeypatch.setattr(lib, "ptiViewEnable", lambda kind: 2)
    (tmp_path / "pti").mkdir()
    (tmp_path / "pti" / "libpti.so").write_bytes(b"")
    (tmp_path / "libxptifw.so").write_bytes(b"")
    monkeypatch.setattr(lib, "path", tmp_path / "libpti_view.so")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/lib")
    with pytest.raises(BackendError, match=rf"PTI_ERROR_NOT_IMPLEMENTED.*LD_LIBRARY_PATH lacks {tmp_path}"):
        XpuptiActivityApi(frozenset({ActivityType.CONCURRENT_KERNEL}), library=lib)


def test_library_path_helpers(tmp_path):
    (tmp_path / "pti").mkdir()
    (tmp_path / "pti" / "libpti.so").write_bytes(b"")
    (tmp_path / "libxptifw.so").write_bytes(b"")
    view = tmp_path / "libpti_view.so"
    assert pti.library_path_missing(view, {"LD_LIBRARY_PATH": "/x"}) == tmp_path.resolve()
    assert pti.library_path_missing(view, {"LD_LIBRARY_PATH": f"/x:{tmp_path}"}) is None
    env = pti.environment_with_library_path(view, {"LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"] == f"{tmp_path.resolve()}:/x"
    assert pti.required_library_dir(tmp_path / "elsewhere" / "libpti_view.so") is None


def test_explicit_library_that_does_not_exist(monkeypatch):
    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, "/nonexistent/libpti_view.so")
    with pytest.raises(pti.PtiNotFound, match="does not name an existing file"):
        pti.find_pti_library()


def test_out_of_window_records_are_counted_in_the_trace_and_logged_below_warning(pti_double, monkeypatch, caplog,
                                                                                 tmp_path):
    """A schedule's warmup step records what the active step then drops as out of window;
    that is expected, so it is in the trace's dropped_records but never a WARNING (it was, every cycle)."""
    import json

    import xpuprof

    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double.path))
    monkeypatch.setattr(XpuBackend, "_probe_cache", None)  # an earlier test may have probed with no library
    traces = []
    with caplog.at_level("DEBUG", logger="xpuprof"):
        with xpuprof.profile(activities=["cpu", "xpu"], backends=["xpu"],
                             schedule=xpuprof.schedule(wait=0, warmup=1, active=1),
                             on_trace_ready=lambda p: traces.append(p.export_chrome_trace(tmp_path / "t.json"))) as prof:
            for _ in range(2):
                assert pti_double.workload_holding_gil(4) == 0  # the warmup step's work is out of the window
                prof.step()
    (path,) = traces
    dropped = json.loads(open(path).read())["dropped_records"]
    assert dropped.get("xpu: out of window", 0) > 0, dropped
    said = [r for r in caplog.records if "dropped records" in r.getMessage()]
    assert said and all(r.levelno < logging.WARNING for r in said), [(r.levelname, r.getMessage()) for r in said]


def test_a_null_driver_device_is_said_in_its_device_properties_and_the_trace_metadata(pti_double):
    """The trace only said deviceProperties name 'Null Device' (the real-stack check:
    tests/xpu/test_real_sycl.py::test_the_trace_and_the_metrics_collector_say_the_null_device_is_a_test_device)."""
    from dataclasses import replace

    from xpuprof.vendors import levelzero

    null = levelzero.Device(index=0, name="Null Device", uuid=bytes(16), vendor_id=0, device_id=0, type=1,
                            core_clock_mhz=0, max_mem_alloc=0, compute_units=0, max_work_group_size=0,
                            local_mem_size=0, total_memory=0, driver_version=0)
    gpu = replace(null, index=1, name="Intel(R) Arc(TM) B580 Graphics", vendor_id=0x8086, uuid=bytes(range(16)))
    props = [null.kineto_properties(), gpu.kineto_properties()]
    assert "null driver's test device" in props[0]["note"] and "note" not in props[1]
    api = XpuptiActivityApi(frozenset({ActivityType.RUNTIME}), library=pti_double.lib, device_properties=props)
    try:
        assert api.metadata()["xpu_test_device"] == f"device 0: {levelzero.NULL_DEVICE_NOTE}"
        plain = XpuptiActivityApi(frozenset({ActivityType.RUNTIME}), library=pti_double.lib, device_properties=props[1:])
        assert "xpu_test_device" not in plain.metadata()
        plain.disable()
    finally:
        api.disable()
