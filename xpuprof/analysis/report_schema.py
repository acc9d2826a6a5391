"""``xpuprof report --format json``: one versioned document (``docs/report-schema.md``).

The document names itself (``schema``, ``version``), says what it summarizes (``title``,
``categories``, ``sources``, ``ranks``, ``filters``, ``totals``) and holds named tables. Each table
lists its columns (key, label, unit, meaning) and its rows as objects keyed by column. Other
analyses extend the one shape: a new table under ``tables``, a new column in an existing table,
a new key in ``totals``; none of that changes the version. Removing or renaming a key, or
changing what a value means, does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

SCHEMA = "xpuprof.report"
VERSION = 1
MAIN_TABLE = "by_name"


def column(key: str, label: str, unit: str = "", meaning: str = "") -> dict[str, str]:
    return {"key": key, "label": label, "unit": unit, "meaning": meaning}


def table(title: str, columns: list[dict[str, str]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A table of the document: its columns, then its rows as objects keyed by column."""
    return {"title": title, "columns": columns, "rows": rows}


def by_name_columns(report: "Report") -> list[dict[str, str]]:
    cols = []
    if any(s.rank is not None for s in report.stats):
        cols.append(column("rank", "Rank", "", "the rank the rows ran on (--by-rank)"))
    cols += [
        column("name", "Name", "", "the rows' name (every ProfilerStep#N counts as ProfilerStep#*)"),
        column("calls", "Calls", "", "how many rows have this name"),
        column("total_ns", "Total", "ns", "inclusive time: the rows' durations added up"),
        column("self_ns", "Self", "ns", "total minus the rows nested directly inside them on their thread; "
                                       "equal to total for device work"),
        column("pct", "Self %", "percent", "self time as a share of every row's self time (the shares add up to 100)"),
        column("avg_ns", "Avg", "ns", "total / calls"),
        column("min_ns", "Min", "ns", "the shortest row"),
        column("max_ns", "Max", "ns", "the longest row"),
    ]
    if report.metric_names:
        cols.append(column("metrics", "Metrics", "see units",
                           "per-kernel metric: mean over the rows that have it, by metric name"))
        cols.append(column("metric_min", "Metric min", "see units", "per-kernel metric: smallest value"))
        cols.append(column("metric_max", "Metric max", "see units", "per-kernel metric: largest value"))
    if report.intervals:
        from .intervals import COLUMNS as INTERVALS

        cols += [column(key, label, unit, meaning) for key, label, unit, meaning in INTERVALS]
    return cols


def report_document(report: "Report") -> dict[str, Any]:
    tables = {MAIN_TABLE: table(report.title, by_name_columns(report),
                                [s.to_dict() | report.interval_of(s) for s in report.stats])}
    if report.resources:
        from .resources import resources_table

        tables["kernel_resources"] = resources_table(report.resources)
    if report.telemetry:
        tables["telemetry"] = table("Telemetry (counter tracks)", [
            column("track", "Track"), column("pid", "Row"), column("metric", "Metric"),
            column("samples", "Samples"), column("mean", "Mean", "see unit"), column("peak", "Peak", "see unit"),
            column("min", "Min", "see unit"), column("unit", "Unit", "", "the metric's unit, when the trace says it")],
            [t.to_dict() for t in report.telemetry])
    if report.ranks_view is not None:  # the per-rank view: the ranks the others wait for

        tables["stragglers"] = document_table(report.ranks_view)
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "title": report.title,
        "categories": report.categories,
        "nested": report.nests,
        "sources": report.sources,
        "ranks": report.ranks,
        "filters": report.filters,
        "totals": {"rows": len(report.table), "names": len(report.stats), "self_ns": report.total_ns,
                   "inclusive_ns": report.inclusive_ns},
        "units": {m: report.table.units.get(m, "") for m in report.metric_names},
        "tables": tables,
    }


def main_rows(document: dict) -> list[dict] | None:
    """The per-name rows of a report document (this version or the unversioned one before it), else None."""
    if document.get("schema") == SCHEMA:
        rows = ((document.get("tables") or {}).get(MAIN_TABLE) or {}).get("rows")
        return rows if isinstance(rows, list) else None
    rows = document.get("kernels")  # before the schema: {"kernels": [...], ...}
    return rows if isinstance(rows, list) else None


def document_table(got) -> dict:
    """The report document's ``stragglers`` table from the straggler analysis's result
    (``cluster.stragglers``): its rows with times in integer ns, as every time of this document, and its notes."""
    from .cluster.stragglers import DOCUMENT_COLUMNS

    def value(row: dict, key: str, unit: str):
        v = row.get(key)
        return int(round(v * 1000)) if unit == "ns" and v is not None else v

    out = table(got.title, [column(k, label, unit, meaning) for k, _, label, unit, meaning in DOCUMENT_COLUMNS],
                [{k: value(r, src, unit) for k, src, _, unit, _ in DOCUMENT_COLUMNS} for r in got.rows])
    out["notes"] = list(got.notes)
    return out
