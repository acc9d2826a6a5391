"""An opt-in noise model for the sim's kernel durations: what a shared machine does to timings.

Off unless a config asks for it (``custom: {sim_noise: {...}}``; ``ProfilerConfig(custom={"sim_noise":
{...}})``), so the sim's traces stay byte-for-byte the same run after run without it. With it, each
kernel launch's nominal duration is multiplied by:

- a **per-call jitter**: log-normal with the kernel's own coefficient of variation (``cv``: one number,
  or ``[low, high]``, from which each kernel name draws a fixed CV: the same kernel is as noisy in every
  run);
- a **between-run factor**: one log-normal factor per run for every kernel (``run_cv``): the machine
  a run landed on (clocks, co-tenants, thermal state) moves all its kernels together; and, off by
  default, a factor per run and kernel (``kernel_run_cv``: a kernel's own run-to-run drift, e.g. where
  its buffers landed);
- **outliers**: a share of calls (``outliers``) last ``outlier_scale`` (a factor, or ``[low, high]``)
  times longer (a preempted call);
- **injected slow-downs**: ``slowdown: {"<glob>": fraction}`` makes every kernel whose name matches the
  glob that much slower (0.03: 3 % slower), the change a regression gate must catch.

``seed`` makes a run's noise reproducible; without it every run (each profiling session) draws a fresh
seed, which the trace records (``"sim_noise": {..., "seed": N}``) so the run can be reproduced. The run
factor comes from the seed alone, so every recording cycle of a session shares it; each cycle's per-call
values come from (seed, cycle). ``draw`` (the in-process sampler the gate's tests use) and the sim's
kernels apply one rule (``factors``).
"""
from __future__ import annotations

import fnmatch
import itertools
import secrets
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

KEYS = ("seed", "cv", "run_cv", "kernel_run_cv", "outliers", "outlier_scale", "slowdown")
DEFAULTS: dict[str, Any] = {"cv": [0.02, 0.05], "run_cv": 0.015, "kernel_run_cv": 0.0, "outliers": 0.01,
                            "outlier_scale": [1.5, 3.0], "slowdown": {}}


class NoiseConfigError(ValueError):
    """A ``sim_noise`` setting that cannot be used; the message names the key and what is valid."""


