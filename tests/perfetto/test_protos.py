"""A ``.pftrace`` holds the JSON trace's events one for one, as Perfetto's own protos decode it (issue 38):
every slice (pid, tid, ts, dur, name, category, args), instant (with its scope), counter value (per metric)
and flow end (launch -> kernel arrows, sync dependencies), from a read Kineto JSON file (HTA's torch traces,
every golden producer) and from a builder as the profiler leaves it."""
from __future__ import annotations

import pytest

from corpus import CORPUS, SNAPSHOTS, ids, snapshot
from pb_decode import Decoded, canonical, kineto_events

from xpuprof.trace.read.kineto import read_trace
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.trace.write.perfetto import write_perfetto


def _same_events(json_path, pftrace) -> None:
    want = kineto_events(json_path)
    got = Decoded(pftrace)
    assert canonical(got.slices) == canonical(want["slices"])
    assert canonical(got.instants) == canonical(want["instants"])
    assert canonical(got.counters) == canonical(want["counters"])
    assert canonical(got.flows) == canonical(want["flows"])


@pytest.mark.parametrize("path", CORPUS, ids=ids(CORPUS))
def test_a_read_json_trace_and_its_pftrace_hold_the_same_events(path, tmp_path):
    out = write_perfetto(read_trace(path), tmp_path / "t.pftrace")
    _same_events(path, out)


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_a_profile_written_as_pftrace_holds_its_json_traces_events(name, tmp_path):
    builder = snapshot(name)
    json_path = write_chrome_trace(builder, tmp_path / "t.pt.trace.json")
    out = write_perfetto(builder, tmp_path / "t.pftrace")
    _same_events(json_path, out)


def test_the_header_is_the_traces_metadata(tmp_path):
    builder = snapshot("sim_xpu_metrics")
    out = write_perfetto(builder, tmp_path / "t.pftrace")
    header = Decoded(out).header
    assert header["deviceProperties"][0]["name"] == "xpuprof simulated accelerator"
    assert header["traceName"] == str(out)
    assert set(header) >= {"schemaVersion", "baseTimeNanoseconds", "backend"}
