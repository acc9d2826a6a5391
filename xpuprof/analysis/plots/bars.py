"""Charts of one row per thing: horizontal bars (stacked by part, with a legend), ranges (a box from the
first to the third quartile, whiskers to the extremes, a median tick), and signed bars around zero (diff's
changes). Rows are named on the left (elided to ``LABEL_CHARS``), a note per row in a column on the right,
the axis with its unit under them; at most ``MAX_ROWS`` rows are drawn (the chart says how many more the
table holds)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import (AXIS, DASHED, GRID, LINE_H, WIDE, Svg, axis_ticks, draw_legend, fit, legend_height, legend_layout,
                  text_w)

ROW = 18
BAR_H = 12
LABEL_CHARS = 40
NOTE_CHARS = 40
MAX_ROWS = 64
MIN_PLOT = 220


@dataclass
class Part:
    """One part of every row's bar: its name (the legend's), colour and a value per row."""

    name: str
    color: str
    values: Sequence[float]


@dataclass
class Frame:
    """Where a chart's parts go: the label column, the plot, the note column, the rows' first baseline."""

    label_w: float
    plot_x: float
    plot_w: float
    note_x: float
    top: float


def _frame(labels: Sequence[str], notes: Sequence[str], width: float, top: float, tick_room: float) -> Frame:
    label_w = min(max([text_w(s) for s in labels] + [24.0]), LABEL_CHARS * text_w("m")) + 10
    note_w = max([text_w(s) for s in notes] + [0.0]) + (10 if notes else 0)
    right = max(note_w, tick_room / 2 + 4)
    plot_w = width - label_w - right - 4
    if plot_w < MIN_PLOT:  # long notes: the labels give up room first
        label_w = max(label_w - (MIN_PLOT - plot_w), 80.0)
        plot_w = width - label_w - right - 4
    return Frame(label_w, label_w, plot_w, label_w + plot_w + 8, top)


def _rows_note(svg: Svg, y: float, hidden: int, x: float) -> float:
    if hidden > 0:
        svg.text(x, y + 10, f"and {hidden:,} more rows in the table", cls="axis")
        return LINE_H + 4
    return 0.0


def _x_axis(svg: Svg, f: Frame, y: float, values: Sequence[float], labels: Sequence[str], lo: float, hi: float,
            title: str, *, grid_top: float | None = None) -> float:
    """The axis line at ``y``, tick labels under it, ``title`` under them; returns the height used."""
    scale = f.plot_w / ((hi - lo) or 1.0)
    svg.line(f.plot_x, y, f.plot_x + f.plot_w, y, cls="axis")
    for v, label in zip(values, labels):
        x = f.plot_x + (v - lo) * scale
        if grid_top is not None:
            svg.line(x, grid_top, x, y, GRID, cls="grid")
        svg.line(x, y, x, y + 4, cls="axis")
        svg.text(x, y + 4 + LINE_H - 2, label, anchor="middle", cls="axis")
    svg.text(f.plot_x + f.plot_w / 2, y + 4 + 2 * LINE_H, fit(title, f.plot_w), anchor="middle", cls="axis")
    return 4 + 2 * LINE_H + 6


def _axis_room(lo: float, hi: float, unit: str, plot_w: float) -> float:
    _, _, _, labels = axis_ticks(lo, hi, unit, plot_w, horizontal=True)
    return max(text_w(s) for s in labels)


@dataclass
class RowChart:
    """A chart of rows laid out by ``lay_out``: its picture (legend and grid drawn), frame, axis (``lo``..``hi``,
    its ticks and their labels), pixels per unit and the axis line's y; rows are drawn from ``frame.top``."""

    svg: Svg
    frame: Frame
    lo: float
    hi: float
    ticks: Sequence[float]
    tick_labels: Sequence[str]
    scale: float
    axis_y: float
    hidden: int

    @classmethod
    def lay_out(cls, names: Sequence[str], notes: Sequence[str], hidden: int, entries: Sequence[tuple[str, str]],
                lo_v: float, hi_v: float, unit: str, chart_id: str, what: str, width: float, *,
                from_zero: bool = False) -> RowChart:
        """A chart of a row per name (``hidden``: rows left out) for values from ``lo_v`` to ``hi_v`` in ``unit``:
        a legend of ``entries`` on top (none: no legend), the frame, the axis' ticks (``from_zero``: the axis
        starts at 0 whatever its ticks), the picture with a grid line per tick."""
        room = _axis_room(lo_v, hi_v, unit, width / 2)
        legend = legend_layout(entries, width - 8) if entries else []
        top = 6 + legend_height(legend) + (6 if legend else 0)
        f = _frame(names, notes, width, top, room)
        lo, hi, ticks, tick_labels = axis_ticks(lo_v, hi_v, unit, f.plot_w, horizontal=True)
        if from_zero:
            lo = 0.0
        shown = len(names)
        height = top + ROW * shown + 4 + 2 * LINE_H + 10 + (LINE_H + 4 if hidden else 0)
        svg = Svg(chart_id, width, height, what)
        if legend:
            draw_legend(svg, 4, 6, legend)
        chart = cls(svg, f, lo, hi, ticks, tick_labels, f.plot_w / (hi - lo or 1.0), top + ROW * shown + 2, hidden)
        for v in ticks:
            svg.line(chart.x(v), top, chart.x(v), chart.axis_y, GRID, cls="grid")
        return chart

    def x(self, v: float) -> float:
        """The pixel of value ``v``."""
        return self.frame.plot_x + (v - self.lo) * self.scale

    def finish(self, title: str) -> str:
        """The axis under the rows (``title`` under its labels), the count of rows left out; the chart's SVG."""
        used = _x_axis(self.svg, self.frame, self.axis_y, self.ticks, self.tick_labels, self.lo, self.hi, title)
        _rows_note(self.svg, self.axis_y + used, self.hidden, self.frame.plot_x)
        return str(self.svg)


