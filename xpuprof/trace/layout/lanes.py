"""Which slices of a track nest, and which lane each slice goes to: the layout's rule on plain arrays.

Viewers draw a track's complete slices as a tree: Perfetto's importer needs every two slices of one
(pid, tid) track to be disjoint or one inside the other, and moves a slice that starts inside another and
ends after it to an overflow track (``slice_spill_overlapping_complete_event``); Chrome's trace viewer and
TensorBoard draw it over its neighbour. Containment is closed: [s, e] nests in [s', e'] when s' <= s and
e <= e'. A zero-length slice never overlaps partly.

Everything here works on one row per slice: ``track`` (an int code per (trace, pid, tid)), ``start`` and
``end`` (int64 ns), ``klass`` and ``group`` (below). Nothing is known of the trace: the adapters
(``tracks``, ``apply``) make these arrays from a TraceTable and apply the plan.

- ``laminar_tracks``: which tracks already nest (vectorized; an untouched trace costs two sorts).
- ``spilled``: the slices a viewer's one-stack walk cannot place (what Perfetto spills): the checker's count.
- ``plan_lanes``: a lane per slice on the tracks that do not nest; lane 0 is the track itself.

Classes: a track may hold slices of different kinds that belong together only loosely: on a device stream
the kernels and copies (class ``PRIMARY``), the host's annotations drawn again over them
(``ANNOTATION``, one group per host thread they came from) and the per-kernel metric slices that wrap each
kernel 1 ns wider (``METRIC``). Primary slices keep the track wherever they nest; a secondary group stays on
the track when all of it nests with what the track keeps, and otherwise moves whole to lanes of its own
(a row of all of a thread's annotations, or all of a stream's metrics, never some of them). Of two primary
slices that cross (ranges of asyncio tasks interleaving on one thread, a prefetch range held across a
step's forward), the side that moves fewer slices leaves the track with what it holds (``keep_track``: the forward and its
hundreds of ops stay where HTA and TensorBoard read them); the slices that left go to further lanes, each
under the enclosing slice that began last, so a range's children stay with it. Nothing in a trace says which
task a range belongs to: a range entered right after its parent (no await between) is placed right; one
entered after an await, while another task's range that began since still encloses it, goes under that one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRIMARY, ANNOTATION, METRIC = 0, 1, 2
_SPAN_LIMIT = 1 << 62  # rebased times of all tracks in one int64 key

_UNSET = object()
_c_walks = _UNSET


def native():
    """The C walks (``xpuprof._native.lanes``), or None when xpuprof was built without a C compiler (then the
    Python copies below run: the same lanes, slower)."""
    global _c_walks
    if _c_walks is _UNSET:
        from ... import _native

        _c_walks = _native.optional("lanes")
    return _c_walks


def distinct(values) -> np.ndarray:
    """The sorted distinct values (as ``np.unique``): asking for the counts takes numpy's sort path, which does
    not import ``numpy.ma`` as a plain ``np.unique`` does on its first call (40-120 ms inside a cycle's stop)."""
    return np.unique(np.asarray(values), return_counts=True)[0]


def sort_order(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Slices in (track, start, longer first) order: the order a viewer walks a track in."""
    return np.lexsort((-end, start, track))


def _track_bounds(track_sorted: np.ndarray) -> np.ndarray:
    """Offsets where each track's rows begin in sorted order, and the total at the end."""
    cuts = np.flatnonzero(track_sorted[1:] != track_sorted[:-1]) + 1
    return np.concatenate([[0], cuts, [len(track_sorted)]]).astype(np.int64)


def walk(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, offsets, nests): the slices in walk order track by track (``track``: codes 0..t-1, t =
    ``track.max() + 1``), where each track's rows begin in ``order`` (t + 1 offsets), and whether each track
    nests. In C when built (a counting sort by track, a sort only of tracks not already in order, one stack
    walk); numpy otherwise (``sort_order`` and ``laminar_tracks``)."""
    track = np.ascontiguousarray(track, np.int32)
    start, end = np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64)
    t = int(track.max()) + 1 if len(track) else 0
    mod = native()
    if mod is not None:
        order = np.empty(len(track), np.int64)
        offsets = np.empty(t + 1, np.int64)
        nests = np.empty(t, np.uint8)
        mod.nest_check(track, start, end, order, offsets, nests)
        return order, offsets, nests.view(bool)
    order = np.lexsort((np.arange(len(track)), -end, start, track))
    offsets = np.searchsorted(track[order], np.arange(t + 1), "left").astype(np.int64)
    codes, ok = laminar_tracks(track, start, end, order)
    nests = np.ones(t, bool)
    nests[codes] = ok
    return order, offsets, nests


def laminar_tracks(track: np.ndarray, start: np.ndarray, end: np.ndarray,
                   order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(track codes, whether each nests), vectorized.

    With the slices of a track in ``sort_order``, a slice's depth is how many slices before it are still open
    at its start, plus one. The track nests exactly when every slice ends no later than the last slice before
    it one level up (its parent): the first slice that breaks nesting always fails this, because everything
    before it nests (so its open ancestors form one chain and the last of them at that depth is its parent).
    """
    track, start, end = np.asarray(track, np.int64), np.asarray(start, np.int64), np.asarray(end, np.int64)
    if order is None:
        order = sort_order(track, start, end)
    tr, s, e = track[order], start[order], end[order]
    codes = distinct(tr) if len(tr) else np.zeros(0, np.int64)
    ok = np.ones(len(codes), bool)
    if len(tr) < 2:
        return codes, ok
    positive = e > s  # zero-length slices never break nesting: left out (they would close before they open)
    tr, s, e = tr[positive], s[positive], e[positive]
    if len(tr) < 2:
        return codes, ok
    bounds = _track_bounds(tr)
    first = np.repeat(bounds[:-1], np.diff(bounds))
    t0 = np.minimum.reduceat(s, bounds[:-1])
    rel_s = s - np.repeat(t0, np.diff(bounds))
    rel_e = e - np.repeat(t0, np.diff(bounds))
    span = int(rel_e.max()) + 1
    n_tracks = len(bounds) - 1
    if span * n_tracks >= _SPAN_LIMIT or (len(tr) + 1) ** 2 >= _SPAN_LIMIT:
        return _laminar_per_track(codes, tr, s, e, bounds)
    tcode = np.repeat(np.arange(n_tracks, dtype=np.int64), np.diff(bounds))
    ends_key = np.sort(tcode * span + rel_e)
    closed = np.searchsorted(ends_key, tcode * span + rel_s, "right") - np.searchsorted(ends_key, tcode * span, "left")
    n = len(tr)
    index = np.arange(n, dtype=np.int64)
    depth = index - first + 1 - closed
    # The last slice one level up before each slice: one search over (depth, position) keys.
    key = depth * (n + 1) + index
    by_key = np.argsort(key, kind="stable")
    key_sorted = key[by_key]
    pos = np.searchsorted(key_sorted, (depth - 1) * (n + 1) + index, "left") - 1
    has_parent = depth > 1
    cand = by_key[np.clip(pos, 0, n - 1)]
    found = has_parent & (pos >= 0) & (tcode[cand] == tcode) & (depth[cand] == depth - 1)
    bad = has_parent & ~(found & (e[cand] >= e) & (e[cand] > s))
    if bad.any():
        bad_codes = distinct(tr[bad])
        ok[np.searchsorted(codes, bad_codes)] = False
    return codes, ok


def _laminar_per_track(codes, tr, s, e, bounds) -> tuple[np.ndarray, np.ndarray]:
    ok = np.ones(len(codes), bool)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if spilled_in_order(s[lo:hi], e[lo:hi]).any():
            ok[np.searchsorted(codes, tr[lo])] = False
    return codes, ok


def spilled_in_order(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """One track's slices in ``sort_order``: which ones a single stack walk cannot place (each of them starts
    inside the innermost open slice and ends after it). What Perfetto's importer moves to an overflow track."""
    mod = native()
    if mod is not None:
        out = np.zeros(len(s), np.uint8)
        mod.spilled(np.ascontiguousarray(s, np.int64), np.ascontiguousarray(e, np.int64), out)
        return out.view(bool)
    return spilled_py(s, e)


def spilled_py(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``spilled_in_order`` in Python (no C part built)."""
    out = np.zeros(len(s), bool)
    stack: list[int] = []  # ends of the open slices, innermost last
    for i, (a, b) in enumerate(zip(s.tolist(), e.tolist())):
        while stack and stack[-1] <= a:
            stack.pop()
        if stack and stack[-1] < b:
            out[i] = True
            continue
        stack.append(b)
    return out


def spilled(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per slice: whether a viewer's one-stack walk of its track cannot place it (see ``spilled_in_order``).
    The checker's count; only the tracks that do not nest are walked. ``track``: codes 0..t-1."""
    out = np.zeros(len(track), bool)
    if len(track) < 2:
        return out
    order, offsets, nests = walk(track, start, end)
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    for k in np.flatnonzero(~nests).tolist():
        rows = order[offsets[k]:offsets[k + 1]]
        out[rows] = spilled_in_order(start[rows], end[rows])
    return out


# ----------------------------------------------------------------------------- lanes
@dataclass
class Lane:
    """A lane a track's slices were moved to: ``track`` (its code), ``number`` (1, 2 ... within the track),
    ``klass`` and ``group`` of the slices on it, ``index`` (1, 2 ... among the lanes of that class and group
    on the track) and how many slices it holds."""

    track: int
    number: int
    klass: int
    group: int
    index: int
    slices: int = 0


def keep_track(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """One track's slices in sort order: which stay on it (bool). Of a slice and the open ones it crosses
    (starts inside them, ends after them), the side that moves fewer slices leaves: the crossed ones with the
    slices placed inside them since, or the crossing one with the slices it holds (a prefetch range held
    across a step's forward leaves, the forward and its hundreds of ops stay; with_stack's Python frames
    around a ``record_function`` enter leave, the range stays); on a tie the crossing one leaves, the first
    comers keep the row. A slice inside one that left, begun after the innermost one that stays, leaves with
    it: children go where their parent goes."""
    mod = native()
    if mod is not None:
        out = np.zeros(len(s), np.uint8)
        mod.keep_track(np.ascontiguousarray(s, np.int64), np.ascontiguousarray(e, np.int64), out)
        return out.view(bool)
    return keep_track_py(np.asarray(s).tolist(), np.asarray(e).tolist())


SCAN_LIMIT = 1 << 14  # slices looked at past a crossing slice to weigh it (bounds a pathological track's cost)


def _holds_more(s, e, i: int, than: int) -> bool:
    """Whether slice i and the slices after it that lie inside it are more than ``than`` (looking at no more
    than SCAN_LIMIT slices past it)."""
    b, held = e[i], 1
    for j in range(i + 1, min(len(s), i + 1 + SCAN_LIMIT)):
        if s[j] >= b or held > than:
            break
        held += e[j] <= b
    return held > than


def keep_track_py(s: list[int], e: list[int]) -> np.ndarray:
    """``keep_track`` in Python (no C part built)."""
    keep = np.zeros(len(s), bool)
    open_: list[int] = []  # kept slices still open, innermost last
    at: list[int] = []  # each open one's place in ``placed``
    placed: list[int] = []
    gone: list[int] = []
    for i, (a, b) in enumerate(zip(s, e)):
        while open_ and e[open_[-1]] <= a:
            open_.pop()
            at.pop()
        gone = [g for g in gone if e[g] > a]
        inside = [g for g in gone if e[g] >= b]
        follow = max(inside, key=lambda g: s[g]) if inside else -1
        if follow >= 0 and (not open_ or s[follow] > s[open_[-1]]):
            gone.append(i)
            continue
        k = len(open_)  # the open slices it crosses: open_[k:] (each ends before it, nested in each other)
        while k and e[open_[k - 1]] < b:
            k -= 1
        if k < len(open_):
            # The side that moves fewer slices leaves: the crossed ones with what was placed inside them since,
            # or this one with the slices it holds; on a tie this one (the first comers keep the row).
            if not _holds_more(s, e, i, len(placed) - at[k]):
                gone.append(i)
                continue
            for j in placed[at[k]:]:
                keep[j] = False
            del placed[at[k]:]
            gone.extend(open_[k:])
            del open_[k:], at[k:]
        keep[i] = True
        at.append(len(placed))
        open_.append(i)
        placed.append(i)
    return keep


def stack_lanes(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, int]:
    """Slices in sort order onto nesting lanes: each goes to the lane whose open slice enclosing it began last
    (then ends first), so a range's children follow it, else to the first lane with nothing open, else to a
    new lane. Returns (int32 lane per slice from 0, lanes used)."""
    mod = native()
    if mod is not None:
        out = np.zeros(len(s), np.int32)
        used = mod.stack_lanes(np.ascontiguousarray(s, np.int64), np.ascontiguousarray(e, np.int64), out)
        return out, int(used)
    got, used = stack_lanes_py(np.asarray(s).tolist(), np.asarray(e).tolist())
    return np.asarray(got, np.int32), used


def stack_lanes_py(s: list[int], e: list[int]) -> tuple[list[int], int]:
    """``stack_lanes`` in Python (no C part built)."""
    stacks: list[list[tuple[int, int]]] = []
    out = []
    for a, b in zip(s, e):
        best, best_key, free = -1, (0, 0), -1
        for k, st in enumerate(stacks):
            while st and st[-1][0] <= a:
                st.pop()
            if not st:
                if free < 0:
                    free = k
            elif st[-1][0] >= b and (best < 0 or (-st[-1][1], st[-1][0]) < best_key):
                best, best_key = k, (-st[-1][1], st[-1][0])
        k = best if best >= 0 else free
        if k < 0:
            k = len(stacks)
            stacks.append([])
        stacks[k].append((b, a))
        out.append(k)
    return out, len(stacks)


def _nests(s: np.ndarray, e: np.ndarray) -> bool:
    """Whether slices (in sort order) nest on one row."""
    return len(s) < 2 or not spilled_in_order(s, e).any()


def plan_lanes(track: np.ndarray, start: np.ndarray, end: np.ndarray, klass: np.ndarray | None = None,
               group=None) -> tuple[np.ndarray, list[Lane]]:
    """(lane number per slice: 0 = stays on its track; the lanes made), by the module's rule; ``track``: codes
    0..t-1. Tracks that nest are not walked. Deterministic: slices that tie in every respect keep their
    input order. ``group`` may be a function giving the array: called only when some track does not nest."""
    track, start, end = np.asarray(track, np.int64), np.asarray(start, np.int64), np.asarray(end, np.int64)
    n = len(track)
    klass = np.zeros(n, np.int8) if klass is None else np.asarray(klass, np.int8)
    lane = np.zeros(n, np.int32)
    lanes: list[Lane] = []
    if n < 2:
        return lane, lanes
    order, offsets, nests = walk(track, start, end)
    bad = np.flatnonzero(~nests).tolist()
    if not bad:
        return lane, lanes
    group = group() if callable(group) else group
    group = np.zeros(n, np.int64) if group is None else np.asarray(group, np.int64)
    for k in bad:
        rows = order[offsets[k]:offsets[k + 1]]
        lanes += _plan_track(k, rows, start[rows], end[rows], klass[rows], group[rows], lane)
    return lane, lanes


def _plan_track(code: int, rows: np.ndarray, s: np.ndarray, e: np.ndarray, klass: np.ndarray, group: np.ndarray,
                lane: np.ndarray) -> list[Lane]:
    """One track that does not nest (rows in sort order): fills ``lane`` for its rows, returns its lanes."""
    made: list[Lane] = []
    primary = klass == PRIMARY
    rows_p = np.flatnonzero(primary)
    stays = keep_track(s[primary], e[primary])
    kept = np.zeros(len(rows), bool)
    kept[rows_p[stays]] = True
    moved = rows_p[~stays]
    if len(moved):  # the slices that left the track, on lanes of their own, each under its enclosing one
        m_lane, used = stack_lanes(s[moved], e[moved])
        first = len(made) + 1
        counts = np.bincount(m_lane, minlength=used)
        for k in range(used):
            made.append(Lane(code, first + k, PRIMARY, 0, k + 1, int(counts[k])))
        lane[rows[moved]] = m_lane + first
    # Secondary groups, in class order and then by their first slice: the whole group stays or moves.
    secondary = ~primary
    if secondary.any():
        keys = sorted({(int(c), int(g)) for c, g in zip(klass[secondary].tolist(), group[secondary].tolist())},
                      key=lambda cg: (cg[0], int(np.flatnonzero((klass == cg[0]) & (group == cg[1]))[0])))
        for c, g in keys:
            member = (klass == c) & (group == g)
            both = kept | member
            if _nests(s[both], e[both]):
                kept = both
                continue
            g_lane, g_used = stack_lanes(s[member], e[member])
            counts = np.bincount(g_lane, minlength=g_used)
            first = len(made) + 1
            for k in range(g_used):
                made.append(Lane(code, first + k, c, g, k + 1, int(counts[k])))
            lane[rows[member]] = g_lane + first
    return made


__all__ = ["ANNOTATION", "METRIC", "PRIMARY", "Lane", "distinct", "laminar_tracks", "native", "plan_lanes",
           "sort_order", "spilled", "spilled_in_order", "spilled_py", "stack_lanes", "stack_lanes_py", "walk"]
