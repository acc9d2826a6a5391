"""Pause/resume without code changes beyond the switch: ``prof.pause()``/``prof.resume()`` and
``PTI_ENABLE_COLLECTION`` (unitrace's in-application switch, read at a cycle's start and at each step,
through libc so a C ``setenv`` counts), on the recording cycle's pause/resume; the XPU session disables
its PTI views while paused; paused spans are marked in the trace."""
from __future__ import annotations

import ctypes
import json

import pytest
from slice_tables import slice_table

import xpuprof
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.backends.xpu.backend import XpuBackend
from xpuprof.clock import now_ns
from xpuprof.config.options import ProfilerConfig
from xpuprof.profiler.pausing import PTI_ENABLE_COLLECTION, env_says_paused, read_env
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.vendors import pti

from .conftest import ALL, UUID0

_libc = ctypes.CDLL(None)
_libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
_libc.unsetenv.argtypes = [ctypes.c_char_p]


@pytest.fixture
def xpu_profile(pti_double, monkeypatch, tmp_path):
    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(pti_double.path))
    monkeypatch.setattr(XpuBackend, "_probe_cache", None)
    monkeypatch.delenv(PTI_ENABLE_COLLECTION, raising=False)

    def make(**kw):
        return xpuprof.profile(activities=["cpu", "xpu"], backends=["xpu"], **kw)
    yield make
    _libc.unsetenv(PTI_ENABLE_COLLECTION.encode())


def _past_the_doubles_backdating(iterations: int) -> None:
    """The PTI double dates a workload's records from (iterations + 1) x 10 µs before its call (its records
    are all in the past when handed over): a workload right after a resume would date its first kernel
    inside the paused span. Wait out that much of the clock (no sleep: a read of the same clock)."""
    resumed = now_ns()
    while now_ns() < resumed + (iterations + 1) * 10_000 + 1_000:
        pass


def kernels(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def written(prof, tmp_path):
    return json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())


def test_the_session_disables_its_views_while_paused(pti_double):
    api = XpuptiActivityApi(ALL, ProfilerConfig(), library=pti_double.lib, device_uuids=[UUID0])
    api.start()
    api.pause()
    assert not any(pti_double.c.xpd_view_enabled(k) for k in range(1, 13))
    pti_double.workload_holding_gil(3)  # nothing recorded: PTI's views are off
    api.resume()
    assert pti_double.c.xpd_view_enabled(1) and pti_double.c.xpd_view_enabled(6)
    api.stop()
    b = TraceBuilder()
    api.process(b, ProcessWindow(api.start_ns - 10**9, now_ns()))
    assert not slice_table(b, "kernel")["name"].size


def test_prof_pause_and_resume_mark_the_span_and_record_only_outside_it(xpu_profile, pti_double, tmp_path):
    with xpu_profile() as prof:
        with xpuprof.record_function("before"):
            assert pti_double.workload_holding_gil(2) == 0
        prof.pause()
        with xpuprof.record_function("while paused"):
            assert pti_double.workload_holding_gil(3) == 0
        prof.resume()
        _past_the_doubles_backdating(iterations=2)
        with xpuprof.record_function("after"):
            assert pti_double.workload_holding_gil(2) == 0
    trace = written(prof, tmp_path)
    assert len(kernels(trace)) == 4  # 2 + 2: the 3 launched while paused are not in the trace
    ranges = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"before", "after"} <= ranges and "while paused" not in ranges
    notes = trace["collection_paused"]
    assert {n["source"] for n in notes} == {"xpu", "host"} and all(n["dur"] > 0 for n in notes)
    spans = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("xpuprof collection paused")]
    assert {s["name"] for s in spans} == {"xpuprof collection paused: xpu", "xpuprof collection paused: host"}


def test_pti_enable_collection_0_at_start_pauses_until_a_step_sees_1(xpu_profile, pti_double, tmp_path):
    _libc.setenv(PTI_ENABLE_COLLECTION.encode(), b"0", 1)  # as a C program does it (os.environ never sees it)
    traces = []
    with xpu_profile(schedule=xpuprof.schedule(wait=0, warmup=0, active=3, repeat=1),
                     on_trace_ready=lambda p: traces.append(written(p, tmp_path))) as prof:
        assert read_env() == "0"
        assert pti_double.workload_holding_gil(3) == 0  # paused from the start: not recorded
        _libc.setenv(PTI_ENABLE_COLLECTION.encode(), b"1", 1)
        prof.step()  # the step reads it: collecting again
        _past_the_doubles_backdating(iterations=2)
        assert pti_double.workload_holding_gil(2) == 0
        prof.step()
        prof.step()
    (trace,) = traces
    assert len(kernels(trace)) == 2
    (note,) = [n for n in trace["collection_paused"] if n["source"] == "xpu"]
    assert note["dur"] > 0


def test_pause_lasts_across_cycles_until_resumed(xpu_profile, pti_double, tmp_path):
    traces = []
    with xpu_profile(schedule=xpuprof.schedule(wait=0, warmup=0, active=1, repeat=2),
                     on_trace_ready=lambda p: traces.append(written(p, tmp_path))) as prof:
        prof.pause()
        pti_double.workload_holding_gil(2)
        prof.step()  # a new cycle starts: still paused
        pti_double.workload_holding_gil(2)
        prof.resume()
        _past_the_doubles_backdating(iterations=1)
        pti_double.workload_holding_gil(1)
        prof.step()
    assert [len(kernels(t)) for t in traces] == [0, 1]
    assert all(t["collection_paused"] for t in traces)


@pytest.mark.parametrize("value, paused", [("0", True), ("off", True), ("1", False), ("", False), (None, False)])
def test_what_pti_enable_collection_means(value, paused):
    assert env_says_paused(value) is paused
