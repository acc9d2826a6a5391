"""The renderers of a report, in one place: ``xpuprof report``'s table (text fitted to a width), CSV, the
versioned JSON document (``report_schema``) and HTML (``html``). The report (``report.Report``) is the model;
nothing here computes a number."""
from __future__ import annotations

import csv
import io

from ..trace.builder.columns import encode_json
from .report import Report
from .summary import format_ns

FORMATS = ("table", "csv", "json", "html")


def _by_rank(report: Report) -> bool:
    return any(s.rank is not None for s in report.stats)


def to_csv(report: Report) -> str:
    metrics = report.metric_names
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    by_rank = _by_rank(report)
    name = "kernel" if set(report.categories) <= {"kernel"} else "name"  # what the rows are
    w.writerow((["rank"] if by_rank else []) + [name, "calls", "total_ns", "self_ns", "pct", "avg_ns", "min_ns",
                                                "max_ns"]
               + [f"{m}::{report.table.units.get(m, '')}" if report.table.units.get(m) else m for m in metrics]
               + [f"{m} {stat}" for m in metrics for stat in ("min", "max")] + _interval_keys(report))
    for s in report.stats:
        w.writerow(([s.rank] if by_rank else []) + [s.name, s.calls, s.total_ns, s.self_ns, f"{s.pct:.4f}",
                                                    f"{s.avg_ns:.3f}", s.min_ns, s.max_ns]
                   + [s.metrics.get(m, "") for m in metrics]
                   + [d.get(m, "") for m in metrics for d in (s.metric_min, s.metric_max)]
                   + [report.interval_of(s).get(key, "") for key in _interval_keys(report)])
    return buf.getvalue()


def _interval_keys(report: Report) -> list[str]:
    """The submission-interval columns (unitrace -s) when the traces carry them."""
    from .intervals import COLUMNS

    return [key for key, *_ in COLUMNS] if report.intervals else []


def _title(report: Report) -> str:
    traces = f"{len(report.sources)} trace{'s' if len(report.sources) != 1 else ''}"
    ranks = f", ranks {', '.join(map(str, report.ranks))}" if report.ranks else ""
    if report.nests:
        return (f"{report.title} ({traces}{ranks}, {len(report.table):,} rows covering {format_ns(report.total_ns)}; "
                "self time leaves out the rows nested inside)")
    return f"{report.title} ({traces}{ranks}, {len(report.table):,} instances, {format_ns(report.total_ns)} total)"


def text_table(report: Report, width: int | None = None) -> str:
    """The per-name table as text: one line per name, names elided in the middle to fit ``width``."""
    from .text import Column, format_value, render_table

    metrics = report.metric_names
    by_rank = _by_rank(report)
    kernels_only = set(report.categories) <= {"kernel"}
    columns = ([Column("Rank")] if by_rank else []) + [
        Column("Kernel" if kernels_only else "Name", "left", shrink=True, min_width=24)]
    columns += [Column(h) for h in (("Calls", "Self", "Self %", "Total", "Avg", "Min", "Max") if report.nests
                                    else ("Calls", "Total", "%", "Avg", "Min", "Max"))]
    for m in metrics:
        columns += [Column(m), Column(f"{m} min"), Column(f"{m} max")]  # the values carry the unit
    intervals = _interval_keys(report)
    columns += [Column(label) for label in ("Queued", "Submit")[:len(intervals)]]
    rows = []
    for s in report.stats:
        cells = ([str(s.rank)] if by_rank else []) + [s.name, f"{s.calls:,}"]
        if report.nests:
            cells += [format_ns(s.self_ns or 0), f"{s.pct:.2f}", format_ns(s.total_ns)]
        else:
            cells += [format_ns(s.total_ns), f"{s.pct:.2f}"]
        cells += [format_ns(s.avg_ns), format_ns(s.min_ns), format_ns(s.max_ns)]
        cells += [format_value(d[m], report.table.units.get(m, "")) if m in d else ""
                  for m in metrics for d in (s.metrics, s.metric_min, s.metric_max)]
        iv = report.interval_of(s)
        cells += [format_ns(iv[k]) if k in iv else "" for k in intervals]
        rows.append(cells)
    return render_table(columns, rows, title=_title(report), width=width)


def telemetry_table(report: Report, width: int | None = None) -> str:
    from .text import Column, render_table

    columns = [Column("Track", "left", shrink=True), Column("Row"), Column("Metric", "left", shrink=True),
               Column("Samples"), Column("Mean"), Column("Peak"), Column("Min")]
    from .text import format_value

    rows = [[t.track, str(t.pid), t.metric, str(len(t.values)), *(format_value(v, t.unit) for v in (t.mean, t.peak, t.low))]
            for t in report.telemetry]
    return render_table(columns, rows, title="Telemetry (counter tracks)", width=width)


def render(report: Report, fmt: str, width: int | None = None) -> str:
    if fmt == "csv":
        return to_csv(report)
    if fmt == "json":
        return encode_json(to_dict(report)).decode() + "\n"
    if fmt == "html":
        from .html import render as render_html

        return render_html(report, ranks=report.ranks_view)
    from .text import terminal_width

    width = width or terminal_width(default=200)  # a file or a pipe: 200 columns; a terminal: its width
    text = text_table(report, width)
    if report.telemetry:
        text += "\n" + telemetry_table(report, width)
    if report.resources:
        from .resources import resources_text

        text += "\n" + resources_text(report.resources, width)
    return text


def to_dict(report: Report) -> dict:
    """The versioned JSON document (``docs/report-schema.md``)."""
    from .report_schema import report_document

    return report_document(report)
