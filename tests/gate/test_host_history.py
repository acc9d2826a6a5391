"""The gate on real host timings: one numpy config run 20 times into a history, runs 11-20 each gated
against the runs before it (then accepted). Nothing changed, so no run may raise an alarm (regressed or
improved); where the machine's run-to-run noise exceeds the effect asked for, the verdict must be
"inconclusive" and say so, never a guess."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpuprof.cli import main

pytestmark = pytest.mark.slow
CONFIG = Path(__file__).with_name("ci_host.yaml")


def test_runs_11_to_20_gated_against_the_earlier_runs_raise_no_alarm(tmp_path, capsys):
    history = tmp_path / "history"
    for i in range(10):
        assert main(["run", str(CONFIG), "--out", str(tmp_path / f"run{i}"), "--history", str(history),
                     "--no-progress"]) == 0
    capsys.readouterr()
    verdicts, machines = [], []
    for i in range(10, 20):
        out = tmp_path / f"run{i}"
        assert main(["run", str(CONFIG), "--out", str(out), "--no-progress"]) == 0
        capsys.readouterr()
        rc = main(["gate", str(out), "--history", str(history), "--format", "json", "--accept", "always"])
        doc = json.loads(capsys.readouterr().out)
        (point,) = doc["points"]
        assert point["baseline_runs"] == i, point["baseline_runs"]
        machine = point["machine"]  # the machine probe, taken around every run's workload, against the history's
        assert machine["status"] in ("steady", "moved"), machine
        assert {p["name"] for p in machine["parts"]} == {"vector", "python", "memory"}, machine
        machines.append((i + 1, machine))
        verdicts += [(i + 1, v) for v in point["factors"] + point["kernels"]]
        assert rc == 0, ([v for _, v in verdicts if v["verdict"] == "regressed"], machine)
    alarms = [(run, v["name"], v["verdict"], v["effect_pct"], v["noise_pct"]) for run, v in verdicts
              if v["verdict"] in ("regressed", "improved")]
    assert alarms == [], (alarms, machines)
    for run, v in verdicts:
        assert v["verdict"] in ("unchanged", "inconclusive"), (run, v)
        if v["verdict"] == "inconclusive":  # the noise was larger than 3 % could be told apart from, or the
            # machine itself ran at another speed than in the history (its probe moved the same way)
            assert ("noise" in v["reason"] and v["noise_pct"] > 0) or "machine probe" in v["reason"], (run, v["reason"])
        else:
            assert v["confidence"] >= 0.95 and abs(v["effect_pct"]) < 3.0, (run, v)
    # the history holds the 10 runs it was built from and the 10 accepted ones
    for run, machine in machines:  # what the probe explained is a host range that moved with the machine
        assert all(name in {v["name"] for r, v in verdicts if r == run} for name in machine["explained"]), machine
    from xpuprof.analysis.history import History

    h = History(history)
    (series,) = h.series_ids()
    assert len(h.read(series).runs) == 20
