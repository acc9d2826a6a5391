"""The gate's decision rule on hand-made runs: each verdict, the run factor, too short a history, the
minimum effect, and the Student-t and Huber pieces it rests on."""
from __future__ import annotations

import math

import numpy as np
import pytest

from xpuprof.analysis.gate_rule import decide, huber, t_quantile, t_sf
from xpuprof.analysis.samples import SampleStats, batch_stats


@pytest.mark.parametrize(("t", "df", "p"), [(1.959964, 1e9, 0.025), (2.228139, 10, 0.025), (3.0, 5, 0.0150496),
                                            (12.7062, 1, 0.025), (-2.228139, 10, 0.975), (0.0, 3, 0.5)])
def test_student_t_tail_matches_tables(t, df, p):
    assert t_sf(t, df) == pytest.approx(p, rel=1e-4)
    if 0 < p < 0.5:
        assert t_quantile(p, df) == pytest.approx(t, rel=1e-4)


def test_huber_location_resists_one_wild_value():
    m, v = huber(np.array([1.0, 1.1, 0.9, 1.0, 50.0]), np.full(5, 0.1))
    assert m == pytest.approx(1.0, abs=0.1) and v > 0


def _runs(rng, n_runs, levels, cv=0.02, calls=50, run_cv=0.0, scale=None):
    """n_runs runs of kernels at ``levels`` (ns), log-normal calls; ``scale``: a multiplier per kernel."""
    out = []
    for _ in range(n_runs):
        factor = math.exp(rng.normal(0, run_cv)) if run_cv else 1.0
        m = np.array([[lv * factor * (scale or {}).get(k, 1.0)] for k, lv in levels.items()])
        d = m * np.exp(rng.normal(0, cv, (len(levels), calls)))
        out.append(dict(zip(levels, batch_stats(d))))
    return out


LEVELS = {f"k{i}": 1000.0 * (i + 1) for i in range(6)}


def test_a_clear_slowdown_of_one_kernel_is_regressed_the_others_unchanged():
    rng = np.random.default_rng(0)
    base = _runs(rng, 10, LEVELS, run_cv=0.01)
    (new,) = _runs(rng, 1, LEVELS, run_cv=0.01, scale={"k2": 1.2})
    res = decide(base, new, domains={k: "kernel" for k in LEVELS})
    by = {v.name: v for v in res.kernels}
    assert by["k2"].verdict == "regressed" and by["k2"].effect_pct == pytest.approx(20, abs=2)
    assert by["k2"].confidence > 0.999 and "slower" in by["k2"].reason
    assert all(by[k].verdict == "unchanged" for k in LEVELS if k != "k2"), [(v.name, v.verdict) for v in res.kernels]
    (factor,) = res.factors  # one kernel does not move the run factor
    assert factor.verdict in ("unchanged", "inconclusive") and abs(factor.raw_effect_pct) < 3
    assert res.regressed == [by["k2"]]


def test_every_kernel_slower_together_is_the_run_factor_not_each_kernel():
    rng = np.random.default_rng(1)
    base = _runs(rng, 10, LEVELS, run_cv=0.005)
    (new,) = _runs(rng, 1, {k: v * 1.3 for k, v in LEVELS.items()})
    res = decide(base, new, domains={k: "kernel" for k in LEVELS})
    (factor,) = res.factors
    assert factor.verdict == "regressed" and factor.raw_effect_pct == pytest.approx(30, abs=3)
    assert all(v.verdict == "unchanged" for v in res.kernels)  # the common shift is removed from each
    assert all(v.raw_effect_pct == pytest.approx(30, abs=3) for v in res.kernels)


def test_too_short_a_history_is_inconclusive_and_says_how_short():
    rng = np.random.default_rng(2)
    base = _runs(rng, 3, LEVELS)
    (new,) = _runs(rng, 1, LEVELS, scale={"k0": 2.0})
    res = decide(base, new, min_runs=5)
    assert {v.verdict for v in res.kernels} == {"inconclusive"}
    assert all(v.reason == "inconclusive: 3 runs, need 5" for v in res.kernels)
    assert res.tests == 0 and not res.regressed


def test_a_significant_change_smaller_than_half_the_effect_that_counts_is_not_a_regression():
    rng = np.random.default_rng(3)
    base = _runs(rng, 10, LEVELS, cv=0.002, calls=400)
    (new,) = _runs(rng, 1, LEVELS, cv=0.002, calls=400, scale={"k1": 1.01})  # 1 %: significant, below 3 % / 2
    by = {v.name: v for v in decide(base, new, max_regression_pct=3.0).kernels}
    assert by["k1"].p_slower < 1e-6 and by["k1"].verdict == "unchanged"
    by = {v.name: v for v in decide(base, new, max_regression_pct=1.5).kernels}
    assert by["k1"].verdict == "regressed"  # asked for 1.5 %: a 1 % change counts from 0.75 %


def test_noise_larger_than_the_effect_asked_for_is_inconclusive_and_said():
    rng = np.random.default_rng(4)
    levels = {"k0": 1000.0}
    base = _runs(rng, 10, levels, cv=0.3, calls=10, run_cv=0.05)
    (new,) = _runs(rng, 1, levels, cv=0.3, calls=10, run_cv=0.05)
    (v,) = decide(base, new).kernels
    assert v.verdict == "inconclusive" and "noise" in v.reason and v.noise_pct > 3


def test_identical_runs_and_one_call_kernels_give_numbers_not_nans():
    same = SampleStats.of([4457, 4457, 4457])
    one = SampleStats.of([1000])
    base = [{"copy": same, "once": SampleStats.of([1000 + 5 * i])} for i in range(6)]
    res = decide(base, {"copy": same, "once": one})
    by = {v.name: v for v in res.kernels}
    assert by["copy"].verdict == "unchanged" and by["copy"].effect_pct == pytest.approx(0.0, abs=1e-9)
    assert by["once"].verdict in ("unchanged", "inconclusive") and math.isfinite(by["once"].noise_pct)


def test_kernels_without_history_are_left_to_the_caller():
    rng = np.random.default_rng(5)
    base = _runs(rng, 6, {"old": 100.0})
    (new,) = _runs(rng, 1, {"old": 100.0, "fresh": 50.0})
    by = {v.name: v for v in decide(base, new).kernels}
    assert by["fresh"].runs == 0 and by["fresh"].verdict == "inconclusive"


@pytest.mark.parametrize(("kwargs", "words"), [({"max_regression_pct": 0}, "max_regression"),
                                               ({"alarm_rate": 1.5}, "false-alarm rate"),
                                               ({"min_runs": 1}, "min_runs")])
def test_bad_options_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        decide([], {}, **kwargs)