def _range(value, key: str, *, low: float, high: float) -> tuple[float, float]:
    """One number or ``[low, high]`` as a (low, high) pair inside [low, high] of what is valid."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if not 1 <= len(items) <= 2 or not all(type(v) in (int, float) and np.isfinite(v) for v in items):
        raise NoiseConfigError(f"sim_noise.{key} must be a number or [low, high], not {value!r}"[:200])
    lo, hi = float(items[0]), float(items[-1])
    if not low <= lo <= hi <= high:
        raise NoiseConfigError(f"sim_noise.{key} must lie in [{low:g}, {high:g}] with low <= high, got {value!r}")
    return lo, hi


@dataclass(frozen=True)
class NoiseModel:
    seed: int
    cv: tuple[float, float] = (0.02, 0.05)
    run_cv: float = 0.015
    outliers: float = 0.01
    outlier_scale: tuple[float, float] = (1.5, 3.0)
    slowdown: tuple[tuple[str, float], ...] = field(default_factory=tuple)
    kernel_run_cv: float = 0.0
    seeded: bool = True  # False: the seed was drawn for this run (said in the metadata)
    _cycles: Any = field(default_factory=itertools.count, compare=False, repr=False)  # apply()'s cycle index

    @classmethod
    def from_config(cls, value: Any) -> "NoiseModel | None":
        """The model a ``sim_noise`` setting asks for: None when absent or false, the defaults for ``true``,
        else a mapping of ``KEYS``. ``NoiseConfigError`` names a bad key or value."""
        if value is None or value is False:
            return None
        if value is True:
            value = {}
        if not isinstance(value, Mapping):
            raise NoiseConfigError(f"sim_noise must be true or a mapping with keys {', '.join(KEYS)}, "
                                   f"not {type(value).__name__}")
        unknown = [k for k in value if k not in KEYS]
        if unknown:
            raise NoiseConfigError(f"sim_noise has unknown key(s) {', '.join(map(repr, unknown))}; valid: {', '.join(KEYS)}")
        v = {**DEFAULTS, **value}
        seed = v.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise NoiseConfigError(f"sim_noise.seed must be a non-negative integer, not {seed!r}")
        cv = _range(v["cv"], "cv", low=0.0, high=1.0)
        run_cv = _range(v["run_cv"], "run_cv", low=0.0, high=1.0)[0]
        kernel_run_cv = _range(v["kernel_run_cv"], "kernel_run_cv", low=0.0, high=1.0)[0]
        outliers = _range(v["outliers"], "outliers", low=0.0, high=1.0)[0]
        scale = _range(v["outlier_scale"], "outlier_scale", low=1.0, high=1000.0)
        slow = v["slowdown"] or {}
        if not isinstance(slow, Mapping):
            raise NoiseConfigError(f"sim_noise.slowdown must map kernel-name globs to fractions "
                                   f"(e.g. {{'sim_gemm*': 0.03}}), not {slow!r}"[:200])
        pairs = []
        for pattern, frac in slow.items():
            if not isinstance(pattern, str) or type(frac) not in (int, float) or not -0.9 <= frac <= 100:
                raise NoiseConfigError(f"sim_noise.slowdown[{pattern!r}] must be a fraction from -0.9 to 100 "
                                       f"(0.03: 3 % slower), not {frac!r}"[:200])
            pairs.append((pattern, float(frac)))
        drawn = seed is None
        return cls(secrets.randbits(63) if drawn else int(seed), cv, run_cv, outliers, scale, tuple(pairs),
                   kernel_run_cv=kernel_run_cv, seeded=not drawn)

    def kernel_cv(self, name: str) -> float:
        """The per-call CV of kernels of this name: fixed by the name inside the ``cv`` range."""
        lo, hi = self.cv
        u = zlib.crc32(str(name).encode("utf-8", "surrogatepass")) / 0xFFFFFFFF
        return lo + (hi - lo) * u

    def slowdown_of(self, name: str) -> float:
        """The injected slow-down (a fraction) of a kernel name: the product of every matching glob's."""
        factor = 1.0
        for pattern, frac in self.slowdown:
            if fnmatch.fnmatchcase(str(name), pattern):
                factor *= 1.0 + frac
        return factor - 1.0

    def run_factor(self, rng: np.random.Generator) -> float:
        """The between-run factor every kernel of a run shares."""
        return float(np.exp(rng.normal(0.0, _sigma(self.run_cv))))

    def factors(self, names: Sequence[str], rng: np.random.Generator, run: float) -> np.ndarray:
        """The multiplicative factor of each call (``names``: the kernel name of each call, in order): the
        run factor ``run``, the kernel's jitter, outliers and the injected slow-downs, drawn from ``rng``."""
        n = len(names)
        uniq, codes = np.unique(np.asarray(list(names), dtype=object).astype(str), return_inverse=True) if n \
            else (np.array([], str), np.zeros(0, np.int64))
        sigma = np.array([_sigma(self.kernel_cv(u)) for u in uniq.tolist()], np.float64)
        slow = np.array([1.0 + self.slowdown_of(u) for u in uniq.tolist()], np.float64)
        own = np.exp(rng.normal(0.0, _sigma(self.kernel_run_cv), len(uniq)))  # each kernel's own run factor
        jitter = np.exp(rng.standard_normal(n) * sigma[codes]) if n else np.zeros(0)
        out = run * own[codes] * jitter * slow[codes] if n else np.zeros(0)
        hit = rng.random(n) < self.outliers
        if hit.any():
            lo, hi = self.outlier_scale
            out[hit] *= rng.uniform(lo, hi, int(hit.sum()))
        return out

    def apply(self, names: Sequence[str], work_ns: np.ndarray) -> np.ndarray:
        """The sim's hook, once per recording cycle: each launch's nominal duration (ns) times its factor,
        at least 1 ns."""
        run = self.run_factor(np.random.default_rng([self.seed, 0]))
        f = self.factors(names, np.random.default_rng([self.seed, 1 + next(self._cycles)]), run)
        return np.maximum(np.rint(np.asarray(work_ns, np.float64) * f), 1).astype(np.int64)

    def draw(self, nominal_ns: Mapping[str, float], calls: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """One run's per-call durations (ns, float) of each kernel in ``nominal_ns``, ``calls`` each, from
        ``rng`` (the in-process sampler: the same factors the sim applies to its launches)."""
        names = [n for n in nominal_ns for _ in range(calls)]
        f = self.factors(names, rng, self.run_factor(rng))
        base = np.repeat(np.array(list(nominal_ns.values()), np.float64), calls)
        d = base * f
        return {n: d[i * calls:(i + 1) * calls] for i, n in enumerate(nominal_ns)}

    def metadata(self) -> dict:
        """What the trace records: every setting, and the seed (drawn or given)."""
        return {"seed": self.seed, "seed_drawn": not self.seeded, "cv": list(self.cv), "run_cv": self.run_cv,
                "kernel_run_cv": self.kernel_run_cv, "outliers": self.outliers, "outlier_scale": list(self.outlier_scale),
                "slowdown": dict(self.slowdown)}


def _sigma(cv: float) -> float:
    """The log-normal sigma whose distribution has this coefficient of variation."""
    return float(np.sqrt(np.log1p(cv * cv)))
