"""Self-contained HTML report: the per-name table, a time-per-name bar chart and one histogram per
metric (``xpuprof report --format html``), or the operator table (``--by op``), all inline SVG (no
scripts or styles fetched at view time).

Charts are laid out for their text: labels use a monospace font whose advance is known
(``CHAR_W`` per character), names are elided in the middle to a fixed budget, and the chart is as
wide as its labels need, so nothing is clipped. Values carry their units (``text.format_value``).
A short inline script records each chart's laid-out size and any text outside it into
``data-rendered`` / ``data-clipped`` attributes, so a headless browser's ``--dump-dom`` shows
that the charts were drawn whole.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np

from .report import NameStat, Report
from .tables import AVG, CALLS, MAX, MIN, SELF, SELF_PCT, TOTAL, metric_label
from .text import elide_middle, format_count, format_ns, format_percent, format_value

BAR_COLOR = "#2f6fde"
HIST_COLOR = "#e07b39"
FONT_PX = 11
CHAR_W = 0.62 * FONT_PX  # a monospace advance is 0.6em; a little slack for font differences
NAME_CHARS = 56  # bar labels longer than this are elided in the middle (the table has the whole name)
_CSS = f"""
body{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f}}
h1{{font-size:20px}}h2{{font-size:16px;margin-top:28px}}
table{{border-collapse:collapse;font-size:13px}}th,td{{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}}
th{{background:#f3f3f3}}td.name,th.name{{text-align:left;max-width:520px;overflow-wrap:anywhere}}
.chart text{{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:{FONT_PX}px;fill:#333}}
.chart .axis{{fill:#666}}.meta{{color:#666;font-size:12px}}
"""
_SCRIPT = """
window.addEventListener('load',function(){
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var widths=[];svg.querySelectorAll('rect.bar').forEach(function(r){widths.push(r.getBBox().width.toFixed(1));});
    var box=svg.getBoundingClientRect(), view=svg.viewBox.baseVal, clipped=0;
    svg.querySelectorAll('text').forEach(function(t){var b=t.getBBox();
      if(b.x<view.x-0.5||b.y<view.y-0.5||b.x+b.width>view.x+view.width+0.5||b.y+b.height>view.y+view.height+0.5)clipped++;});
    svg.setAttribute('data-rendered', Math.round(box.width)+'x'+Math.round(box.height)+':'+widths.join(','));
    svg.setAttribute('data-clipped', String(clipped));
  });
  document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart[data-rendered]').length));
});
"""


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _text_w(text: str) -> float:
    return len(text) * CHAR_W


def bar_chart(labels: Sequence[str], values: Sequence[float], notes: Sequence[str], *, what: str,
              min_width: int = 860, row: int = 20, chart_id: str = "time-per-kernel") -> str:
    """Horizontal bars, one per label: ``values`` (ns) as bar lengths, ``notes`` printed after each bar."""
    shown = [elide_middle(str(n), NAME_CHARS) for n in labels]
    label_w = max([_text_w(s) for s in shown] + [40.0]) + 12
    note_w = max([_text_w(s) for s in notes] + [0.0]) + 10
    plot_w = max(240.0, min_width - label_w - note_w)
    width = int(label_w + plot_w + note_w + 4)
    height = row * len(labels) + 52
    peak = max(values, default=1) or 1
    parts = [f'<svg class="chart" id="{_esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(what)}">']
    for i, (name, label, value, note) in enumerate(zip(labels, shown, values, notes)):
        y = 10 + i * row
        w = max(1.0, plot_w * value / peak)
        parts.append(f'<text x="{label_w - 6:.1f}" y="{y + row * 0.65:.1f}" text-anchor="end">{_esc(label)}'
                     f'<title>{_esc(name)}</title></text>')
        parts.append(f'<rect class="bar" x="{label_w:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" '
                     f'fill="{BAR_COLOR}"><title>{_esc(name)}: {_esc(note)}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + row * 0.65:.1f}">{_esc(note)}</text>')
    axis_y = 10 + len(labels) * row + 4
    parts.append(f'<line x1="{label_w:.1f}" y1="{axis_y}" x2="{label_w + plot_w:.1f}" y2="{axis_y}" stroke="#888"/>')
    parts.append(f'<text class="axis" x="{label_w:.1f}" y="{axis_y + 14}">0</text>')
    parts.append(f'<text class="axis" x="{label_w + plot_w:.1f}" y="{axis_y + 14}" text-anchor="end">'
                 f'{_esc(format_ns(peak))}</text>')
    parts.append(f'<text class="axis" x="{label_w + plot_w / 2:.1f}" y="{axis_y + 28}" text-anchor="middle">'
                 f'{_esc(what)}</text></svg>')
    return "".join(parts)


def histogram(values: np.ndarray, *, title: str, unit: str = "", bins: int = 20, width: int = 460,
              height: int = 200, chart_id: str = "") -> str:
    """Distribution of one metric over kernel instances: x in the metric's unit, y in kernels."""
    values = values[np.isfinite(values)]
    counts, edges = np.histogram(values, bins=bins) if len(values) else (np.zeros(bins, int), np.linspace(0, 1, bins + 1))
    peak = int(counts.max()) or 1
    left = _text_w(f"{peak:,}") + 14
    bottom, top_pad, right = 44, 10, 10 + _text_w(format_value(float(edges[-1]), unit)) / 2
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    bw = plot_w / bins
    parts = [f'<svg class="chart" id="{_esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}">']
    for i, c in enumerate(counts.tolist()):
        h = plot_h * c / peak
        lo, hi = format_value(float(edges[i]), unit), format_value(float(edges[i + 1]), unit)
        parts.append(f'<rect class="bar" x="{left + i * bw:.1f}" y="{top_pad + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{HIST_COLOR}"><title>{_esc(lo)} to {_esc(hi)}: {c:,} kernels</title></rect>')
    base = top_pad + plot_h
    parts.append(f'<line x1="{left:.1f}" y1="{base}" x2="{left + plot_w:.1f}" y2="{base}" stroke="#888"/>')
    parts.append(f'<text class="axis" x="{left:.1f}" y="{base + 14}" text-anchor="middle">'
                 f'{_esc(format_value(float(edges[0]), unit))}</text>')
    parts.append(f'<text class="axis" x="{left + plot_w:.1f}" y="{base + 14}" text-anchor="middle">'
                 f'{_esc(format_value(float(edges[-1]), unit))}</text>')
    parts.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{base + 32}" text-anchor="middle">'
                 f'{_esc(title)}{_esc(f" [{unit}]" if unit else "")}</text>')
    parts.append(f'<text class="axis" x="{left - 6:.1f}" y="{top_pad + 10}" text-anchor="end">{peak:,}</text>')
    parts.append(f'<text class="axis" x="{left - 6:.1f}" y="{base}" text-anchor="end">0</text>')
    parts.append(f'<text class="axis" x="{left + 4:.1f}" y="{top_pad + 10}">kernels</text></svg>')
    return "".join(parts)


def _table(head: Sequence[tuple[str, str]], rows: Sequence[Sequence], table_id: str) -> str:
    """``head``: (label, class); a row cell is text, or (text, title) shown with its exact value on hover."""
    out = ["<tr>" + "".join(f'<th class="{c}">{_esc(h)}</th>' for h, c in head) + "</tr>"]
    for row in rows:
        tds = []
        for (_, cls), cell in zip(head, row):
            text, hover = cell if isinstance(cell, tuple) else (cell, None)
            title = f' title="{_esc(hover)}"' if hover is not None else ""
            tds.append(f'<td class="{cls}"{title}>{_esc(text)}</td>')
        out.append(f"<tr>{''.join(tds)}</tr>")
    return f'<table id="{_esc(table_id)}">' + "".join(out) + "</table>"


def kernel_table(report: Report) -> str:
    """The per-name table with the label set of the text report (``analysis.tables``): every time with its
    unit in the cell, a metric's unit in its cells (the exact value on hover)."""
    metrics = report.metric_names
    by_rank = any(s.rank is not None for s in report.stats)
    units = report.table.units
    head = ([("Rank", "")] if by_rank else []) + [("Name", "name"), (CALLS, "")]
    head += [(h, "") for h in ((SELF, SELF_PCT, TOTAL) if report.nests else (SELF_PCT, TOTAL))]
    head += [(AVG, ""), (MIN, ""), (MAX, "")]
    head += [(metric_label(m, units.get(m, "")), "") for m in metrics]
    from .intervals import COLUMNS as INTERVALS

    intervals = INTERVALS if report.intervals else ()
    head += [(label, "") for _k, label, *_ in intervals]
    rows = []
    for s in report.stats:
        cells = ([str(s.rank)] if by_rank else []) + [s.name, format_count(s.calls)]
        cells += ([format_ns(s.self_ns or 0), format_percent(s.pct), format_ns(s.total_ns)] if report.nests
                  else [format_percent(s.pct), format_ns(s.total_ns)])
        cells += [format_ns(s.avg_ns), format_ns(s.min_ns), format_ns(s.max_ns)]
        cells += [(format_value(s.metrics[m], units.get(m, "")), f"{s.metrics[m]!r}") if m in s.metrics else ""
                  for m in metrics]
        iv = report.interval_of(s)
        cells += [format_ns(iv[k]) if k in iv else "" for k, *_ in intervals]
        rows.append(cells)
    return _table(head, rows, "kernels")


def ranks_section(result) -> list[str]:
    """The per-rank view of a multi-rank report: what each rank waits against the others (or its step
    time, without collectives), the steps they waited for it, and the stragglers table."""
    if not result.rows:
        return ["<h2>Ranks</h2>"] + [f'<p class="meta">{_esc(n)}</p>' for n in result.notes]
    flagged = [r["rank"] for r in result.rows if r["straggler"]]
    head = (f'<p class="meta">{len(result.rows)} ranks; stragglers: {_esc(", ".join(map(str, flagged)) or "none")}. '
            "Red: the ranks the others wait for, and the steps they waited.</p>")
    notes = [f'<p class="meta">{_esc(n)}</p>' for n in result.notes]
    return ["<h2>Ranks: what they wait for</h2>", head, *notes, result.html_figure(),
            result.html_table("stragglers")]


def _page(title: str, sections: list[str]) -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
            + "".join(sections) + f"<script>{_SCRIPT}</script></body></html>")


def render(report: Report, *, title: str | None = None, ranks=None, extra_sections: Sequence[str] = ()) -> str:
    """The whole report as one HTML string; ``ranks``: a stragglers result (a store's per-rank view);
    ``extra_sections``: more of the page, last (``report --history``'s plots: analysis.history_html)."""
    title = title or f"xpuprof report: {report.title}"
    covered = (f"{_esc(format_ns(report.total_ns))} covered (self time: nested rows are not counted twice)"
               if report.nests else f"{_esc(format_ns(report.total_ns))} total")
    sections = [f"<h1>{_esc(title)}</h1>",
                f'<p class="meta">{len(report.sources)} trace(s)'
                + (f", ranks {', '.join(map(str, report.ranks))}" if report.ranks else "")
                + f", {len(report.table):,} rows, {covered}. Sources: "
                + ", ".join(_esc(s) for s in report.sources) + "</p>"]
    noun = report.title.lower()
    if report.stats:
        stats: list[NameStat] = report.stats
        values = [float(s.self_ns if report.nests and s.self_ns is not None else s.total_ns) for s in stats]
        what = f"{'self' if report.nests else 'total'} time per name"
        notes = [f"{format_ns(v)} ({s.pct:.1f}%)" for v, s in zip(values, stats)]
        sections += [f"<h2>{_esc(report.title)}: {'self' if report.nests else 'total'} time</h2>",
                     bar_chart([s.name for s in stats], values, notes, what=what),
                     f"<h2>{_esc(report.title)}</h2>", kernel_table(report)]
    else:
        sections.append(f"<p>No {_esc(noun)} matched.</p>")
    if report.telemetry:
        from .telemetry import sparkline

        cells = "".join(
            f'<figure class="telemetry"><figcaption>{_esc(t.key)}: avg {_esc(format_value(t.mean, t.unit))}, '
            f'peak {_esc(format_value(t.peak, t.unit))} ({len(t.values)} samples)</figcaption>{sparkline(t)}</figure>'
            for t in report.telemetry)
        sections += ["<h2>Telemetry</h2>", f'<div id="telemetry">{cells}</div>']
    if report.resources:
        from .resources import COLUMNS as RESOURCES

        head = [("Kernel", "name")] + [(f"{label} [{unit}]" if unit else label, "") for _k, label, unit, _m in RESOURCES]
        rows = [[r["kernel"], *[str(r.get(k, "")) for k, *_ in RESOURCES]] for r in report.resources]
        sections += ["<h2>Kernel resources</h2>", _table(head, rows, "kernel-resources")]
    if ranks is not None:
        sections += ranks_section(ranks)
    for i, m in enumerate(report.table.metrics):
        unit = report.table.units.get(m, "")
        sections += [f"<h2>Distribution of {_esc(m)}{' [' + _esc(unit) + ']' if unit else ''}</h2>",
                     histogram(report.table.metrics[m], title=m, unit=unit, chart_id=f"metric-{i}")]
    return _page(title, [*sections, *extra_sections])


def render_ops(avgs, rows, *, sources: Sequence[str], title: str = "xpuprof report: operators") -> str:
    """``--by op``: self CPU time per name as bars, and torch's key_averages table (its labels and formats)."""
    from .averages_table import _format_share, _format_time

    sections = [f"<h1>{_esc(title)}</h1>",
                f'<p class="meta">{len(sources)} trace(s), {len(rows):,} names, '
                f'{sum(r.count for r in rows):,} calls. Sources: ' + ", ".join(_esc(s) for s in sources) + "</p>"]
    if not rows:
        sections.append("<p>No events recorded.</p>")
        return _page(title, sections)
    cpu_sum = sum(r.self_cpu_time_total for r in avgs)
    dev_sum = sum(r.self_device_time_total for r in avgs if r._on_device and not r.is_user_annotation)
    dev = (avgs._use_device or "device").upper()
    notes = [f"{_format_time(r.self_cpu_time_total)} ({_format_share(r.self_cpu_time_total, cpu_sum)})" for r in rows]
    sections += ["<h2>Self CPU time per name</h2>",
                 bar_chart([r.key for r in rows], [r.self_cpu_time_total * 1e3 for r in rows], notes,
                           chart_id="time-per-op", what="self CPU time per name"),
                 "<h2>key_averages()</h2>",
                 _table([("Name", "name"), ("Self CPU %", ""), ("Self CPU", ""), ("CPU total %", ""),
                         ("CPU total", ""), ("CPU time avg", ""), (f"Self {dev}", ""), (f"Self {dev} %", ""),
                         (f"{dev} total", ""), (f"{dev} time avg", ""), ("# of Calls", "")],
                        [[r.key, _format_share(r.self_cpu_time_total, cpu_sum), _format_time(r.self_cpu_time_total),
                          _format_share(r.cpu_time_total, cpu_sum), _format_time(r.cpu_time_total),
                          _format_time(r.cpu_time), _format_time(r.self_device_time_total),
                          _format_share(r.self_device_time_total, dev_sum), _format_time(r.device_time_total),
                          _format_time(r.device_time), str(r.count)] for r in rows],
                        "operators")]
    return _page(title, sections)
