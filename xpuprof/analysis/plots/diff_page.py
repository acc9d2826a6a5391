"""``xpuprof diff A B --format html``: what changed, to look at.

- each matched kernel's change in time, B against A, as a bar left (faster) or right (slower) of zero,
  coloured by its verdict, the threshold dashed on both sides (kernels matched across problem sizes are
  shown in their own colour: never a regression);
- per metric, each kernel's change in the metric's unit;
- telemetry: each series of both runs over time on one chart (traces), or the change of its average
  (report JSON, which holds no samples);
- EU stall reasons whose share of a kernel's samples changed;
- the tables ``diff`` prints, with the same labels and formats."""
from __future__ import annotations

from typing import Sequence

from ..text import format_ns, format_value
from .bars import signed_bars
from .svg import DASHED, PALETTE  # noqa: F401 - DASHED: the threshold's key

STATUS_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "same": "#9a9a9a", "params": "#9467bd"}
STATUS_WORDS = {"regression": "slower beyond the threshold", "improvement": "faster beyond the threshold",
                "same": "within the threshold", "params": "parameters changed (not compared)"}
MAX_METRICS = 8
A_COLOR, B_COLOR = PALETTE[0], PALETTE[1]


def _esc(text) -> str:
    from .page import _esc as esc

    return esc(text)


def _h2(text: str) -> str:
    return f"<h2>{_esc(text)}</h2>"


def time_changes(result) -> list[str]:
    rows = [r for r in result.rows if r.delta_pct is not None]
    if not rows:
        return []
    rows.sort(key=lambda r: -(r.delta_pct or 0.0))
    labels = [r.name if not r.b_name else f"{r.name} -> {r.b_name}" for r in rows]
    notes = [f"{r.delta_pct:+.1f} % ({format_ns(r.a_ns)} -> {format_ns(r.b_ns)})" for r in rows]
    titles = [f"{label}: {STATUS_WORDS.get(r.status, r.status)}; {result.field} {format_ns(r.a_ns)} -> "
              f"{format_ns(r.b_ns)} ({r.delta_pct:+.2f} %), calls {r.a_calls:,} -> {r.b_calls:,}"
              + (f"; {r.note}" if r.note else "") for label, r in zip(labels, rows)]
    present = list(dict.fromkeys(r.status for r in rows))
    key = [(STATUS_WORDS.get(s, s), STATUS_COLORS.get(s, PALETTE[9])) for s in present]
    return [_h2(f"Kernel {result.field} time: B against A"),
            signed_bars(labels, [r.delta_pct for r in rows], [STATUS_COLORS.get(r.status, PALETTE[9]) for r in rows],
                        unit="%", chart_id="time-change", what=f"change of each kernel's {result.field} time, B vs A",
                        notes=notes, titles=titles, key=key,
                        marks=[(result.threshold_pct, f"the threshold, +-{result.threshold_pct:g} %")])]


def metric_changes(result, units: dict[str, str]) -> list[str]:
    metrics = list(dict.fromkeys(m for r in result.rows for m in r.metrics))
    out = []
    for i, m in enumerate(metrics[:MAX_METRICS]):
        unit = units.get(m, "")
        rows = [(r, *r.metrics[m]) for r in result.rows if m in r.metrics]
        rows = [(r, a, b) for r, a, b in rows if a is not None and b is not None]
        if not rows:
            continue
        rows.sort(key=lambda x: -(x[2] - x[1]))
        labels = [r.name for r, _, _ in rows]
        deltas = [b - a for _, a, b in rows]
        notes = [f"{format_value(a, unit)} -> {format_value(b, unit)}" for _, a, b in rows]
        colors = [STATUS_COLORS["regression"] if d > 0 else STATUS_COLORS["improvement"] if d < 0 else
                  STATUS_COLORS["same"] for d in deltas]
        label = f"{m} [{unit}]" if unit else m
        out += [_h2(f"{label}: B against A per kernel"),
                signed_bars(labels, deltas, colors, unit=unit, chart_id=f"metric-change-{i}",
                            what=f"change of {label} per kernel, B - A", notes=notes,
                            key=[("higher in B", STATUS_COLORS["regression"]), ("lower in B", STATUS_COLORS["improvement"])])]
    return out


ROWS_AS_LINES = 3  # rows of one side drawn each; more: the mean of that side's rows


