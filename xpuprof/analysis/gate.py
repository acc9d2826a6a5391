"""``xpuprof gate`` (and ``xpuprof diff --history``, the same code): a new run against its history.

For each point of the new run (``run_records``), the history's series of the same experiment on the same
kind of machine (``history``) gives the baseline - its newest ``window`` runs - and the decision rule
(``gate_rule``) gives each kernel and host range a verdict; the machine probe (``gate_probe``) then says
whether the machine itself moved, and makes the host verdicts that moved with it inconclusive. Kernels
are compared by equal identity only (equal base name and parameters, ``kernel_identity``): a kernel the
history does not hold is listed as new, or as unmatched when the history holds its base with other
parameters. A gated run joins the history only when accepted (``accept``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .gate_probe import MachineCheck, check_machine
from .gate_rule import RuleResult, decide
from .history import DEFAULT_KEEP, DEFAULT_WINDOW, History, HistoryRun
from .kernel_identity import unmatched_note

ACCEPT_POLICIES = ("passed", "always")


@dataclass(frozen=True)
class GateOptions:
    max_regression_pct: float = 3.0  # the effect that counts
    alarm_rate_pct: float = 1.0  # family-wise false regressions per gated run, in percent
    min_runs: int = 5
    window: int = DEFAULT_WINDOW
    only: str | None = None  # "kernel" or "range": judge one domain (device kernels, host ranges) only

    def check(self) -> None:
        """``ValueError`` naming the option and what is valid."""
        if not 0 < self.max_regression_pct < 1000:
            raise ValueError(f"--max-regression must be a percentage above 0 (3 for 3 %), got {self.max_regression_pct:g}")
        if not 0 < self.alarm_rate_pct < 50:
            raise ValueError(f"--alarm-rate must be a percentage between 0 and 50, got {self.alarm_rate_pct:g}")
        if self.min_runs < 2:
            raise ValueError(f"--min-runs must be at least 2 (a spread needs two runs), got {self.min_runs}")
        if self.only not in (None, "kernel", "range"):
            raise ValueError(f"--only {self.only!r} is not known; valid: kernels, ranges")
        if self.window < self.min_runs:
            raise ValueError(f"--window ({self.window}) must hold at least --min-runs ({self.min_runs}) runs")


@dataclass
class PointGate:
    """One point of the new run against its series."""

    run: HistoryRun  # the kernels judged (``--only`` leaves out a domain)
    baseline: list[HistoryRun]
    total_runs: int  # runs the series holds (the window may use fewer)
    rule: RuleResult
    new: dict[str, str] = field(default_factory=dict)  # kernel -> "new: ..." / "unmatched: ..."
    missing: dict[str, int] = field(default_factory=dict)  # baseline kernels absent from this run -> runs
    skipped_files: list[str] = field(default_factory=list)
    elsewhere: int = 0  # runs of this config in other series (another machine or device)
    whole: HistoryRun | None = None  # the run with every kernel (what ``accept`` appends)
    machine: MachineCheck | None = None  # the machine probe against the baseline's (``gate_probe``)

    @property
    def label(self) -> str:
        lab = self.run.label
        return str(lab.get("point") or lab.get("test") or lab.get("name") or self.run.series)

    @property
    def regressed(self) -> bool:
        return bool(self.rule.regressed)

    def to_dict(self) -> dict:
        r = self.rule
        return {"point": self.label, "series": self.run.series, "key": self.run.key, "baseline_runs": len(self.baseline),
                "series_runs": self.total_runs, "baseline_dates": [b.date for b in self.baseline],
                "tests": r.tests, "alpha_per_test": r.alpha_per_side,
                "factors": [v.to_dict() for v in r.factors], "kernels": [v.to_dict() for v in r.kernels],
                "new": self.new, "missing": self.missing, "skipped_files": self.skipped_files,
                "other_series_runs": self.elsewhere,
                "machine": self.machine.to_dict() if self.machine is not None else None,
                "counts": {v: r.count(v) for v in ("regressed", "improved", "unchanged", "inconclusive")}}


@dataclass
class GateResult:
    points: list[PointGate]
    history: Path
    options: GateOptions
    skipped: list[str] = field(default_factory=list)  # points of the new run that could not be gated
    source: str = ""
    accepted: list[Path] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return any(p.regressed for p in self.points)

    @property
    def exit_status(self) -> int:
        return 1 if self.regressed else 0

    def count(self, verdict: str) -> int:
        return sum(p.rule.count(verdict) for p in self.points)

    def to_dict(self) -> dict:
        o = self.options
        return {"kind": "xpuprof-gate", "run": self.source, "history": str(self.history),
                "max_regression_pct": o.max_regression_pct, "alarm_rate_pct": o.alarm_rate_pct,
                "min_runs": o.min_runs, "window": o.window, "only": o.only, "regressed": self.regressed,
                "points": [p.to_dict() for p in self.points], "skipped": self.skipped,
                "accepted": [str(p) for p in self.accepted]}


def gate_runs(runs: list[HistoryRun], history: History, options: GateOptions, *, source: str = "",
              skipped: list[str] | None = None) -> GateResult:
    """Each run (a point of the new run) against the newest ``options.window`` runs of its series."""
    options.check()
    history.check_readable()
    by_config: dict[str, int] = {}
    newest: list[HistoryRun] = []  # each series' newest run: what other series hold, for the notes
    for sid in history.series_ids():
        got = history.read(sid, window=1)
        if got.runs:
            by_config[got.runs[-1].key["config_hash"]] = by_config.get(got.runs[-1].key["config_hash"], 0) + got.total
            newest.append(got.runs[-1])
    points = []
    for run in runs:
        whole = run
        if options.only:
            run = HistoryRun(run.key, {n: k for n, k in run.kernels.items() if k.domain == options.only}, run.label,
                             run.machine, run.git, run.source, run.time, run.run_id, run.xpuprof_version, run.probe)
        series = history.read(run.series, window=options.window)
        if options.only:
            for b in series.runs:
                b.kernels = {n: k for n, k in b.kernels.items() if k.domain == options.only}
        stats = [b.stats() for b in series.runs]
        # Without runs of its own series, the kernels of this config's other points or parameters on this
        # machine (another --set n=...) say which parameters the history does hold.
        related = series.runs or [r for r in newest if r.series != run.series and r.key["machine"] == run.key["machine"]
                                  and r.label.get("name") == run.label.get("name") and r.label.get("name")]
        domains = {**{n: k.domain for b in series.runs for n, k in b.kernels.items()}, **run.domains()}
        # the false-alarm rate holds for the whole gated run: each of its points gets an equal share
        rule = decide(stats, run.stats(), max_regression_pct=options.max_regression_pct,
                      alarm_rate=options.alarm_rate_pct / 100.0 / max(len(runs), 1), min_runs=options.min_runs,
                      domains=domains)
        # the machine itself faster or slower than in the baseline: host verdicts that moved with it are
        # inconclusive, not alarms (a regime switch of the host is not a code change)
        machine = check_machine(rule, run.probe, [b.probe for b in series.runs], min_runs=options.min_runs)
        known = list(dict.fromkeys(n for b in series.runs for n in b.kernels))
        hints = list(dict.fromkeys(n for b in related for n in b.kernels))
        point = PointGate(run, series.runs, series.total, rule, skipped_files=series.skipped, whole=whole,
                          machine=machine)
        for v in rule.kernels:
            if v.runs == 0 and hints and (series.runs or v.name not in hints):
                note = unmatched_note(v.name, hints)
                if not series.runs:
                    note += " in another series of this config (another point or parameters: not this run's baseline)"
                v.verdict = note.split(":", 1)[0]
                v.reason = note
                point.new[v.name] = note
        for name in known:
            if name not in run.kernels:
                point.missing[name] = sum(name in b.kernels for b in series.runs)
        point.elsewhere = by_config.get(run.key["config_hash"], 0) - series.total
        points.append(point)
    return GateResult(points, history.root, options, list(skipped or []), source)


def gate_run_dir(run_dir: str | Path, history_dir: str | Path, options: GateOptions) -> GateResult:
    """``xpuprof gate RUN_DIR --history DIR``: every point of the run directory against its series."""
    from .run_records import records_from_run_dir

    options.check()
    history = History(history_dir)
    history.check_readable()
    got = records_from_run_dir(run_dir, source="gate --accept")
    return gate_runs(got.runs, history, options, source=str(run_dir), skipped=got.skipped)


def accept(result: GateResult, *, policy: str = "passed", keep: int = DEFAULT_KEEP) -> list[Path]:
    """Append the gated runs to their series: every point (``always``) or the points without a regression
    (``passed``); returns the files written (also kept in ``result.accepted``)."""
    if policy not in ACCEPT_POLICIES:
        raise ValueError(f"--accept {policy!r} is not known; valid: {', '.join(ACCEPT_POLICIES)}")
    history = History(result.history)
    written = [history.append(p.whole or p.run, keep=keep) for p in result.points
               if policy == "always" or not p.regressed]
    result.accepted.extend(written)
    return written