def stacked_bars(labels: Sequence[str], parts: Sequence[Part], *, unit: str, chart_id: str, what: str,
                 notes: Sequence[str] | None = None, titles: Sequence[str] | None = None, width: float = WIDE,
                 axis_title: str | None = None) -> str:
    """Horizontal bars, one per label, each the sum of ``parts`` (one part: plain bars, no legend); ``unit``:
    the values' unit (``ns`` for times); ``titles``: the hover text per row."""
    shown = min(len(labels), MAX_ROWS)
    hidden = len(labels) - shown
    names = [fit(s, LABEL_CHARS * text_w("m")) for s in labels[:shown]]
    notes = [fit(s, NOTE_CHARS * text_w("m")) for s in (notes or [])[:shown]]
    totals = [sum(float(p.values[i]) for p in parts) for i in range(shown)]
    peak = max(totals + [0.0]) or 1.0
    entries = [(p.name, p.color) for p in parts] if len(parts) > 1 else []
    c = RowChart.lay_out(names, notes, hidden, entries, 0.0, peak, unit, chart_id, what, width, from_zero=True)
    svg, f, scale, top = c.svg, c.frame, c.scale, c.frame.top
    for i in range(shown):
        y = top + i * ROW
        tip = titles[i] if titles else f"{labels[i]}: {notes[i] if notes else ''}"
        svg.text(f.label_w - 8, y + ROW * 0.7, names[i], anchor="end", title=str(labels[i]))
        x = f.plot_x
        for p in parts:
            w = float(p.values[i]) * scale
            if w > 0:
                svg.rect(x, y + (ROW - BAR_H) / 2, max(w, 0.5), BAR_H, p.color, cls="bar",
                         title=f"{tip}" if len(parts) == 1 else f"{labels[i]}: {p.name}: {tip}")
            x += w
        if notes:
            svg.text(f.note_x, y + ROW * 0.7, notes[i])
    return c.finish(axis_title or what)


@dataclass
class Spread:
    """A row of ``range_chart``: extremes, quartiles and median (any may be None: not drawn)."""

    low: float | None = None
    q1: float | None = None
    median: float | None = None
    q3: float | None = None
    high: float | None = None
    color: str = "#4e79a7"