def _side_lines(side: str, color: str, members: list) -> list:
    from .lines import Line, pooled_mean

    if len(members) <= ROWS_AS_LINES:
        return [Line(f"{side} [{t.pid}]" if len(members) > 1 else side, color, t.ts_ms, t.values) for t in members]
    x, y = pooled_mean([t.ts_ms for t in members], [t.values for t in members])
    return [Line(f"{side}: mean of {len(members)} rows", color, x, y)]


def telemetry_changes(rows: list[dict], series_a: dict, series_b: dict, units: dict[str, str]) -> list[str]:
    """Per (track, metric) both runs' samples over time (``series_*``: key -> TelemetrySeries, read from
    traces; a side of many rows as their mean), else the change of each series' average."""
    import numpy as np

    from .lines import series_chart

    if not rows:
        return []
    groups: dict[tuple, tuple[list, list]] = {}
    for side, series in ((0, series_a), (1, series_b)):
        for t in series.values():
            groups.setdefault((t.track, t.metric, t.unit), ([], []))[side].append(t)
    figures = []
    for i, ((track, metric, unit), (a, b)) in enumerate(groups.items()):
        lines = _side_lines("A", A_COLOR, a) + _side_lines("B", B_COLOR, b)
        what = f"{track} {metric}" + (f" [{unit}]" if unit else "")

        def stats(members):
            if not members:
                return None, None
            v = np.concatenate([t.values for t in members])
            return float(v.mean()), float(v.max())

        (am, ap), (bm, bp) = stats(a), stats(b)
        change = f" ({100 * (bm - am) / am:+.1f} %)" if am and bm is not None else ""
        caption = (f"{what}: average {format_value(am, unit)} -> {format_value(bm, unit)}{change}, peak "
                   f"{format_value(ap, unit)} -> {format_value(bp, unit)}")
        figures.append(f'<figure class="telemetry"><figcaption>{_esc(caption)}</figcaption>'
                       f'{series_chart(lines, unit=unit, chart_id=f"telemetry-{i}", what=what)}</figure>')
    out = [_h2("Telemetry: A and B over time"), f'<div class="figures">{"".join(figures)}</div>'] if figures else []
    drawn = set(series_a) | set(series_b)
    averages = [r for r in rows if r["series"] not in drawn and r["mean_delta_pct"] is not None]
    if averages:
        out += [_h2("Telemetry: change of each series' average, B vs A"),
                signed_bars([r["series"] for r in averages], [r["mean_delta_pct"] for r in averages],
                            [PALETTE[0]] * len(averages), unit="%", chart_id="telemetry-change",
                            what="change of the average, B vs A",
                            notes=[f"{r['mean_delta_pct']:+.1f} %" for r in averages])]
    return out


def stall_changes(rows: list[dict], threshold: float) -> list[str]:
    changed = [r for r in rows if r["status"] != "same"] or rows
    changed = [r for r in changed if r.get("delta_points") is not None]
    if not changed:
        return []
    changed.sort(key=lambda r: -r["delta_points"])
    return [_h2("EU stall reasons: change of their share of each kernel's samples"),
            signed_bars([f"{r['kernel']}: {r['reason']}" for r in changed], [r["delta_points"] for r in changed],
                        [STATUS_COLORS["regression"] if r["status"] == "grew" else STATUS_COLORS["same"]
                         for r in changed], unit="points", chart_id="stall-change",
                        what="change of the share of samples, B - A (points)",
                        notes=[f"{r['a_pct']:.1f} % -> {r['b_pct']:.1f} %" for r in changed],
                        marks=[(threshold, f"the threshold, +-{threshold:g} points")])]


def render(result, *, a: str, b: str, units: dict[str, str], telemetry: list[dict], series_a: dict,
           series_b: dict, stalls: list[dict], tables: Sequence[tuple[str, str]], notes: Sequence[str]) -> str:
    """The page; ``tables``: (heading, HTML table) of what the text output prints, in its order."""
    from .page import _page

    title = "xpuprof diff: B against A"
    meta = (f"A: {a}; B: {b}. {result.field} time per kernel, threshold {result.threshold_pct:g} %: "
            f"{len(result.regressions)} regression(s).")
    sections = [f"<h1>{_esc(title)}</h1>", f'<p class="meta">{_esc(meta)}</p>',
                *(f'<p class="meta">{_esc(n)}</p>' for n in notes)]
    sections += time_changes(result)
    sections += metric_changes(result, units)
    sections += telemetry_changes(telemetry, series_a, series_b, units)
    sections += stall_changes(stalls, result.threshold_pct)
    for heading, table in tables:
        sections += [_h2(heading), table]
    return _page(title, sections)
