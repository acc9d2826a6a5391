"""The gate's verdicts as text: a heading per point (what was compared with what, whether the machine
itself moved), one line per kernel (baseline median +- run-to-run spread, new median, effect +- noise,
confidence), what was not compared and why, and a last line with the counts and the exit status."""
from __future__ import annotations

import io

from .gate import GateResult, PointGate
from .gate_probe import UNTESTED
from .gate_rule import Verdict
from .summary import format_ns

_ORDER = {"regressed": 0, "improved": 1, "inconclusive": 2, "unmatched": 3, "new": 4, "unchanged": 5}


def _pct(v: float | None, sign: bool = True) -> str:
    return "-" if v is None else (f"{v:+.2f}%" if sign else f"{v:.2f}%")


def confidence_text(v: Verdict, max_regression_pct: float) -> str:
    if v.verdict == "regressed":
        return f"{100 * v.confidence:.2f}% slower"
    if v.verdict == "improved":
        return f"{100 * v.confidence:.2f}% faster"
    if v.verdict == "unchanged":
        return f"{100 * v.confidence:.1f}% within +-{max_regression_pct:g}%"
    return v.reason.split(": ", 1)[-1] if v.reason.startswith(("inconclusive", "new", "unmatched")) else v.reason


def point_heading(p: PointGate, result: GateResult) -> list[str]:
    o = result.options
    run = p.run
    lines = [f"point {p.label!r}: series {run.series} ({run.key['device']}, machine {run.key['machine']}); "
             f"baseline: the newest {len(p.baseline)} of {p.total_runs} run(s)"
             + (f", {p.baseline[0].date} to {p.baseline[-1].date}" if p.baseline else "")]
    if p.rule.tests:
        share = f" (this point's share of {o.alarm_rate_pct:g}%)" if len(result.points) > 1 else ""
        lines.append(f"max regression {o.max_regression_pct:g}% (flagged from {o.max_regression_pct / 2:g}% when "
                     f"significant); false-alarm rate {100 * p.rule.alarm_rate:.3g}%{share} over {p.rule.tests} "
                     f"test(s): p < {p.rule.alpha_per_side:.2g} each")
    for f in p.rule.factors:
        lines.append(f"{f.name}: {_pct(f.raw_effect_pct)} against the baseline runs (their own run-to-run spread "
                     f"{_pct(f.spread_pct, False)}); removed from each kernel's effect")
    if p.machine is not None and p.machine.status not in UNTESTED:  # a check not made: said once, below
        lines.append(p.machine.summary())
    return lines


def machine_notes(result: GateResult) -> list[str]:
    """Each distinct reason the machine probe could not be used, once, with the points it concerns."""
    notes: dict[str, list[str]] = {}
    for p in result.points:
        if p.machine is not None and p.machine.status in UNTESTED:
            notes.setdefault(p.machine.note, []).append(p.label)
    return [f"machine probe not used for {', '.join(repr(x) for x in labels) if len(result.points) > 1 else 'this run'}"
            f": {note}" for note, labels in notes.items()]


def render(result: GateResult, *, show_all: bool = True) -> str:
    """The whole result as text (``xpuprof gate``'s table format)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=False, highlight=False)
    console.print(f"xpuprof gate: {result.source or 'run'} against the history in {result.history}", markup=False)
    for p in result.points:
        for line in point_heading(p, result):
            console.print(line, markup=False)
        rows = sorted(p.rule.all, key=lambda v: (_ORDER.get(v.verdict, 9), v.name))
        if not show_all:
            rows = [v for v in rows if v.verdict != "unchanged"]
        t = Table(title_justify="left")
        for col in ("Kernel / range", "Verdict", "Baseline (median +- run spread)", "New median", "Effect (+- noise)",
                    "Confidence", "Runs"):
            t.add_column(col, justify="right" if col in ("New median", "Runs") else "left", overflow="fold")
        for v in rows:
            medians = [b.kernels[v.name].stats.median_ns for b in p.baseline if v.name in b.kernels]
            base = (f"{format_ns(sorted(medians)[len(medians) // 2])} +- {_pct(v.spread_pct, False)}"
                    if medians and v.spread_pct is not None else "-")
            effect = f"{_pct(v.effect_pct)} +- {_pct(v.noise_pct, False)}" if v.effect_pct is not None else "-"
            t.add_row(escape(v.name), v.verdict, base, format_ns(v.new_ns) if v.new_ns else "-", effect,
                      escape(confidence_text(v, result.options.max_regression_pct)), str(v.runs))
        console.print(t)
        for name, runs in p.missing.items():
            console.print(f"not in this run: {name} (in {runs} of {len(p.baseline)} baseline runs)", markup=False)
        if p.elsewhere > 0:
            console.print(f"note: the history holds {p.elsewhere} more run(s) of this config on other machines or "
                          "devices; not compared (their timings are not this machine's)", markup=False)
        for line in p.skipped_files:
            console.print(f"history: {line}", markup=False)
    for line in result.skipped:
        console.print(f"not gated: {line}", markup=False)
    for line in machine_notes(result):
        console.print(line, markup=False)
    console.print(summary_line(result), markup=False)
    return console.export_text()


def summary_line(result: GateResult) -> str:
    counts = ", ".join(f"{result.count(v)} {v}" for v in ("regressed", "improved", "unchanged", "inconclusive"))
    new = sum(len(p.new) for p in result.points)
    status = result.exit_status
    explained = sum(len(p.machine.explained) for p in result.points if p.machine is not None)
    tail = "a regression: exit 1" if status else ("nothing regressed: exit 0" + (
        " (inconclusive verdicts are not failures: the noise was larger than the effect asked for, the "
        "history too short" + (", or the machine itself ran at another speed" if explained else "") + ")"
        if result.count("inconclusive") else ""))
    accepted = f"; accepted into the history: {len(result.accepted)} run(s)" if result.accepted else ""
    return f"gate: {counts}, {new} new or unmatched; {tail}{accepted}"


def explanation(result: GateResult) -> str:
    """The failing lines of a result, for a pytest failure message: the regressed kernels with their numbers."""
    lines = []
    for p in result.points:
        for v in p.rule.regressed:
            lines.append(f"{v.name}: regressed {_pct(v.effect_pct)} +- {_pct(v.noise_pct, False)} "
                         f"({confidence_text(v, result.options.max_regression_pct)}; {len(p.baseline)} baseline runs)")
    return "\n".join(lines)
