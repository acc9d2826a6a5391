"""The gate's decision rule: is each kernel of a new run slower, faster, the same, or can its noise not tell?

Input: per kernel, the new run's per-call summary (``samples.SampleStats``: the location ``loc`` = mean
log duration of the calls left after outliers, its standard error) and the same for each baseline run of
the history. The model of a run's location of kernel k in run r:

    loc[r, k] = mu[k] + f[r] + e[r, k],   e ~ N(0, se[r, k]^2 + tau[k]^2)

- ``f[r]``, the **run factor**: what moves every kernel of one run together (the machine's clocks and
  co-tenants). It is estimated per domain (device kernels; host ranges) when the domain has at least
  ``MIN_FACTOR_KERNELS`` kernels with history, as a Huber M-estimate over the kernels (a single changed
  kernel does not move it), and removed from each kernel's effect; the run factor itself is tested
  against the baseline runs' own factors (Student's t prediction interval), so a change common to every
  kernel is not hidden, only held to the machine's run-to-run spread;
- ``mu[k]``, the kernel's baseline level: a Huber M-estimate over the baseline runs;
- ``se[r, k]``: the run's own standard error, from its calls; ``tau[k]``: the kernel's run-to-run noise
  beyond that, estimated from the baseline residuals (a method-of-moments estimate, never below 0).

The effect of kernel k is ``d = loc[new, k] - f[new] - mu[k]`` with variance ``se_new^2 + tau^2 + var(mu) +
var(f_new)``; ``d / sqrt(var)`` is read against Student's t with Satterthwaite's degrees of freedom: the
calls' own noise with its many, the run factors' test and the run-to-run noise of kernels without a run
factor (both hold the machine's regime jumps) with at most ``MACHINE_DF``: heavy tails, so the more of the
noise is the machine's, the larger ``t`` must be. With ``m``
tests (kernels and run factors) and a family-wise false-alarm rate ``alarm_rate`` over both directions,
each side of each test is held to ``alarm_rate / (2 m)`` (Bonferroni). For the effect that counts,
``max_regression`` (delta):

- **regressed**: slower with ``p < alarm_rate / (2 m)`` and by at least delta / 2 (the midpoint between
  "no change" and "the change that counts": a significant 0.3 % drift is not a regression);
- **improved**: the same, faster;
- **unchanged**: the 90 % interval of the effect lies inside (-delta, +delta);
- **inconclusive**: neither: the noise is too large for the effect asked for, or the history holds fewer
  than ``min_runs`` runs of the kernel ("inconclusive: N runs, need M").
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .samples import SampleStats

MIN_FACTOR_KERNELS = 3  # a run factor needs this many kernels with history in a domain (a median of 3 resists 1)
HUBER_C = 1.5
EQUIVALENCE_P = 0.05  # "unchanged": each one-sided test against +-delta at 5 % (a 90 % interval inside)
SE_FLOOR = 1e-5  # log units (0.001 %): identical runs (a deterministic sim) are not infinitely certain
# A machine's run-to-run noise (co-tenants, clocks, where memory landed) switches between regimes rather
# than scattering normally: a shared host's runs jump 2x. Where it is machine-wide it is the run factor,
# removed from each kernel and tested itself; it is read with at most this many degrees of freedom, however
# long the history (a Student t with 3 of them has the heavy tails such jumps need). So is the run-to-run
# noise of kernels whose domain has too few kernels for a run factor (it holds the machine's jumps).
MACHINE_DF = 3.0
VERDICTS = ("regressed", "improved", "unchanged", "inconclusive")


# ----------------------------------------------------------------------------- Student's t
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (the normal for df >= 1e7)."""
    if math.isnan(t):
        return math.nan
    if df >= 1e7:
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


