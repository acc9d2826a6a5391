"""The picture of each ``xpuprof analyze`` result, above its table on the HTML page: a row per rank (or per
rank and stream, per kernel, per copy kind) as bars split by what the time went to, or as ranges of a
distribution. Reads the result's rows only (HTA's column names, µs), so every engine's result draws alike.

- temporal: each rank's kernel span as idle / compute / non-compute time (HTA's three parts);
- stragglers: what each rank waits in collectives against the others (``cluster.straggler_html``) and each
  rank's step times over the steps (quartiles, extremes; the ranks' median dashed);
- idle: each stream's idle time by cause; overlap: each rank's communication time, overlapped or not;
- kernels, kernel-types: time per kernel (coloured by type) or per type;
- queue, memory-bw: each stream's queue length or each copy kind's bandwidth as a range;
- launch: each rank's launch delays (median to p99 as a box, to the max as a whisker, the mean as a tick),
  or with ``--events`` the distribution of every launch's delay per rank."""
from __future__ import annotations

import html
import math
from collections import defaultdict

import numpy as np

from ..text import format_percent, format_us, format_value
from .bars import Part, Spread, range_chart, signed_bars, stacked_bars  # noqa: F401 - the set analyses draw with
from .svg import IDLE, PALETTE

RED = "#d62728"
_IDLE_COLORS = {"host_wait": PALETTE[1], "kernel_wait": PALETTE[4], "other": IDLE}
_TYPE_COLORS = {"COMPUTATION": PALETTE[0], "COMMUNICATION": PALETTE[1], "MEMORY": PALETTE[2], "OTHER": PALETTE[9]}


def _h2(text: str) -> str:
    return f"<h2>{html.escape(text)}</h2>"


def _ns(us) -> float:
    return 0.0 if us is None or (isinstance(us, float) and math.isnan(us)) else float(us) * 1e3


def _temporal(result) -> list[str]:
    rows = result.rows
    labels = [f"rank {r['rank']}" for r in rows]
    parts = [Part("idle", IDLE, [_ns(r["idle_us"]) for r in rows]),
             Part("compute", PALETTE[0], [_ns(r["compute_us"]) for r in rows]),
             Part("non-compute (communication, memory, other kernels)", PALETTE[1],
                  [_ns(r["non_compute_us"]) for r in rows])]
    notes = [f"{format_us(r['kernel_us'])} span, {format_percent(r['idle_pct'])} idle" for r in rows]
    titles = [f"rank {r['rank']}: idle {format_us(r['idle_us'])} ({format_percent(r['idle_pct'])}), compute "
              f"{format_us(r['compute_us'])} ({format_percent(r['compute_pct'])}), non-compute "
              f"{format_us(r['non_compute_us'])} ({format_percent(r['non_compute_pct'])}) of its kernel span "
              f"{format_us(r['kernel_us'])}" for r in rows]
    return [_h2("GPU time per rank: idle, compute, non-compute"),
            stacked_bars(labels, parts, unit="ns", chart_id="temporal", what="time in each rank's kernel span",
                         notes=notes, titles=titles)]


def _stragglers(result) -> list[str]:
    from ..cluster.straggler_html import figure

    out = [_h2("Waits in collectives per rank"), figure(result.rows, result.details)] if result.rows else []
    steps: dict[int, list[float]] = defaultdict(list)
    for d in result.details:
        if d.get("step_us") is not None and math.isfinite(d["step_us"]):
            steps[d["rank"]].append(float(d["step_us"]) * 1e3)
    flagged = {r["rank"] for r in result.rows if r.get("straggler")}
    ranks = [r["rank"] for r in result.rows if steps.get(r["rank"])]
    if not ranks:
        return out
    spreads, notes, titles = [], [], []
    for rank in ranks:
        v = np.asarray(steps[rank])
        q = np.percentile(v, [0, 25, 50, 75, 100]).tolist()
        spreads.append(Spread(*q, color=RED if rank in flagged else PALETTE[0]))
        notes.append(f"median {format_value(q[2], 'ns')}, {len(v)} steps")
        titles.append(f"rank {rank}: {len(v)} steps, {format_value(q[0], 'ns')} to {format_value(q[4], 'ns')}, "
                      f"median {format_value(q[2], 'ns')}" + (" (a straggler)" if rank in flagged else ""))
    median = float(np.median([s.median for s in spreads]))
    key = [("a rank", PALETTE[0])] + ([("a straggler", RED)] if flagged else [])
    out += [_h2("Step time per rank"),
            range_chart([f"rank {r}" for r in ranks], spreads, unit="ns", chart_id="step-times",
                        what="step time over the steps (box: the middle half, whiskers: the extremes)", notes=notes,
                        titles=titles, reference=(median, f"the ranks' median {format_value(median, 'ns')}"), key=key)]
    return out


def _idle(result) -> list[str]:
    by_stream: dict[tuple, dict] = defaultdict(dict)
    for r in result.rows:
        by_stream[(r["rank"], r["stream"])][r["idle_category"]] = _ns(r["idle_time_us"])
    cats = list(dict.fromkeys(r["idle_category"] for r in result.rows))
    keys = list(by_stream)
    parts = [Part(c.replace("_", " "), _IDLE_COLORS.get(c, PALETTE[len(cats) % 10]),
                  [by_stream[k].get(c, 0.0) for k in keys]) for c in cats]
    notes = [format_value(sum(by_stream[k].values()), "ns") + " idle" for k in keys]
    return [_h2("GPU idle time per rank and stream, by cause"),
            stacked_bars([f"rank {r} stream {s}" for r, s in keys], parts, unit="ns", chart_id="idle",
                         what="idle time by cause", notes=notes)]


