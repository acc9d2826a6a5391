"""Plain-text tables for terminals: fitted to a width, one line per row, long names elided in the
middle (a kernel's template arguments are in the middle; its distinguishing suffix is not).

Built from strings with no per-cell objects, so a table of thousands of rows renders in
milliseconds (rich, used for small tables elsewhere, costs ~0.5 ms per cell).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Sequence

ELLIPSIS = "…"


def terminal_width(default: int = 80) -> int:
    """The terminal's columns (``COLUMNS`` wins; ``default`` when output is not a terminal)."""
    return max(20, shutil.get_terminal_size((default, 24)).columns)


def elide_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle replaced by an ellipsis."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]


def elide_end(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at the end with an ellipsis."""
    if len(text) <= width:
        return text
    return text[:max(0, width - 1)] + ELLIPSIS if width > 0 else ""


def one_line(text: str) -> str:
    """Control characters (a newline in a name) shown as spaces: a row stays one line."""
    return "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in text) if not text.isprintable() else text


@dataclass(frozen=True)
class Column:
    header: str
    align: str = "right"  # "left" or "right"
    shrink: bool = False  # may be narrowed (its cells elided) to fit the width
    min_width: int = 12
    elide: str = "middle"  # "middle" or "end"


def render_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, title: str | None = None,
                 width: int | None = None, boxed: bool = True) -> str:
    """Rows of cells as text, at most ``width`` characters wide where shrinkable columns allow it.

    ``boxed``: rich's heavy-head box; else aligned columns two spaces apart."""
    n = len(columns)
    cells = [[one_line(str(c)) for c in row] for row in rows]
    widths = [max([len(col.header), *(len(r[i]) for r in cells)]) for i, col in enumerate(columns)]
    overhead = 3 * n + 1 if boxed else 2 * (n - 1)
    if width is not None:
        excess = sum(widths) + overhead - width
        for i in reversed(range(n)):  # the rightmost shrinkable columns give up their width first
            col = columns[i]
            if excess <= 0:
                break
            if col.shrink and widths[i] > col.min_width:
                give = min(excess, widths[i] - max(col.min_width, 1))
                widths[i] -= give
                excess -= give

    def fit(text: str, i: int) -> str:
        col = columns[i]
        w = widths[i]
        if len(text) > w:
            text = elide_middle(text, w) if col.elide == "middle" else elide_end(text, w)
        return text.ljust(w) if col.align == "left" else text.rjust(w)

    lines = []
    if title:
        lines.append(title)
    if boxed:
        lines.append("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
        lines.append("┃" + "┃".join(f" {fit(c.header, i)} " for i, c in enumerate(columns)) + "┃")
        lines.append("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
        lines.extend("│" + "│".join(f" {fit(c, i)} " for i, c in enumerate(row)) + "│" for row in cells)
        lines.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    else:
        lines.append("  ".join(fit(c.header, i) for i, c in enumerate(columns)).rstrip())
        lines.extend("  ".join(fit(c, i) for i, c in enumerate(row)).rstrip() for row in cells)
    return "\n".join(lines) + "\n"


_BYTE_UNITS = frozenset({"b", "byte", "bytes"})
_PERCENT_UNITS = frozenset({"%", "percent", "pct"})
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_value(value: float, unit: str = "") -> str:
    """A measured value for people: bytes in KiB/MiB/GiB, times in ns/us/ms/s, percentages with '%',
    large counts with k/M/G, the unit kept (never ``2.441e+08``)."""
    import math

    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    low = (unit or "").strip().lower()
    if low in _BYTE_UNITS:
        size = abs(value)
        for scale, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if size >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B"
    if low in _TIME_UNITS:
        from .summary import format_ns

        return format_ns(value * _TIME_UNITS[low])
    if low in _PERCENT_UNITS:
        return f"{value:.1f} %"
    size = abs(value)
    prefixed = len(unit) > 1 and unit[0] in "kKMGT" and unit[1].isalpha()  # MHz, GBpS: scaled already
    for scale, prefix in (() if prefixed or size < 1e4 else _SI):  # 9,999 stays a number; 12,345 is 12.3k
        if size >= scale:
            scaled = value / scale
            text = f"{scaled:.{2 if abs(scaled) < 10 else 1 if abs(scaled) < 100 else 0}f}{prefix}"
            break
    else:
        text = f"{value:,.4g}" if value != int(value) or size >= 1e15 else f"{int(value):,}"
    return f"{text} {unit}".rstrip() if unit else text
