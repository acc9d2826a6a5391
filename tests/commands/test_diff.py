import json

import pytest

from xpuprof.analysis.diff import DiffError, diff, load_side
from xpuprof.cli import main


@pytest.fixture
def pair(tmp_path, make_trace):
    a = make_trace(tmp_path / "a.pt.trace.json", 0)
    b = make_trace(tmp_path / "b.pt.trace.json", 0, scale={"gemm_kernel": 1.2, "axpy_kernel": 0.8},
                        stall=15.0, kernels={"gemm_kernel": (6, 50_000), "axpy_kernel": (10, 4_000), "new_kernel": (1, 9_000)})
    return a, b


def test_per_kernel_deltas(pair):
    res = diff(load_side(pair[0]), load_side(pair[1]), threshold_pct=10)
    by = {r.name: r for r in res.rows}
    assert by["gemm_kernel"].status == "regression" and by["gemm_kernel"].delta_pct == pytest.approx(20.0)
    assert by["axpy_kernel"].status == "improvement"
    assert by["new_kernel"].status == "added" and by["reduce_kernel"].status == "removed"
    a, b = by["gemm_kernel"].metrics["XVE_STALL"]
    assert b - a == pytest.approx(5.0, abs=1.5)
    assert [r.name for r in res.regressions] == ["gemm_kernel"]
    assert diff(load_side(pair[0]), load_side(pair[1]), threshold_pct=25).regressions == []


def test_cli_exit_codes(pair, capsys):
    assert main(["diff", str(pair[0]), str(pair[1])]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "+20.0" in out
    assert main(["diff", str(pair[0]), str(pair[1]), "--threshold", "30"]) == 0
    capsys.readouterr()
    assert main(["diff", str(pair[0]), str(pair[0])]) == 0
    assert "no kernel changed" in capsys.readouterr().out
    assert main(["diff", str(pair[0]), str(pair[1]), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == 1 and data["kernels"][0]["name"] == "gemm_kernel"


def test_run_summaries_compare_point_by_point(tmp_path, capsys):
    def summary(path, gemm_avg):
        kernels = [{"name": "g", "calls": 2, "total_ns": 2 * gemm_avg, "avg_ns": gemm_avg, "min_ns": gemm_avg,
                    "max_ns": gemm_avg, "metrics": {}}]
        path.write_text(json.dumps({"kind": "xpuprof-run-summary", "points": [
            {"label": "n=64", "kernels": kernels}, {"label": "n=128", "kernels": kernels}]}))
        return path

    a, b = summary(tmp_path / "a.json", 1000), summary(tmp_path / "b.json", 1300)
    res = diff(load_side(a), load_side(b))
    assert sorted((r.point, r.status) for r in res.rows) == [("n=128", "regression"), ("n=64", "regression")]
    assert main(["diff", str(a), str(b), "--min-us", "5"]) == 0  # 1.3 us kernels are below the floor


def test_bad_inputs(tmp_path, capsys):
    with pytest.raises(DiffError, match="no such file"):
        load_side(tmp_path / "x.json")
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    with pytest.raises(DiffError, match="neither a trace"):
        load_side(junk)
    assert main(["diff", str(junk), str(junk)]) == 2
    assert "neither a trace" in capsys.readouterr().err
