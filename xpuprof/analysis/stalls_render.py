"""``xpuprof report --stalls`` as a text table, CSV or self-contained HTML (the JSON is
``stalls.document``). Each kernel: its samples, its stall-reason mix and its hottest source lines."""
from __future__ import annotations

import csv
import html
import io

from .stalls import StallReport, top_reason

# One colour per reason (cycled), so a reason keeps its colour across kernels in the HTML bars.
PALETTE = ("#2f6fde", "#e07b39", "#3aa55d", "#c94c4c", "#8e6cc9", "#c9a13a", "#3bb3b3", "#b05c9a", "#7a7a7a",
           "#5b8c2a")


def _kernels(report: StallReport, top: int | None):
    return report.kernels[:top] if top else report.kernels


def text(report: StallReport, *, top: int | None = None, lines: int | None = 5, width: int | None = 200) -> str:
    """Two plain-text tables (``analysis.text``): each kernel's reason shares in percent, then its hottest
    source lines."""
    from .text import Column, render_table

    kernels = _kernels(report, top)
    by_rank = any(k.rank is not None for k in kernels)
    shown = [r for i, r in enumerate(report.reasons) if any(k.samples[i] for k in kernels)]
    period = ", ".join(f"{p} ns" for p in report.periods_ns if p)
    lead = [Column("Rank")] if by_rank else []
    mix = render_table(
        lead + [Column("Kernel", "left", shrink=True, min_width=24), Column("Samples")] + [Column(r) for r in shown],
        [([str(k.rank)] if by_rank else []) + [k.name, f"{k.total:,}"]
         + [f"{v:.1f}" if v else "" for r, v in zip(report.reasons, k.shares().tolist()) if r in shown]
         for k in kernels],
        title=(f"EU stall samples ({len(report.sources)} trace(s), {report.total:,} samples"
               + (f", period {period}" if period else "") + "): share of each kernel's samples, %"), width=width)
    rows = []
    for k in kernels:
        for line in k.lines[:lines]:
            reason, share = top_reason(line.samples, report.reasons)
            rows.append(([str(k.rank)] if by_rank else []) + [
                k.name, line.location, f"{line.total:,}", f"{100.0 * line.total / k.total:.1f}" if k.total else "",
                f"{reason} ({share:.0f}%)"])
    hot = render_table(lead + [Column("Kernel", "left", shrink=True, min_width=16),
                               Column("Location", "left", shrink=True, min_width=16), Column("Samples"),
                               Column("% of kernel"), Column("Top reason", "left")], rows,
                       title="Hottest source lines per kernel" + (f" (top {lines})" if lines else ""), width=width)
    return "\n".join([mix, hot, *report.notes]) + "\n"


def to_csv(report: StallReport, *, top: int | None = None, lines: int = 5) -> str:
    """Long format: one row per kernel and reason ("reason" rows), then per hot line ("line" rows)."""
    kernels = _kernels(report, top)
    by_rank = any(k.rank is not None for k in kernels)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((["rank"] if by_rank else []) + ["row", "kernel", "reason", "location", "samples", "share_pct"])
    for k in kernels:
        lead = [k.rank] if by_rank else []
        for r, (v, s) in enumerate(zip(k.samples.tolist(), k.shares().tolist())):
            if v:
                w.writerow(lead + ["reason", k.name, report.reasons[r], "", int(v), f"{s:.4f}"])
        for line in k.lines[:lines]:
            reason, _ = top_reason(line.samples, report.reasons)
            w.writerow(lead + ["line", k.name, reason, line.location, line.total,
                               f"{100.0 * line.total / k.total:.4f}" if k.total else ""])
    return buf.getvalue()


def _esc(v) -> str:
    return html.escape(str(v), quote=True)


def to_html(report: StallReport, *, top: int | None = None, lines: int = 5) -> str:
    """One page: a legend of the reasons (with PTI's descriptions), per kernel a stacked bar of its mix
    and a table of its hottest lines. Inline SVG and CSS only."""
    kernels = _kernels(report, top)
    colors = {r: PALETTE[i % len(PALETTE)] for i, r in enumerate(report.reasons)}
    legend = "".join(f'<li><span class="sw" style="background:{colors[r]}"></span>{_esc(r)}: '
                     f'{_esc(report.descriptions.get(r, ""))}</li>' for r in report.reasons)
    parts = ["<h1>EU stall samples</h1>",
             f'<p class="meta">{len(report.sources)} trace(s), {report.total} samples, {len(report.kernels)} kernels. '
             "Samples are per kernel over all its launches. Sources: " + ", ".join(_esc(s) for s in report.sources)
             + "</p>", f'<ul class="legend">{legend}</ul>']
    width = 760
    for n, k in enumerate(kernels):
        bars, x = [], 0.0
        for r, (v, s) in enumerate(zip(k.samples.tolist(), k.shares().tolist())):
            if not v:
                continue
            w = width * s / 100.0
            bars.append(f'<rect class="bar" x="{x:.1f}" y="0" width="{w:.1f}" height="22" '
                        f'fill="{colors[report.reasons[r]]}"><title>{_esc(report.reasons[r])}: {v} samples '
                        f'({s:.1f}%)</title></rect>')
            x += w
        title = (f"rank {k.rank}: " if k.rank is not None else "") + k.name
        parts.append(f'<h2>{_esc(title)} <span class="meta">{k.total} samples</span></h2>'
                     f'<svg class="chart" id="stalls-{n}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
                     f'height="22" viewBox="0 0 {width} 22" role="img" aria-label="stall mix">{"".join(bars)}</svg>')
        rows = ["<tr><th class=\"name\">Location</th><th>Samples</th><th>% of kernel</th><th class=\"name\">"
                "Top reason</th></tr>"]
        for line in k.lines[:lines]:
            reason, share = top_reason(line.samples, report.reasons)
            pct = f"{100.0 * line.total / k.total:.1f}" if k.total else ""
            rows.append(f'<tr><td class="name">{_esc(line.location)}</td><td>{line.total}</td><td>{pct}</td>'
                        f'<td class="name">{_esc(reason)} ({share:.0f}%)</td></tr>')
        parts.append('<table class="lines">' + "".join(rows) + "</table>")
    for note in report.notes:
        parts.append(f'<p class="meta">{_esc(note)}</p>')
    css = ("body{font-family:system-ui,sans-serif;margin:24px;color:#1d1d1f}h1{font-size:20px}"
           "h2{font-size:15px;margin-top:24px;overflow-wrap:anywhere}.meta{color:#666;font-size:12px}"
           "table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;"
           "text-align:right}td.name,th.name{text-align:left;overflow-wrap:anywhere;max-width:560px}"
           ".legend{list-style:none;padding:0;font-size:12px}.sw{display:inline-block;width:10px;height:10px;"
           "margin-right:6px}")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>xpuprof EU stall report</title>'
            f"<style>{css}</style></head><body>" + "".join(parts) + "</body></html>")
