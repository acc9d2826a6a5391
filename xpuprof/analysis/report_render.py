"""The renderers of a report, in one place: ``xpuprof report``'s table (text fitted to a width), CSV, the
versioned JSON document (``report_schema``) and HTML (``html``). The report (``report.Report``) is the model;
nothing here computes a number."""
from __future__ import annotations

import csv
import io

from .report import Report
from .text import format_ns

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
    """The per-name table as text, fitted to ``width`` (``analysis.tables``: the label set ``run`` shares)."""
    from .intervals import COLUMNS as INTERVALS
    from .tables import stats_table

    return stats_table(report.stats, units=report.table.units, nests=report.nests, title=_title(report), width=width,
                       sort_by=report.filters.get("sort") or "total",
                       intervals=[(k, label) for k, label, *_ in INTERVALS][:2] if report.intervals else None,
                       interval_of=report.interval_of)


def telemetry_table(report: Report, width: int | None = None) -> str:
    """Mean, peak and min of each telemetry series, in its unit (``[no unit]`` when the trace gives none)."""
    from .text import Column, format_count, format_value, render_table

    unitless = any(not t.unit for t in report.telemetry)
    head = " [no unit]" if unitless and not any(t.unit for t in report.telemetry) else ""
    columns = [Column("Track", "left", wrap=True, min_width=10), Column("Row"),
               Column("Metric", "left", wrap=True, min_width=10), Column("Samples"),
               Column(AVG + head), Column(PEAK + head), Column(MIN + head)]
    rows = [[t.track, str(t.pid), t.metric, format_count(len(t.values)),
             *(format_value(v, t.unit) for v in (t.mean, t.peak, t.low))] for t in report.telemetry]
    return render_table(columns, rows, title="Telemetry (counter tracks)", width=width)


AVG, PEAK, MIN = "Avg", "Peak", "Min"


def _nothing_found(report: Report) -> str:
    """One line for a report with no rows: what was looked for, and where."""
    asked = report.filters.get("categories")
    what = ", ".join(asked) if asked else "kernel, copy, fill or host range"
    where = ", ".join(report.sources) if len(report.sources) <= 3 else f"{len(report.sources)} traces"
    narrowed = [f"--{k} {v}" for k, v in (("name", report.filters.get("name")), ("start", report.filters.get("start_ms")),
                                          ("end", report.filters.get("end_ms"))) if v is not None]
    return f"no {what} events in {where}" + (f" matching {' '.join(narrowed)}" if narrowed else "") + "\n"


def render(report: Report, fmt: str, width: int | None = None) -> str:
    if fmt == "csv":
        return to_csv(report)
    if fmt == "json":
        return json_bytes(to_dict(report)).decode() + "\n"
    if fmt == "html":
        from .html import render as render_html

        return render_html(report, ranks=report.ranks_view)
    text = text_table(report, width) if report.stats else _nothing_found(report)
    if report.ranks_view is not None:
        text += "\n" + report.ranks_view.table_text(width)
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


def json_bytes(value) -> bytes:
    """``encode_json``'s bytes; plain Python values (a report from a store's summaries) without loading it
    (its module loads numpy)."""
    import orjson

    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # numpy values, or what only encode_json's fallbacks write
        from ..trace.builder.columns import encode_json

        return encode_json(value)
