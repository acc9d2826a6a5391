"""Kernel submission intervals of XPU traces (unitrace's ``-s``): per kernel name the mean time queued
(appended -> submitted) and submitted -> started, from the ``xpu_submission_intervals`` metadata the
XPU backend writes (sums per kernel name over the whole trace). Added to the kernel report's rows.

The sums cover each trace whole: with a ``--start``/``--end`` window the report leaves them out
rather than show figures for rows it did not select.
"""
from __future__ import annotations

from typing import Iterable

METADATA_KEY = "xpu_submission_intervals"
KINDS = ("queued", "submit")
COLUMNS = (("queued_avg_ns", "Queued", "ns", "mean time from append to submit (waiting in the command list)"),
           ("submit_avg_ns", "Submit", "ns", "mean time from submit to the start of execution"))


def combine(traces: Iterable[tuple[int | None, dict | None]], by_rank: bool = False) -> dict[tuple, dict[str, float]]:
    """(rank or None, kernel name) -> {"queued_avg_ns": ..., "submit_avg_ns": ...} over the traces."""
    sums: dict[tuple, dict[str, list[float]]] = {}
    for rank, md in traces:
        if not isinstance(md, dict):
            continue
        names = md.get("names") if isinstance(md.get("names"), list) else []
        for kind in KINDS:
            part = md.get(kind) if isinstance(md.get(kind), dict) else {}
            counts, totals = part.get("count") or [], part.get("total") or []
            for name, count, total in zip(names, counts, totals):
                if not (isinstance(count, int) and count > 0 and isinstance(total, (int, float))):
                    continue
                acc = sums.setdefault((rank if by_rank else None, str(name)), {k: [0, 0.0] for k in KINDS})
                acc[kind][0] += count
                acc[kind][1] += float(total)
    out = {}
    for key, acc in sums.items():
        row = {f"{kind}_avg_ns": round(total / count, 3) for kind, (count, total) in acc.items() if count}
        if row:
            out[key] = row
    return out
