"""Every trace of the viewer corpus (``viewer_corpus``) as Perfetto's own trace processor imports it (issue
38): every event imported, every slice on its own thread's track (no overflow track, no
``slice_spill_overlapping_complete_event``), one process per pid, every flow drawn and every launch arrow
starting at its launch call, counters, no error or data-loss row in ``stats``; and by our strict-nesting
checker, 0 improperly nested slices with every slice of the source present.

Before the layout pass: the asyncio traces lost 36 of 41 slices to overflow tracks, merged views of 6 ranks
and more merged processes of different ranks (pids past 2**32), torch.profiler's asyncio trace and HTA's
simple_add trace spilled slices, HTA's ns_resolution trace 774 (epoch µs beyond what a double holds to
the ns).
"""
from __future__ import annotations

import json

import pytest

from perfetto_sql import imported, query, trace_processor, viewer_problems
from viewer_corpus import HTA_TRACES, MAKERS

from xpuprof.trace.layout.check import nesting_report, slice_multiset

pytestmark = pytest.mark.slow


@pytest.fixture
def corpus(viewer_corpus):
    trace_processor()  # skips with the reason when it is absent
    return viewer_corpus


def _check(entry, tmp_path) -> None:
    assert nesting_report(entry.path).improper == 0
    if entry.source is not None:
        assert slice_multiset(entry.path) == slice_multiset(entry.source)
    flows = None
    if entry.source is not None and not hasattr(entry.source, "freeze"):  # a trace file we converted
        flows = len(imported(entry.source, tmp_path)["flows"])
    assert viewer_problems(entry.path, tmp_path, flows=flows) == []


@pytest.mark.parametrize("name", [*MAKERS, *(f"hta:{n}" for n in HTA_TRACES)])
def test_perfetto_imports_the_trace_whole(corpus, name, tmp_path):
    entry = corpus[name]
    if name == "torch_asyncio_converted":
        assert nesting_report(entry.source).improper > 0  # torch writes the tasks' ranges on one row
    if name == "ondemand_asyncio":  # the capture's writer laid the tasks' ranges out too
        assert json.loads(entry.path.read_bytes())["laneLayout"]["moved_slices"] > 0
    _check(entry, tmp_path)


SPILLS = "select value from stats where name = 'slice_spill_overlapping_complete_event'"


def test_the_checker_counts_what_perfetto_spills(corpus, tmp_path):
    """Our checker on traces written before the layout pass gives exactly the slices Perfetto moves off their
    track: torch.profiler's asyncio trace, HTA's simple_add (its only overlaps are on a stream)."""
    simple_add = next(n for n in HTA_TRACES if n.startswith("simple_add/"))
    for src in (corpus["torch_asyncio_converted"].source, corpus[f"hta:{simple_add}"].source):
        (row,) = query(src, SPILLS, tmp_path)
        assert nesting_report(src).improper == int(row["value"]) > 0


def test_merged_views_of_the_old_pids_merged_processes_in_perfetto(tmp_path):
    """Why merged pids changed: pids (rank + 1) * 10**9 + i, as merge wrote them before, for 6 ranks."""
    import json

    trace_processor()
    events = []
    for rank in range(6):
        for i in range(3):
            pid = (rank + 1) * 10**9 + i
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"r{rank}p{i}"}})
            events.append({"ph": "X", "name": "x", "pid": pid, "tid": 1, "ts": 1.0, "dur": 1.0})
    path = tmp_path / "old.merged.json"
    path.write_text(json.dumps({"traceEvents": events}))
    problems = viewer_problems(path, tmp_path)
    assert any("processes in Perfetto" in p for p in problems), problems
