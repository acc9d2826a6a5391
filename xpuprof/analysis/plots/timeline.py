"""The timeline overview of one trace (``analysis.step_timeline``): a band of its steps, each named where its
box has room and described on hover (its time and what each kind of work took of it), and a lane per kind
of work with the time it kept the device busy; each lane's share of the trace at its right. Intervals
closer than a pixel are drawn as one box, so the page stays small whatever the trace holds."""
from __future__ import annotations

import numpy as np

from ..step_timeline import StepTimeline
from ..text import format_ns, format_percent
from .bars import _x_axis, Frame
from .svg import GRID, LINE_H, PALETTE, WIDE, Svg, axis_ticks, text_w

STEP_ROW = 22
LANE_ROW = 18
STEP_FILLS = ("#dbe4f0", "#b9cae2")
LANE_COLORS = {"compute kernels": PALETTE[0], "communication kernels": PALETTE[1], "memory kernels": PALETTE[4],
               "other kernels": PALETTE[9], "copies": PALETTE[2], "fills": PALETTE[6], "host ranges": PALETTE[0],
               "operators": PALETTE[3]}


def _pixel_boxes(starts: np.ndarray, ends: np.ndarray, x0: float, scale: float) -> list[tuple[float, float]]:
    """Intervals as (x, width) boxes, those less than a pixel apart joined."""
    if not len(starts):
        return []
    xs, xe = x0 + starts * scale, x0 + ends * scale
    new = np.r_[True, xs[1:] - xe[:-1] >= 1.0]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(xs) - 1]
    return [(a, max(b - a, 1.0)) for a, b in zip(xs[first].tolist(), np.maximum.accumulate(xe)[last].tolist())]


def timeline_chart(tl: StepTimeline, *, chart_id: str = "timeline", width: float = WIDE) -> str:
    """The SVG of ``tl`` (see the module docstring)."""
    rows = ["steps", *(lane.name for lane in tl.lanes)]
    notes = [f"{len(tl.step_names):,} steps" if tl.step_names else "no steps"]
    notes += [f"{format_percent(100 * lane.busy_ns / tl.span_ns if tl.span_ns else 0)} busy" for lane in tl.lanes]
    label_w = max(text_w(r) for r in rows) + 10
    note_w = max(text_w(n) for n in notes) + 10
    span_ms = tl.span_ns / 1e6 or 1e-6
    plot_w = width - label_w - note_w - 4
    lo, hi, ticks_v, tick_labels = axis_ticks(0.0, span_ms, "ms", plot_w, horizontal=True, max_count=10)
    note_w = max(note_w, text_w(tick_labels[-1]) / 2 + 6)
    plot_w = width - label_w - note_w - 4
    lo, hi, ticks_v, tick_labels = axis_ticks(0.0, span_ms, "ms", plot_w, horizontal=True, max_count=10)
    f = Frame(label_w, label_w, plot_w, label_w + plot_w + 8, 8)
    top = 8
    axis_y = top + STEP_ROW + LANE_ROW * len(tl.lanes) + 4
    height = axis_y + 4 + 2 * LINE_H + 12
    what = "timeline of " + (f"rank {tl.rank}" if tl.rank is not None else tl.source)
    svg = Svg(chart_id, width, height, what)
    scale = plot_w / ((hi - lo) * 1e6 or 1.0)  # px per ns
    for v in ticks_v:
        svg.line(label_w + v * 1e6 * scale, top, label_w + v * 1e6 * scale, axis_y, GRID, cls="grid")
    # the steps
    svg.text(label_w - 8, top + STEP_ROW * 0.68, "steps", anchor="end")
    starts, ends = tl.step_starts, tl.step_ends
    busy = {lane.name: lane.busy_between(starts, ends) for lane in tl.lanes}
    for i, name in enumerate(tl.step_names):
        x, w = label_w + starts[i] * scale, max((ends[i] - starts[i]) * scale, 1.0)
        step_ns = int(ends[i] - starts[i])
        parts = "; ".join(f"{lane}: {format_ns(float(b[i]))} ({format_percent(100 * b[i] / step_ns if step_ns else 0)})"
                          for lane, b in busy.items())
        tip = f"{name}: {format_ns(step_ns)} from {format_ns(float(starts[i]))}" + (f"; {parts}" if parts else "")
        svg.rect(x, top + 2, w, STEP_ROW - 4, STEP_FILLS[i % 2], cls="step", title=tip)
        label = "#" + name.rsplit("#", 1)[-1]
        if text_w(label) + 6 <= w:
            svg.text(x + w / 2, top + STEP_ROW * 0.68, label, anchor="middle", title=tip)
    if not tl.step_names:  # the whole trace as one span, so the band says so
        svg.rect(label_w, top + 2, tl.span_ns * scale, STEP_ROW - 4, STEP_FILLS[0], cls="step",
                 title="no ProfilerStep ranges in this trace")
    svg.text(f.note_x, top + STEP_ROW * 0.68, notes[0])
    # the lanes
    for k, lane in enumerate(tl.lanes):
        y = top + STEP_ROW + k * LANE_ROW
        svg.text(label_w - 8, y + LANE_ROW * 0.7, lane.name, anchor="end")
        color = LANE_COLORS.get(lane.name, PALETTE[9])
        tip = f"{lane.name}: busy {format_ns(lane.busy_ns)} over {lane.events:,} events"
        for x, w in _pixel_boxes(lane.starts, lane.ends, label_w, scale):
            svg.rect(x, y + 3, w, LANE_ROW - 6, color, cls="busy", title=tip)
        svg.text(f.note_x, y + LANE_ROW * 0.7, notes[k + 1])
    _x_axis(svg, f, axis_y, ticks_v, tick_labels, lo, hi, "time since the trace's start")
    return str(svg)
