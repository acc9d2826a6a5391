"""EU stall-reason shares between two runs: a reason whose share of a kernel's samples grew by more than
the threshold (in percentage points) is flagged, like a kernel that got slower.

Each side's shares come with the side (``diff.read_side``: a trace, a directory of traces or the JSON of
``xpuprof report --stalls``); a side without stall samples (a run summary, a trace recorded without stall
sampling) has nothing to compare.
"""
from __future__ import annotations


def diff_stalls(a: dict[tuple[str, str], tuple[float, int]] | None,
                b: dict[tuple[str, str], tuple[float, int]] | None, *, threshold_points: float) -> list[dict]:
    """One row per (kernel, reason) present on both sides: shares, their change in points, and whether it
    grew by more than ``threshold_points`` ("grew") or fell by more ("fell")."""
    if not a or not b:
        return []
    totals_a = {k: n for (k, _r), (_s, n) in a.items()}
    totals_b = {k: n for (k, _r), (_s, n) in b.items()}
    rows = []
    for key in dict.fromkeys([*a, *b]):
        kernel, reason = key
        if kernel not in totals_a or kernel not in totals_b:
            continue  # a kernel sampled on one side only has no share to compare
        sa, sb = a.get(key, (0.0, 0))[0], b.get(key, (0.0, 0))[0]
        delta = sb - sa
        status = "grew" if delta > threshold_points else "fell" if delta < -threshold_points else "same"
        rows.append({"kernel": kernel, "reason": reason, "a_pct": round(sa, 3), "b_pct": round(sb, 3),
                     "delta_points": round(delta, 3), "status": status, "a_samples": totals_a[kernel],
                     "b_samples": totals_b[kernel]})
    order = {"grew": 0, "fell": 1, "same": 2}
    rows.sort(key=lambda r: (order[r["status"]], -abs(r["delta_points"])))
    return rows
