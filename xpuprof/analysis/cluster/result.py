"""What an analysis returns, and its renderings: a table, CSV, JSON rows, HTML."""
from __future__ import annotations

import csv
import html
import io
import math
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("table", "csv", "json", "html")
TEXT_COLUMNS = ("kernel_type", "idle_category", "explanation")  # words: aligned left


@dataclass
class AnalysisResult:
    analysis: str
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)  # said once on stderr (and in the HTML page)
    engine: str = ""
    nodes: list[str] = field(default_factory=list)  # where each task ran (a node id per task)
    title: str = ""
    # finer-grained rows the HTML view draws (stragglers: one per rank and step); not in table/CSV/JSON
    details: list[dict[str, Any]] = field(default_factory=list)

    def render(self, fmt: str) -> str:
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
        return self.table_text()

    def table_text(self, width: int = 200) -> str:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        t = Table(title=escape(self.title or self.analysis), title_justify="left")
        for c in self.columns:
            if c == "name":  # kernel names run to kilobytes: the table shows their start (CSV/JSON keep them)
                t.add_column(escape(c), justify="left", overflow="ellipsis", no_wrap=True, max_width=70)
            else:
                t.add_column(escape(c), justify="left" if c in TEXT_COLUMNS else "right")
        for r in self.rows:
            t.add_row(*[escape("" if r.get(c) is None else _text(r.get(c))) for c in self.columns])
        console = Console(file=io.StringIO(), width=width, record=True, force_terminal=False)
        console.print(t)
        for note in self.notes:
            console.print(escape(f"note: {note}"))
        return console.export_text()

    def html_table(self, table_id: str = "") -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        left = [' class="text"' if c in TEXT_COLUMNS else "" for c in self.columns]
        body = "".join("<tr>" + "".join(f"<td{a}>{html.escape('' if r.get(c) is None else _text(r.get(c)))}</td>"
                                        for c, a in zip(self.columns, left)) + "</tr>" for r in self.rows)
        ident = f' id="{html.escape(table_id)}"' if table_id else ""
        return f"<table{ident}><tr>{head}</tr>{body}</table>"

    def html_page(self) -> str:
        notes = "".join(f"<p class=\"meta\">{html.escape(n)}</p>" for n in self.notes)
        title = html.escape(self.title or f"xpuprof analyze {self.analysis}")
        return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{title}</title><style>body{{font-family:system-ui,sans-serif;margin:24px}}"
                "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
                "text-align:right}th{background:#f3f3f3}td.text{text-align:left;max-width:460px}.meta{color:#666;font-size:12px}"
                ".chart text{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11px;fill:#333}"
                ".chart .axis{fill:#666}</style></head><body>"
                f"<h1>{title}</h1>{notes}{self.html_figure()}{self.html_table(self.analysis)}</body></html>")

    def html_figure(self) -> str:
        """The analysis's picture above its table, for those that have one."""
        if self.analysis == "stragglers":
            from .straggler_html import figure

            return figure(self.rows, self.details)
        return ""


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _text(v) -> str:
    """For reading: whole numbers whole, others to 6 significant digits (CSV and JSON keep every digit)."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "" if math.isnan(v) else str(v)
        return f"{v:.0f}" if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    return str(v)