# ----------------------------------------------------------------------------- robust locations
def huber_rows(x: np.ndarray, scale: np.ndarray, *, iterations: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``x`` (values) and ``scale`` (their standard errors; NaN: absent): (location, its
    variance), a Huber M-estimate: each value weighted by 1/scale^2, down-weighted past ``HUBER_C`` scales
    from the fit; started at the weighted median. A row without values gives NaN."""
    x = np.atleast_2d(np.asarray(x, np.float64))
    s = np.atleast_2d(np.asarray(scale, np.float64))
    ok = np.isfinite(x) & np.isfinite(s) & (s > 0)
    w0 = np.where(ok, 1.0 / np.where(ok, s, 1.0) ** 2, 0.0)
    xv = np.where(ok, x, 0.0)
    order = np.argsort(np.where(ok, x, np.inf), axis=1)
    cw = np.cumsum(np.take_along_axis(w0, order, axis=1), axis=1)
    half = np.argmax(cw >= cw[:, -1:] / 2.0, axis=1)
    m = np.take_along_axis(np.take_along_axis(xv, order, axis=1), half[:, None], axis=1)[:, 0]
    s_safe = np.where(ok, s, 1.0)
    for _ in range(iterations):
        z = np.abs(xv - m[:, None]) / s_safe
        w = w0 * np.minimum(1.0, HUBER_C / np.maximum(z, 1e-12))
        total = w.sum(axis=1)
        m = np.where(total > 0, (w * xv).sum(axis=1) / np.where(total > 0, total, 1.0), np.nan)
    inside = ok & (np.abs(xv - m[:, None]) / s_safe <= HUBER_C)
    info = (w0 * inside).sum(axis=1)
    n = ok.sum(axis=1)
    info = np.where(info > 0, info, w0.sum(axis=1) / np.maximum(n, 1))  # every point beyond c: their mean weight
    var = np.where(n > 0, 1.0 / np.where(info > 0, info, 1.0), np.nan)
    return np.where(n > 0, m, np.nan), var


def huber(x: np.ndarray, scale: np.ndarray) -> tuple[float, float]:
    """``huber_rows`` of one row."""
    m, v = huber_rows(np.asarray(x)[None, :], np.asarray(scale)[None, :])
    return float(m[0]), float(v[0])


# ----------------------------------------------------------------------------- the result
@dataclass
class Verdict:
    """One kernel (or a domain's run factor): the verdict and the numbers it rests on (effects in %)."""

    name: str
    verdict: str
    runs: int  # baseline runs that hold it
    baseline_ns: float | None = None  # the baseline level (geometric mean per call, run factors removed)
    spread_pct: float | None = None  # the baseline runs' run-to-run spread of this kernel (raw, robust SD)
    new_ns: float | None = None  # the new run's median call
    effect_pct: float | None = None  # the change, with the run factor removed
    raw_effect_pct: float | None = None  # the change as measured (run factor included)
    noise_pct: float | None = None  # standard error of the effect
    p_slower: float | None = None
    p_faster: float | None = None
    df: float | None = None
    confidence: float | None = None  # of the verdict: slower / faster / within +-delta
    reason: str = ""
    domain: str = ""

    def to_dict(self) -> dict:
        def plain(v):
            return float(v) if isinstance(v, (float, np.floating)) else v

        return {k: plain(getattr(self, k)) for k in ("name", "verdict", "runs", "baseline_ns", "spread_pct", "new_ns",
                                                      "effect_pct", "raw_effect_pct", "noise_pct", "p_slower",
                                                      "p_faster", "df", "confidence", "reason", "domain")}


@dataclass
class RuleResult:
    kernels: list[Verdict]
    factors: list[Verdict] = field(default_factory=list)  # one per domain whose run factor was removed
    tests: int = 0
    alpha_per_side: float = 0.0
    max_regression_pct: float = 3.0
    alarm_rate: float = 0.005
    min_runs: int = 5

    @property
    def all(self) -> list[Verdict]:
        return [*self.factors, *self.kernels]

    @property
    def regressed(self) -> list[Verdict]:
        return [v for v in self.all if v.verdict == "regressed"]

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.all)


# ----------------------------------------------------------------------------- the rule
def decide(baseline: Sequence[Mapping[str, SampleStats]], new: Mapping[str, SampleStats], *,
           max_regression_pct: float = 3.0, alarm_rate: float = 0.005, min_runs: int = 5,
           domains: Mapping[str, str] | None = None) -> RuleResult:
    """Verdicts for every kernel of ``new`` (module docstring). ``baseline``: one mapping per baseline run
    (oldest first), kernel name -> its calls' summary; ``domains``: kernel name -> "kernel" / "range"
    (run factors are per domain; default: one domain)."""
    if not max_regression_pct > 0 or not math.isfinite(max_regression_pct):
        raise ValueError(f"max_regression must be a positive percentage, got {max_regression_pct}")
    if not 0 < alarm_rate < 1:
        raise ValueError(f"the false-alarm rate must be between 0 and 1, got {alarm_rate}")
    if min_runs < 2:
        raise ValueError(f"min_runs must be at least 2 (a spread needs two runs), got {min_runs}")
    domains = domains or {}
    names = list(new)
    R = len(baseline)
    counts = {n: sum(n in run for run in baseline) for n in names}
    tested = [n for n in names if counts[n] >= min_runs]
    out = {n: Verdict(n, "inconclusive", counts[n], new_ns=new[n].median_ns, domain=domains.get(n, ""),
                      reason=f"inconclusive: {counts[n]} runs, need {min_runs}") for n in names}
    result = RuleResult([out[n] for n in names], max_regression_pct=max_regression_pct, alarm_rate=alarm_rate,
                        min_runs=min_runs)
    if not tested:
        return result
    K = len(tested)
    L, SD, KEPT = (np.full((R, K), np.nan) for _ in range(3))
    for r, run in enumerate(baseline):
        for k, n in enumerate(tested):
            s = run.get(n)
            if s is not None:
                L[r, k], SD[r, k], KEPT[r, k] = s.loc, s.sd, s.kept
    ln = np.array([new[n].loc for n in tested])
    s2_new, s2_df, noisier = _per_call_variance(SD, KEPT, [new[n] for n in tested])
    kept_n = np.array([new[n].kept for n in tested], np.float64)
    vn = np.where(s2_df > 0, s2_new / kept_n, np.nan)
    vn = np.where(np.isfinite(vn), np.maximum(vn, SE_FLOOR ** 2), vn)
    # each baseline run's standard error^2, from the pooled spread (never 0: identical calls are not exact)
    V = np.where(KEPT > 0, np.maximum(s2_new / np.where(KEPT > 0, KEPT, 1.0), SE_FLOOR ** 2), np.nan)
    dom = np.array([domains.get(n, "") for n in tested], dtype=object)
    groups = {d: np.flatnonzero(dom == d) for d in dict.fromkeys(dom.tolist())}
    factored = {d: idx for d, idx in groups.items() if len(idx) >= MIN_FACTOR_KERNELS}
    fit = _fit_baseline(L, V, factored, dict(enumerate(dom.tolist())))

    f_new, var_f_new = np.zeros(K), np.zeros(K)
    factor_rows = []
    for d, idx in factored.items():
        scale = np.where(np.isfinite(vn[idx]), vn[idx], fit.v_between[idx]) + fit.tau2[idx] + fit.var_mu[idx]
        fn, vfn = huber(ln[idx] - fit.mu[idx], np.sqrt(scale))
        f_new[idx], var_f_new[idx] = fn, vfn
        factor_rows.append((d, fn, fit.f[:, idx[0]]))

    in_factor = {int(k) for idx in factored.values() for k in idx}  # their machine-wide noise is the run factor
    tests = K + len(factor_rows)
    alpha = alarm_rate / tests
    delta = math.log1p(max_regression_pct / 100.0)
    result.tests, result.alpha_per_side = tests, alpha
    for d, fn, fr in factor_rows:
        result.factors.append(_factor_verdict(d, fn, fr, alpha, delta, max_regression_pct))
    for k, n in enumerate(tested):
        v = out[n]
        runs = int(fit.runs[k])
        tau2, var_mu = fit.tau2[k], fit.var_mu[k]
        if np.isfinite(vn[k]):
            var = vn[k] + tau2 + var_mu + var_f_new[k]
            parts = [(vn[k], s2_df[k]), (tau2, fit.tau_df[k] if k in in_factor else min(fit.tau_df[k], MACHINE_DF)),
                     (var_mu, runs - 1)]
        else:  # one call per run: the noise is what the baseline runs show between them
            var = fit.v_between[k] * (1.0 + 1.0 / runs) + var_f_new[k]
            parts = [(fit.v_between[k] * (1.0 + 1.0 / runs), min(runs - 1, MACHINE_DF))]
        var = max(var, SE_FLOOR ** 2)
        denom = sum(c * c / max(df, 1) for c, df in parts if c > 0)
        df = min(var * var / denom, 1e7) if denom > 0 else 1e7
        _judge(v, ln[k] - f_new[k] - fit.mu[k], math.sqrt(var), df, alpha, delta, max_regression_pct)
        if noisier[k]:
            v.reason += "; its calls vary more than in the baseline runs (their own spread is used)"
        v.runs = runs
        v.baseline_ns = math.exp(fit.mu[k])
        v.raw_effect_pct = 100.0 * math.expm1(ln[k] - fit.mu[k])
        spread = L[:, k][np.isfinite(L[:, k])]
        v.spread_pct = 100.0 * MAD_SD * float(np.median(np.abs(spread - np.median(spread))))
    return result


def _f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Fisher's F with (d1, d2) degrees of freedom."""
    return _betainc(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f)) if f > 0 else 1.0


