"""The sim's opt-in noise model: off by default (the sim's kernels stay exactly what they were), seeded,
per-kernel jitter CVs, one run factor per run, outliers, injected slow-downs; bad settings are one error
naming the key."""
from __future__ import annotations

import numpy as np
import pytest

import xpuprof
from slice_tables import slice_table
from xpuprof.backends.base import BackendError
from xpuprof.backends.sim.noise import NoiseConfigError, NoiseModel

WORK = [{"flops": 10 ** 7}, {"bytes": 10 ** 6}, {"flops": 4 * 10 ** 7}]  # three kernels; no sync, no compression


def _kernels(custom=None):
    cfg = xpuprof.ProfilerConfig(backends=["sim"], custom={"sim_seed": 1, **(custom or {})})
    with xpuprof.profile(config=cfg, activities=["user_annotation", "runtime", "kernel"]) as prof:
        for i, args in enumerate(WORK):
            with xpuprof.record_function(f"work{i}", args):
                pass
    k = slice_table(prof.builder, "kernel")
    return dict(zip(k["name"].tolist(), k["dur"].tolist())), prof.builder.metadata


def test_off_by_default_the_kernels_and_metadata_are_unchanged():
    plain, meta = _kernels()
    again, _ = _kernels({"sim_noise": False})
    assert plain == again and "sim_noise" not in meta


def test_seeded_noise_is_reproducible_and_recorded():
    a, meta = _kernels({"sim_noise": {"seed": 5}})
    b, _ = _kernels({"sim_noise": {"seed": 5}})
    c, _ = _kernels({"sim_noise": {"seed": 6}})
    plain, _ = _kernels()
    assert a == b and a != c and a != plain
    assert meta["sim_noise"]["seed"] == 5 and meta["sim_noise"]["seed_drawn"] is False
    drawn = _kernels({"sim_noise": True})[1]["sim_noise"]
    assert drawn["seed_drawn"] is True and isinstance(drawn["seed"], int)  # a run can be reproduced from its trace


def test_an_injected_slowdown_slows_the_matching_kernels_only():
    quiet = {"cv": 0, "run_cv": 0, "outliers": 0, "seed": 1}
    base, _ = _kernels({"sim_noise": quiet})
    slow, meta = _kernels({"sim_noise": {**quiet, "slowdown": {"sim_work1": 0.5}}})
    assert slow["sim_work1"] == pytest.approx(1.5 * base["sim_work1"], abs=1)
    assert slow["sim_work0"] == base["sim_work0"] and slow["sim_work2"] == base["sim_work2"]
    assert meta["sim_noise"]["slowdown"] == {"sim_work1": 0.5}


def test_factors_follow_the_per_kernel_cv_the_run_factor_and_the_outlier_share():
    model = NoiseModel(seed=0, cv=(0.02, 0.05), run_cv=0.0, outliers=0.01, outlier_scale=(1.5, 3.0))
    names = ["k_a"] * 20000 + ["k_b"] * 20000
    f = model.factors(names, np.random.default_rng(3), 1.0)
    for name, part in (("k_a", f[:20000]), ("k_b", f[20000:])):
        clean = part[part < 1.3]
        assert 0.02 <= model.kernel_cv(name) <= 0.05
        assert np.std(np.log(clean)) == pytest.approx(np.sqrt(np.log1p(model.kernel_cv(name) ** 2)), rel=0.05)
        assert np.mean(part > 1.4) == pytest.approx(0.01, abs=0.003)  # 1 % outliers, each 1.5-3x
    runs = [NoiseModel(seed=s, run_cv=0.015).run_factor(np.random.default_rng(s)) for s in range(2000)]
    assert np.std(np.log(runs)) == pytest.approx(0.015, rel=0.1)


def test_draw_gives_one_runs_calls_of_each_kernel_with_a_shared_run_factor():
    model = NoiseModel(seed=0, cv=(0.0, 0.0), run_cv=0.02, outliers=0.0)
    got = model.draw({"a": 1000.0, "b": 50.0}, 40, np.random.default_rng(1))
    assert set(got) == {"a", "b"} and all(len(v) == 40 for v in got.values())
    assert got["a"] / 1000.0 == pytest.approx(got["b"] / 50.0)  # no jitter: the run factor alone, shared


@pytest.mark.parametrize(("setting", "words"), [
    ({"cvv": 0.1}, ["unknown key", "'cvv'", "valid: seed, cv"]),
    ({"cv": [0.05, 0.01]}, ["sim_noise.cv", "low <= high"]),
    ({"run_cv": "big"}, ["sim_noise.run_cv", "number"]),
    ({"seed": -1}, ["sim_noise.seed", "non-negative integer"]),
    ({"slowdown": {"k*": "3%"}}, ["sim_noise.slowdown", "fraction"]),
    ([1, 2], ["sim_noise must be true or a mapping"]),
])
def test_bad_settings_are_one_error_naming_the_key(setting, words):
    with pytest.raises(NoiseConfigError) as err:
        NoiseModel.from_config(setting)
    assert all(w in str(err.value) for w in words), str(err.value)
    from xpuprof.backends.sim import SimBackend

    cfg = xpuprof.ProfilerConfig(backends=["sim"], custom={"sim_noise": setting})
    with pytest.raises(BackendError, match="sim_noise"):
        SimBackend().configure(frozenset(SimBackend.supported_activities()), cfg)
