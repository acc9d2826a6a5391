"""What every chart of the HTML reports is made of: an SVG element laid out for its text, axes with ticks in
their unit, a legend that wraps, a palette.

Charts are inline SVG written here, not drawn by a script at view time: the page is one file that shows
its charts with scripts off (a mail attachment, a strict viewer, print), their text is the page's text
(searchable, selectable, read by the browser test from the DOM), and every mark carries a ``<title>``
with its exact value on hover. The layout is computed here, so it must know how wide text is: all chart
text is one monospace font at ``FONT_PX`` (an advance of 0.6 em in every monospace font; ``CHAR_W``
keeps a little slack) and a name is elided in the middle to the room it has (the tables keep it whole).

Each chart has a fixed size in pixels that fits a 1,000 px window (``WIDE``); the page lets it shrink
with the window (``max-width: 100%``), never stretch, so its text keeps its size where there is room.
Marks that carry data are plain elements; axes, ticks and grid lines have the classes ``axis``/``grid``
(a test counts the pixels of the marks alone)."""
from __future__ import annotations

import html
import math
from typing import Callable, Sequence

from ..text import cell_len, elide_middle, one_line

FONT_PX = 11
CHAR_W = 0.62 * FONT_PX  # a monospace advance is 0.6 em; a little slack for font differences
LINE_H = 14  # one line of chart text, baseline to baseline
WIDE = 940  # a full-width chart: fits a 1,000 px window with the page's margins
HALF = 460  # a chart of a pair side by side (two fit WIDE)
# Tableau's ten colours: told apart by most people with a colour vision deficiency, and in print.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
IDLE = "#c9c9c9"
DASHED = "dashed"  # a legend entry for a dashed reference line
AXIS = "#888"
GRID = "#e6e6e6"


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def text_w(text: str) -> float:
    """The width of ``text`` at the chart font (wide characters two advances)."""
    return cell_len(text) * CHAR_W


