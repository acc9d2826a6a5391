"""pytest: ``@pytest.mark.xpuprof(max_regression=..., history=...)`` gates a test body against the run
history of that test: --xpuprof-accept builds it, a regression fails the test with the gate's explanation
and writes the HTML history plot, a missing or short history is said (a warning) and never fails."""
from __future__ import annotations

import importlib.metadata
import json

import pytest

# Every inner pytest runs in its own process (runpytest_subprocess), as a user's does. In-process runs drop
# the modules first imported inside them from sys.modules, so a module one run kept met the next run's
# re-imported classes: "'ArgColumn' object is not iterable" run alone, rich's "'Style' object has no
# attribute 'strip'" under pytest-xdist (which imports in another order) - artifacts of the harness.
pytestmark = pytest.mark.slow

BODY = """
import os
import pytest
import xpuprof

# Six ranges launch six sim kernels (fewer than the sim's every-8th sync: no compression); six calls of the
# sim's own +-5 % jitter tell 10 % apart, not 3 %.
# WORK_SCALE makes the kernels' work, so their time, larger: the regression a change would bring.
@pytest.mark.xpuprof(backends=["sim"], activities=["user_annotation", "runtime", "kernel"], max_regression=10,
                     history="perf-history")
def test_work(xpuprof_trace):
    flops = int(2e7 * float(os.environ.get("WORK_SCALE", "1")))
    for _ in range(6):
        with xpuprof.record_function("work", {"flops": flops}):
            pass
    assert xpuprof_trace.kernels(name="sim_work").count == 6
"""


def _plugin_args():
    eps = importlib.metadata.entry_points(group="pytest11")
    return [] if any(ep.value.startswith("xpuprof.pytest_plugin") for ep in eps) else ["-p", "xpuprof.pytest_plugin"]


def test_accepted_runs_build_the_history_and_a_slower_kernel_fails_with_the_gates_explanation(pytester, monkeypatch):
    pytester.makepyfile(test_perf=BODY)
    res = pytester.runpytest_subprocess(*_plugin_args())
    res.assert_outcomes(passed=1, warnings=1)
    res.stdout.fnmatch_lines(["*no run history at *perf-history yet: the test was not gated*--xpuprof-accept*"])
    for i in range(5):
        res = pytester.runpytest_subprocess(*_plugin_args(), "--xpuprof-accept")
        res.assert_outcomes(passed=1, warnings=1)  # "N runs, need 5" until the fifth
    history = pytester.path / "perf-history"
    (series,) = [p for p in history.iterdir() if p.is_dir()]
    runs = sorted(series.glob("*.json"))
    assert len(runs) == 5
    doc = json.loads(runs[0].read_text())
    assert doc["label"]["test"] == "test_perf.py::test_work" and doc["source"] == "pytest --xpuprof-accept"
    # the machine probe, taken before and after the test body, rides with the run
    assert set(doc["machine_probe"]["parts"]) == {"vector", "python", "memory"} and doc["machine_probe"]["takes"] == 2
    res = pytester.runpytest_subprocess(*_plugin_args(), "-rA")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*xpuprof gate*", "*sim_work*unchanged*"])

    monkeypatch.setenv("WORK_SCALE", "1.5")
    res = pytester.runpytest_subprocess(*_plugin_args(), "--xpuprof-accept", f"--xpuprof-keep-failed={pytester.path / 'kept'}")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*xpuprof gate: regression against 5 baseline run(s) in *perf-history (max_regression=10%)*",
                              "*sim_work: regressed +*% slower; 5 baseline runs)*", "*history plot: *xpuprof-history.html*"])
    assert len(list(series.glob("*.json"))) == 5  # the regressed run was not accepted
    (plot,) = (pytester.path / "kept").glob("*.history.html")
    assert 'class="new-run"' in plot.read_text() and "#d62728" in plot.read_text()


def test_a_gate_without_a_history_is_a_usage_error_and_bad_values_are_refused(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xpuprof(backends=["sim"], max_regression=3)
        def test_no_history(xpuprof_trace):
            pass

        @pytest.mark.xpuprof(max_regression="3%", history="h")
        def test_bad_value(xpuprof_trace):
            pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args())
    res.assert_outcomes(failed=1, errors=1)
    res.stdout.fnmatch_lines(["*max_regression=...) needs history= or --xpuprof-history DIR*"])
    res.stdout.fnmatch_lines(["*max_regression=...) must be a percentage above 0*'3%'*"])
    (pytester.path / "h").mkdir()
    (pytester.path / "h" / "notes.txt").write_text("not a history")
    res = pytester.runpytest_subprocess(*_plugin_args(), "--xpuprof-history=h", "--xpuprof-accept", "-k", "no_history")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*the run history cannot be used:*not an xpuprof history*"])