def _overlap(result) -> list[str]:
    rows = result.rows
    over = [_ns(r["overlapped_us"]) for r in rows]
    comm = [_ns(r["communication_us"]) for r in rows]
    parts = [Part("overlapped by computation", PALETTE[2], over),
             Part("not overlapped", PALETTE[1], [max(c - o, 0.0) for c, o in zip(comm, over)])]
    notes = [f"{format_percent(r['comp_comm_overlap_pct'])} overlapped" for r in rows]
    return [_h2("Communication time per rank, overlapped by computation or not"),
            stacked_bars([f"rank {r['rank']}" for r in rows], parts, unit="ns", chart_id="overlap",
                         what="communication time", notes=notes)]


def _kernels(result) -> list[str]:
    rows = result.rows
    types = list(dict.fromkeys(r["kernel_type"] for r in rows))
    by_rank = "rank" in result.columns
    labels = [(f"rank {r['rank']}: " if by_rank else "") + str(r["name"]) for r in rows]
    parts = [Part(t.lower(), _TYPE_COLORS.get(t, PALETTE[9]), [_ns(r["sum_us"]) if r["kernel_type"] == t else 0.0
                                                               for r in rows]) for t in types]
    notes = [f"{format_us(r['sum_us'])}, {r['calls']:,} calls" for r in rows]
    return [_h2("Time per kernel" + (" and rank" if by_rank else "")),
            stacked_bars(labels, parts, unit="ns", chart_id="kernels", what="total time per kernel", notes=notes)]


def _kernel_types(result) -> list[str]:
    rows = result.rows
    parts = [Part("time", PALETTE[0], [_ns(r["sum_us"]) for r in rows])]
    notes = [f"{format_us(r['sum_us'])} ({format_percent(r['percentage'])})" for r in rows]
    return [_h2("Time per kernel type"),
            stacked_bars([str(r["kernel_type"]).lower() for r in rows], parts, unit="ns", chart_id="kernel-types",
                         what="total time per kernel type", notes=notes)]


def _described(result, label_of, chart_id: str, heading: str, what: str, unit: str, scale: float = 1.0) -> list[str]:
    """Rows of count/mean/min/p25/p50/p75/max (queue, memory-bw) as ranges."""
    rows = [r for r in result.rows if r.get("p50") is not None]
    if not rows:
        return []
    spreads = [Spread(*(float(r[k]) * scale for k in ("min", "p25", "p50", "p75", "max"))) for r in rows]
    notes = [f"median {format_value(s.median, unit)}, {int(r['count']):,} samples" for s, r in zip(spreads, rows)]
    return [_h2(heading), range_chart([label_of(r) for r in rows], spreads, unit=unit, chart_id=chart_id, what=what,
                                      notes=notes)]


def _launch(result) -> list[str]:
    if "launch_delay_us" in result.columns:  # --events: every launch
        from .lines import distribution_chart

        by_rank: dict[int, list[float]] = defaultdict(list)
        for r in result.rows:
            if r.get("launch_delay_us") is not None:
                by_rank[r["rank"]].append(float(r["launch_delay_us"]) * 1e3)
        ranks = sorted(by_rank)
        groups = [(f"rank {rank}", np.asarray(by_rank[rank]), PALETTE[i % 10]) for i, rank in enumerate(ranks[:8])]
        if not groups:
            return []
        return [_h2("Launch delay distribution per rank"),
                distribution_chart(groups, unit="ns", chart_id="launch-delays", more=max(len(ranks) - 8, 0),
                                   what="launch delay: share of each rank's launches")]
    rows = [r for r in result.rows if r.get("launch_delay_p50_us") is not None]
    if not rows:
        return []
    spreads = [Spread(_ns(r["launch_delay_p50_us"]), _ns(r["launch_delay_p50_us"]), _ns(r["launch_delay_mean_us"]),
                      _ns(r["launch_delay_p99_us"]), _ns(r["launch_delay_max_us"])) for r in rows]
    notes = [f"mean {format_us(r['launch_delay_mean_us'])}, {r['launches']:,} launches" for r in rows]
    return [_h2("Launch delay per rank"),
            range_chart([f"rank {r['rank']}" for r in rows], spreads, unit="ns", chart_id="launch",
                        what="launch delay (box: median to p99, whisker: to the max, tick: the mean)", notes=notes)]


_FIGURES = {
    "temporal": _temporal, "stragglers": _stragglers, "idle": _idle, "overlap": _overlap, "kernels": _kernels,
    "kernel-types": _kernel_types, "launch": _launch,
    "queue": lambda r: _described(r, lambda x: f"rank {x['rank']} stream {x['stream']}", "queue",
                                  "Queue length per rank and stream", "queue length [operations]", ""),
    "memory-bw": lambda r: _described(r, lambda x: f"rank {x['rank']}: {x['name']}", "memory-bw",
                                      "Memory bandwidth per rank and copy kind", "bandwidth", "GB/s"),
}


def figures(result) -> list[str]:
    """The headings and charts of one analysis result (none for an empty one)."""
    draw = _FIGURES.get(result.analysis)
    return draw(result) if draw is not None and result.rows else []


def page(result) -> str:
    """The HTML page of one analysis: its title, notes, charts and table (``analysis.html``'s page)."""
    from .page import _esc, _page

    title = result.title or f"xpuprof analyze {result.analysis}"
    notes = [f'<p class="meta">{_esc(n)}</p>' for n in result.notes]
    return _page(title, [f"<h1>{_esc(title)}</h1>", *notes, *figures(result), "<h2>Table</h2>",
                         f'<div class="scroll">{result.html_table(result.analysis)}</div>'])
