"""The gate's plumbing end to end, on five sim runs with the noise model: ``run --history`` (and YAML
``history:``) builds the history, ``gate`` judges a run against it (exit 0 / 1 / 2), ``--accept`` adds a
gated run, ``diff --history`` is the same gate, the HTML pages carry a history plot per kernel."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from xpuprof.analysis.history import History
from xpuprof.cli import main

ROOT = Path(__file__).resolve().parents[2]
SIM = str(ROOT / "configs" / "sim.yaml")
QUIET = ["--set", "custom.sim_noise.cv=0.01", "--set", "custom.sim_noise.run_cv=0.005",
         "--set", "custom.sim_noise.outliers=0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs 1-3 into the history (run 1 through the YAML key), run 4 unchanged, run 5 with sim_gemm 30 % slower."""
    d = tmp_path_factory.mktemp("gate")
    hist = d / "hist"
    for i in (1, 2, 3):
        where = ["--set", f"history={hist}"] if i == 1 else ["--history", str(hist)]
        assert main(["run", SIM, "--out", str(d / f"run{i}"), "--no-progress", *where, *QUIET,
                     "--set", f"custom.sim_noise.seed={i}"]) == 0
    assert main(["run", SIM, "--out", str(d / "run4"), "--no-progress", *QUIET, "--set", "custom.sim_noise.seed=4"]) == 0
    assert main(["run", SIM, "--out", str(d / "run5"), "--no-progress", *QUIET, "--set", "custom.sim_noise.seed=5",
                 "--set", "custom.sim_noise.slowdown={'sim_gemm*': 0.3}"]) == 0
    return d


def _gate_json(capsys, *argv) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main([*argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def test_run_history_holds_one_series_of_three_runs(runs):
    h = History(runs / "hist")
    (series,) = h.series_ids()
    got = h.read(series)
    assert len(got.runs) == 3 and got.skipped == []
    run = got.runs[0]
    assert set(run.kernels) >= {"sim_gemm[numpy] n=128 float32", "gemm[numpy] n=128 float32"}
    assert {k.domain for k in run.kernels.values()} == {"kernel", "range"}
    assert run.kernels["sim_gemm[numpy] n=128 float32"].stats.calls == 12
    assert set(run.kernels["sim_gemm[numpy] n=128 float32"].metrics) == {"XVE_STALL", "XVE_ACTIVE", "GpuTime"}
    assert run.key["machine"] == run.machine["id"] and run.source == "run --history"
    summary = json.loads((runs / "run4" / "summary.jsonl").read_text())
    assert summary["machine"]["id"] == run.key["machine"] and re.fullmatch(r"[0-9a-f]{16}",
                                                                           summary["points"][0]["config_hash"])


def test_an_unchanged_run_passes_and_a_slowed_kernel_fails_with_its_numbers(runs, capsys):
    # --only kernels: the sim's device times follow the seeded noise model; its host ranges are this machine's
    # wall clock, which a loaded CI machine moves by more than any effect (a flaky verdict, not the gate's rule)
    rc, doc = _gate_json(capsys, "gate", str(runs / "run4"), "--history", str(runs / "hist"), "--min-runs", "3",
                         "--only", "kernels")
    assert rc == 0 and doc["regressed"] is False
    (point,) = doc["points"]
    by = {v["name"]: v for v in point["kernels"]}
    assert by["sim_gemm[numpy] n=128 float32"]["verdict"] in ("unchanged", "inconclusive")
    rc, doc = _gate_json(capsys, "gate", str(runs / "run5"), "--history", str(runs / "hist"), "--min-runs", "3")
    assert rc == 1 and doc["regressed"] is True
    gemm = {v["name"]: v for v in doc["points"][0]["kernels"]}["sim_gemm[numpy] n=128 float32"]
    assert gemm["verdict"] == "regressed" and gemm["effect_pct"] == pytest.approx(30, abs=6)
    capsys.readouterr()
    assert main(["gate", str(runs / "run5"), "--history", str(runs / "hist"), "--min-runs", "3"]) == 1
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if line.startswith("│ sim_gemm"))
    assert "regressed" in line and "% slower" in line and "+-" in line and " us" in line
    assert "a regression: exit 1" in text and "baseline: the newest 3 of 3 run(s)" in text


def test_too_short_a_history_is_inconclusive_and_says_how_short(runs, capsys):
    rc, doc = _gate_json(capsys, "gate", str(runs / "run5"), "--history", str(runs / "hist"))
    assert rc == 0
    assert {v["reason"] for v in doc["points"][0]["kernels"]} == {"inconclusive: 3 runs, need 5"}


def test_diff_with_history_is_the_gate(runs, capsys):
    argv = [str(runs / "run5"), "--history", str(runs / "hist"), "--min-runs", "3"]
    assert _gate_json(capsys, "gate", *argv) == _gate_json(capsys, "diff", *argv)


def test_accept_adds_a_passing_run_and_refuses_a_regressed_one_unless_always(runs, tmp_path, capsys):
    import shutil

    hist = tmp_path / "hist"
    shutil.copytree(runs / "hist", hist)
    h = History(hist)
    (series,) = h.series_ids()
    argv = ["--history", str(hist), "--min-runs", "3", "--only", "kernels"]  # device times: seeded (see above)
    assert main(["gate", str(runs / "run4"), *argv, "--accept"]) == 0
    assert h.read(series).total == 4
    assert main(["gate", str(runs / "run5"), *argv, "--accept"]) == 1
    assert h.read(series).total == 4  # a regressed run joins only when accepted as intended
    assert main(["gate", str(runs / "run5"), *argv, "--accept", "always"]) == 1
    assert h.read(series).total == 5 and h.read(series).runs[-1].source == "gate --accept"
    assert "history: " in capsys.readouterr().out


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg class=\"chart history\".*?</svg>", page, re.S)]


