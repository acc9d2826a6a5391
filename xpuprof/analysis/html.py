"""Self-contained HTML report (``xpuprof report --format html``): the timeline of the first trace's steps,
time per name as bars, the per-name table, per-kernel distributions of each metric, telemetry over time
with its axes and extremes, the kernels' resources and the per-rank view; or the operator table (``--by
op``). Every chart is inline SVG from ``analysis.plots`` (nothing fetched at view time).

A short inline script records each chart's laid-out size and any text outside it into ``data-rendered`` /
``data-clipped`` attributes, so a headless browser's ``--dump-dom`` shows that the charts were drawn whole.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .plots.page import _esc, _page  # noqa: F401 - the page every HTML output shares (history_html uses it)
from .plots.svg import CHAR_W, PALETTE  # noqa: F401 - CHAR_W: the history plots' text measure
from .report import NameStat, Report
from .tables import AVG, CALLS, MAX, MIN, SELF, SELF_PCT, TOTAL, metric_label
from .text import format_count, format_ns, format_percent, format_value

BAR_COLOR = PALETTE[0]
KERNELS_PER_DISTRIBUTION = 8  # kernels drawn in one metric's distribution chart (the busiest)
TIMELINES = 1  # traces whose timeline a report draws (the first; `report TRACE` shows another)
def bar_chart(labels: Sequence[str], values: Sequence[float], notes: Sequence[str], *, what: str,
              chart_id: str = "time-per-kernel") -> str:
    """Horizontal bars, one per label: ``values`` (ns) as bar lengths, ``notes`` in a column at their right."""
    from .plots.bars import Part, stacked_bars

    return stacked_bars(list(labels), [Part(what, BAR_COLOR, list(values))], unit="ns", chart_id=chart_id, what=what,
                        notes=list(notes))


def metric_distributions(report: Report) -> list[str]:
    """Per metric, its values' distribution per kernel (the busiest ``KERNELS_PER_DISTRIBUTION`` of those that
    have it, in the table's order), one line each with a legend."""
    from .plots.lines import distribution_chart
    from .summary import unique_inverse

    table = report.table
    if not table.metrics or not len(table):
        return []
    names, codes = unique_inverse(table.name)
    index = {str(n): i for i, n in enumerate(names.tolist())}
    order = list(dict.fromkeys(index[s.name] for s in report.stats if s.name in index))
    out = []
    for i, (metric, column) in enumerate(table.metrics.items()):
        unit = table.units.get(metric, "")
        ok = np.isfinite(column)
        having = [k for k in order if ok[codes == k].any()]
        groups = [(str(names[k]), column[(codes == k) & ok], PALETTE[j % len(PALETTE)])
                  for j, k in enumerate(having[:KERNELS_PER_DISTRIBUTION])]
        label = f"{metric} [{unit or 'no unit'}]"
        what = f"{label} per kernel instance: share of each kernel's calls"
        out += [f"<h2>Distribution of {_esc(label)} per kernel</h2>",
                distribution_chart(groups, unit=unit, chart_id=f"metric-{i}", what=what,
                                   more=max(len(having) - KERNELS_PER_DISTRIBUTION, 0))]
    return out


def telemetry_section(series_list) -> list[str]:
    """Telemetry: a chart per (track, metric), a line per device row, with time and value axes and the
    extremes marked; the caption says the average, minimum and maximum."""
    from .plots.lines import Line, series_chart

    groups: dict[tuple, list] = {}
    for t in series_list:
        groups.setdefault((t.track, t.metric, t.unit), []).append(t)
    figures = []
    for i, ((track, metric, unit), members) in enumerate(groups.items()):
        values = np.concatenate([t.values for t in members])
        lines = [Line(f"{t.track} [{t.pid}]", PALETTE[j % len(PALETTE)], t.ts_ms, t.values)
                 for j, t in enumerate(members)]
        what = f"{track} {metric}" + (f" [{unit}]" if unit else "")
        rows = f"{len(members)} rows, " if len(members) > 1 else f"[{members[0].pid}], "
        caption = (f"{what}: {rows}{len(values):,} samples; avg {format_value(float(values.mean()), unit)}, "
                   f"min {format_value(float(values.min()), unit)}, max {format_value(float(values.max()), unit)}")
        figures.append(f'<figure class="telemetry"><figcaption>{_esc(caption)}</figcaption>'
                       f'{series_chart(lines, unit=unit, chart_id=f"telemetry-{i}", what=what)}</figure>')
    return ["<h2>Telemetry</h2>", f'<div id="telemetry" class="figures">{"".join(figures)}</div>'] if figures else []


def timeline_section(report: Report) -> list[str]:
    """The first trace's steps and busy time per kind of work (``analysis.step_timeline``)."""
    from .plots.timeline import timeline_chart
    from .step_timeline import step_timeline

    table = getattr(report, "trace_table", None)
    if table is None or not len(table.traces):
        return []
    tl = step_timeline(table, 0)
    if tl is None or not tl.span_ns:
        return []
    which = f"rank {tl.rank}" if tl.rank is not None else tl.source
    others = len(table.traces) - TIMELINES
    note = (f"{which}: {len(tl.step_names):,} steps over {format_ns(tl.span_ns)}; hover a step for its time and "
            "what each kind of work took of it" + (f". {others:,} more trace(s) in this report: "
                                                  "`xpuprof report TRACE --format html` shows one" if others > 0 else ""))
    return ["<h2>Timeline</h2>", f'<p class="meta">{_esc(note)}</p>', timeline_chart(tl)]


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
    return f'<div class="scroll"><table id="{_esc(table_id)}">' + "".join(out) + "</table></div>"


def columns_table(columns, cells: Sequence[Sequence[str]], table_id: str) -> str:
    """A table the text renderer would print (``text.Column`` headers, cells as formatted), as HTML: text
    columns aligned left, numbers right, every cell whole."""
    head = [(c.header, "text" if c.align == "left" else "") for c in columns]
    return _table(head, cells, table_id)


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
    from .plots.analyses import figures

    return ["<h2>Ranks: what they wait for</h2>", head, *notes, *figures(result),
            f'<div class="scroll">{result.html_table("stragglers")}</div>']


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
    sections += timeline_section(report)
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
    sections += metric_distributions(report)
    sections += telemetry_section(report.telemetry)
    if report.resources:
        from .resources import COLUMNS as RESOURCES

        head = [("Kernel", "name")] + [(f"{label} [{unit}]" if unit else label, "") for _k, label, unit, _m in RESOURCES]
        rows = [[r["kernel"], *[str(r.get(k, "")) for k, *_ in RESOURCES]] for r in report.resources]
        sections += ["<h2>Kernel resources</h2>", _table(head, rows, "kernel-resources")]
    if ranks is not None:
        sections += ranks_section(ranks)
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
