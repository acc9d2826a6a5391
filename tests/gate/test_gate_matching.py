"""What the gate compares: equal identities only. A kernel whose parameters differ from the history's is
"unmatched" and names the parameters the history holds; a kernel the history never saw is "new"; a kernel
the history holds but this run lacks is listed. ``diff`` pairs one kernel across problem sizes and says so."""
from __future__ import annotations

import json

import numpy as np
import pytest

from xpuprof.analysis.diff import diff, load_side
from xpuprof.analysis.gate import GateOptions, gate_runs
from xpuprof.analysis.gate_text import render
from xpuprof.analysis.history import History, HistoryRun, KernelRecord
from xpuprof.analysis.samples import SampleStats
from xpuprof.cli import main

KEY = {"config_hash": "aaaa", "device": "cpu", "machine": "m"}


def _run(names, t, key=KEY, name="bench"):
    rng = np.random.default_rng(int(t) % 1000)
    kernels = {n: KernelRecord(n, "kernel", SampleStats.of(1000 * (1 + rng.normal(0, 0.01, 30)))) for n in names}
    return HistoryRun(dict(key), kernels, {"name": name, "point": "p"}, {"id": key["machine"]}, None, "test", t)


def test_only_equal_identities_are_compared_the_rest_said(tmp_path):
    h = History(tmp_path / "h")
    for i in range(5):
        h.append(_run(["g n=128", "copy"], 1.7e9 + i))
    result = gate_runs([_run(["g n=256", "fresh", "copy"], 1.8e9)], h, GateOptions())
    (point,) = result.points
    by = {v.name: v for v in point.rule.kernels}
    assert by["copy"].verdict == "unchanged"
    assert by["g n=256"].verdict == "unmatched" and "history has n=128" in by["g n=256"].reason
    assert by["fresh"].verdict == "new"
    assert point.missing == {"g n=128": 5} and point.rule.tests == 1
    text = render(result)
    assert "not in this run: g n=128 (in 5 of 5 baseline runs)" in text and "2 new or unmatched" in text


def test_a_new_series_names_the_parameters_its_config_has_elsewhere(tmp_path):
    h = History(tmp_path / "h")
    for i in range(5):
        h.append(_run(["g n=128"], 1.7e9 + i))
    other = _run(["g n=512"], 1.8e9, {**KEY, "config_hash": "bbbb"})  # `--set n=512`: another series
    (point,) = gate_runs([other], h, GateOptions()).points
    (v,) = point.rule.kernels
    assert v.verdict == "unmatched" and "history has n=128 in another series of this config" in v.reason
    elsewhere = _run(["g n=512"], 1.8e9, {**KEY, "config_hash": "cccc", "machine": "other"})
    (point,) = gate_runs([elsewhere], h, GateOptions()).points
    assert point.rule.kernels[0].reason == "inconclusive: 0 runs, need 5"  # another machine's history is no hint


def _summary(path, name, avg):
    kernels = [{"name": name, "calls": 12, "total_ns": 12 * avg, "avg_ns": avg, "min_ns": avg, "max_ns": avg,
                "metrics": {}},
               {"name": "Memcpy H2D", "calls": 3, "total_ns": 3000, "avg_ns": 1000, "min_ns": 1000, "max_ns": 1000,
                "metrics": {}}]
    path.write_text(json.dumps({"kind": "xpuprof-run-summary", "points": [{"label": "sim", "kernels": kernels}]}))
    return path


def test_diff_pairs_one_kernel_across_problem_sizes_and_never_calls_it_a_regression(tmp_path, capsys):
    a = _summary(tmp_path / "a.jsonl", "sim_gemm[numpy] n=128 float32", 3600)
    b = _summary(tmp_path / "b.jsonl", "sim_gemm[numpy] n=512 float32", 136000)
    res = diff(load_side(a), load_side(b), threshold_pct=5)
    gemm = next(r for r in res.rows if r.name.startswith("sim_gemm"))
    assert (gemm.status, gemm.match, gemm.b_name, gemm.note) == ("params", "params", "sim_gemm[numpy] n=512 float32",
                                                                 "n 128 -> 512")
    assert gemm.delta_pct > 3000 and res.regressions == []
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "params changed" in out and "-> sim_gemm[numpy] n=512 float32 (n 128 -> 512)" in out
    assert "matched by identity with changed parameters" in out
    capsys.readouterr()
    main(["diff", str(a), str(b), "--format", "json"])
    row = next(r for r in json.loads(capsys.readouterr().out)["kernels"] if r["match"] == "params")
    assert row["b_name"] == "sim_gemm[numpy] n=512 float32" and row["note"] == "n 128 -> 512"


def test_diff_says_when_kernels_differing_only_in_parameters_cannot_be_paired(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    row = {"calls": 1, "total_ns": 10, "avg_ns": 10, "min_ns": 10, "max_ns": 10, "metrics": {}}
    a.write_text(json.dumps({"points": [{"label": "x", "kernels": [{**row, "name": "k<float, 128>"},
                                                                   {**row, "name": "k<float, 64>"}]}]}))
    b.write_text(json.dumps({"points": [{"label": "x", "kernels": [{**row, "name": "k<float, 256>"}]}]}))
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "not paired: k<…>: 2 kernel(s) in A" in out and "params changed" not in out


def test_points_that_cannot_join_a_history_are_skipped_and_said(tmp_path):
    from xpuprof.analysis.run_records import RunDirError, records_from_run_dir

    summary = {"kind": "xpuprof-run-summary", "machine": {"id": "m"}, "points": [
        {"label": "failed", "config_hash": "a", "error": "boom", "traces": []},
        {"label": "parquet", "config_hash": "b", "error": None, "traces": [str(tmp_path / "w.store" / "rank=0")]},
        {"label": "none", "config_hash": "c", "error": None, "traces": []}]}
    (tmp_path / "summary.jsonl").write_text(json.dumps(summary))
    got = records_from_run_dir(tmp_path, source="test")
    assert got.runs == [] and [s.split(":")[0] for s in got.skipped] == ["point 'failed'", "point 'parquet'",
                                                                          "point 'none'"]
    assert "output.format: parquet" in got.skipped[1]
    del summary["machine"]
    (tmp_path / "summary.jsonl").write_text(json.dumps(summary))
    with pytest.raises(RunDirError, match="no machine fingerprint"):
        records_from_run_dir(tmp_path, source="test")
