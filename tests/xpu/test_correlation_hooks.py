"""record_function pushes its correlation id to PTI through PTI's own C entry points (the session's
``correlation_hooks``), called from the C record_function with no Python call per range: a Python
push/pop through ctypes cost ~1.7 us per range (1,864 ns measured over the double, 181 ns now).
The speed is a benchmark's business (benchmarks/bench_record_function.py); these tests prove the
path is taken, links device work as before, and counts failures instead of hiding them."""
from __future__ import annotations

import array
import ctypes
import json

import pytest

import xpuprof
from xpuprof.vendors import pti
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.host import recorder

needs_c = pytest.mark.skipif(not recorder.FAST_PATH, reason="the C record_function (xpuprof._native.hostrec) "
                                                             "is not built: python setup.py build_ext --inplace")


@needs_c
def test_ranges_link_device_work_through_ptis_c_entry_points(pti_double, monkeypatch, tmp_path):
    from xpuprof.backends.xpu.backend import XpuBackend

    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double.path))
    monkeypatch.setattr(XpuBackend, "_probe_cache", None)  # an earlier test may have probed with no library

    def no_python_call(self, *a, **k):
        raise AssertionError("a Python push/pop call per range: the C hooks were not used")

    monkeypatch.setattr(XpuptiActivityApi, "push_correlation_id", no_python_call)
    monkeypatch.setattr(XpuptiActivityApi, "pop_correlation_id", no_python_call)
    with xpuprof.profile(backends=["xpu"], activities=["cpu", "xpu"]) as prof:
        with xpuprof.record_function("step"):
            assert pti_double.workload_holding_gil(3) == 0
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    (step,) = [e for e in evs if e["name"] == "step" and e.get("cat") == "user_annotation"]
    runtime = [e for e in evs if e.get("cat") == "xpu_runtime"]
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert len(runtime) == 9 and len(kernels) == 3
    assert {e["args"]["External id"] for e in runtime + kernels} == {step["args"]["External id"]}
    assert "backend_errors" not in trace


@needs_c
def test_a_failing_c_push_or_pop_is_counted_never_raised():
    from xpuprof._native import hostrec

    calls = []
    push_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64)
    pop_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64))
    push = push_t(lambda kind, cid: calls.append(("push", kind, cid)) or 7)
    pop = pop_t(lambda kind, out: calls.append(("pop", kind)) or 0)

    class Session:
        failures = array.array("q", [0, 0])
        correlation_hooks = (ctypes.cast(push, ctypes.c_void_p).value, ctypes.cast(pop, ctypes.c_void_p).value, 2,
                             failures)

    rec = recorder.HostRecorder(correlation_sessions=[Session()])
    hostrec.set_recorder(rec)
    try:
        with xpuprof.record_function("a"):
            cid = hostrec.current_correlation_id()
    finally:
        hostrec.set_recorder(None)
    assert calls == [("push", 2, cid), ("pop", 2)]
    assert list(Session.failures) == [1, 7]  # the push failed once with 7; the pop succeeded
    assert rec.range_count() == 1  # the range itself is kept


@needs_c
def test_malformed_hooks_are_refused_when_the_recorder_is_set():
    from xpuprof._native import hostrec

    class Bad:
        correlation_hooks = (0, 0, 2, array.array("q", [0, 0]))

    class Short:
        correlation_hooks = (1, 1, 2, bytearray(8))

    class NoThreadId:  # the context shape (rocprofiler-sdk) needs its thread-id entry point
        correlation_hooks = (1, 1, 0xC7, array.array("q", [0, 0]), 0)

    class Wrong:
        correlation_hooks = ("push", 1, 2, array.array("q", [0, 0]))

    for session, error, message in ((Bad(), ValueError, "NULL push, pop or thread-id"),
                                    (NoThreadId(), ValueError, "NULL push, pop or thread-id"),
                                    (Short(), ValueError, "two aligned int64"),
                                    (Wrong(), TypeError, r"must be \(push address, pop address, kind, buffer\)")):
        with pytest.raises(error, match=message):
            hostrec.set_recorder(recorder.HostRecorder(correlation_sessions=[session]))
    hostrec.set_recorder(None)


def test_the_session_reports_failed_pushes_in_its_errors(pti_double):
    from xpuprof.activity import ActivityType
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.trace.builder.builder import TraceBuilder

    s = XpuptiActivityApi(frozenset({ActivityType.RUNTIME}), None, library=pti_double.lib)
    assert s.correlation_hooks is not None and s.correlation_hooks[3] is s.correlation_failures
    s.start()
    s.stop()
    s.correlation_failures[0], s.correlation_failures[1] = 3, int(pti.Result.ERROR_BAD_ARGUMENT)
    s.process(TraceBuilder(), ProcessWindow(0, 1 << 62))
    (err,) = [e for e in s.errors() if "external-correlation" in e]
    assert err.startswith("3 external-correlation push/pop call(s) failed") and "not linked" in err
