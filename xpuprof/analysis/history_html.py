"""History plots: per kernel, its runs over time (each run's median call, with the middle half of its calls
as a whisker), the baseline band (the baseline's median +- the effect that counts) and the new run, marked
by its verdict. Inline SVG (nothing fetched at view time), for ``xpuprof gate --format html``, ``diff
--history`` and ``report RUN_DIR --history DIR --format html``; the pytest plugin writes one per gated test.
"""
from __future__ import annotations

import math

from .gate import GateResult, PointGate
from .gate_rule import Verdict
from .html import CHAR_W, _esc, _page
from .summary import format_ns

VERDICT_COLORS = {"regressed": "#d62728", "improved": "#2ca02c", "unchanged": "#2f6fde", "inconclusive": "#7f7f7f",
                  "new": "#9467bd", "unmatched": "#9467bd"}
BAND_COLOR = "#2f6fde"
RUN_COLOR = "#555555"


def history_chart(p: PointGate, v: Verdict, max_regression_pct: float, *, chart_id: str, width: int = 680,
                  height: int = 190) -> str:
    """One kernel's history (see the module docstring) as an SVG element."""
    runs = [(b.date, b.kernels[v.name].stats) for b in p.baseline if v.name in b.kernels]
    new = p.run.kernels.get(v.name)
    values = [s.median_ns for _, s in runs] + ([new.stats.median_ns] if new else [])
    lows = [s.quantiles_ns[1] if len(s.quantiles_ns) > 3 else s.median_ns for _, s in runs]
    highs = [s.quantiles_ns[3] if len(s.quantiles_ns) > 3 else s.median_ns for _, s in runs]
    if new is not None:
        q = new.stats.quantiles_ns
        lows.append(q[1] if len(q) > 3 else new.stats.median_ns)
        highs.append(q[3] if len(q) > 3 else new.stats.median_ns)
    medians = sorted(s.median_ns for _, s in runs)
    base = medians[len(medians) // 2] if medians else None
    band = (base * (1 - max_regression_pct / 100), base * (1 + max_regression_pct / 100)) if base else None
    lo = min([*lows, *(band or ())], default=0.0)
    hi = max([*highs, *(band or ())], default=1.0)
    pad = (hi - lo) * 0.08 or max(hi * 0.05, 1.0)
    lo, hi = max(lo - pad, 0.0), hi + pad
    left = max(CHAR_W * len(format_ns(hi)), CHAR_W * len(format_ns(lo))) + 12
    right, top, bottom = 16, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(values)
    step = plot_w / max(n, 1)

    def x(i: int) -> float:
        return left + step * (i + 0.5)

    def y(val: float) -> float:
        return top + plot_h * (1 - (val - lo) / (hi - lo)) if hi > lo else top + plot_h / 2

    color = VERDICT_COLORS.get(v.verdict, RUN_COLOR)
    what = f"{v.name}: {len(runs)} baseline run(s) and the new run ({v.verdict})"
    parts = [f'<svg class="chart history" id="{_esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(what)}">']
    if band is not None:
        y0, y1 = y(band[1]), y(band[0])
        parts.append(f'<rect class="band" x="{left:.1f}" y="{y0:.1f}" width="{plot_w:.1f}" height="{max(y1 - y0, 1):.1f}" '
                     f'fill="{BAND_COLOR}" fill-opacity="0.12"><title>baseline median {_esc(format_ns(base))} '
                     f'+-{max_regression_pct:g}% (the effect that counts)</title></rect>')
        parts.append(f'<line class="baseline" x1="{left:.1f}" y1="{y(base):.1f}" x2="{left + plot_w:.1f}" '
                     f'y2="{y(base):.1f}" stroke="{BAND_COLOR}" stroke-dasharray="4,3"/>')
    for i, (date, s) in enumerate(runs):
        parts.append(f'<line x1="{x(i):.1f}" y1="{y(highs[i]):.1f}" x2="{x(i):.1f}" y2="{y(lows[i]):.1f}" '
                     f'stroke="{RUN_COLOR}" stroke-opacity="0.5"/>')
        parts.append(f'<circle class="run" cx="{x(i):.1f}" cy="{y(s.median_ns):.1f}" r="3" fill="{RUN_COLOR}">'
                     f'<title>{_esc(date)}: median {_esc(format_ns(s.median_ns))}, {s.calls} calls</title></circle>')
    if new is not None:
        i = len(runs)
        parts.append(f'<line x1="{x(i):.1f}" y1="{y(highs[i]):.1f}" x2="{x(i):.1f}" y2="{y(lows[i]):.1f}" '
                     f'stroke="{color}"/>')
        effect = "" if v.effect_pct is None else f", effect {v.effect_pct:+.2f}%"
        parts.append(f'<rect class="new-run" x="{x(i) - 4.5:.1f}" y="{y(new.stats.median_ns) - 4.5:.1f}" width="9" '
                     f'height="9" fill="{color}"><title>this run: median {_esc(format_ns(new.stats.median_ns))}, '
                     f'{new.stats.calls} calls: {_esc(v.verdict)}{_esc(effect)}</title></rect>')
    base_y = top + plot_h
    parts.append(f'<line x1="{left:.1f}" y1="{base_y:.1f}" x2="{left + plot_w:.1f}" y2="{base_y:.1f}" stroke="#888"/>')
    parts.append(f'<text class="axis" x="{left - 6:.1f}" y="{top + 10:.1f}" text-anchor="end">{_esc(format_ns(hi))}</text>')
    parts.append(f'<text class="axis" x="{left - 6:.1f}" y="{base_y:.1f}" text-anchor="end">{_esc(format_ns(lo))}</text>')
    if runs:
        parts.append(f'<text class="axis" x="{left:.1f}" y="{base_y + 14:.1f}">{_esc(runs[0][0][:10])}</text>')
    parts.append(f'<text class="axis" x="{left + plot_w:.1f}" y="{base_y + 14:.1f}" text-anchor="end">this run</text>')
    parts.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{base_y + 30:.1f}" text-anchor="middle">'
                 f'median call per run (whisker: the middle half of its calls)</text></svg>')
    return "".join(parts)


