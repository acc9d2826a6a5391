"""Values over time (telemetry; diff's two runs of one metric) and distributions (per-kernel metric values),
as line charts with both axes in their units.

A series longer than the plot has pixels is drawn as its envelope (each pixel column's minimum and maximum,
in time order), so a spike survives and the page stays small whatever the sample count."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..text import format_value
from .svg import (GRID, HALF, LINE_H, WIDE, Svg, axis_ticks, draw_legend, fit, legend_height, legend_layout,
                  text_w)


@dataclass
class Line:
    label: str
    color: str
    x: np.ndarray
    y: np.ndarray


def envelope(x: np.ndarray, y: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * columns`` points: per column of the x range, its lowest and highest value in time order."""
    if len(x) <= 2 * columns:
        return x, y
    col = np.minimum(((x - x[0]) / ((x[-1] - x[0]) or 1.0) * columns).astype(np.int64), columns - 1)
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    ends = np.r_[starts[1:], len(x)]
    arg_lo = np.array([b + int(np.argmin(y[b:e])) for b, e in zip(starts.tolist(), ends.tolist())])
    arg_hi = np.array([b + int(np.argmax(y[b:e])) for b, e in zip(starts.tolist(), ends.tolist())])
    first = np.minimum(arg_lo, arg_hi)  # the column's extremes in time order
    idx = np.column_stack([first, np.maximum(arg_lo, arg_hi)]).ravel()
    return x[idx], y[idx]


def pooled_mean(x_parts: Sequence[np.ndarray], y_parts: Sequence[np.ndarray], columns: int = 400
                ) -> tuple[np.ndarray, np.ndarray]:
    """Several series as one: the mean of every sample in each of ``columns`` slices of the time range."""
    x = np.concatenate([np.asarray(v, np.float64) for v in x_parts]) if x_parts else np.zeros(0)
    y = np.concatenate([np.asarray(v, np.float64) for v in y_parts]) if y_parts else np.zeros(0)
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if not len(x):
        return x, y
    lo, hi = float(x.min()), float(x.max())
    col = np.minimum(((x - lo) / ((hi - lo) or 1.0) * columns).astype(np.int64), columns - 1)
    n = np.bincount(col, minlength=columns)
    keep = n > 0
    return (np.bincount(col, weights=x, minlength=columns)[keep] / n[keep],
            np.bincount(col, weights=y, minlength=columns)[keep] / n[keep])


def _path(xs: np.ndarray, ys: np.ndarray) -> str:
    pts = [f"{a:.1f},{b:.1f}" for a, b in zip(xs.tolist(), ys.tolist())]
    return "M" + " L".join(pts) if pts else ""


MAX_LINES = 6  # more rows than this: their range and mean per pixel column instead of a line each
PLOT_H = 140
X_TICK_DY = 4 + LINE_H  # an x tick label's baseline under the axis (clear of the lowest y label)


def _band(lines: Sequence[Line], lo: float, hi: float, columns: int) -> tuple[np.ndarray, ...]:
    """(x, low, mean, high) per pixel column over every sample of ``lines``: the rows' range and mean."""
    x = np.concatenate([np.asarray(ln.x, np.float64) for ln in lines])
    y = np.concatenate([np.asarray(ln.y, np.float64) for ln in lines])
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    col = np.minimum(((x - lo) / ((hi - lo) or 1.0) * columns).astype(np.int64), columns - 1)
    order = np.argsort(col, kind="stable")
    col, y, x = col[order], y[order], x[order]
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    n = np.diff(np.r_[starts, len(y)])
    return (np.add.reduceat(x, starts) / n, np.minimum.reduceat(y, starts), np.add.reduceat(y, starts) / n,
            np.maximum.reduceat(y, starts))


