"""Self-contained HTML report: kernel table, a time-per-kernel bar chart and one histogram per
metric, all inline SVG (no scripts or styles fetched at view time).

A short inline script records the laid-out size of each chart into ``data-rendered`` attributes
after load, so a headless browser's ``--dump-dom`` shows that the charts were really drawn.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np

from .report import KernelStat, Report
from .summary import format_ns

BAR_COLOR = "#2f6fde"
HIST_COLOR = "#e07b39"
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f3f3f3}td.name,th.name{text-align:left;max-width:520px;overflow-wrap:anywhere}
.chart text{font-size:11px;fill:#333}.meta{color:#666;font-size:12px}
"""
_SCRIPT = """
window.addEventListener('load',function(){
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var widths=[];svg.querySelectorAll('rect.bar').forEach(function(r){widths.push(r.getBBox().width.toFixed(1));});
    var box=svg.getBoundingClientRect();
    svg.setAttribute('data-rendered', Math.round(box.width)+'x'+Math.round(box.height)+':'+widths.join(','));
  });
  document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart[data-rendered]').length));
});
"""


def _esc(text) -> str:
    return html.escape(str(text), quote=True)




def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def bar_chart(stats: Sequence[KernelStat], *, width: int = 860, row: int = 20, chart_id: str = "time-per-kernel") -> str:
    """Horizontal bars: total time per kernel."""
    label_w, pad = 330, 90
    height = row * len(stats) + 30
    peak = max((s.total_ns for s in stats), default=1) or 1
    parts = [f'<svg class="chart" id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="time per kernel">']
    for i, s in enumerate(stats):
        y = 10 + i * row
        w = max(1.0, (width - label_w - pad) * s.total_ns / peak)
        parts.append(f'<text x="{label_w - 6}" y="{y + row * 0.65:.1f}" text-anchor="end">{_esc(_short(s.name))}</text>')
        parts.append(f'<rect class="bar" x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" '
                     f'fill="{BAR_COLOR}"><title>{_esc(s.name)}: {_esc(format_ns(s.total_ns))}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + row * 0.65:.1f}">{_esc(format_ns(s.total_ns))} '
                     f'({s.pct:.1f}%)</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: np.ndarray, *, title: str, bins: int = 20, width: int = 420, height: int = 180,
              chart_id: str = "") -> str:
    """Distribution of one metric over kernel instances."""
    values = values[np.isfinite(values)]
    counts, edges = np.histogram(values, bins=bins) if len(values) else (np.zeros(bins, int), np.linspace(0, 1, bins + 1))
    left, bottom, top_pad = 40, 30, 10
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    peak = counts.max() or 1
    bw = plot_w / bins
    parts = [f'<svg class="chart" id="{_esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}">']
    for i, c in enumerate(counts.tolist()):
        h = plot_h * c / peak
        parts.append(f'<rect class="bar" x="{left + i * bw:.1f}" y="{top_pad + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{HIST_COLOR}"><title>[{edges[i]:.4g}, {edges[i + 1]:.4g}): {c}</title></rect>')
    parts.append(f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - 10}" y2="{top_pad + plot_h}" stroke="#888"/>')
    parts.append(f'<text x="{left}" y="{height - 8}">{edges[0]:.4g}</text>')
    parts.append(f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{edges[-1]:.4g}</text>')
    parts.append(f'<text x="4" y="{top_pad + 10}">{peak}</text></svg>')
    return "".join(parts)


def kernel_table(report: Report) -> str:
    metrics = report.metric_names
    by_rank = any(s.rank is not None for s in report.stats)
    head = ([("Rank", "")] if by_rank else []) + [("Kernel", "name"), ("Calls", ""), ("Total", ""), ("%", ""),
                                                   ("Avg", ""), ("Min", ""), ("Max", "")]
    units = report.table.units
    head += [(f"{m} [{units[m]}]" if units.get(m) else m, "") for m in metrics]
    rows = ["<tr>" + "".join(f'<th class="{c}">{_esc(h)}</th>' for h, c in head) + "</tr>"]
    for s in report.stats:
        cells = ([str(s.rank)] if by_rank else []) + [None, str(s.calls), format_ns(s.total_ns), f"{s.pct:.2f}",
                                                      format_ns(s.avg_ns), format_ns(s.min_ns), format_ns(s.max_ns)]
        cells += [f"{s.metrics[m]:.4g}" if m in s.metrics else "" for m in metrics]
        tds = "".join(f'<td class="name">{_esc(s.name)}</td>' if c is None else f"<td>{_esc(c)}</td>" for c in cells)
        rows.append(f"<tr>{tds}</tr>")
    return '<table id="kernels">' + "".join(rows) + "</table>"


STRAGGLER_COLOR = "#d62728"


def rank_chart(rows: Sequence[dict], *, width: int = 860, row: int = 16, chart_id: str = "step-time-per-rank") -> str:
    """Horizontal bars: each rank's mean step time, stragglers in red, the median as a line."""
    label_w, pad = 70, 150
    height = row * len(rows) + 30
    peak = max((r["mean_step_us"] for r in rows), default=1.0) or 1.0
    median = float(np.median([r["mean_step_us"] for r in rows])) if rows else 0.0
    scale = (width - label_w - pad) / peak
    parts = [f'<svg class="chart" id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="step time per rank">']
    for i, r in enumerate(rows):
        y = 10 + i * row
        w = max(1.0, scale * r["mean_step_us"])
        color = STRAGGLER_COLOR if r["straggler"] else BAR_COLOR
        text = f'{format_ns(r["mean_step_us"] * 1e3)} ({r["vs_median_pct"]:+.1f}%)'
        parts.append(f'<text x="{label_w - 6}" y="{y + row * 0.7:.1f}" text-anchor="end">rank {_esc(r["rank"])}</text>')
        parts.append(f'<rect class="bar{" straggler" if r["straggler"] else ""}" x="{label_w}" y="{y + 2}" '
                     f'width="{w:.1f}" height="{row - 4}" fill="{color}"><title>rank {_esc(r["rank"])}: '
                     f'{_esc(text)}, start lag {_esc(format_ns(r["start_lag_us"] * 1e3))}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + row * 0.7:.1f}">{_esc(text)}</text>')
    x = label_w + scale * median
    parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 4}" stroke="#333" stroke-dasharray="3,3">'
                 f'<title>median rank: {_esc(format_ns(median * 1e3))}</title></line></svg>')
    return "".join(parts)


