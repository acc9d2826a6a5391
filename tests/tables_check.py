"""Reading tables back from what a command printed (boxed text tables, aligned text tables, HTML tables), and
the check every table must pass: a unit on every numeric column (in its cells, or its header names what is
counted) and one number format per column, never scientific notation."""
from __future__ import annotations

import re
from html.parser import HTMLParser

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
# One family per way a number is written; a column's cells all belong to one.
FAMILIES = [
    ("time", re.compile(r"^-?\d+(\.\d{3})? (ns|us|ms|s)$")),
    ("signed time", re.compile(r"^[+-]\d+(\.\d{3})? (ns|us|ms|s)$")),
    ("torch time", re.compile(r"^-?\d+\.\d{3}(us|ms|s)$")),
    ("percent", re.compile(r"^[+-]?\d+\.(\d{1,2}) ?%$|^NaN$")),
    ("bytes", re.compile(r"^-?\d+(\.\d+)? (B|KiB|MiB|GiB|TiB|KB|MB|GB)$")),
    ("count", re.compile(r"^-?\d{1,3}(,\d{3})*$")),
    ("count pair", re.compile(r"^\d{1,3}(,\d{3})*/\d{1,3}(,\d{3})*$")),
    ("value with unit", re.compile(r"^[+-]?\d[\d,]*(\.\d+)?[kMGT]? [^\d\s][^\s]*$")),
    ("decimal", re.compile(r"^[+-]?\d+\.\d+$")),
]
WITH_UNIT = {"time", "signed time", "torch time", "percent", "bytes", "value with unit"}
COUNT_HEADERS = re.compile(r"^(# of Calls|Calls|Calls A/B|Samples|Samples A/B|Iterations|Traces|Rank|Ranks|Steps|"
                           r"Launches|Stream|Row|groups|metrics|derived|SIMD|Points|Node ID|.* outliers|"
                           r"Gpu shorter than cpu)$")
NUMBERISH = re.compile(r"^[+-]?\d")


def clean(text: str) -> str:
    return ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")


def boxed_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(headers, body rows of cells) of every ┏...┘ table in ``text``; a header spread over lines is joined."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("┏"):
            i += 1
            continue
        i += 1
        head: list[list[str]] = []
        while i < len(lines) and lines[i].startswith("┃"):
            head.append([c.strip() for c in lines[i].strip("┃").split("┃")])
            i += 1
        headers = [" ".join(filter(None, parts)) for parts in zip(*head)] if head else []
        i += 1  # ┡━━
        rows = []
        while i < len(lines) and lines[i].startswith("│"):
            rows.append([c.strip() for c in lines[i].strip("│").split("│")])
            i += 1
        out.append((headers, rows))
    return out


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._is_head = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self._row, self._is_head = [], False
        elif tag in ("td", "th"):
            self._cell = []
            self._is_head = tag == "th"

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            headers, rows = self.tables[-1]
            if self._is_head and not headers:
                headers.extend(self._row)
            else:
                rows.append(self._row)
            self._row = None


def html_tables(page: str) -> list[tuple[list[str], list[list[str]]]]:
    parser = _Html()
    parser.feed(page)
    return parser.tables


def column_problems(headers: list[str], rows: list[list[str]], where: str) -> list[str]:
    """Why a table's numeric columns fail the rules ([] when they pass)."""
    problems = []
    for j, header in enumerate(headers):
        cells = [r[j] for r in rows if j < len(r) and r[j] not in ("", "-", "--")]
        numeric = [c for c in cells if NUMBERISH.match(c)]
        if not numeric:
            continue
        if any(re.search(r"\de[+-]\d", c) for c in cells):
            problems.append(f"{where}: column {header!r} writes scientific notation: {cells[:4]}")
            continue
        fams = {name for name, rx in FAMILIES if all(rx.match(c) for c in cells)}
        if not fams:
            kinds = {c: [name for name, rx in FAMILIES if rx.match(c)] for c in cells[:8]}
            problems.append(f"{where}: column {header!r} mixes number formats: {kinds}")
            continue
        fam = next(name for name, _ in FAMILIES if name in fams)
        if fam == "percent":
            decimals = {len(m.group(1)) for c in cells for m in [FAMILIES[3][1].match(c)] if m and m.group(1)}
            if len(decimals) > 1:
                problems.append(f"{where}: column {header!r} writes percentages with {sorted(decimals)} decimals")
        if fam in WITH_UNIT:
            continue
        if fam in ("count", "count pair") and COUNT_HEADERS.match(header):
            continue
        if "[" in header and "]" in header:
            continue
        problems.append(f"{where}: column {header!r} has numbers ({fam}: {cells[:3]}) without a unit in its "
                        "cells or header")
    return problems


def widest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in clean(text).split("\n")), default=0)
