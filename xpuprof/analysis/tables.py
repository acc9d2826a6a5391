"""The one label set of the tables ``report``, ``run``, ``diff`` and ``analyze`` print, and the per-name table
``report`` and ``run`` share.

One label per quantity, one format per column, a unit in every numeric header or cell:

=========  ==========================================================  ============================
label      quantity (cells)                                            torch's key_averages label
=========  ==========================================================  ============================
Calls      how many slices have the name (``12,345``)                  ``# of Calls``
Total      inclusive time, added over the calls (``3.606 us``)          ``CPU total`` / ``XPU total``
Self       total minus the slices nested directly inside               ``Self CPU`` / ``Self XPU``
Self %     self time as a share of every row's self time (``76.4 %``)  ``Self CPU %`` / ``Self XPU %``
Avg        total / calls                                               ``CPU time avg`` / ``XPU time avg``
Min, Max   the shortest and longest call                               (none)
<metric>   a per-kernel metric's mean, in its unit (``19.8 %``)         (none)
=========  ==========================================================  ============================

docs/cli.md carries the same table for users. ``key_averages().table()`` keeps torch's own labels.
"""
from __future__ import annotations

from typing import Sequence

from .text import Column, format_count, format_ns, format_percent, format_value, render_table

CALLS, TOTAL, SELF, SELF_PCT, AVG, MIN, MAX = "Calls", "Total", "Self", "Self %", "Avg", "Min", "Max"
TORCH_LABELS = {CALLS: "# of Calls", TOTAL: "CPU total / <device> total", SELF: "Self CPU / Self <device>",
                SELF_PCT: "Self CPU % / Self <device> %", AVG: "CPU time avg / <device> time avg"}
# columns whose cells are counts or identifiers: the label names what is counted
COUNT_LABELS = frozenset({CALLS, "# of Calls", "Rank", "Iterations", "Traces", "Samples", "Steps", "Points",
                          "Calls A/B", "Samples A/B", "groups", "metrics", "derived", "Stream", "Row", "SIMD"})
# --sort words of the per-name table -> the column that stays whatever the width
SORT_COLUMN = {"total": TOTAL, "self": SELF, "calls": CALLS, "avg": AVG, "max": MAX, "name": None}


def metric_label(metric: str, unit: str, stat: str = "") -> str:
    """A metric column's label: its name (the cells carry the unit), ``[no unit]`` when the trace gives none."""
    return f"{metric}{' ' + stat if stat else ''}{'' if unit else ' [no unit]'}"


def stats_table(stats: Sequence, *, units: dict[str, str], nests: bool, title: str, width: int | None,
                name_label: str = "Name", sort_by: str = "total", intervals=None, interval_of=None,
                widen_hint: str = "--wide shows them") -> str:
    """The per-name table of ``report`` and ``run`` (``report.NameStat`` rows) fitted to ``width``."""
    metrics = list(dict.fromkeys(m for s in stats for m in s.metrics))
    by_rank = any(getattr(s, "rank", None) is not None for s in stats)
    sort_col = SORT_COLUMN.get(sort_by)
    spec: list[tuple[Column, object]] = []
    if by_rank:
        spec.append((Column("Rank"), lambda s: str(s.rank)))
    spec.append((Column(name_label, "left", wrap=True, min_width=16), lambda s: s.name))
    spec.append((Column(CALLS), lambda s: format_count(s.calls)))
    if nests:
        spec.append((Column(SELF), lambda s: format_ns(s.self_ns or 0)))
    # left out first when the terminal is narrow: a metric's min/max, then Min/Max, Self %, the metric, Avg
    spec += [(Column(SELF_PCT, optional=4), lambda s: format_percent(s.pct)),
             (Column(TOTAL), lambda s: format_ns(s.total_ns)),
             (Column(AVG, optional=2), lambda s: format_ns(s.avg_ns)),
             (Column(MIN, optional=5), lambda s: format_ns(s.min_ns)),
             (Column(MAX, optional=5), lambda s: format_ns(s.max_ns))]
    for m in metrics:
        unit = units.get(m, "")
        spec.append((Column(metric_label(m, unit), optional=3),
                     lambda s, m=m, u=unit: format_value(s.metrics[m], u) if m in s.metrics else ""))
        for stat, attr in (("min", "metric_min"), ("max", "metric_max")):
            spec.append((Column(metric_label(m, unit, stat), optional=6),
                         lambda s, m=m, u=unit, a=attr: format_value(getattr(s, a)[m], u) if m in getattr(s, a) else ""))
        if sort_by and sort_by.split("::")[0].split(" ")[0].lower() == m.lower():
            sort_col = metric_label(m, unit, sort_by.split(" ", 1)[1] if " " in sort_by else "")
    for key, label, *_ in intervals or ():
        spec.append((Column(label, optional=7), lambda s, k=key: format_ns(interval_of(s)[k])
                     if k in interval_of(s) else ""))
    from dataclasses import replace

    spec = [(replace(c, optional=0) if c.header == sort_col else c, f) for c, f in spec]
    rows = [[f(s) for _, f in spec] for s in stats]
    return render_table([c for c, _ in spec], rows, title=title, width=width, widen_hint=widen_hint)
