"""Per (name, category) slice counts and durations of one rank, accumulated while its slices are written
(the store's ``summary`` table): ``xpuprof report`` over a store reads these few rows per rank instead
of the events. Durations as the report reads them: an absent duration counts as 0."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class SliceSummary:
    def __init__(self) -> None:
        # (name or None, cat or None) -> [count, total, min, max, timed (the count with a duration)]
        self.groups: dict[tuple, list] = {}

    def add(self, names: Sequence, name_ids: np.ndarray, cats: Sequence, cat_ids: np.ndarray, dur: np.ndarray,
            timed: np.ndarray | None = None) -> None:
        """Rows given as ids into ``names``/``cats`` (-1: none) and ns durations (absent ones already 0,
        and False in ``timed``; None: every row has its duration)."""
        n = len(dur)
        if not n:
            return
        name_ids = np.asarray(name_ids, np.int64)
        cat_ids = np.asarray(cat_ids, np.int64)
        if name_ids.strides and name_ids.strides[0] == 0:
            name_ids = np.full(n, name_ids[0])
        if cat_ids.strides and cat_ids.strides[0] == 0:
            cat_ids = np.full(n, cat_ids[0])
        names_u, name_local = _dense(name_ids + 1)  # +1: -1 (none) becomes 0
        cats_u, cat_local = _dense(cat_ids + 1)
        key = name_local * len(cats_u) + cat_local
        uniq, inv = _dense(key)
        dur = np.asarray(dur, np.int64)
        counts = np.bincount(inv, minlength=len(uniq))
        timed_counts = counts if timed is None else np.bincount(inv, weights=np.asarray(timed, bool),
                                                                minlength=len(uniq)).astype(np.int64)
        totals = np.zeros(len(uniq), np.int64)
        np.add.at(totals, inv, dur)
        lows = np.full(len(uniq), np.iinfo(np.int64).max)
        np.minimum.at(lows, inv, dur)
        highs = np.full(len(uniq), np.iinfo(np.int64).min)
        np.maximum.at(highs, inv, dur)
        for k, c, s, lo, hi, t in zip(uniq.tolist(), counts.tolist(), totals.tolist(), lows.tolist(), highs.tolist(),
                                      timed_counts.tolist()):
            ni, ci = int(names_u[k // len(cats_u)]) - 1, int(cats_u[k % len(cats_u)]) - 1
            g = (names[ni] if ni >= 0 else None, cats[ci] if ci >= 0 else None)
            got = self.groups.get(g)
            if got is None:
                self.groups[g] = [c, s, lo, hi, t]
            else:
                got[0] += c
                got[1] += s
                got[2], got[3] = min(got[2], lo), max(got[3], hi)
                got[4] += t

    def add_rows(self, rows: Sequence[tuple]) -> None:
        """(name, cat, dur or None) per row (few rows: objects read one at a time)."""
        for name, cat, dur in rows:
            d = int(dur or 0)
            t = int(dur is not None)
            got = self.groups.get((name, cat))
            if got is None:
                self.groups[(name, cat)] = [1, d, d, d, t]
            else:
                got[0] += 1
                got[1] += d
                got[2], got[3] = min(got[2], d), max(got[3], d)
                got[4] += t

    def lists(self) -> dict:
        """The rank metadata's summary columns (one list per column; a string list holds None as "")."""
        keys = sorted(self.groups, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or ""))
        vals = [self.groups[k] for k in keys]
        return {"summary_name": [k[0] for k in keys], "summary_cat": [k[1] for k in keys],
                "summary_count": [v[0] for v in vals], "summary_total_ns": [v[1] for v in vals],
                "summary_min_ns": [v[2] for v in vals], "summary_max_ns": [v[3] for v in vals],
                "summary_timed": [v[4] for v in vals]}

def _dense(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values, each row's index among them) of non-negative ids: by counting when the
    ids are dense enough, else by sorting."""
    top = int(ids.max()) + 1 if len(ids) else 1
    if top <= 4 * len(ids) + (1 << 20):
        uniq = np.flatnonzero(np.bincount(ids, minlength=top))
        remap = np.zeros(top, np.int64)
        remap[uniq] = np.arange(len(uniq))
        return uniq, remap[ids]
    return np.unique(ids, return_inverse=True)
