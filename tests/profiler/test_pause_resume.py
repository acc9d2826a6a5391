"""Pause/resume of a recording cycle's sources (torch's toggle_collection_dynamic; the XPU backend's
pause()/resume() build on the same Session hooks): records in a paused window are dropped, the window is
marked in the trace, and a pause lasts until resumed, across cycles."""
from __future__ import annotations

import json

from slice_tables import slice_table
import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.backends import registry
from xpuprof.backends.base import Backend, ProbeResult, Session


def _sim_steps(prof, n, pause_at=None, resume_at=None, what=("xpu",)):
    for i in range(n):
        if i == pause_at:
            prof.toggle_collection_dynamic(False, list(what))
        if i == resume_at:
            prof.toggle_collection_dynamic(True, list(what))
        with xpuprof.record_function(f"step{i}"):
            pass


def test_device_activities_paused_are_dropped_and_the_window_marked(tmp_path):
    with xpuprof.profile(backends=["sim"], activities=["cpu", "xpu"]) as prof:
        _sim_steps(prof, 6, pause_at=2, resume_at=4)
    data = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    ev = data["traceEvents"]
    kernels = sorted(e["name"] for e in ev if e.get("cat") == "kernel")
    assert kernels == ["sim_step0", "sim_step1", "sim_step4", "sim_step5"]
    ranges = sorted(e["name"] for e in ev if e.get("cat") == "user_annotation")
    assert ranges == [f"step{i}" for i in range(6)]  # the host was not paused
    (note,) = data["collection_paused"]
    assert note["source"] == "sim" and note["dur"] > 0
    (span,) = [e for e in ev if e.get("name") == "xpuprof collection paused: sim"]
    assert span["pid"] == "Spans" and span["ts"] == note["ts"] and span["dur"] == note["dur"]
    step2 = next(e for e in ev if e.get("name") == "step2")
    assert note["ts"] <= step2["ts"] <= note["ts"] + note["dur"]
    assert data["dropped_records"]["sim: out of window"] == 2


def test_a_pause_lasts_across_cycles_until_resumed():
    prof = xpuprof.profile(backends=["sim"], activities=["cpu", "xpu"],
                           schedule=xpuprof.schedule(wait=0, warmup=0, active=2, repeat=3))
    counts = []
    prof.on_trace_ready = lambda p: counts.append(len(slice_table(p.builder, "kernel")["name"]))
    with prof:
        prof.toggle_collection_dynamic(False, ["xpu"])
        for i in range(6):
            if i == 4:
                prof.toggle_collection_dynamic(True, ["xpu"])
            with xpuprof.record_function(f"s{i}"):
                pass
            prof.step()
    assert counts == [0, 0, 2]


class _HookSession(Session):
    calls: list = []

    def start(self):
        pass

    def stop(self):
        pass

    def pause(self):
        self.calls.append("pause")

    def resume(self):
        self.calls.append("resume")

    def process(self, builder, window):
        ts = [window.start_ns + 1, *(s + 1 for s, _ in window.paused)]
        keep = [t for t in ts if window.contains(t)]
        builder.add_slices(names=["k"] * len(keep), ts=keep, dur=[1] * len(keep), pid=0, tid=1,
                           cat=ActivityType.CONCURRENT_KERNEL)


class _HookBackend(Backend):
    name = "hooktest"

    @classmethod
    def probe(cls):
        return ProbeResult.ok()

    @classmethod
    def supported_activities(cls):
        return frozenset({ActivityType.CONCURRENT_KERNEL})

    def configure(self, activity_types, config):
        return _HookSession()


def test_sessions_get_pause_and_resume_calls_and_a_paused_window():
    registry.register(_HookBackend, replace=True)
    _HookSession.calls = []
    try:
        with xpuprof.profile(backends=["hooktest"], activities=["kernel"]) as prof:
            prof.toggle_collection_dynamic(False, ["kernel"])
            prof.toggle_collection_dynamic(False, ["kernel"])  # already paused: one pause
            prof.toggle_collection_dynamic(True, ["kernel"])
            prof.toggle_collection_dynamic(False, ["cpu"])  # host only: the session is not paused
    finally:
        registry.unregister("hooktest")
    assert _HookSession.calls == ["pause", "resume"]
    assert len(slice_table(prof.builder, "kernel")["name"]) == 1  # the record inside the paused window dropped
    sources = [n["source"] for n in prof.builder.metadata["collection_paused"]]
    assert sources == ["hooktest", "host"]
