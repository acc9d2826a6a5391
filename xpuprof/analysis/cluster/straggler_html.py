"""The stragglers' picture (``analyze stragglers --format html`` and the report's per-rank view): per rank
a bar of the time it waits per step in collectives, a tick at what the other ranks wait (their median),
stragglers in red; to its right one cell per step, coloured where the others waited for the rank (red
for a straggler's steps). Without
collectives the bars are each rank's mean step time against the others'. Inline SVG laid out for its
text (a monospace advance per character, as ``analysis.html``'s charts), so nothing is clipped."""
from __future__ import annotations

import html
from typing import Sequence

BAR_COLOR = "#2f6fde"
STRAGGLER_COLOR = "#d62728"
BEHIND_CELL = "#f2a65a"  # a step the others waited for a rank that is not a straggler
IDLE_CELL = "#e4e4e4"
FONT_PX = 11
CHAR_W = 0.62 * FONT_PX
ROW = 18
BAR_W = 360
MAX_CELLS = 20_000  # per-step cells drawn at most (ranks x steps); beyond, the bars alone


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _us(value) -> str:
    return "?" if value is None else f"{value:,.0f} µs"


def figure(rows: Sequence[dict], steps: Sequence[dict] = (), *, chart_id: str = "straggler-waits") -> str:
    """The SVG of a stragglers result's rows (``stragglers.result``) and its per-(rank, step) rows."""
    if not rows:
        return ""
    waits = any(r.get("wait_us") is not None for r in rows)
    key, other_key = ("wait_us", "others_wait_us") if waits else ("mean_step_us", None)
    values = [r.get(key) or 0.0 for r in rows]
    others = [r.get(other_key) for r in rows] if other_key else [None] * len(rows)
    peak = max([*values, *(o or 0.0 for o in others)], default=0.0) or 1.0
    labels = [f"rank {r['rank']}" for r in rows]
    notes = [(f"{_us(v)} (others {_us(o)})" if o is not None else _us(v)) for v, o in zip(values, others)]
    label_w = max(_w(t) for t in labels) + 10
    note_w = max(_w(t) for t in notes) + 10
    step_ids = sorted({s["step"] for s in steps})
    cells = len(step_ids) * len(rows) <= MAX_CELLS and step_ids
    cell = max(2.0, min(12.0, 480 / len(step_ids))) if cells else 0.0
    strip_x = label_w + BAR_W + note_w
    head = "waits per step in collectives (tick: the others' median)" if waits else "mean step time (tick: none)"
    strip_head = "steps the others waited for it (red: a straggler's)" if cells else ""
    width = int(max(strip_x + cell * len(step_ids) + 10, label_w + _w(head) + 10, strip_x + _w(strip_head) + 10))
    height = 24 + ROW * len(rows) + 8
    scale = BAR_W / peak
    parts = [f'<svg class="chart" id="{_esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(head)}">',
             f'<text class="axis" x="{label_w}" y="14">{_esc(head)}</text>']
    if cells:
        parts.append(f'<text class="axis" x="{strip_x:.1f}" y="14">{_esc(strip_head)}</text>')
    by_cell = {(s["rank"], s["step"]): s for s in steps}
    for i, (r, v, o, note) in enumerate(zip(rows, values, others, notes)):
        y = 22 + i * ROW
        red = r.get("straggler")
        why = r.get("explanation") or note
        parts.append(f'<text x="{label_w - 6}" y="{y + ROW * 0.7:.1f}" text-anchor="end">{_esc(labels[i])}</text>')
        parts.append(f'<rect class="bar{" straggler" if red else ""}" x="{label_w}" y="{y + 3}" '
                     f'width="{max(1.0, scale * v):.1f}" height="{ROW - 6}" fill="{STRAGGLER_COLOR if red else BAR_COLOR}">'
                     f'<title>rank {_esc(r["rank"])}: {_esc(why)}</title></rect>')
        if o is not None:
            x = label_w + scale * o
            parts.append(f'<line x1="{x:.1f}" y1="{y + 1}" x2="{x:.1f}" y2="{y + ROW - 1}" stroke="#111" '
                         f'stroke-width="2"><title>the other ranks: {_esc(_us(o))}</title></line>')
        parts.append(f'<text x="{label_w + BAR_W + 6}" y="{y + ROW * 0.7:.1f}">{_esc(note)}</text>')
        if cells:
            for j, step in enumerate(step_ids):
                s = by_cell.get((r["rank"], step))
                if s is None:
                    continue
                tip = (f"rank {r['rank']}, step {step}: " + (
                    f"waits {_us(s.get('wait_us'))}, the others {_us(s.get('others_wait_us'))}" if waits else
                    f"step {_us(s.get('step_us'))}, starts {_us(s.get('start_lag_us'))} after the earliest rank"))
                if s.get("behind"):
                    tip += f"; the others wait for it {_us(s.get('delay_us'))}"
                parts.append(f'<rect class="step" x="{strip_x + j * cell:.1f}" y="{y + 3}" width="{max(1.0, cell - 1):.1f}" '
                             f'height="{ROW - 6}" fill="{_cell_color(s.get("behind"), red)}">'
                             f'<title>{_esc(tip)}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def _cell_color(behind: bool, straggler: bool) -> str:
    return (STRAGGLER_COLOR if straggler else BEHIND_CELL) if behind else IDLE_CELL


def _w(text: str) -> float:
    return len(text) * CHAR_W
