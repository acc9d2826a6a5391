"""The machine probe and the gate's reading of it: a host range that moved with the machine (its probe
moved the same way, beyond the history's spread) is inconclusive, naming the probe part and both numbers;
a range that moved while the machine was steady, or against the machine's move, is still judged; device
kernels are not explained by a host probe; histories without probe data read as before, said once."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from xpuprof.analysis.gate import GateOptions, gate_runs
from xpuprof.analysis.gate_text import render
from xpuprof.analysis.history import History, HistoryRun, KernelRecord
from xpuprof.analysis.history_html import render_gate_page
from xpuprof.analysis.machine_probe import CALLS, PARTS, GuardedProbe, MachineProbe, ProbeResult
from xpuprof.analysis.samples import batch_stats

RANGE = "elementwise[numpy] size=65536 float32"
KERNEL = "sim_gemm[numpy] n=128 float32"
KEY = {"config_hash": "c0ffee", "device": "cpu", "machine": "m1"}
PROBE_LEVELS = {"vector": 46_000.0, "python": 38_000.0, "memory": 95_000.0}


def _stats(rng, level: float, calls: int, cv: float):
    return batch_stats(np.array([level * np.exp(rng.normal(0, cv, calls))]))[0]


def _probe(rng, scale: float = 1.0, cv: float = 0.01, run_cv: float = 0.004) -> ProbeResult:
    """A probe whose parts run ``scale`` times their usual call (the machine's regime); ``run_cv``: how much
    the machine moves from run to run."""
    move = math.exp(rng.normal(0, run_cv))
    return ProbeResult({p: _stats(rng, lv * scale * move * math.exp(rng.normal(0, 0.004)), 2 * CALLS, cv)
                        for p, lv in PROBE_LEVELS.items()})


def _run(rng, t: float, *, range_scale=1.0, kernel_scale=None, probe=1.0, ranges=(RANGE,),
         probe_run_cv=0.004) -> HistoryRun:
    """One run: host ranges at ~47 us per call (30 calls, 2 % CV), 0.5 % run-to-run; optionally a device
    kernel; ``probe``: the machine's regime (a scale), or None for a run recorded without a probe."""
    run_f = math.exp(rng.normal(0, 0.005))
    kernels = {name: KernelRecord(name, "range", _stats(rng, 47_000.0 * (i + 1) * run_f * range_scale, 30, 0.02))
               for i, name in enumerate(ranges)}
    if kernel_scale is not None:
        kernels[KERNEL] = KernelRecord(KERNEL, "kernel", _stats(rng, 20_000.0 * kernel_scale * run_f, 30, 0.02))
    return HistoryRun(dict(KEY), kernels, {"name": "gate_host_check"}, {"id": "m1"}, None, "test", t,
                      probe=None if probe is None else _probe(np.random.default_rng(int(t)), probe,
                                                              run_cv=probe_run_cv))  # its own draws


def _gate(tmp_path, new: HistoryRun, *, baseline_probe=1.0, seed=1, **kw):
    rng = np.random.default_rng(seed)
    history = History(tmp_path / "h")
    for i in range(10):
        history.append(_run(rng, 1e9 + i, probe=baseline_probe, ranges=kw.get("ranges", (RANGE,)),
                            kernel_scale=1.0 if kw.get("kernel") else None,
                            probe_run_cv=kw.get("probe_run_cv", 0.004)))
    return gate_runs([new], history, GateOptions())


def _new(seed=7, **kw) -> HistoryRun:
    return _run(np.random.default_rng(seed), 2e9, **kw)


def test_a_machine_regime_switch_makes_the_host_range_inconclusive_naming_the_probe(tmp_path):
    # the switch this VM makes: every host loop ~47 % slower, the workload's range and the probe alike
    result = _gate(tmp_path, _new(range_scale=1.47, probe=1.47))
    (point,) = result.points
    (v,) = point.rule.kernels
    assert v.verdict == "inconclusive", v  # before the probe: "regressed" +47 %, exit 1
    assert "machine probe" in v.reason and "vector" in v.reason and "rerun on a settled machine" in v.reason
    assert "+47" in v.reason or "+46" in v.reason or "+48" in v.reason, v.reason  # the machine's move
    assert "history +-" in v.reason  # and the history's spread of the probe
    assert result.exit_status == 0 and not result.regressed
    m = point.machine
    assert m.status == "moved" and m.explained == [RANGE] and m.baseline_runs == 10
    assert {p.name for p in m.moved} == set(PARTS) and all(p.verdict == "regressed" for p in m.moved)
    doc = json.loads(json.dumps(result.to_dict()))
    machine = doc["points"][0]["machine"]
    assert machine["status"] == "moved" and machine["explained"] == [RANGE]
    assert {p["name"]: p["moved"] for p in machine["parts"]} == {p: "slower" for p in PARTS}
    text = render(result)
    assert "machine probe against 10 baseline run(s): vector +" in text and "slower" in text
    assert "the machine itself ran at another speed" in text and "exit 0" in text
    html = render_gate_page(result)
    assert "machine probe against 10 baseline run(s)" in html


def test_a_probe_wider_than_the_range_from_run_to_run_still_explains_the_switch(tmp_path):
    # the probe's takes, a few ms before and after a 2 ms workload, do not always catch the workload's
    # regime: its history scatters ~8 % while the range's holds 0.5 %. Read with the run factor's 3
    # degrees of freedom, a +42 % move was not significant (p ~ 0.013 > 0.01): the range's +45 % an alarm.
    result = _gate(tmp_path, _new(range_scale=1.45, probe=1.45), probe_run_cv=0.12, seed=5)
    (v,) = result.points[0].rule.kernels
    m = result.points[0].machine
    assert v.verdict == "inconclusive" and "machine probe" in v.reason, (v.reason, [p.reason for p in m.parts])
    assert all(p.spread_pct > 5 for p in m.parts)


def test_a_range_that_slowed_on_a_steady_machine_is_still_regressed(tmp_path):
    result = _gate(tmp_path, _new(range_scale=1.47, probe=1.0))
    (v,) = result.points[0].rule.kernels
    assert v.verdict == "regressed" and v.effect_pct == pytest.approx(47, abs=3)
    assert result.points[0].machine.status == "steady" and result.points[0].machine.explained == []
    assert result.exit_status == 1


def test_a_range_that_slowed_while_the_machine_ran_faster_is_still_judged(tmp_path):
    result = _gate(tmp_path, _new(range_scale=1.47, probe=0.7))
    (v,) = result.points[0].rule.kernels
    assert v.verdict == "regressed", v.reason  # the machine moved the other way: it explains nothing
    m = result.points[0].machine
    assert m.status == "moved" and all(p.verdict == "improved" for p in m.moved) and m.explained == []
    assert result.exit_status == 1


def test_a_faster_machine_makes_a_faster_range_inconclusive_not_improved(tmp_path):
    result = _gate(tmp_path, _new(range_scale=0.68, probe=0.68))
    (v,) = result.points[0].rule.kernels
    assert v.verdict == "inconclusive" and "faster" in v.reason and "machine probe" in v.reason


def test_a_range_that_moved_far_more_than_the_machine_is_judged(tmp_path):
    # the machine ran 8 % slower (beyond its history's ~1 %), the range 60 %: more than the machine explains
    result = _gate(tmp_path, _new(range_scale=1.6, probe=1.08))
    (v,) = result.points[0].rule.kernels
    assert result.points[0].machine.status == "moved"
    assert v.verdict == "regressed" and "moved more than 2x that" in v.reason, v.reason


def test_device_kernels_are_not_explained_by_the_host_probe(tmp_path):
    result = _gate(tmp_path, _new(range_scale=1.47, kernel_scale=1.3, probe=1.47), kernel=True)
    by = {v.name: v for v in result.points[0].rule.kernels}
    assert by[RANGE].verdict == "inconclusive" and by[KERNEL].verdict == "regressed"
    m = result.points[0].machine
    assert m.explained == [RANGE] and "a host probe does not measure a device" in m.note
    assert result.exit_status == 1


def test_the_host_run_factor_that_moved_with_the_machine_is_inconclusive(tmp_path):
    ranges = ("step_a", "step_b", "step_c")
    result = _gate(tmp_path, _new(range_scale=1.47, probe=1.47, ranges=ranges), ranges=ranges)
    point = result.points[0]
    (factor,) = point.rule.factors
    assert factor.verdict == "inconclusive" and "machine probe" in factor.reason, factor.reason
    assert factor.name in point.machine.explained
    assert result.exit_status == 0


def test_a_history_without_probe_data_gates_as_before_and_says_so_once(tmp_path):
    result = _gate(tmp_path, _new(range_scale=1.47, probe=1.47), baseline_probe=None)
    point = result.points[0]
    (v,) = point.rule.kernels
    assert v.verdict == "regressed"  # as before the probe: nothing tells the machine's move from the code's
    assert point.machine.status == "no probe in history" and point.machine.parts == []
    text = render(result)
    assert text.count("machine probe not used") == 1 and "the history's runs hold none" in text
    assert json.loads(json.dumps(result.to_dict()))["points"][0]["machine"]["status"] == "no probe in history"
    # and a new run without one (an older run directory) against a history with one
    result = _gate(tmp_path / "b", _new(probe=None))
    assert result.points[0].machine.status == "no probe in run"
    assert render(result).count("machine probe not used") == 1


def test_a_steady_machine_changes_nothing(tmp_path):
    for scale in (1.0, 1.47):
        rng_seed = 11
        with_probe = _gate(tmp_path / f"p{scale}", _new(seed=rng_seed, range_scale=scale, probe=1.0))
        without = _gate(tmp_path / f"n{scale}", _new(seed=rng_seed, range_scale=scale, probe=None),
                        baseline_probe=None)
        a, b = with_probe.points[0].rule.kernels[0], without.points[0].rule.kernels[0]
        assert (a.verdict, a.effect_pct, a.reason) == (b.verdict, b.effect_pct, b.reason)


def test_history_runs_keep_the_probe_and_older_runs_without_it_still_read(tmp_path):
    rng = np.random.default_rng(3)
    run = _run(rng, 1e9)
    history = History(tmp_path / "h")
    path = history.append(run)
    doc = json.loads(path.read_text())
    assert set(doc["machine_probe"]["parts"]) == set(PARTS)
    assert doc["machine_probe"]["parts"]["vector"]["calls"] == 2 * CALLS
    (back,) = history.read(run.series).runs
    assert back.probe.parts["python"] == run.probe.parts["python"]
    del doc["machine_probe"]  # a run written before the probe
    older = HistoryRun.from_dict(doc)
    assert older.probe is None and set(older.kernels) == {RANGE}
    doc["machine_probe"] = {"version": 1, "parts": {"vector": {"calls": 0}}}
    with pytest.raises(ValueError, match="machine_probe part 'vector'"):
        HistoryRun.from_dict(doc)


def test_the_probe_times_each_part_around_the_workload_and_records_its_cost():
    probe = GuardedProbe(calls=4)
    probe.before()  # python and vector only: the copy (it flushes the caches) waits for the workload's end
    probe.after()
    got = probe.result()
    assert got.takes == 2 and set(got.parts) == set(PARTS)
    assert got.parts["vector"].calls == 8 and got.parts["python"].calls == 8
    assert got.parts["memory"].calls >= 16  # one pass over a buffer of >= 16 MiB in 1 MiB chunks
    assert all(s.median_ns > 0 for s in got.parts.values())
    assert got.cost_ms > 0 and got.cpu_ms > 0
    again = ProbeResult.from_dict(json.loads(json.dumps(got.to_dict())))
    assert again.parts == got.parts and again.takes == 2


def test_a_probe_that_fails_is_recorded_as_its_error_and_never_raises(monkeypatch):
    probe = GuardedProbe(calls=2)

    def no_memory(self):
        raise MemoryError("cannot allocate the copy buffers")

    monkeypatch.setattr(MachineProbe, "_memory", no_memory)
    probe.before()
    probe.after()
    assert probe.result() is None
    assert probe.record() == {"error": "MemoryError: cannot allocate the copy buffers"}


def test_run_records_the_probe_per_point_and_the_history_and_gate_read_it(tmp_path, capsys):
    from pathlib import Path

    from xpuprof.cli import main

    config = Path(__file__).with_name("ci_host.yaml")
    history = tmp_path / "h"
    for i in range(2):
        assert main(["run", str(config), "--out", str(tmp_path / f"r{i}"), "--history", str(history),
                     "--no-progress", "--set", "iterations=5"]) == 0
    (point,) = json.loads((tmp_path / "r1" / "summary.jsonl").read_text())["points"]
    probe = point["machine_probe"]
    assert set(probe["parts"]) == set(PARTS) and probe["takes"] == 2 and probe["cost_ms"] > 0
    assert probe["parts"]["python"]["calls"] == 2 * CALLS
    (series,) = History(history).series_ids()
    assert all(r.probe is not None and set(r.probe.parts) == set(PARTS) for r in History(history).read(series).runs)
    capsys.readouterr()
    rc = main(["gate", str(tmp_path / "r1"), "--history", str(history), "--min-runs", "2", "--format", "json"])
    assert rc in (0, 1)  # judged against two runs of this machine: whatever the noise says
    (gated,) = json.loads(capsys.readouterr().out)["points"]
    assert gated["machine"]["baseline_runs"] == 2 and {p["name"] for p in gated["machine"]["parts"]} == set(PARTS)


def test_the_cli_still_imports_no_numpy():
    import subprocess
    import sys

    code = ("import sys, xpuprof, xpuprof.cli, xpuprof.commands.run, xpuprof.commands.gate\n"
            "try:\n    xpuprof.cli.main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_the_runner_takes_the_probe_right_before_the_first_iteration_and_right_after_the_last(tmp_path):
    from pathlib import Path

    from xpuprof.config.yamlconfig import load_config
    from xpuprof.workloads import run_names
    from xpuprof.workloads.runner import PointResult, run_point

    config = Path(__file__).with_name("ci_host.yaml")
    cfg = load_config(str(config), overrides=["iterations=3", "repeats=2", "warmup=1"], out_dir=str(tmp_path),
                      names=run_names())

    class Recorder:  # when each take happens: how many measured iterations had run
        def __init__(self, result):
            self.result, self.calls = result, []

        def before(self):
            self.calls.append(("before", len(self.result.iteration_ns)))

        def after(self):
            self.calls.append(("after", len(self.result.iteration_ns)))

    result = PointResult(cfg.points[0])
    probe = Recorder(result)
    run_point(cfg.points[0], result=result, probe=probe)
    assert probe.calls == [("before", 0), ("after", 6)]  # once around both repeats' 3 iterations
    assert len(result.traces) == 2
    # a real probe inside the profiled window leaves nothing in the trace: its ranges are the iterations'
    result = PointResult(cfg.points[0])
    run_point(cfg.points[0], result=result, probe=GuardedProbe(calls=2))
    names = [str(n) for t in result.tables for n in t.name.tolist()]
    assert names and set(names) == {result.workload}, set(names)


def test_one_rule_says_whether_python_calls_are_traced(tmp_path):
    """The probe leaves the profiled window only when Python calls land in the trace: our tracer (asked for
    with python_functions, its activity selected) or torch's stacks. The runner and the pytest plugin read
    the same property; the plugin used to guess from the word "python" in the activities, and the runner
    from the activity alone, which every default selection holds (so its probe never ran next to the body)."""
    from xpuprof.config.options import ProfilerConfig
    from xpuprof.pytest_plugin import ProfiledTrace

    assert not ProfilerConfig().traces_python_calls  # the default activities hold python_function
    assert ProfilerConfig(python_functions=True).traces_python_calls
    assert ProfilerConfig(with_stack=True).traces_python_calls
    from xpuprof.activity import ActivityType

    assert not ProfilerConfig(python_functions=True, activities=frozenset({ActivityType.CPU_OP})).traces_python_calls
    trace = ProfiledTrace(tmp_path / "t.json", activities=["cpu", "python_function"])
    assert trace.traces_python_calls  # not started: assumed
    trace.start()
    try:
        assert not trace.traces_python_calls
    finally:
        trace.stop()
