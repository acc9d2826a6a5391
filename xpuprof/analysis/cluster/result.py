"""What an analysis returns, and its renderings: a table, CSV, JSON rows, HTML."""
from __future__ import annotations

import csv
import html
import io
import math
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("table", "csv", "json", "html")


class AnalysisError(ValueError):
    """An unknown analysis or an option it does not take."""


@dataclass
class AnalysisResult:
    analysis: str
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)  # said once on stderr (and in the HTML page)
    engine: str = ""
    nodes: list[str] = field(default_factory=list)  # where each task ran (a node id per task)
    title: str = ""
    units: dict[str, str] = field(default_factory=dict)  # column -> unit, for columns whose name does not say it
    # finer-grained rows the HTML view draws (stragglers: one per rank and step); not in table/CSV/JSON
    details: list[dict[str, Any]] = field(default_factory=list)

    def render(self, fmt: str, width: int | None = 200) -> str:
        if fmt == "json":
            from ...trace.builder.columns import encode_json

            return encode_json([{c: _json_value(r.get(c)) for c in self.columns} for r in self.rows]).decode() + "\n"
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(self.columns)
            for r in self.rows:
                w.writerow(["" if _json_value(r.get(c)) is None else str(r.get(c)) for c in self.columns])
            return buf.getvalue()
        if fmt == "html":
            return self.html_page()
        return self.table_text(width)

    def table_text(self, width: int | None = 200) -> str:
        """The rows as a table fitted to ``width``: HTA's columns under the labels of ``analysis.tables`` (``sum_us``
        is Total, ``mean_us`` Avg), each column in one format with its unit (CSV and JSON keep HTA's names)."""
        from ..text import render_table

        shown = [c for c in self.columns if c not in _SENTENCES]
        columns, cells = self.presented(shown)
        # the cells carry their units: a title's "(µs)" is the unit of the CSV and JSON columns only
        title = (self.title or self.analysis).replace(" (µs)", "")
        # sentences read as lines under the table, each after what its row is (rank 1: ...)
        said = [f"{_row_name(r, shown)}: {r[c]}" for c in self.columns if c in _SENTENCES for r in self.rows if r.get(c)]
        return render_table(columns, cells, title=title, width=width,
                            notes=said + [f"note: {n}" for n in self.notes])

    def presented(self, shown: list[str] | None = None):
        """(text columns, cell text per row) of ``shown`` (default: every column): the labels and formats people
        read (``table_text``, HTML)."""
        from ..text import Column

        shown = self.columns if shown is None else shown
        shows = [_presentation(c, self.units.get(c), [r.get(c) for r in self.rows]) for c in shown]
        # names wrap; the columns that say what a row is stay; of the numbers the first two stay and the
        # rest are left out from the right on a narrow terminal (the table says which)
        columns, numbers = [], 0
        for i, (c, (label, kind, _)) in enumerate(zip(shown, shows)):
            keep = c in _IDENTIFIERS or (kind == "number" and numbers < 2)
            numbers += kind == "number"
            columns.append(Column(label, "left" if kind == "text" else "right", wrap=c == "name", min_width=16,
                                  optional=0 if keep else i + 1))
        cells = [[fmt(r.get(c)) for c, (_, _, fmt) in zip(shown, shows)] for r in self.rows]
        return columns, cells

    def html_table(self, table_id: str = "") -> str:
        columns, cells = self.presented()
        head = "".join(f"<th>{html.escape(c.header)}</th>" for c in columns)
        left = [' class="text"' if c.align == "left" else "" for c in columns]
        body = "".join("<tr>" + "".join(f"<td{a}>{html.escape(v)}</td>" for a, v in zip(left, row)) + "</tr>"
                       for row in cells)
        ident = f' id="{html.escape(table_id)}"' if table_id else ""
        return f"<table{ident}><tr>{head}</tr>{body}</table>"

    def html_page(self) -> str:
        """The page: title, notes, the analysis's charts (``analysis.plots.analyses``) and its table."""
        from ..plots.analyses import page

        return page(self)

    def html_figure(self) -> str:
        """The analysis's charts, with their headings (none for an analysis without a picture)."""
        from ..plots.analyses import figures

        return "".join(figures(self))


def ranks_text(ranks: list[int], limit: int = 20) -> str:
    """"0, 1, 2 and 30 more": a list of ranks for a note."""
    text = ", ".join(map(str, ranks[:limit]))
    return text + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _text(v) -> str:
    """For reading: whole numbers whole, others to 6 significant digits (CSV and JSON keep every digit); a list
    in brackets, an empty one as nothing."""
    if isinstance(v, (list, tuple)):
        return str(list(v)) if v else ""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "" if math.isnan(v) else str(v)
        return f"{v:.0f}" if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    return str(v)


_IDENTIFIERS = frozenset({"rank", "stream", "name", "kernel_type", "idle_category"})
_SENTENCES = frozenset({"explanation"})  # a sentence per row: lines under the text table, a column elsewhere


def _row_name(row: dict, columns: list[str]) -> str:
    """What a row is, in words: its identifying columns ("rank 1", "rank 0 stream 7")."""
    return " ".join(f"{c.replace('_', ' ')} {row.get(c)}" for c in columns if c in _IDENTIFIERS) or "row"
# HTA's column words -> the label set of analysis.tables
_WORDS = {"calls": "Calls", "sum": "Total", "mean": "Avg", "min": "Min", "max": "Max", "std": "Std",
          "count": "Samples", "rank": "Rank", "stream": "Stream", "steps": "Steps", "launches": "Launches",
          "percentage": "Share"}


def _label(base: str) -> str:
    words = base.split("_")
    first = _WORDS.get(words[0], words[0].capitalize())
    rest = [_WORDS.get(w, w).lower() if i else w for i, w in enumerate(words[1:])]
    return " ".join([first, *rest])


def _presentation(column: str, unit: str | None, values: list):
    """(label, "text" | "number", format) of one analysis column: its unit from its name (``_us``, ``_pct``,
    ``percentage``, ``_ratio``, ``_z``) or ``unit``; whole numbers as counts, flags as yes/no."""
    from ..text import format_count, format_percent, format_us, format_value

    def blank(fn):
        return lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else fn(v)

    if column.endswith("_us"):
        return _label(column[:-3]), "number", blank(format_us)
    if column.endswith("_pct") or column == "percentage":
        return _label(column[:-4] if column.endswith("_pct") else column), "number", blank(format_percent)
    if column.endswith("_ratio"):
        return _label(column) + " [ratio]", "number", blank(lambda v: f"{v:.3f}")
    if column.endswith("_z"):
        return _label(column[:-2]) + " [z-score]", "number", blank(lambda v: f"{v:+.2f}")
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return _label(column), "text", blank(lambda v: "yes" if v else "no")
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if unit:
            return _label(column), "number", blank(lambda v: format_value(v, unit))
        if all(float(v).is_integer() for v in present):
            return _label(column), "number", blank(format_count)
        return _label(column) + " [no unit]", "number", blank(lambda v: format_value(v))
    return _label(column), "text", blank(_text)
