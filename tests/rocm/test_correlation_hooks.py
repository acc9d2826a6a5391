"""record_function pushes its correlation id to rocprofiler-sdk through the SDK's own C entry
points (push/pop by context and thread, the thread from rocprofiler_get_thread_id), called from
the C record_function with no Python call per range. The double (fake_rocprofiler.c) refuses a
wrong context or thread, as the SDK does, so the arguments' order and values are checked."""
from __future__ import annotations

import pytest

import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.vendors import rocprofiler as rocprof
from xpuprof.backends.rocm.activity_api import RocprofActivityApi
from xpuprof.backends.rocm.backend import RocmBackend
from xpuprof.config.options import ProfilerConfig
from xpuprof.host import recorder
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

ALL = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.RUNTIME,
                 ActivityType.EXTERNAL_CORRELATION, ActivityType.CUDA_SYNC})
needs_c = pytest.mark.skipif(not recorder.FAST_PATH, reason="the C record_function (xpuprof._native.hostrec) "
                                                             "is not built: python setup.py build_ext --inplace")


def _ranged_run(session, lib, fail: int = 0):
    from xpuprof._native import hostrec

    hostrec.set_recorder(recorder.HostRecorder(correlation_sessions=[session]))
    session.start()
    try:
        lib.fake_fail_external(fail)
        with xpuprof.record_function("step"):
            cid = hostrec.current_correlation_id()
            depth = lib.fake_external_depth()
            lib.fake_run_scenario()
    finally:
        hostrec.set_recorder(None)
    session.stop()
    b = TraceBuilder(pid=session.pid)
    session.process(b, ProcessWindow(0, 2**62))
    return cid, depth, [e for chunk in iter_event_chunks(b) for e in chunk]


@needs_c
def test_ranges_link_device_work_through_the_sdks_c_entry_points(fake_rocprofiler, monkeypatch):
    def no_python_call(self, *a, **k):
        raise AssertionError("a Python push/pop call per range: the C hooks were not used")

    monkeypatch.setattr(RocprofActivityApi, "push_correlation_id", no_python_call)
    monkeypatch.setattr(RocprofActivityApi, "pop_correlation_id", no_python_call)
    session = RocmBackend().configure(ALL, ProfilerConfig())
    lib = rocprof.load_library()
    cid, depth, evs = _ranged_run(session, lib)
    assert depth == 1 and lib.fake_external_depth() == 0  # pushed on enter, popped on exit
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert kernels and {k["args"].get("External id") for k in kernels} == {cid}
    assert session.errors() == []


@needs_c
def test_failed_c_pushes_are_counted_and_reported_never_raised(fake_rocprofiler):
    session = RocmBackend().configure(ALL, ProfilerConfig())
    lib = rocprof.load_library()
    cid, depth, evs = _ranged_run(session, lib, fail=2)  # the push and the pop both fail
    assert depth == 0
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert kernels and all(k["args"].get("External id") != cid for k in kernels)
    (err,) = session.errors()
    assert err.startswith("2 external-correlation push/pop call(s) failed") and "not linked" in err


def test_no_hooks_without_external_correlation(fake_rocprofiler):
    session = RocmBackend().configure(ALL - {ActivityType.EXTERNAL_CORRELATION}, ProfilerConfig())
    assert session.correlation_hooks is None


def test_the_python_path_counts_failures_too(fake_rocprofiler):
    session = RocmBackend().configure(ALL, ProfilerConfig())
    lib = rocprof.load_library()
    session.start()
    lib.fake_fail_external(1)
    session.push_correlation_id(5)
    session.pop_correlation_id()  # the stack was empty: the double pops nothing, no failure
    session.stop()
    assert list(session.correlation_failures) == [1, 1]