def history_sections(result: GateResult) -> list[str]:
    """A heading per point and a figure per kernel (``history_chart``), ordered as the text table."""
    from .gate_text import _ORDER, confidence_text, machine_notes, point_heading

    out = ["<h2>Run history</h2>",
           f'<p class="meta">History {_esc(result.history)}; dots: the baseline runs (newest last), square: this '
           f"run, band: the baseline median +-{result.options.max_regression_pct:g}%.</p>"]
    n = 0
    for p in result.points:
        out.append(f"<h3>{_esc(p.label)}</h3>" + "".join(f'<p class="meta">{_esc(line)}</p>'
                                                          for line in point_heading(p, result)))
        for v in sorted(p.rule.all, key=lambda v: (_ORDER.get(v.verdict, 9), v.name)):
            if v.name not in p.run.kernels:
                continue  # a run factor: no calls of its own to plot
            caption = (f"{v.name}: {v.verdict}"
                       + ("" if v.effect_pct is None or not math.isfinite(v.effect_pct)
                          else f" {v.effect_pct:+.2f}% +- {v.noise_pct:.2f}%")
                       + f" ({confidence_text(v, result.options.max_regression_pct)})")
            out.append(f'<figure class="history"><figcaption>{_esc(caption)}</figcaption>'
                       f"{history_chart(p, v, result.options.max_regression_pct, chart_id=f'history-{n}')}</figure>")
            n += 1
    out.extend(f'<p class="meta">{_esc(line)}</p>' for line in machine_notes(result))
    return out


def render_gate_page(result: GateResult) -> str:
    """``xpuprof gate --format html``: the verdicts' summary and a history plot per kernel."""
    from .gate_text import summary_line

    title = f"xpuprof gate: {result.source or 'run'}"
    return _page(title, [f"<h1>{_esc(title)}</h1>", f'<p class="meta">{_esc(summary_line(result))}</p>',
                         *history_sections(result)])