def test_html_pages_hold_a_history_plot_per_kernel(runs, tmp_path, capsys):
    out = tmp_path / "gate.html"
    assert main(["gate", str(runs / "run5"), "--history", str(runs / "hist"), "--min-runs", "3", "--format", "html",
                 "-o", str(out)]) == 1
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text()
    svgs = _svgs(page)
    assert len(svgs) == 4  # two kernels (the GEMM, the copy), two host ranges
    ns = "{http://www.w3.org/2000/svg}"
    for svg in svgs:
        w, h = (float(v) for v in svg.get("viewBox").split()[2:])
        assert len(svg.findall(f"{ns}circle")) == 3 and len(svg.findall(f"{ns}rect[@class='new-run']")) == 1
        for c in svg.findall(f"{ns}circle"):
            assert 0 <= float(c.get("cx")) <= w and 0 <= float(c.get("cy")) <= h
    gemm = next(s for s in svgs if "sim_gemm" in s.get("aria-label"))
    assert gemm.find(f"{ns}rect[@class='new-run']").get("fill") == "#d62728"  # regressed: red
    report = tmp_path / "report.html"
    assert main(["report", str(runs / "run5"), "--history", str(runs / "hist"), "--format", "html", "-o",
                 str(report)]) == 0
    page = report.read_text()
    assert "<h2>Run history</h2>" in page and len(_svgs(page)) == 4 and 'id="kernels"' in page


@pytest.mark.parametrize(("argv", "words"), [
    (["gate", "{runs}/nowhere", "--history", "{runs}/hist"], "no such run directory"),
    (["gate", "{runs}/run4", "--history", "{runs}/nohist"], "no such history directory"),
    (["gate", "{runs}/run4", "--history", "{runs}/run1"], "not an xpuprof history"),
    (["gate", "{runs}/run4", "--history", "{runs}/hist", "--format", "html"], "needs -o FILE"),
    (["gate", "{runs}/run4", "--history", "{runs}/hist", "--window", "3"], "--window (3) must hold"),
    (["diff", "{runs}/run4", "{runs}/run5", "--history", "{runs}/hist"], "give one run directory"),
    (["diff", "{runs}/run4", "{runs}/run5", "--accept"], "apply with --history"),
    (["report", "{runs}/run4", "--history", "{runs}/hist"], "--format html"),
    (["run", SIM, "--out", "{runs}/x", "--history", "{runs}/run1"], "not an xpuprof history"),
])
def test_bad_input_is_one_line_and_exit_2(runs, capsys, argv, words):
    capsys.readouterr()
    assert main([a.replace("{runs}", str(runs)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert not (runs / "x").exists()  # refused before the workload ran


def test_cli_usage_errors_exit_2(runs):
    for argv in (["gate", str(runs / "run4")], ["gate", str(runs / "run4"), "--history", "h", "--max-regression", "0"],
                 ["gate", str(runs / "run4"), "--history", "h", "--accept", "sometimes"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
