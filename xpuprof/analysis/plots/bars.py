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
    room = _axis_room(0.0, peak, unit, width / 2)
    legend = legend_layout([(p.name, p.color) for p in parts], width - 8) if len(parts) > 1 else []
    top = 6 + legend_height(legend) + (6 if legend else 0)
    f = _frame(names, notes, width, top, room)
    lo, hi, values, tick_labels = axis_ticks(0.0, peak, unit, f.plot_w, horizontal=True)
    lo = 0.0
    height = top + ROW * shown + 4 + 2 * LINE_H + 10 + (LINE_H + 4 if hidden else 0)
    svg = Svg(chart_id, width, height, what)
    if legend:
        draw_legend(svg, 4, 6, legend)
    scale = f.plot_w / (hi - lo or 1.0)
    axis_y = top + ROW * shown + 2
    for v in values:
        svg.line(f.plot_x + v * scale, top, f.plot_x + v * scale, axis_y, GRID, cls="grid")
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
    used = _x_axis(svg, f, axis_y, values, tick_labels, lo, hi, axis_title or what)
    _rows_note(svg, axis_y + used, hidden, f.plot_x)
    return str(svg)


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
    room = _axis_room(lo_v, hi_v, unit, width / 2)
    entries = list(key) + ([(reference[1], DASHED)] if reference else [])
    legend = legend_layout(entries, width - 8) if entries else []
    top = 6 + legend_height(legend) + (6 if legend else 0)
    f = _frame(names, notes, width, top, room)
    lo, hi, values, tick_labels = axis_ticks(lo_v, hi_v, unit, f.plot_w, horizontal=True)
    height = top + ROW * shown + 4 + 2 * LINE_H + 10 + (LINE_H + 4 if hidden else 0)
    svg = Svg(chart_id, width, height, what)
    if legend:
        draw_legend(svg, 4, 6, legend)
    scale = f.plot_w / (hi - lo or 1.0)

    def x(v: float) -> float:
        return f.plot_x + (v - lo) * scale

    axis_y = top + ROW * shown + 2
    for v in values:
        svg.line(x(v), top, x(v), axis_y, GRID, cls="grid")
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
    used = _x_axis(svg, f, axis_y, values, tick_labels, lo, hi, what)
    _rows_note(svg, axis_y + used, hidden, f.plot_x)
    return str(svg)


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
    room = _axis_room(-bound, bound, unit, width / 2)
    entries = list(key) + [(w, DASHED) for _, w in marks[:1]]
    legend = legend_layout(entries, width - 8) if entries else []
    top = 6 + legend_height(legend) + (6 if legend else 0)
    f = _frame(names, notes, width, top, room)
    lo, hi, ticks_v, tick_labels = axis_ticks(-bound, bound, unit, f.plot_w, horizontal=True)
    height = top + ROW * shown + 4 + 2 * LINE_H + 10 + (LINE_H + 4 if hidden else 0)
    svg = Svg(chart_id, width, height, what)
    if legend:
        draw_legend(svg, 4, 6, legend)
    scale = f.plot_w / (hi - lo or 1.0)

    def x(v: float) -> float:
        return f.plot_x + (v - lo) * scale

    axis_y = top + ROW * shown + 2
    for v in ticks_v:
        svg.line(x(v), top, x(v), axis_y, GRID, cls="grid")
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
    used = _x_axis(svg, f, axis_y, ticks_v, tick_labels, lo, hi, what)
    _rows_note(svg, axis_y + used, hidden, f.plot_x)
    return str(svg)
