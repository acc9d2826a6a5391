"""Plain-text tables for terminals, fitted to a width: every line at most ``width`` cells wide, numbers
never split, names whole (wrapped onto more lines), optional columns left out first, with one line
saying which and how to get them.

How a table is fitted (``render_table``), in order, until it fits:
1. headers wrap at their spaces (``CPU time avg`` over two lines) instead of widening their column;
2. optional columns (``Column.optional`` > 0) are left out, the highest number first;
3. text columns (``wrap``/``shrink``) narrow to what is left, their cells wrapped onto more lines
   (``wrap``), or elided in the middle or at the end (``shrink`` alone: one-line summaries).
Number columns never narrow below their widest cell. Built from strings with no per-cell objects, so
a table of thousands of rows renders in milliseconds.
"""
from __future__ import annotations

import math
import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import Sequence

ELLIPSIS = "…"
DEFAULT_WIDTH = 160  # output that is not a terminal (a file, a pipe, a notebook): wide, not unbounded


def terminal_width(default: int = DEFAULT_WIDTH) -> int:
    """The columns of the terminal stdout is (``COLUMNS`` wins); ``default`` when stdout is not one."""
    import os

    env = os.environ.get("COLUMNS", "")
    if env.strip().isdigit() and int(env) > 0:
        return max(20, int(env))
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return max(20, shutil.get_terminal_size((default, 24)).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return default


def cell_len(text: str) -> int:
    """The terminal cells ``text`` takes (wide characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def elide_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle replaced by an ellipsis."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    return _take(text, head) + ELLIPSIS + _take_end(text, keep - head)


def elide_end(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at the end with an ellipsis."""
    if cell_len(text) <= width:
        return text
    return _take(text, max(0, width - 1)) + ELLIPSIS if width > 0 else ""


def _take(text: str, cells: int) -> str:
    if text.isascii():
        return text[:cells]
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > cells:
            break
        out.append(ch)
        used += w
    return "".join(out)


def _take_end(text: str, cells: int) -> str:
    return _take(text[::-1], cells)[::-1] if cells > 0 else ""


def one_line(text: str) -> str:
    """Control characters (a newline in a name) shown as spaces: a cell stays one line of its own."""
    return "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in text) if not text.isprintable() else text


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` over lines of at most ``width`` cells: broken at spaces where it can, anywhere where it
    must (a kernel name without spaces), nothing dropped."""
    if cell_len(text) <= width:
        return [text]
    if text.isascii():
        return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False,
                             drop_whitespace=True) or [""]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        while cell_len(word) > width:  # a word longer than a line: cut it (nothing dropped)
            if line:
                lines.append(line)
                line = ""
            head = _take(word, width)
            lines.append(head)
            word = word[len(head):]
        if not line:
            line = word
        elif cell_len(line) + 1 + cell_len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return [ln for ln in lines if ln] or [""]


def _pad(text: str, width: int, align: str) -> str:
    gap = width - cell_len(text)
    if gap <= 0:
        return text
    return text + " " * gap if align == "left" else " " * gap + text


@dataclass(frozen=True)
class Column:
    header: str
    align: str = "right"  # "left" or "right"
    shrink: bool = False  # may be narrowed to fit the width: its cells wrap (``wrap``) or are elided
    min_width: int = 12  # the narrowest a shrinking column gets
    elide: str = "middle"  # a shrinking column that does not wrap: "middle" or "end"
    wrap: bool = False  # a narrowed column's cells wrap onto more lines (names stay whole)
    optional: int = 0  # > 0: left out to fit, the highest first (0: always shown)
    max_width: int | None = None  # a wrapping column wraps beyond this even when there is room


def fit_widths(columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int | None,
               overhead_per_column: int, overhead: int) -> tuple[list[int], list[int], bool]:
    """(kept column indexes, their widths, whether headers wrap) so the table fits ``width``."""
    n = len(columns)
    natural = [max([cell_len(col.header), *(_width(r[i]) for r in cells)]) for i, col in enumerate(columns)]
    widest_word = [max([cell_len(w) for w in col.header.split()] or [0]) for col in columns]
    body = [max([0, *(_width(r[i]) for r in cells)]) for i in range(n)]
    for i, col in enumerate(columns):
        if col.max_width and (col.wrap or col.shrink):
            natural[i] = min(natural[i], max(col.max_width, widest_word[i]))
    keep = list(range(n))
    if width is None:
        return keep, natural, False

    def total(widths_of) -> int:
        return sum(widths_of[i] for i in keep) + overhead_per_column * len(keep) + overhead

    if total(natural) <= width:
        return keep, natural, False
    # 1. headers over several lines: a column is as wide as its cells or its longest header word
    narrow = [max(body[i], widest_word[i]) for i in range(n)]
    for i, col in enumerate(columns):
        if col.wrap or col.shrink:
            narrow[i] = min(natural[i], max(narrow[i], 1))
    floor = [min(narrow[i], max(col.min_width, widest_word[i])) if (col.wrap or col.shrink) else narrow[i]
             for i, col in enumerate(columns)]
    # 2. optional columns left out, the highest number first (the rightmost of equals first)
    while total(floor) > width:
        optional = [i for i in keep if columns[i].optional > 0]
        if not optional:
            break
        keep.remove(max(optional, key=lambda i: (columns[i].optional, i)))
    # 3. text columns take what is left, the widest giving up width first
    widths = list(narrow)
    excess = total(widths) - width
    flexible = [i for i in keep if columns[i].wrap or columns[i].shrink]
    for least in (floor, [max(4, widest_word[i]) for i in range(n)]):  # the last resort: below min_width
        while excess > 0:
            can = [i for i in flexible if widths[i] > least[i]]
            if not can:
                break
            widest = max(can, key=lambda i: (widths[i], i))
            widths[widest] -= 1
            excess -= 1
    return keep, widths, True


def _width(text: str) -> int:
    """The cells a cell's widest line takes (a cell of several lines, such as a stack, holds newlines)."""
    return max(cell_len(part) for part in text.split("\n")) if "\n" in text else cell_len(text)


def _cell_text(value) -> str:
    """A cell as text: a list or tuple is a cell of several lines, anything else one line."""
    if isinstance(value, (list, tuple)):
        return "\n".join(one_line(str(v)) for v in value)
    return one_line(str(value))


def render_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, title: str | None = None,
                 width: int | None = None, boxed: bool = True, widen_hint: str = "--wide shows them",
                 notes: Sequence[str] = ()) -> str:
    """Rows of cells as text, at most ``width`` cells wide (None: as wide as the cells need).

    ``boxed``: rich's heavy-head box; else aligned columns two spaces apart. Optional columns left out
    to fit are named in a line after the table, with ``widen_hint`` (how to get them back). ``notes``:
    lines printed after the table, wrapped to the width."""
    cells = [[_cell_text(c) for c in row] for row in rows]
    per_col, base = (3, 1) if boxed else (2, -2)
    keep, widths, headers_wrap = fit_widths(columns, cells, width, per_col, base)
    cols = [columns[i] for i in keep]
    w = [widths[i] for i in keep]
    head_lines = [wrap_cell(c.header, wi) if headers_wrap else [c.header] for c, wi in zip(cols, w)]
    depth = max([len(h) for h in head_lines] or [1])

    def lines_of(cell_texts: list[str], header: bool = False) -> list[list[str]]:
        """Each column's lines for one row (wrapped or elided to its width)."""
        out = []
        for c, wi, cell in zip(cols, w, cell_texts):
            lines: list[str] = []
            for text in cell.split("\n"):
                if header or cell_len(text) <= wi:
                    lines.append(text)
                elif c.wrap:
                    lines.extend(wrap_cell(text, wi))
                elif c.shrink:
                    lines.append(elide_middle(text, wi) if c.elide == "middle" else elide_end(text, wi))
                else:
                    lines.append(text)  # a number: never split, never cut
            out.append(lines)
        return out

    def join(parts: list[str], edge: tuple[str, str, str]) -> str:
        left, mid, right = edge
        if boxed:
            return left + mid.join(f" {p} " for p in parts) + right
        return "  ".join(parts).rstrip()

    out: list[str] = []
    limit = width or 10**9
    if title:
        out.extend(_wrapped_lines(title, limit))
    if boxed:
        out.append("┏" + "┳".join("━" * (wi + 2) for wi in w) + "┓")
    for k in range(depth):
        parts = [_pad(h[k] if k < len(h) else "", wi, c.align) for c, wi, h in zip(cols, w, head_lines)]
        out.append(join(parts, ("┃", "┃", "┃")))
    if boxed:
        out.append("┡" + "╇".join("━" * (wi + 2) for wi in w) + "┩")
    for row in cells:
        per = lines_of([row[i] for i in keep])
        for k in range(max(len(p) for p in per) if per else 1):
            parts = [_pad(p[k] if k < len(p) else "", wi, c.align) for c, wi, p in zip(cols, w, per)]
            out.append(join(parts, ("│", "│", "│")))
    if boxed:
        out.append("└" + "┴".join("─" * (wi + 2) for wi in w) + "┘")
    for note in notes:
        out.extend(_wrapped_lines(note, limit))
    left_out = [columns[i].header for i in range(len(columns)) if i not in keep]
    if left_out:
        noun = "column" if len(left_out) == 1 else "columns"
        out.extend(_wrapped_lines(f"{len(left_out)} {noun} left out to fit {width} characters: "
                                  f"{', '.join(left_out)} ({widen_hint})", limit))
    return "\n".join(out) + "\n"


def _wrapped_lines(text: str, width: int) -> list[str]:
    return [line for part in one_line(text).split("\n") for line in wrap_cell(part, width)] if text else [""]


def wrapped(text: str, width: int | None) -> str:
    """A paragraph (a title, a note) wrapped to ``width`` cells, as one string ending in a newline."""
    return "\n".join(_wrapped_lines(text, width or 10**9)) + "\n"


# ----------------------------------------------------------------------------- numbers with their units
_BYTE_UNITS = frozenset({"b", "byte", "bytes"})
_PERCENT_UNITS = frozenset({"%", "percent", "pct"})
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_ranks(ranks) -> str:
    """Ranks in numeric order, runs of three or more as ranges: ``0, 1``, ``0-999``, ``0-3, 5, 7-9``
    (one short line however many ranks a job has)."""
    ordered = sorted(set(int(r) for r in ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts += [f"{ordered[i]}-{ordered[j]}"] if j - i >= 2 else [str(r) for r in ordered[i:j + 1]]
        i = j + 1
    return ", ".join(parts)


def format_ns(ns: float | None) -> str:
    """A time for people: ``120 ns``, ``3.606 us``, ``43.275 ms``, ``1.204 s`` (one format: the unit scales)."""
    if ns is None or not math.isfinite(ns):
        return "-"
    size = abs(ns)
    if size < 1_000 and round(size) < 1_000:
        return f"{ns:.0f} ns"
    if size < 999_999.5:
        return f"{ns / 1e3:.3f} us"
    if size < 999_999_999.5:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"


def format_us(us: float | None) -> str:
    """A time given in microseconds (HTA's columns), as ``format_ns`` writes it."""
    return "-" if us is None else format_ns(us * 1e3)


def format_percent(value: float | None, decimals: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{decimals}f} %"


def format_count(value) -> str:
    """A count: ``12,345`` (whole numbers only)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        value = round(value)
    return f"{int(value):,}"


def format_bytes(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    size = abs(value)
    for scale, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= scale:
            return f"{value / scale:.1f} {name}"
    return f"{value:.0f} B"


def format_value(value: float | None, unit: str = "") -> str:
    """A measured value for people: bytes in KiB/MiB/GiB, times in ns/us/ms/s, percentages with ``%``,
    large counts with k/M/G, the unit kept (never ``2.441e+08``). A value of no known unit is written
    with three significant digits and k/M/G the same way."""
    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    low = (unit or "").strip().lower()
    if low in _BYTE_UNITS:
        return format_bytes(value)
    if low in _TIME_UNITS:
        return format_ns(value * _TIME_UNITS[low])
    if low in _PERCENT_UNITS:
        return format_percent(value)
    return f"{_scaled(value, prefixed=len(unit) > 1 and unit[0] in 'kKMGT' and unit[1].isalpha())} {unit}".rstrip()


def _scaled(value: float, *, prefixed: bool = False) -> str:
    """Three significant digits with a k/M/G/T prefix from 10,000 up (``9,999``, ``12.3k``, ``4.52M``); a
    unit that carries its own prefix (MHz) is never prefixed again."""
    size = abs(value)
    if not prefixed and size >= 1e4:
        for scale, prefix in _SI:
            if size >= scale:
                scaled = value / scale
                return f"{scaled:.{2 if abs(scaled) < 10 else 1 if abs(scaled) < 100 else 0}f}{prefix}"
    if value == int(value) and size < 1e15:
        return f"{int(value):,}"
    return f"{value:,.{2 if size < 10 else 1 if size < 100 else 0}f}" if size < 1e4 else f"{value:,.0f}"
