"""The gate's machine check: did the machine itself run faster or slower in the new run than in its
history? (``machine_probe`` measured it around each run's workload.)

A shared host switches between speed regimes (our CI VM runs numpy's elementwise loop at ~47 or ~67 us
per call for seconds to minutes at a time). A history recorded in one regime and a run in the other
differ by ~45 % in every host range, and a single range cannot say whether the code or the machine
changed. So each probe part of the new run is tested against the same part in the baseline runs with
the run factor's rule (``gate_rule._judge`` on a Student's t prediction interval from the baseline runs'
spread), at the point's per-test false-alarm level and with the same minimum effect (half the effect
that counts). A part that is significant in that test **moved**. Its degrees of freedom are its
history's (runs - 1), not capped at ``MACHINE_DF`` as the run factor's are: that cap keeps a machine's
regime jump from reading as a code change, and here the jump is the thing measured.

When a part moved, every regressed or improved verdict of the **host domain** (host ranges and their run
factor: code timed on the CPU, as the probe is) that moved the same way becomes *inconclusive*, its reason
naming the probe part and both numbers: the run cannot tell a code change from the machine's. Device
kernels are left as judged: a host probe does not measure a device (said in the check's note). A range
that moved far more than the machine did (beyond ``EXPLAINS_UP_TO`` times the largest same-way part's move,
in log terms) is still judged, with that said. A machine that did not move changes nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .gate_rule import SE_FLOOR, RuleResult, Verdict, _judge
from .machine_probe import PART_LABELS
from .samples import SampleStats

HOST_DOMAIN = "range"
EXPLAINS_UP_TO = 2.0  # a machine that ran +x % slower explains a host range's move up to (1 + x)^2 - 1
_DIRECTION = {"regressed": "slower", "improved": "faster"}
UNTESTED = ("no probe in history", "no probe in run", "too few probe runs", "not tested")  # no check was made


@dataclass
class MachineCheck:
    """The new run's probe against its history's: per part a verdict, and what it explained."""

    status: str  # "moved", "steady", "no probe in history", "no probe in run", "too few probe runs", "not tested"
    parts: list[Verdict] = field(default_factory=list)
    baseline_runs: int = 0  # baseline runs that hold a probe
    explained: list[str] = field(default_factory=list)  # verdicts made inconclusive by the machine's move
    note: str = ""

    @property
    def moved(self) -> list[Verdict]:
        return [p for p in self.parts if p.verdict in _DIRECTION]

    def to_dict(self) -> dict:
        return {"status": self.status, "baseline_runs": self.baseline_runs, "explained": self.explained,
                "parts": [{**p.to_dict(), "moved": _DIRECTION.get(p.verdict), "what": PART_LABELS.get(p.name, "")}
                          for p in self.parts], "note": self.note}

    def summary(self) -> str:
        """One line for a point's heading."""
        if self.status in UNTESTED:
            return f"machine probe: {self.note}"
        parts = ", ".join(f"{p.name} {_pct(p.raw_effect_pct)} (history +-{p.spread_pct or 0:.2g}%"
                          f"{'; ' + _DIRECTION[p.verdict] if p.verdict in _DIRECTION else ''})" for p in self.parts)
        return f"machine probe against {self.baseline_runs} baseline run(s): {parts}" + (
            f"; {self.note}" if self.note else "")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def part_verdict(part: str, new: SampleStats, baseline: list[SampleStats], alpha: float, max_regression_pct: float
                 ) -> Verdict:
    """One probe part of the new run against the baseline runs' (each run's location): the run factor's t
    prediction interval (``gate_rule._factor_verdict``)."""
    locs = np.array([s.loc for s in baseline], np.float64)
    R = len(locs)
    v = Verdict(part, "inconclusive", R, new_ns=new.median_ns, domain="machine")
    v.baseline_ns = math.exp(float(np.median(locs))) if R else None
    if R < 2:
        v.reason = f"inconclusive: {R} baseline run(s) with this probe part, need 2"
        return v
    centre = float(np.mean(locs))
    sd = float(np.std(locs, ddof=1))
    se = max(sd * math.sqrt(1.0 + 1.0 / R), SE_FLOOR)
    v.spread_pct = 100.0 * sd
    v.raw_effect_pct = 100.0 * math.expm1(new.loc - centre)
    # R - 1 degrees of freedom, not the MACHINE_DF cap of the run factor's test: that cap keeps a regime
    # jump from reading as a code change; here the jump is what is measured, and read with 3 degrees of
    # freedom the probe (its two takes a few ms apart mix regimes: its history is wider than a 2 ms range's)
    # missed switches that the range's own test flagged
    _judge(v, new.loc - centre, se, float(max(R - 1, 1)), alpha, math.log1p(max_regression_pct / 100.0),
           max_regression_pct)
    return v