def range_chart(labels: Sequence[str], rows: Sequence[Spread], *, unit: str, chart_id: str, what: str,
                notes: Sequence[str] | None = None, titles: Sequence[str] | None = None,
                reference: tuple[float, str] | None = None, width: float = WIDE,
                key: Sequence[tuple[str, str]] = ()) -> str:
    """A row per label: whiskers from low to high, a box from q1 to q3, a tick at the median; ``reference``:
    (value, what it is) drawn as a dashed line over every row; ``key``: legend entries (label, colour)."""
    shown = min(len(labels), MAX_ROWS)
    hidden = len(labels) - shown
    names = [fit(s, LABEL_CHARS * text_w("m")) for s in labels[:shown]]
    notes = [fit(s, NOTE_CHARS * text_w("m")) for s in (notes or [])[:shown]]
    present = [v for r in rows[:shown] for v in (r.low, r.q1, r.median, r.q3, r.high) if v is not None
               and math.isfinite(v)] + ([reference[0]] if reference else [])
    lo_v, hi_v = (min(present), max(present)) if present else (0.0, 1.0)
    lo_v = min(lo_v, 0.0) if lo_v >= 0 and lo_v < 0.25 * hi_v else lo_v
    entries = list(key) + ([(reference[1], DASHED)] if reference else [])
    c = RowChart.lay_out(names, notes, hidden, entries, lo_v, hi_v, unit, chart_id, what, width)
    svg, f, x, top, axis_y = c.svg, c.frame, c.x, c.frame.top, c.axis_y
    for i in range(shown):
        r, y = rows[i], top + i * ROW
        mid = y + ROW / 2
        tip = titles[i] if titles else labels[i]
        svg.text(f.label_w - 8, y + ROW * 0.7, names[i], anchor="end", title=str(labels[i]))
        if r.low is not None and r.high is not None:
            svg.line(x(r.low), mid, x(r.high), mid, r.color, width=1.5, title=tip)
            for v in (r.low, r.high):
                svg.line(x(v), mid - 4, x(v), mid + 4, r.color, width=1.5, title=tip)
        if r.q1 is not None and r.q3 is not None:
            svg.rect(x(r.q1), y + (ROW - BAR_H) / 2, max(x(r.q3) - x(r.q1), 1.5), BAR_H, r.color, cls="bar",
                     title=tip, opacity=0.45)
        if r.median is not None:
            svg.rect(x(r.median) - 1.5, y + 2, 3, ROW - 4, r.color, cls="bar", title=tip)
        if notes:
            svg.text(f.note_x, y + ROW * 0.7, notes[i])
    if reference:
        svg.line(x(reference[0]), top - 2, x(reference[0]), axis_y, "#333", dash="4,3",
                 title=f"{reference[1]}")
    return c.finish(what)


def signed_bars(labels: Sequence[str], values: Sequence[float], colors: Sequence[str], *, unit: str,
                chart_id: str, what: str, notes: Sequence[str] | None = None, titles: Sequence[str] | None = None,
                marks: Sequence[tuple[float, str]] = (), key: Sequence[tuple[str, str]] = (),
                width: float = WIDE) -> str:
    """Bars from zero, left for negative values and right for positive ones; ``marks``: dashed lines at
    (value, what) such as a threshold; ``key``: legend entries (label, colour)."""
    shown = min(len(labels), MAX_ROWS)
    hidden = len(labels) - shown
    names = [fit(s, LABEL_CHARS * text_w("m")) for s in labels[:shown]]
    notes = [fit(s, NOTE_CHARS * text_w("m")) for s in (notes or [])[:shown]]
    vals = [float(v) for v in values[:shown]]
    bound = max([abs(v) for v in vals] + [abs(m) for m, _ in marks] + [1e-9])
    entries = list(key) + [(w, DASHED) for _, w in marks[:1]]
    c = RowChart.lay_out(names, notes, hidden, entries, -bound, bound, unit, chart_id, what, width)
    svg, f, x, top, axis_y = c.svg, c.frame, c.x, c.frame.top, c.axis_y
    for i in range(shown):
        y = top + i * ROW
        tip = titles[i] if titles else labels[i]
        svg.text(f.label_w - 8, y + ROW * 0.7, names[i], anchor="end", title=str(labels[i]))
        a, b = sorted((x(0.0), x(vals[i])))
        svg.rect(a, y + (ROW - BAR_H) / 2, max(b - a, 1.0), BAR_H, colors[i], cls="bar", title=tip)
        if notes:
            svg.text(f.note_x, y + ROW * 0.7, notes[i])
    svg.line(x(0.0), top - 2, x(0.0), axis_y, AXIS, cls="axis")
    for value, label in marks:
        for v in (value, -value) if value else (0.0,):
            svg.line(x(v), top - 2, x(v), axis_y, "#333", dash="4,3", title=label)
    return c.finish(what)
