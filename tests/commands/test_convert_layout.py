"""``xpuprof convert`` lays out what it writes (issue 38): a trace torch.profiler wrote with slices that do
not nest (asyncio tasks) becomes one every viewer shows whole, as JSON and in a store.

Before: convert wrote only stores, with the rows as they were; there was no JSON output.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from xpuprof.cli import main
from xpuprof.trace.layout import lay_out
from xpuprof.trace.layout.check import nesting_report, slice_multiset
from xpuprof.trace.read.kineto import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trace"))
from test_layout import _overlapping_kineto_json  # noqa: E402

HTA = Path(__file__).resolve().parents[1] / "data" / "hta"


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_convert_writes_a_laid_out_trace(tmp_path, capsys, suffix):
    src = tmp_path / "torch.pt.trace.json"
    _overlapping_kineto_json(src)
    out = tmp_path / f"whole{suffix}"
    assert main(["convert", str(src), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert str(out) in said and "10 of 12 slices moved to 5 lane(s)" in said
    assert nesting_report(src).improper == 10 and nesting_report(out).improper == 0
    assert slice_multiset(out) == slice_multiset(src)
    assert read_trace(out).traces[0].header["laneLayout"]["moved_slices"] == 10


def test_convert_to_a_trace_takes_one_input_and_no_store_options(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _overlapping_kineto_json(a)
    _overlapping_kineto_json(b)
    assert main(["convert", str(a), str(b), "-o", str(tmp_path / "o.json")]) == 2
    assert "holds one trace; 2 inputs given" in capsys.readouterr().err
    assert main(["convert", str(a), "--rank", "1", "-o", str(tmp_path / "o.json")]) == 2
    assert "--rank and --replace name a store's rank" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_hta_trace_converts_whole(tmp_path):
    """HTA's simple_add trace: 7 kernels overlap on stream 7 (Perfetto spills 7), and a tid of -1."""
    src = next((HTA / "simple_add").glob("*.json.gz"))
    assert nesting_report(src).improper == 7
    out = tmp_path / "simple_add.json"
    assert main(["convert", str(src), "-o", str(out)]) == 0
    assert nesting_report(out).improper == 0 and slice_multiset(out) == slice_multiset(src)
    data = json.loads(out.read_text())
    assert data["idMap"]["tids"] == [[0, -1, data["idMap"]["tids"][0][2]]]
    ints = [e[k] for e in data["traceEvents"] for k in ("pid", "tid") if isinstance(e.get(k), int)]
    assert min(ints) >= 0 and max(ints) < 2**31


@pytest.mark.parametrize("nests", [True, False])
def test_convert_to_a_store_lays_out_and_reads_again_only_when_it_must(tmp_path, monkeypatch, nests):
    pytest.importorskip("pyarrow")
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.table.compare import differences
    from xpuprof.trace.write import kineto_store

    src = tmp_path / "t.json"
    _overlapping_kineto_json(src, tasks=1 if nests else 6)
    reads = []
    real = kineto_store.TraceReader
    monkeypatch.setattr(kineto_store, "TraceReader", lambda *a, **kw: reads.append(1) or real(*a, **kw))
    kineto_store.convert_trace(src, tmp_path / "s", chunk_bytes=256)  # many chunks: rows stream by
    assert len(reads) == (1 if nests else 2)
    got = read_store(tmp_path / "s")
    assert nesting_report(got).improper == 0 and slice_multiset(got) == slice_multiset(src)
    assert differences(lay_out(read_trace(src)), got) == []