def _per_call_variance(SD: np.ndarray, KEPT: np.ndarray, new: list[SampleStats]):
    """(variance of one call's log duration, its degrees of freedom, noisier) per kernel: a kernel's calls
    vary alike in every run, so the spread is pooled over the baseline runs and the new run (hundreds of
    degrees of freedom instead of one run's calls). ``noisier``: the new run's calls vary more than the
    pool (an F test at 1 %): then its own spread is used."""
    dfw = np.where(KEPT > 1, KEPT - 1, 0.0)
    pool_df = dfw.sum(axis=0)
    pool = np.where(pool_df > 0, np.nansum(dfw * np.nan_to_num(SD) ** 2, axis=0) / np.maximum(pool_df, 1), np.nan)
    own = np.array([s.sd ** 2 for s in new])
    own_df = np.array([max(s.kept - 1, 0) for s in new], np.float64)
    noisier = np.array([bool(own_df[k] > 0 and pool_df[k] > 0 and pool[k] > 0
                             and _f_sf(own[k] / pool[k], own_df[k], pool_df[k]) < 0.01) for k in range(len(new))])
    combined = np.where(pool_df + own_df > 0, (np.nan_to_num(pool) * pool_df + own * own_df)
                        / np.maximum(pool_df + own_df, 1), np.nan)
    return np.where(noisier, own, combined), np.where(noisier, own_df, pool_df + own_df), noisier