def fit(text: str, px: float) -> str:
    """``text`` on one line, elided in the middle to at most ``px`` pixels."""
    return elide_middle(one_line(str(text)), max(1, int(px // CHAR_W)))


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


class Svg:
    """One chart: ``Svg(chart_id, width, height, label)``, marks added in drawing order, ``str()`` the element."""

    def __init__(self, chart_id: str, width: float, height: float, label: str, cls: str = "chart") -> None:
        self.id, self.width, self.height = chart_id, int(math.ceil(width)), int(math.ceil(height))
        self.parts = [f'<svg class="{esc(cls)}" id="{esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" '
                      f'width="{self.width}" height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
                      f'role="img" aria-label="{esc(label)}">']

    @staticmethod
    def _extra(cls: str | None, title: str | None) -> tuple[str, str]:
        return (f' class="{esc(cls)}"' if cls else "", f"<title>{esc(title)}</title>" if title else "")

    def rect(self, x: float, y: float, w: float, h: float, fill: str, *, cls: str | None = None,
             title: str | None = None, opacity: float | None = None) -> None:
        c, t = self._extra(cls, title)
        o = f' fill-opacity="{opacity:g}"' if opacity is not None else ""
        self.parts.append(f'<rect{c} x="{_num(round(x, 1))}" y="{_num(round(y, 1))}" width="{_num(round(max(w, 0), 1))}" '
                          f'height="{_num(round(max(h, 0), 1))}" fill="{fill}"{o}>{t}</rect>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = AXIS, *, cls: str | None = None,
             dash: str | None = None, width: float = 1, title: str | None = None) -> None:
        c, t = self._extra(cls, title)
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line{c} x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                          f'stroke-width="{width:g}"{d}>{t}</line>')

    def path(self, d: str, *, stroke: str = "none", fill: str = "none", width: float = 1.5,
             opacity: float | None = None, cls: str | None = None, title: str | None = None) -> None:
        c, t = self._extra(cls, title)
        o = f' fill-opacity="{opacity:g}"' if opacity is not None else ""
        self.parts.append(f'<path{c} d="{d}" stroke="{stroke}" stroke-width="{width:g}" fill="{fill}"{o} '
                          f'stroke-linejoin="round">{t}</path>')

    def circle(self, cx: float, cy: float, r: float, fill: str, *, title: str | None = None,
               cls: str | None = None) -> None:
        c, t = self._extra(cls, title)
        self.parts.append(f'<circle{c} cx="{cx:.1f}" cy="{cy:.1f}" r="{r:g}" fill="{fill}">{t}</circle>')

    def text(self, x: float, y: float, text: str, *, anchor: str = "start", cls: str | None = None,
             title: str | None = None) -> None:
        """``text`` with its baseline at ``y`` (the font's ascent above, about 0.8 em)."""
        c, t = self._extra(cls, title)
        a = f' text-anchor="{anchor}"' if anchor != "start" else ""
        self.parts.append(f'<text{c} x="{x:.1f}" y="{y:.1f}"{a}>{esc(text)}{t}</text>')

    def __str__(self) -> str:
        return "".join(self.parts) + "</svg>"


# ----------------------------------------------------------------------------- ticks
def nice_step(span: float, count: int) -> float:
    """A step of 1, 2 or 5 times a power of ten that cuts ``span`` into about ``count`` pieces."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * power * (1 + 1e-9):
            return m * power
    return 10 * power


def nice_range(lo: float, hi: float, count: int) -> tuple[float, float, float]:
    """(low, high, step): the range widened to whole steps (zero kept in view when the data is one-signed
    and starts near it)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, count)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


def ticks(lo: float, hi: float, step: float) -> list[float]:
    n = int(round((hi - lo) / step))
    return [lo + i * step for i in range(n + 1)]


# ----------------------------------------------------------------------------- tick labels in a unit
_TIME = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
_BYTES = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
_SI = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
BYTE_UNITS = frozenset({"b", "byte", "bytes"})
PERCENT_UNITS = frozenset({"%", "percent", "pct"})
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def _decimals(step: float) -> int:
    """Decimals that tell ticks ``step`` apart."""
    if step <= 0 or not math.isfinite(step):
        return 0
    d = -math.floor(math.log10(step) + 1e-9)
    frac = step * 10 ** max(d, 0)
    return max(0, d + (0 if abs(frac - round(frac)) < 1e-6 else 1))


def tick_formatter(unit: str, top: float, step: float) -> Callable[[float], str]:
    """Labels for ticks ``step`` apart up to ``top`` (absolute), in one scaled unit for the whole axis:
    times (unit ``ns``/``us``/``ms``/``s``) in ns..s, bytes in KiB..TiB, percentages with ``%``, other
    values with k/M/G/T (a prefixed unit such as MHz kept as it is), counts (no unit) as plain numbers."""
    low = (unit or "").strip().lower()
    top = abs(top) or abs(step) or 1.0
    if low in TIME_UNITS:
        base = TIME_UNITS[low]
        name, scale = next(((n, s) for n, s in _TIME if top * base >= s), ("ns", 1.0))
        dec = _decimals(step * base / scale)
        return lambda v: f"{v * base / scale:,.{dec}f} {name}"
    if low in BYTE_UNITS:
        name, scale = next(((n, s) for n, s in _BYTES if top >= s), ("B", 1))
        dec = min(_decimals(step / scale), 2)
        return lambda v: f"{v / scale:,.{dec}f} {name}"
    if low in PERCENT_UNITS:
        dec = _decimals(step)
        return lambda v: f"{v:,.{dec}f} %"
    prefixed = len(unit) > 1 and unit[0] in "kKMGT" and unit[1].isalpha()
    prefix, scale = ("", 1.0) if prefixed else next(((p, s) for p, s in _SI if top >= s), ("", 1.0))
    dec = _decimals(step / scale)
    sep = " " if unit or prefix else ""
    return lambda v: f"{v / scale:,.{dec}f}{sep}{prefix}{unit}".rstrip()


def axis_ticks(lo: float, hi: float, unit: str, room_px: float, *, horizontal: bool,
               max_count: int = 8) -> tuple[float, float, list[float], list[str]]:
    """(low, high, tick values, labels) of an axis over ``room_px`` pixels: as many ticks as their labels
    leave room for (side by side with a gap on a horizontal axis, a line apart on a vertical one)."""
    count = max_count
    # bytes step in powers of two's units (1 MiB, not 1,048,576 / 5): ticks are whole in the unit shown
    scale = next((s for _, s in _BYTES if max(abs(lo), abs(hi)) >= s), 1) if unit.strip().lower() in BYTE_UNITS else 1
    while True:
        low, high, step = nice_range(lo / scale, hi / scale, count)
        low, high, step = low * scale, high * scale, step * scale
        values = ticks(low, high, step)
        fmt = tick_formatter(unit, max(abs(low), abs(high)), step)
        labels = [fmt(v) for v in values]
        need = (max(text_w(s) for s in labels) + 12) if horizontal else LINE_H + 4
        if count <= 1 or room_px / max(len(values) - 1, 1) >= need:
            return low, high, values, labels
        count -= 1


# ----------------------------------------------------------------------------- legend
def legend_layout(items: Sequence[tuple[str, str]], width: float) -> list[tuple[float, int, str, str]]:
    """(x, row, label, colour) of legend entries (a swatch and a label each) wrapped into rows of ``width``."""
    out, x, row = [], 0.0, 0
    for label, color in items:
        w = 14 + text_w(label)
        if x > 0 and x + w > width:
            x, row = 0.0, row + 1
        out.append((x, row, label, color))
        x += w + 18
    return out


def draw_legend(svg: Svg, x0: float, y0: float, layout: list[tuple[float, int, str, str]],
                titles: Sequence[str] | None = None) -> None:
    """The legend ``legend_layout`` made, its first row's baseline at ``y0 + 10``; a colour ``DASHED``
    draws a dashed line (a reference line's key) instead of a swatch."""
    for i, (x, row, label, color) in enumerate(layout):
        y = y0 + row * LINE_H
        tip = titles[i] if titles else None
        if color == DASHED:
            svg.line(x0 + x, y + 6, x0 + x + 10, y + 6, "#333", dash="3,2", width=1.5, cls="legend")
        else:
            svg.rect(x0 + x, y + 1, 10, 10, color, cls="legend", title=tip)
        svg.text(x0 + x + 14, y + 10, label, title=tip)


def legend_height(layout: list[tuple[float, int, str, str]]) -> float:
    return (max((row for _, row, _, _ in layout), default=-1) + 1) * LINE_H