def check_machine(rule: RuleResult, new_probe, baseline_probes: list, *, min_runs: int) -> MachineCheck:
    """Test the new run's probe against the baseline runs' probes and explain host verdicts by it (module
    docstring): the verdicts of ``rule`` are changed in place. ``new_probe`` / ``baseline_probes``:
    ``machine_probe.ProbeResult`` or None per run."""
    with_probe = [b for b in baseline_probes if b is not None]
    if new_probe is None:
        return MachineCheck("no probe in run", note="this run holds none (recorded by an older xpuprof, or the "
                            "probe failed): a machine regime switch cannot be told from a code change")
    if not with_probe:
        return MachineCheck("no probe in history", note="the history's runs hold none (recorded by an older "
                            "xpuprof): a machine regime switch cannot be told from a code change")
    if len(with_probe) < min_runs:
        return MachineCheck("too few probe runs", baseline_runs=len(with_probe),
                            note=f"{len(with_probe)} baseline run(s) hold one, need {min_runs}: not used")
    if not rule.tests:
        return MachineCheck("not tested", baseline_runs=len(with_probe),
                            note="nothing of this point was tested (too short a history)")
    check = MachineCheck("steady", baseline_runs=len(with_probe))
    for part, stats in new_probe.parts.items():
        base = [b.parts[part] for b in with_probe if part in b.parts]
        if len(base) >= min_runs:
            check.parts.append(part_verdict(part, stats, base, rule.alpha_per_side, rule.max_regression_pct))
    moved = check.moved
    if not moved:
        return check
    check.status = "moved"
    device_alarms = [v.name for v in rule.all if v.domain != HOST_DOMAIN and v.verdict in _DIRECTION]
    for v in rule.all:
        if v.domain != HOST_DOMAIN or v.verdict not in _DIRECTION:
            continue
        same = [p for p in moved if p.verdict == v.verdict]
        if not same:
            continue  # the machine moved the other way: the range's move is not the machine's
        moved_pct = v.raw_effect_pct if v.raw_effect_pct is not None else v.effect_pct  # as measured
        effect = math.log1p(moved_pct / 100.0)
        largest = max(same, key=lambda p: abs(p.raw_effect_pct))
        machine = math.log1p(largest.raw_effect_pct / 100.0)
        probes = "; ".join(f"{p.name} {_pct(p.raw_effect_pct)}, history +-{p.spread_pct:.2g}%" for p in same)
        if abs(effect) > EXPLAINS_UP_TO * abs(machine):
            v.reason += (f"; the machine ran {_DIRECTION[v.verdict]} too (machine probe: {probes}), but this moved "
                         f"more than {EXPLAINS_UP_TO:g}x that: judged")
            continue
        was = v.verdict
        v.verdict, v.confidence = "inconclusive", None
        v.reason = (f"inconclusive: the machine itself ran {_pct(largest.raw_effect_pct)} {_DIRECTION[was]} in this "
                    f"run (machine probe: {probes}); this {'range' if v.name in _names(rule.kernels) else 'factor'} "
                    f"moved {_pct(moved_pct)}, "
                    f"would be {was}; rerun on a settled machine")
        check.explained.append(v.name)
    notes = []
    if check.explained:
        notes.append(f"{len(check.explained)} host verdict(s) that moved the same way are inconclusive")
    if device_alarms:
        notes.append(f"device kernels are judged as measured ({len(device_alarms)} moved): a host probe does not "
                     "measure a device")
    check.note = "; ".join(notes) or "no host verdict moved with it"
    return check


def _names(verdicts: list[Verdict]) -> set[str]:
    return {v.name for v in verdicts}
