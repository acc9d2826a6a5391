"""The vectorized joins over nested host intervals (op <- runtime call, op <- parent op)
agree with a brute-force search on random nested scopes."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.trace.builder.intervals import innermost_containing, parents


def _nested(seed: int):
    rng = np.random.default_rng(seed)
    tid, start, end = [], [], []

    def nest(t, lo, hi, depth):  # random properly nested intervals, as RecordFunction scopes are
        cur = lo
        while cur < hi and depth < 6:
            s = cur + int(rng.integers(0, 50))
            e = min(hi, s + int(rng.integers(0, 400)))
            if s >= e:
                break
            tid.append(t), start.append(s), end.append(e)
            if rng.random() < 0.6:
                nest(t, s, e, depth + 1)
            cur = e if rng.random() < 0.5 else e + int(rng.integers(0, 30))

    for t in (11, 12, 13):
        nest(t, 0, 20_000, 0)
    return rng, np.array(tid), np.array(start), np.array(end)


def _brute_innermost(tid, start, end, t, q, exclude=-1):
    inside = [i for i in np.flatnonzero((tid == t) & (start <= q) & (q < end)) if i != exclude]
    return inside


def test_innermost_join_matches_a_brute_force_search():
    rng, tid, start, end = _nested(12)
    q_tid = rng.choice([11, 12, 13, 14], 3000)
    q_ts = rng.integers(-10, 20_100, 3000)
    got = innermost_containing(tid, start, end, q_tid, q_ts)
    assert (got >= 0).sum() > 1000 and (got == -1).sum() > 10
    for i in range(len(q_ts)):
        inside = _brute_innermost(tid, start, end, q_tid[i], q_ts[i])
        if not inside:
            assert got[i] == -1, i
            continue
        assert got[i] in inside, i
        # innermost: every other interval around the point encloses the one chosen
        assert all(start[j] <= start[got[i]] and end[got[i]] <= end[j] for j in inside), i


def test_parents_and_depths_match_a_brute_force_search():
    _, tid, start, end = _nested(3)
    parent, depth = parents(tid, start, end)
    for i in range(len(start)):
        around = [j for j in np.flatnonzero((tid == tid[i]) & (start <= start[i]) & (end[i] <= end))
                  if (start[j], -end[j], j) < (start[i], -end[i], i)]  # identical twins: the first is outer
        assert depth[i] == len(around) + 1, i
        if not around:
            assert parent[i] == -1, i
        else:
            assert parent[i] == max(around, key=lambda j: (start[j], -end[j], j)), i


def test_a_trace_longer_than_the_join_key_says_so():
    with pytest.raises(ValueError, match="trace too long"):
        innermost_containing(np.array([1, 1]), np.array([0, 1 << 45]), np.array([5, (1 << 45) + 5]),
                             np.array([1]), np.array([2]))