def _axes(svg: Svg, left: float, top: float, plot_w: float, plot_h: float, x_axis: tuple, y_axis: tuple,
          x_title: str):
    """The axes of the plot ``plot_w`` x ``plot_h`` at (``left``, ``top``): a grid line and a label per y tick, both
    axis lines, a tick and a label per x tick and ``x_title`` under them. ``x_axis`` and ``y_axis`` are
    ``axis_ticks``' (lo, hi, ticks, labels); returns (px, py): a value's pixel on each axis."""
    (x_lo, x_hi, x_ticks, x_labels), (y_lo, y_hi, y_ticks, y_labels) = x_axis, y_axis
    base = top + plot_h

    def px(v):
        return left + (v - x_lo) / ((x_hi - x_lo) or 1.0) * plot_w

    def py(v):
        return base - (v - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h

    for v, label in zip(y_ticks, y_labels):
        svg.line(left, py(v), left + plot_w, py(v), GRID, cls="grid")
        svg.text(left - 6, py(v) + 4, label, anchor="end", cls="axis")
    svg.line(left, top, left, base, cls="axis")
    svg.line(left, base, left + plot_w, base, cls="axis")
    for v, label in zip(x_ticks, x_labels):
        svg.line(px(v), base, px(v), base + 4, cls="axis")
        svg.text(px(v), base + X_TICK_DY, label, anchor="middle", cls="axis")
    svg.text(left + plot_w / 2, base + X_TICK_DY + LINE_H, fit(x_title, plot_w), anchor="middle", cls="axis")
    return px, py


def series_chart(lines: Sequence[Line], *, unit: str, chart_id: str, what: str, width: float = HALF,
                 plot_h: float = PLOT_H, x_unit: str = "ms", x_title: str = "time since the trace's start") -> str:
    """One chart of ``lines`` over a shared time axis (``x`` in ``x_unit``), the y axis in ``unit``, the lowest
    and highest value marked and named at the right. Up to ``MAX_LINES`` lines: one each, with a legend on top
    when there are several; more: their range (a band) and mean per pixel column."""
    lines = [ln for ln in lines if len(ln.x)]
    finite = [ln.y[np.isfinite(ln.y)] for ln in lines]
    vals = np.concatenate(finite) if finite else np.zeros(0)
    v_lo, v_hi = (float(vals.min()), float(vals.max())) if len(vals) else (0.0, 1.0)
    banded = len(lines) > MAX_LINES
    if banded:
        entries = [(f"mean of {len(lines)} rows", lines[0].color), ("their range", "#9ab8d8")]
    else:
        entries = [(fit(ln.label, width / 2), ln.color) for ln in lines] if len(lines) > 1 else []
    legend = legend_layout(entries, width - 8)
    top = 10 + legend_height(legend) + (6 if legend else 0)
    bottom = X_TICK_DY + LINE_H + 10
    height = top + plot_h + bottom
    y_lo, y_hi, y_ticks, y_labels = axis_ticks(v_lo, v_hi, unit, plot_h, horizontal=False, max_count=5)
    left = max(text_w(s) for s in y_labels) + 12
    marks = [f"max {format_value(v_hi, unit)}", f"min {format_value(v_lo, unit)}"]
    right = max(text_w(s) for s in marks) + 12
    plot_w = width - left - right
    x_lo_v = min(float(ln.x[0]) for ln in lines) if lines else 0.0
    x_hi_v = max(float(ln.x[-1]) for ln in lines) if lines else 1.0
    x_lo, x_hi, x_ticks, x_labels = axis_ticks(x_lo_v, x_hi_v, x_unit, plot_w, horizontal=True, max_count=6)
    svg = Svg(chart_id, width, height, what)
    if legend:
        draw_legend(svg, 4, 6, legend)
    px, py = _axes(svg, left, top, plot_w, plot_h, (x_lo, x_hi, x_ticks, x_labels), (y_lo, y_hi, y_ticks, y_labels),
                   x_title)
    base = top + plot_h
    if banded and len(vals):
        bx, low, mean, high = _band(lines, x_lo, x_hi, int(plot_w))
        xs = px(bx)
        outline = np.r_[xs, xs[::-1]], np.r_[py(high), py(low)[::-1]]
        svg.path(_path(*outline) + " Z", fill="#9ab8d8", opacity=0.6,
                 title=f"the range of {len(lines)} rows per pixel column")
        svg.path(_path(xs, py(mean)), stroke=lines[0].color, width=1.5, title=f"the mean of {len(lines)} rows")
    else:
        for ln in lines:
            ok = np.isfinite(ln.y)
            xs, ys = envelope(np.asarray(ln.x, np.float64)[ok], np.asarray(ln.y, np.float64)[ok], int(plot_w))
            svg.path(_path(px(xs), py(ys)), stroke=ln.color, width=1.5, title=f"{ln.label}: {len(ln.y):,} samples")
    if lines and len(vals):  # the extremes: a dashed line each, a dot where they are, their values at the right
        for v, label, pick in ((v_hi, marks[0], np.nanargmax), (v_lo, marks[1], np.nanargmin)):
            svg.line(left, py(v), left + plot_w, py(v), "#999", dash="3,3", cls="grid")
            ln = max(lines, key=lambda ln: -np.inf if not np.isfinite(ln.y).any() else
                     (np.nanmax(ln.y) if pick is np.nanargmax else -np.nanmin(ln.y)))
            i = int(pick(ln.y))
            svg.circle(px(float(ln.x[i])), py(v), 3, ln.color,
                       title=f"{label} ({ln.label}) at {format_value(float(ln.x[i]), x_unit)}")
        y_max, y_min = py(v_hi) + 4, py(v_lo) + 4
        if y_min - y_max < LINE_H:  # close together: one above the other around their middle
            mid = (y_max + y_min) / 2
            y_max, y_min = mid - LINE_H / 2, mid + LINE_H / 2
        y_max = max(y_max, top + 8)
        y_min = max(min(y_min, base), y_max + LINE_H)
        svg.text(left + plot_w + 8, y_max, marks[0])
        svg.text(left + plot_w + 8, y_min, marks[1])
    return str(svg)


def distribution_chart(groups: Sequence[tuple[str, np.ndarray, str]], *, unit: str, chart_id: str, what: str,
                       more: int = 0, width: float = WIDE, plot_h: float = 170, bins: int = 24) -> str:
    """Per group (label, values, colour) its histogram over shared bins, as a step line (each group's share of
    its own values per bin, so a kernel of few calls shows its shape beside one of many), a legend under the
    axis with each group's count; ``more``: groups left out (said in the legend)."""
    finite = [v[np.isfinite(v)] for _, v, _ in groups]
    allv = np.concatenate(finite) if finite else np.zeros(0)
    v_lo, v_hi = (float(allv.min()), float(allv.max())) if len(allv) else (0.0, 1.0)
    entries = [(fit(f"{label} ({len(v):,})", width * 0.45), color) for (label, _, color), v in zip(groups, finite)]
    if more:
        entries.append((f"and {more:,} more kernels (the table has them)", "none"))
    legend = legend_layout(entries, width - 8)
    top = 10
    bottom = X_TICK_DY + LINE_H + 10 + legend_height(legend) + 6
    height = top + plot_h + bottom
    left_guess = text_w("100 %") + 12
    x_lo, x_hi, x_ticks, x_labels = axis_ticks(v_lo, v_hi, unit, width - left_guess - 40, horizontal=True, max_count=8)
    edges = np.linspace(x_lo, x_hi, bins + 1)
    shares = [np.histogram(v, bins=edges)[0] / max(len(v), 1) * 100 for v in finite]
    peak = max([float(s.max()) for s in shares if len(s)] + [1.0])
    y_lo, y_hi, y_ticks, y_labels = axis_ticks(0.0, peak, "%", plot_h, horizontal=False, max_count=5)
    left = max(text_w(s) for s in y_labels) + 12
    right = max(text_w(x_labels[-1]) / 2 + 6, 12)
    plot_w = width - left - right
    # the ticks again for the plot's final width
    x_lo, x_hi, x_ticks, x_labels = axis_ticks(v_lo, v_hi, unit, plot_w, horizontal=True, max_count=8)
    edges = np.linspace(x_lo, x_hi, bins + 1)
    shares = [np.histogram(v, bins=edges)[0] / max(len(v), 1) * 100 for v in finite]
    svg = Svg(chart_id, width, height, what)
    px, py = _axes(svg, left, top, plot_w, plot_h, (x_lo, x_hi, x_ticks, x_labels), (y_lo, y_hi, y_ticks, y_labels),
                   what)
    base = top + plot_h
    xs = px(edges)
    for (label, values, color), share in zip(groups, shares):
        ys = py(share)
        pts = [f"{xs[0]:.1f},{base:.1f}"]
        for i in range(bins):
            pts += [f"{xs[i]:.1f},{ys[i]:.1f}", f"{xs[i + 1]:.1f},{ys[i]:.1f}"]
        pts.append(f"{xs[-1]:.1f},{base:.1f}")
        d = "M" + " L".join(pts)
        svg.path(d + " Z", fill=color, opacity=0.12, title=f"{label}: {len(values):,} values")
        svg.path(d, stroke=color, width=1.5,
                 title=f"{label}: {len(values):,} values, {format_value(float(np.nanmin(values)), unit)} to "
                       f"{format_value(float(np.nanmax(values)), unit)}" if len(values) else label)
    draw_legend(svg, 4, base + X_TICK_DY + LINE_H + 10, legend,
                titles=[label for label, _, _ in groups] + ([] if not more else [f"{more} more"]))
    return str(svg)
