"""Nested host intervals (RecordFunction scopes, ranges) on threads: vectorized joins.

Intervals on one thread must nest, as scopes do. The depth of each interval and of each query
point come from the sorted starts and ends; the innermost interval around a point is then the
last interval of the point's depth that started at or before it (one searchsorted on a combined
(depth, start) key), so no Python loop runs per interval or per query (only per thread).
"""
from __future__ import annotations

import numpy as np

# Times are rebased per thread: 2**44 ns (~4.9 h) of trace, 2**19 nesting levels in one int64 key.
_TIME_BITS = 44


class _Thread:
    """One thread's intervals sorted by start (the longer, enclosing one first on a tie), with depths."""

    def __init__(self, idx: np.ndarray, start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> None:
        order = np.lexsort((-(end - start), start))
        self.idx, self.s, self.e = idx[order], start[order], end[order]
        self.ends_sorted = np.sort(self.e)
        self.depth = np.arange(1, len(self.s) + 1) - np.searchsorted(self.ends_sorted, self.s, "right")
        self.t0 = t0
        if t1 - t0 >= 1 << _TIME_BITS or int(self.depth.max()) >= 1 << (63 - _TIME_BITS):
            raise ValueError("trace too long or intervals nested too deep for the interval join "
                             f"(at most {1 << _TIME_BITS} ns and {1 << (63 - _TIME_BITS)} levels per thread)")
        key = (self.depth.astype(np.int64) << _TIME_BITS) + (self.s - t0)
        self.by_key = np.argsort(key, kind="stable")
        self.key_sorted = key[self.by_key]

    def at_depth(self, depth: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Position (in sorted order) of the last interval of ``depth`` starting at or before ``q``; -1 none."""
        pos = np.searchsorted(self.key_sorted, (depth.astype(np.int64) << _TIME_BITS) + (q - self.t0), "right") - 1
        ok = (depth > 0) & (pos >= 0)
        cand = self.by_key[np.where(ok, pos, 0)]
        ok &= self.depth[cand] == depth
        return np.where(ok, cand, -1)


def _threads(tid: np.ndarray, start: np.ndarray, end: np.ndarray, q_tid: np.ndarray, q_ts: np.ndarray):
    for t in np.intersect1d(np.unique(tid), np.unique(q_tid)).tolist():
        iv = np.flatnonzero(tid == t)
        qs = np.flatnonzero(q_tid == t)
        q = q_ts[qs]
        t0 = int(min(start[iv].min(), q.min()))
        t1 = int(max(end[iv].max(), q.max()))
        yield _Thread(iv, start[iv], end[iv], t0, t1), qs, q


def innermost_containing(tid: np.ndarray, start: np.ndarray, end: np.ndarray, q_tid: np.ndarray,
                         q_ts: np.ndarray) -> np.ndarray:
    """Index of the innermost interval on the same thread with start <= t < end, per query; -1 for none."""
    tid, start, end = np.asarray(tid), np.asarray(start, np.int64), np.asarray(end, np.int64)
    q_tid, q_ts = np.asarray(q_tid), np.asarray(q_ts, np.int64)
    out = np.full(len(q_ts), -1, np.int64)
    if not len(start) or not len(q_ts):
        return out
    for th, qs, q in _threads(tid, start, end, q_tid, q_ts):
        q_depth = np.searchsorted(th.s, q, "right") - np.searchsorted(th.ends_sorted, q, "right")
        cand = th.at_depth(q_depth, q)
        ok = cand >= 0
        c = np.where(ok, cand, 0)
        ok &= (th.s[c] <= q) & (q < th.e[c])
        out[qs[ok]] = th.idx[c[ok]]
    return out


def parents(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent index or -1, depth from 1) of every interval: the innermost other interval around it."""
    tid, start, end = np.asarray(tid), np.asarray(start, np.int64), np.asarray(end, np.int64)
    parent = np.full(len(start), -1, np.int64)
    depth = np.zeros(len(start), np.int64)
    if not len(start):
        return parent, depth
    for th, _, _ in _threads(tid, start, end, tid, start):
        depth[th.idx] = th.depth
        cand = th.at_depth(th.depth - 1, th.s)
        ok = cand >= 0
        parent[th.idx[ok]] = th.idx[cand[ok]]
    return parent, depth