def ranks_section(result) -> list[str]:
    """The per-rank view of a store report: step time per rank and the stragglers table."""
    if not result.rows:
        return ["<h2>Ranks</h2>"] + [f'<p class="meta">{_esc(n)}</p>' for n in result.notes]
    flagged = [r["rank"] for r in result.rows if r["straggler"]]
    head = (f'<p class="meta">{len(result.rows)} ranks; stragglers: {_esc(", ".join(map(str, flagged)) or "none")}. '
            "Bars: mean ProfilerStep time per rank (red: straggler); dashed line: the median rank.</p>")
    return ["<h2>Ranks: step time and stragglers</h2>", head, rank_chart(result.rows),
            result.html_table("stragglers")]


def render(report: Report, *, title: str = "xpuprof kernel report", ranks=None) -> str:
    """The whole report as one HTML string; ``ranks``: a stragglers result (a store's per-rank view)."""
    sections = [f"<h1>{_esc(title)}</h1>",
                f'<p class="meta">{len(report.sources)} trace(s)'
                + (f", ranks {', '.join(map(str, report.ranks))}" if report.ranks else "")
                + f", {len(report.table)} kernel instances, {_esc(format_ns(report.total_ns))} total. Sources: "
                + ", ".join(_esc(s) for s in report.sources) + "</p>"]
    if report.stats:
        sections += ["<h2>Time per kernel</h2>", bar_chart(report.stats), "<h2>Kernels</h2>", kernel_table(report)]
    else:
        sections.append("<p>No kernels matched.</p>")
    if report.telemetry:
        from .telemetry import sparkline

        cells = "".join(f'<figure class="telemetry"><figcaption>{_esc(t.key)}: mean {t.mean:.4g}, peak {t.peak:.4g}'
                        f" ({len(t.values)} samples)</figcaption>{sparkline(t)}</figure>" for t in report.telemetry)
        sections += ["<h2>Telemetry</h2>", f'<div id="telemetry">{cells}</div>']
    if ranks is not None:
        sections += ranks_section(ranks)
    for i, m in enumerate(report.table.metrics):
        unit = report.table.units.get(m, "")
        sections += [f"<h2>Distribution of {_esc(m)}{' [' + _esc(unit) + ']' if unit else ''}</h2>",
                     histogram(report.table.metrics[m], title=f"{m} distribution", chart_id=f"metric-{i}")]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
            + "".join(sections) + f"<script>{_SCRIPT}</script></body></html>")
