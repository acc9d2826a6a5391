"""The decision rule on samples drawn from the sim's noise model, in process, over hundreds of seeded
trials (deterministic: the seeds are fixed): the issue's setting is 10 kernels, 50 calls per kernel per
run, 10 baseline runs, a per-call CV of 2-5 % per kernel, a 1-2 % run factor and 1 % outliers.

What the rule reaches there at its default false-alarm rate (1 %; measured over 1000 trials,
docs/cli.md "How the gate decides"): any alarm (regressed or improved) on identical configurations in
0.3 % of trials; a 3 % slow-down of one kernel detected in 89 %: 99 % when that kernel's CV is 2-3 %,
92 % at 3-4 %, 86 % at 4-4.5 %, 65 % at 4.5-5 %. A 3 % change at 5 % per-call CV with 50 calls is 4.2
standard errors of the new run's mean alone; a one-sided family-wise 1 % over 11 tests needs 3.1 of
them before power is counted, so >= 95 % is out of reach there for any rule holding the false alarms
to 1 %. It is reached with 100 calls per run (99 %), or per-call CVs up to 4 % (97 %): those are the
detection tests below.
"""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.analysis.gate_rule import decide
from xpuprof.analysis.samples import batch_stats
from xpuprof.backends.sim.noise import NoiseModel

pytestmark = pytest.mark.slow
TRIALS = 200
KERNELS, CALLS, BASELINE_RUNS = 10, 50, 10


def _trial(seed: int, *, slowdown: float = 0.0, cv=(0.02, 0.05), calls: int = CALLS):
    """One trial: BASELINE_RUNS runs and a new run of KERNELS kernels; ``slowdown`` slows one kernel (chosen
    by the seed) in the new run. Returns (result, the slowed kernel or None, its CV)."""
    rng = np.random.default_rng(seed)
    names = [f"kernel{k}_t{seed}" for k in range(KERNELS)]
    nominal = dict(zip(names, rng.uniform(5e3, 5e5, KERNELS)))
    run_cv = float(rng.uniform(0.01, 0.02))
    model = NoiseModel(seed=seed, cv=cv, run_cv=run_cv, outliers=0.01, outlier_scale=(1.5, 3.0))
    slowed = names[int(rng.integers(KERNELS))] if slowdown else None
    new_model = NoiseModel(seed=seed, cv=cv, run_cv=run_cv, outliers=0.01, outlier_scale=(1.5, 3.0),
                           slowdown=((slowed, slowdown),) if slowed else ())
    draws = [model.draw(nominal, calls, rng) for _ in range(BASELINE_RUNS)] + [new_model.draw(nominal, calls, rng)]
    stats = batch_stats(np.array([d[n] for d in draws for n in names]))
    runs = [dict(zip(names, stats[i * KERNELS:(i + 1) * KERNELS])) for i in range(len(draws))]
    result = decide(runs[:-1], runs[-1], max_regression_pct=3.0, alarm_rate=0.01, min_runs=5,
                    domains=dict.fromkeys(names, "kernel"))
    return result, slowed, model.kernel_cv(slowed) if slowed else None


def _detected(seeds, **kw) -> float:
    hits = []
    for seed in seeds:
        result, slowed, _ = _trial(seed, slowdown=0.03, **kw)
        hits.append(next(v for v in result.kernels if v.name == slowed).verdict == "regressed")
    return float(np.mean(hits))


def test_identical_configurations_raise_an_alarm_in_at_most_1_percent_of_trials():
    alarms = [seed for seed in range(TRIALS)
              if any(v.verdict in ("regressed", "improved") for v in _trial(seed)[0].all)]
    assert len(alarms) <= TRIALS // 100, f"alarms in trials {alarms}"


def test_a_3_percent_slowdown_is_detected_in_95_percent_of_trials_with_100_calls():
    assert _detected(range(10_000, 10_000 + TRIALS), calls=100) >= 0.95


def test_a_3_percent_slowdown_is_detected_in_95_percent_of_trials_at_2_to_4_percent_cv():
    assert _detected(range(20_000, 20_000 + TRIALS), cv=(0.02, 0.04)) >= 0.95


def test_at_the_issues_noise_detection_is_what_the_noise_allows():
    """2-5 % CV, 50 calls: measured, and held to what it is (module docstring); the slowed kernel's verdict is
    never "improved", and a miss is never "unchanged" unless the noise was as large as the change."""
    verdicts = []
    for seed in range(30_000, 30_000 + TRIALS):
        result, slowed, cv = _trial(seed, slowdown=0.03)
        v = next(v for v in result.kernels if v.name == slowed)
        verdicts.append((cv, v))
    rate = np.mean([v.verdict == "regressed" for _, v in verdicts])
    low = np.mean([v.verdict == "regressed" for cv, v in verdicts if cv < 0.03])
    assert rate >= 0.85 and low >= 0.97, (rate, low)
    assert not [v for _, v in verdicts if v.verdict == "improved"]
    for cv, v in verdicts:
        if v.verdict == "unchanged":
            assert v.noise_pct > 0.5, (cv, v)