@dataclass
class _Fit:
    mu: np.ndarray  # each kernel's baseline level (log)
    var_mu: np.ndarray
    f: np.ndarray  # (runs, kernels): each baseline run's factor on its kernels' columns (0: no factor)
    tau2: np.ndarray  # each kernel's run-to-run variance beyond its runs' standard errors
    v_between: np.ndarray  # the baseline runs' residual variance per kernel
    runs: np.ndarray
    tau_df: np.ndarray  # the degrees of freedom tau2 rests on (its own runs, or its domain's pool)


def _fit_baseline(L: np.ndarray, V: np.ndarray, factored: dict, domains: dict) -> _Fit:
    """Levels, run factors and run-to-run noise of the baseline runs (alternating Huber fits).

    A kernel's run-to-run noise ``tau2`` is the larger of its own estimate (``runs - 1`` degrees of
    freedom: noisy with ten runs) and its domain's pooled one (every kernel's residuals: precise): a
    machine that moves each kernel a little from run to run shows it in all of them, and a single
    kernel's estimate that happens to come out low must not make its test overconfident."""
    R, K = L.shape
    f, var_f = np.zeros((R, K)), np.zeros((R, K))
    tau2, tau_df = np.zeros(K), np.full(K, 1e7)
    # a kernel with one call per run has no within-run spread: its runs' spread scales its Huber fits
    spread = _mad_var(L)
    within = np.where(np.isfinite(V), V, np.where(np.isfinite(L), spread, 0.0))
    w_bar = np.array([np.nanmean(V[:, k]) if np.isfinite(V[:, k]).any() else 0.0 for k in range(K)])
    leverage = np.zeros(K)  # the share of each run's factor a kernel makes (its residuals shrink by it)
    robust = np.zeros(K)  # run-to-run variance from the residuals' MAD: the Huber fits' scale, which a few
    # runs far off (a machine busy for a third of the history) do not inflate as the mean square does
    for rounds in range(4):
        mu, var_mu = huber_rows((L - f).T, np.sqrt(within + robust + var_f).T)
        if rounds == 3:
            break
        for idx in factored.values():
            scale = within[:, idx] + robust[idx]
            fr, vf = huber_rows(L[:, idx] - mu[idx], np.sqrt(scale))
            fr, vf = np.where(np.isfinite(fr), fr, 0.0), np.where(np.isfinite(fr), vf, 0.0)
            fr = fr - np.median(fr)  # the median baseline run is the reference
            f[:, idx], var_f[:, idx] = fr[:, None], vf[:, None]
            w = np.where(np.isfinite(L[:, idx]) & (scale > 0), 1.0 / np.where(scale > 0, scale, 1.0), 0.0)
            leverage[idx] = np.nanmean(w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300), axis=0)
        resid = L - f - mu
        runs = np.isfinite(resid).sum(axis=0)
        dof = np.maximum((runs - 1) * (1.0 - np.minimum(leverage, 0.9)), 1e-9)
        v_between = np.nansum(resid * resid, axis=0) / dof
        own = np.maximum(0.0, v_between - w_bar)
        mad = _mad_var(resid) / np.maximum(1.0 - leverage, 0.1)
        robust = np.where(runs >= 3, np.maximum(0.0, mad - w_bar), own)
        tau2, tau_df = own.copy(), np.maximum(runs - 1, 1).astype(np.float64)
        for d in dict.fromkeys(domains.values()):
            idx = np.flatnonzero(np.array([domains[k] == d for k in range(K)]))
            pool_df = float(np.maximum(runs[idx] - 1, 0).sum())
            if len(idx) < 2 or pool_df <= 0:
                continue
            pooled = max(0.0, float(((runs[idx] - 1) * (v_between[idx] - w_bar[idx])).sum()) / pool_df)
            use = pooled >= own[idx]
            tau2[idx] = np.where(use, pooled, own[idx])
            tau_df[idx] = np.where(use, pool_df, tau_df[idx])
    return _Fit(mu, var_mu, f, tau2, v_between, runs, tau_df)


