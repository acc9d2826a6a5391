"""Per (name, category) slice counts and durations of one rank, accumulated while its slices are written
(the store's ``summary`` table): ``xpuprof report`` over a store reads these few rows per rank instead
of the events. Durations as the report reads them: an absent duration counts as 0."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class SliceSummary:
    def __init__(self) -> None:
        self.groups: dict[tuple, list] = {}  # (name or None, cat or None) -> [count, total, min, max]

    def add(self, names: Sequence, name_ids: np.ndarray, cats: Sequence, cat_ids: np.ndarray, dur: np.ndarray) -> None:
        """Rows given as ids into ``names``/``cats`` (-1: none) and ns durations (absent ones already 0)."""
        n = len(dur)
        if not n:
            return
        name_ids = np.asarray(name_ids, np.int64)
        cat_ids = np.asarray(cat_ids, np.int64)
        if name_ids.strides and name_ids.strides[0] == 0:
            name_ids = np.full(n, name_ids[0])
        if cat_ids.strides and cat_ids.strides[0] == 0:
            cat_ids = np.full(n, cat_ids[0])
        width = int(cat_ids.max()) + 2 if n else 1
        key = (name_ids + 1) * width + (cat_ids + 1)
        uniq, inv = np.unique(key, return_inverse=True)
        dur = np.asarray(dur, np.int64)
        counts = np.bincount(inv, minlength=len(uniq))
        totals = np.zeros(len(uniq), np.int64)
        np.add.at(totals, inv, dur)
        lows = np.full(len(uniq), np.iinfo(np.int64).max)
        np.minimum.at(lows, inv, dur)
        highs = np.full(len(uniq), np.iinfo(np.int64).min)
        np.maximum.at(highs, inv, dur)
        for k, c, s, lo, hi in zip(uniq.tolist(), counts.tolist(), totals.tolist(), lows.tolist(), highs.tolist()):
            ni, ci = k // width - 1, k % width - 1
            g = (names[ni] if ni >= 0 else None, cats[ci] if ci >= 0 else None)
            got = self.groups.get(g)
            if got is None:
                self.groups[g] = [c, s, lo, hi]
            else:
                got[0] += c
                got[1] += s
                got[2], got[3] = min(got[2], lo), max(got[3], hi)

    def add_rows(self, rows: Sequence[tuple]) -> None:
        """(name, cat, dur or None) per row (few rows: objects read one at a time)."""
        for name, cat, dur in rows:
            d = int(dur or 0)
            got = self.groups.get((name, cat))
            if got is None:
                self.groups[(name, cat)] = [1, d, d, d]
            else:
                got[0] += 1
                got[1] += d
                got[2], got[3] = min(got[2], d), max(got[3], d)

    def columns(self) -> dict:
        from .arrowcols import ints, text_dict_column

        keys = list(self.groups)
        vals = [self.groups[k] for k in keys]
        return {"name": text_dict_column([k[0] for k in keys]), "cat": text_dict_column([k[1] for k in keys]),
                "count": ints([v[0] for v in vals]), "total_ns": ints([v[1] for v in vals]),
                "min_ns": ints([v[2] for v in vals]), "max_ns": ints([v[3] for v in vals])}
