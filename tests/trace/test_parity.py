"""Parity, one way: every reader gives an equal TraceTable, and ``xpuprof report`` gives the same document
over JSON files as over their store.

The corpus: the golden traces of every producer (``tests/data/golden``: host ranges, sim XPU/CUDA/HIP with
metrics, the vendor decoders' doubles, EU stalls, torch ops, telemetry, plugins, a merged view) and HTA's
real traces (``tests/data/hta``). The readers: the Kineto JSON reader's C scanner and its orjson fallback,
the store reader over ``xpuprof convert``'s store, and - for the golden snapshots - the frozen builder
itself and the store ``export_parquet`` writes from it. Equal means ``trace.table.compare.differences`` finds
nothing: rank tables, and every row after decoding strings in (rank, pid, tid, ts, dur, name) order.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.read import kineto_stream
from xpuprof.trace.read.inputs import read_inputs
from xpuprof.trace.read.kineto import read_trace
from xpuprof.trace.table.compare import differences

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden"
HTA = REPO / "tests" / "data" / "hta"
sys.path.insert(0, str(REPO / "tests" / "golden"))
import snapshot  # noqa: E402

JSON_CORPUS = sorted(p for p in GOLDEN.glob("*.json")) + sorted(HTA.glob("*/*.json.gz"))
SNAPSHOTS = sorted(p.name[:-len(".snap.npz")] for p in GOLDEN.glob("*.snap.npz"))
BIG = {"rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"}  # 70k events: the slow tier


def _ids(paths):
    return [p.name for p in paths]


def _marks(paths):
    return [pytest.param(p, marks=pytest.mark.slow) if p.name in BIG else p for p in paths]


@pytest.fixture
def orjson_reader(monkeypatch):
    """The Kineto JSON reader without its C part (what it falls back to)."""
    def use():
        monkeypatch.setattr(kineto_stream, "_native_module", None)
    return use


@pytest.mark.parametrize("path", _marks(JSON_CORPUS), ids=_ids(JSON_CORPUS))
def test_the_c_scanner_and_orjson_read_an_equal_table(path, orjson_reader):
    if kineto_stream.native() is None:
        pytest.skip("xpuprof._native.tracescan is not built (python setup.py build_ext --inplace)")
    fast = read_trace(path)
    orjson_reader()
    assert differences(fast, read_trace(path)) == []


@pytest.mark.parametrize("path", _marks([p for p in JSON_CORPUS if "merged" not in p.name]),
                         ids=_ids([p for p in JSON_CORPUS if "merged" not in p.name]))
def test_the_store_convert_writes_reads_back_an_equal_table(path, tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.write.kineto_store import convert_trace

    convert_trace(path, tmp_path / "s", position=0)
    assert differences(read_trace(path, position=0), read_store(tmp_path / "s")) == []


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_a_frozen_builder_equals_its_json_and_its_exported_store(name, tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.write.chrome import write_chrome_trace
    from xpuprof.trace.write.parquet import write_store

    b = snapshot.load(GOLDEN / f"{name}.snap.npz", BASE_TIME_NS)
    frozen = b.freeze()
    path = write_chrome_trace(b, tmp_path / "t.pt.trace.json")
    assert differences(frozen, read_trace(path)) == []
    write_store(b, tmp_path / "s")
    assert differences(frozen, read_store(tmp_path / "s")) == []


def test_many_ranks_read_as_one_table_from_files_and_from_their_store(tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.write.kineto_store import convert_trace

    ranks = [GOLDEN / "sim_rank0.pt.trace.json", GOLDEN / "sim_rank1.pt.trace.json"]
    for i, p in enumerate(ranks):
        convert_trace(p, tmp_path / "s", position=i)
    files = read_inputs(ranks)
    assert sorted(set(files.slices.rank.tolist())) == [0, 1]
    assert differences(files, read_store(tmp_path / "s")) == []
    assert differences(files, read_inputs([tmp_path / "s"])) == []


# ----------------------------------------------------------------------------- the report, one way
REPORT_CORPUS = [GOLDEN / f"{n}.pt.trace.json" for n in ("sim_xpu_metrics", "sim_cuda", "sim_hip", "host", "torch_ops",
                                                          "telemetry", "xpu_double", "cuda_decoder", "rocm_decoder",
                                                          "plugins")] + sorted(HTA.glob("*/*.json.gz"))


def _doc(paths, **kw):
    from xpuprof.analysis.report import build_report
    from xpuprof.analysis.report_render import to_dict

    doc = to_dict(build_report(paths, **kw))
    doc.pop("sources")
    return doc


@pytest.mark.parametrize("path", _marks(REPORT_CORPUS), ids=_ids(REPORT_CORPUS))
def test_report_json_over_a_trace_equals_the_report_over_its_store(path, tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.write.kineto_store import convert_trace

    convert_trace(path, tmp_path / "s", position=0)
    assert _doc([path]) == _doc([tmp_path / "s"])  # metrics and times exactly, not approximately
    assert _doc([path], by_rank=True, start_ms=0.0, end_ms=1e9) == _doc([tmp_path / "s"], by_rank=True, start_ms=0.0,
                                                                         end_ms=1e9)


def test_report_json_of_many_ranks_equals_their_store(tmp_path):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.write.kineto_store import convert_trace

    ranks = [GOLDEN / "sim_rank0.pt.trace.json", GOLDEN / "sim_rank1.pt.trace.json"]
    for i, p in enumerate(ranks):
        convert_trace(p, tmp_path / "s", position=i)
    for kw in ({}, {"by_rank": True}, {"categories": ["user_annotation"], "by_rank": True}):
        assert _doc(ranks, **kw) == _doc([tmp_path / "s"], **kw)
    assert _doc(ranks, by_rank=True)["ranks"] == [0, 1]


@pytest.mark.parametrize("name", ["sim_xpu_metrics", "telemetry", "host"])
def test_push_down_reads_a_part_of_the_same_table_from_a_file_and_from_a_store(name, tmp_path):
    """What a report reads (slices with the metric slices' args, telemetry counters) is that part of the
    whole table, from a file and from its store; the trace's first event stays the same."""
    pytest.importorskip("pyarrow")
    from dataclasses import replace

    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.table.columns import RowText
    from xpuprof.trace.table.model import FlatSegment, TraceTable
    from xpuprof.trace.write.kineto_store import convert_trace

    path = GOLDEN / f"{name}.pt.trace.json"
    metric = lambda n: n.startswith("metrics: ")  # noqa: E731
    telemetry = lambda c: c in ("gpu_pm_counter", "host_counter")  # noqa: E731
    full = read_trace(path, position=0)
    convert_trace(path, tmp_path / "s", position=0)
    s = full.slices
    keep = [metric(t or "") for t in s.text("name")]
    import numpy as np

    keep = np.array(keep, bool)
    expected_slices = replace(s, ints={k: (v, p & keep) for k, (v, p) in s.ints.items() if (p & keep).any()},
                              floats={k: (v, p & keep) for k, (v, p) in s.floats.items() if (p & keep).any()},
                              args=RowText.from_rows([s.args[i] if keep[i] else None for i in range(len(s))]))
    c = full.counters
    expected_counters = c.take(np.array([telemetry(t or "") for t in c.text("cat")], bool))
    expected = TraceTable([FlatSegment(expected_slices), FlatSegment(expected_counters)], full.traces)
    for got in (read_trace(path, position=0, kinds=("slices", "counters"), slice_args=metric, counters=telemetry),
                read_store(tmp_path / "s", kinds=("slices", "counters"), slice_args=metric, counters=telemetry)):
        assert differences(expected, got) == []
        assert got.traces[0].first_ts_ns == full.traces[0].first_ts_ns
        assert len(got.flows) == len(got.instants) == 0


STORE_V1 = REPO / "tests" / "data" / "store_v1"  # written by main's convert and export_parquet, before the table


@pytest.mark.parametrize("store,traces", [
    ("convert", ["sim_rank0", "sim_rank1"]), ("metrics", ["sim_xpu_metrics"]), ("export", ["host"])])
def test_stores_written_before_the_table_read_as_their_traces(store, traces):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store

    files = read_inputs([GOLDEN / f"{t}.pt.trace.json" for t in traces])
    got = read_store(STORE_V1 / store)
    if store == "export":  # export_parquet says it was not given its rank: "default", no sources
        assert [i.source for i in got.traces] == ["default"]
        assert differences(files, got, compare_ranks=False) == []
    else:
        assert differences(files, got) == []
    assert _doc([GOLDEN / f"{t}.pt.trace.json" for t in traces]) == _doc([STORE_V1 / store])