MAD_SD = 1.4826


def _mad_var(x: np.ndarray) -> np.ndarray:
    """Per column of ``x``: the variance a normal sample with the column's MAD has (NaN ignored; the floor
    for a column of fewer than 2 values)."""
    n = np.isfinite(x).sum(axis=0)
    med = _column_median(x, n)
    mad = MAD_SD * _column_median(np.abs(x - med), n)
    return np.where(n >= 2, np.maximum(mad * mad, SE_FLOOR ** 2), SE_FLOOR ** 2)


def _column_median(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Median of each column's finite values (``n`` of them; NaN sorts last); 0 for an empty column."""
    srt = np.sort(np.where(np.isfinite(x), x, np.inf), axis=0)
    cols = np.arange(x.shape[1])
    lo, hi = np.maximum((n - 1) // 2, 0), np.maximum(n // 2, 0)
    return np.where(n > 0, (srt[lo, cols] + srt[np.minimum(hi, len(x) - 1), cols]) / 2.0, 0.0)


def _var(s: SampleStats) -> float:
    return s.se ** 2 if s.kept > 1 else math.nan


def _judge(v: Verdict, effect: float, se: float, df: float, alpha: float, delta: float, delta_pct: float) -> None:
    """Fill ``v``'s verdict from the effect (log units) and its standard error."""
    t = effect / se
    v.effect_pct, v.noise_pct, v.df = 100.0 * math.expm1(effect), 100.0 * se, df
    tail = t_sf(abs(t), df)
    v.p_slower, v.p_faster = (tail, 1.0 - tail) if t >= 0 else (1.0 - tail, tail)
    half = delta_pct / 2.0
    flagged = min(v.p_slower, v.p_faster) < alpha and abs(v.effect_pct) >= half
    # P(beyond +delta), P(beyond -delta): the equivalence test (skipped for a flagged change)
    above, below = (1.0, 1.0) if flagged else (t_sf((delta - effect) / se, df), t_sf((effect + delta) / se, df))
    if v.p_slower < alpha and v.effect_pct >= half:
        v.verdict, v.confidence = "regressed", 1.0 - v.p_slower
        v.reason = f"slower by {v.effect_pct:+.2f}% (p={v.p_slower:.2g}, needs p < {alpha:.2g} and >= {half:g}%)"
    elif v.p_faster < alpha and v.effect_pct <= -half:
        v.verdict, v.confidence = "improved", 1.0 - v.p_faster
        v.reason = f"faster by {v.effect_pct:+.2f}% (p={v.p_faster:.2g}, needs p < {alpha:.2g} and >= {half:g}%)"
    elif above < EQUIVALENCE_P and below < EQUIVALENCE_P:
        v.verdict, v.confidence = "unchanged", 1.0 - max(above, below)
        v.reason = f"within +-{delta_pct:g}% (90% interval {_interval(effect, se, df)})"
    else:
        v.verdict, v.confidence = "inconclusive", None
        v.reason = (f"inconclusive: noise +-{100 * se:.3g}% for an effect of {delta_pct:g}% "
                    f"(90% interval {_interval(effect, se, df)})")


def t_pdf(t: float, df: float) -> float:
    if df >= 1e7:
        return math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def _t_quantile_cached(p: float, df: float) -> float:
    return t_quantile(p, df)


def t_quantile(p: float, df: float) -> float:
    """The t with P(T > t) = p, for 0 < p < 1 (Newton's method on ``t_sf`` from the normal quantile)."""
    from statistics import NormalDist

    t = -NormalDist().inv_cdf(p)
    for _ in range(50):
        step = (t_sf(t, df) - p) / max(t_pdf(t, df), 1e-300)
        bound = max(5.0, abs(t))  # a heavy tail (df 1 or 2) lies far out: steps may double t
        t += max(min(step, bound), -bound / 2)
        if abs(step) < 1e-10 * max(1.0, abs(t)):
            break
    return t


def _interval(effect: float, se: float, df: float) -> str:
    q = _t_quantile_cached(0.05, float(f"{df:.3g}"))  # the interval's text: 3 digits of df are plenty
    return f"{100 * math.expm1(effect - q * se):+.2f}% to {100 * math.expm1(effect + q * se):+.2f}%"


def _factor_verdict(domain: str, f_new: float, f_base: np.ndarray, alpha: float, delta: float,
                    delta_pct: float) -> Verdict:
    """The run factor of one domain against the baseline runs' factors: a t prediction interval."""
    R = len(f_base)
    label = {"kernel": "every device kernel", "range": "every host range"}.get(domain, "every kernel")
    v = Verdict(f"(run factor: {label} together)", "inconclusive", R, domain=domain)
    sd = float(np.std(f_base, ddof=1)) if R > 1 else math.nan
    se = max(sd * math.sqrt(1.0 + 1.0 / R), SE_FLOOR) if math.isfinite(sd) else math.nan
    v.spread_pct = 100.0 * sd if math.isfinite(sd) else None
    v.raw_effect_pct = 100.0 * math.expm1(f_new - float(np.mean(f_base)))
    if not math.isfinite(se):
        v.reason = f"inconclusive: {R} runs, need 2"
        return v
    _judge(v, f_new - float(np.mean(f_base)), se, float(min(max(R - 1, 1), MACHINE_DF)), alpha, delta, delta_pct)
    return v
