"""Steps every vendor pipeline's emit stage shares (backends/<vendor>/emit.py).

- Dropped records: ``count_dropped(builder, source, reason, count, kind=...)``, the one structured
  call; ``OUT_OF_WINDOW`` is the reason of records outside the capture window (expected, counted in
  the trace, never a warning).
- The capture window: ``keep_in_window`` (mask of the rows it keeps, their loss counted) and
  ``kept`` (rows under a mask, without a copy when it keeps them all).
- Arg columns every device row kind carries: ``bandwidth`` (bytes / ns = GB/s).
- Device rows: ``name_stream_rows`` names each distinct (device, stream) row once.
- Correlation ids: ``CorrelationSpace`` (ids as offsets into one dense table), ``CorrelationMap``
  (id -> value, e.g. the External id or the calling thread), ``FlowIds`` (one ``ac2g`` arrow per
  id) and ``add_flow_ends`` (an ``s``/``f`` pair per host call and device row sharing an id).

Everything is columnar and linear in the rows: dense tables where ids are counters, a sort only
where they span too wide a range for a table.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..trace.builder.dropped import OUT_OF_WINDOW, drop_label
from ..trace.builder.columns import ArgColumn, stored_once
from ..trace.builder.keyindex import distinct_rows, factorize, first_rows
from .base import ProcessWindow

__all__ = ["OUT_OF_WINDOW", "count_dropped", "SessionDrops", "keep_in_window", "kept", "bandwidth", "intern_keys", "name_stream_rows",
           "CorrelationSpace", "CorrelationMap", "FlowIds", "add_flow_ends"]


# ----------------------------------------------------------------------------- dropped records
def count_dropped(builder, source: str, reason: str, count: int, *, kind: str = "") -> None:
    """Records of ``source`` lost or discarded for ``reason`` (``kind``: the record kind, where the
    reason is counted per kind). The trace's ``dropped_records`` names them "<source>: <reason>", or
    "<source> <kind> <reason>" with a kind."""
    builder.drop(source, reason, int(count), kind=kind)


class SessionDrops:
    """What one session lost itself (full vendor buffers, records it could not read), by (reason,
    kind): reported by the session's ``dropped_records`` under the labels the trace shows, and
    written into the trace by its ``process`` (the profiler then does not count them again)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._counts: dict[tuple[str, str], int] = {}

    def set(self, reason: str, count: int, *, kind: str = "") -> None:
        if count:
            self._counts[(reason, kind)] = int(count)

    def add(self, reason: str, count: int, *, kind: str = "") -> None:
        if count:
            self._counts[(reason, kind)] = self._counts.get((reason, kind), 0) + int(count)

    def clear(self) -> None:
        self._counts.clear()

    def labels(self) -> dict[str, int]:
        return {drop_label(self.source, reason, kind): n for (reason, kind), n in self._counts.items()}

    def write(self, builder) -> None:
        for (reason, kind), n in self._counts.items():
            count_dropped(builder, self.source, reason, n, kind=kind)


# ----------------------------------------------------------------------------- window
def keep_in_window(builder, window: ProcessWindow | None, start_ns: np.ndarray, source: str,
                   kind: str = "") -> np.ndarray | None:
    """Mask of the rows whose start lies in ``window``; None when it keeps them all (the usual case,
    so callers copy nothing). The rows it drops are counted as ``OUT_OF_WINDOW``."""
    if window is None or not len(start_ns):
        return None
    keep = np.asarray(window.contains(np.asarray(start_ns, dtype=np.int64)), bool)
    lost = len(keep) - int(np.count_nonzero(keep))
    if not lost:
        return None
    count_dropped(builder, source, OUT_OF_WINDOW, lost, kind=kind)
    return keep


def kept(rows, mask: np.ndarray | None):
    """``rows[mask]``, without copying the rows when the mask keeps them all."""
    return rows if mask is None or mask.all() else rows[mask]


# ----------------------------------------------------------------------------- args and rows
def bandwidth(nbytes: np.ndarray, dur_ns: np.ndarray) -> ArgColumn:
    """``memory bandwidth (GB/s)``: bytes per ns, present where the copy took time."""
    ok = dur_ns > 0
    gbps = np.divide(np.asarray(nbytes, np.float64), dur_ns, out=np.zeros(len(dur_ns)), where=ok)
    return ArgColumn("num", gbps, ok)


def intern_keys(builder, keys: np.ndarray, text_of: Callable[[int], str]) -> np.ndarray:
    """The string id of each row's text: ``text_of`` called and interned once per distinct key
    (``factorize``: linear, where ``np.unique`` sorts the whole column)."""
    f = factorize(keys)
    ids = np.fromiter((builder.strings.intern(text_of(k)) for k in f.uniq.tolist()), np.int32, len(f.uniq))
    return ids[f.codes]


def name_stream_rows(builder, pid: np.ndarray, tid: np.ndarray, label: Callable[[int], str], *,
                     sort_index: Callable[[int], int] = int) -> list[tuple[int, int]]:
    """Name each distinct (pid, tid) row not named yet: ``label(tid)``, sorted by ``sort_index(tid)``.
    Returns the distinct pairs (sorted)."""
    pairs = distinct_rows(pid, tid) if len(pid) else []
    for d, s in pairs:
        if (d, s) not in builder.thread_names:
            builder.set_thread_name(d, s, label(s), sort_index=sort_index(s))
    return pairs


# ----------------------------------------------------------------------------- correlation ids
class CorrelationSpace:
    """Correlation ids as offsets into one dense range (vendors count them per process), so set
    tests, first occurrences and id lookups are table reads instead of sorts. ``over`` gives None
    when the ids span too wide a range for a table; callers then take the sorting path."""

    def __init__(self, lo: int, span: int) -> None:
        self.lo, self.span = lo, span

    @classmethod
    def over(cls, *columns: np.ndarray) -> "CorrelationSpace | None":
        lo = hi = None
        total = 0
        for c in columns:
            total += len(c)
            if len(c):
                a, b = int(c.min()), int(c.max())
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        if lo is None:
            return cls(0, 1)
        span = hi - lo + 1
        return cls(lo, span) if span <= max(4 * total, 1 << 20) else None

    def offsets(self, corr: np.ndarray) -> np.ndarray:
        # one pass: the subtraction casts as it goes (astype, then subtract, made two)
        return np.subtract(corr, np.intp(self.lo), dtype=np.intp, casting="unsafe")

    def members(self, corr: np.ndarray, *, zero: bool = False) -> np.ndarray:
        """Table: offset -> True for every id in ``corr`` (0 too when ``zero``; 0 means "none" to PTI)."""
        table = np.zeros(self.span, bool)
        table[self.offsets(corr if zero else corr[corr != 0])] = True
        return table

    def isin(self, corr: np.ndarray, table: np.ndarray) -> np.ndarray:
        """Mask: the rows of ``corr`` whose id the ``members`` table holds."""
        return table[self.offsets(corr)]

    def first_at(self, corr: np.ndarray) -> np.ndarray:
        """Table: offset -> the first row of ``corr`` holding that id (``len(corr)`` where none)."""
        return first_rows(self.offsets(corr), self.span)

    def first_rows(self, corr: np.ndarray) -> np.ndarray:
        """Mask: the rows holding their id's first occurrence in ``corr``."""
        off = self.offsets(corr)
        return self.first_at(corr)[off] == np.arange(len(corr))


class CorrelationMap:
    """Correlation id -> one int64 value (an External id, a thread, a stream ...), looked up for whole
    columns; ``default`` where an id has none. Of several rows with one id, the first wins (``last``:
    the last); ``preferred`` rows (a mask) win over the others whatever their order."""

    def __init__(self, corr: np.ndarray, values: np.ndarray, *, default: int = 0, last: bool = False,
                 preferred: np.ndarray | None = None) -> None:
        corr = np.asarray(corr).astype(np.int64, copy=False)
        values = np.asarray(values).astype(np.int64, copy=False)
        self.default = default
        self.space = CorrelationSpace.over(corr)
        groups = [np.ones(len(corr), bool)] if preferred is None else [~preferred, preferred]
        if self.space is not None:
            # One table write per group, the preferred group last; within a group only the winning
            # row of an id is written, so no write order is left to numpy.
            self.table = np.full(self.space.span, default, np.int64)
            self.found = np.zeros(self.space.span, bool)
            for sel in groups:
                c, v = corr[sel], values[sel]
                if not len(c):
                    continue
                if last:
                    c, v = c[::-1], v[::-1]
                win = self.space.first_rows(c)
                off = self.space.offsets(c[win])
                self.table[off] = v[win]
                self.found[off] = True
            return
        # Sorting path: by id, then preferred rows, then row order (reversed for ``last``); the
        # first row of each id's run is its winner.
        rank = np.zeros(len(corr), np.int8) if preferred is None else (~preferred).astype(np.int8)
        row = np.arange(len(corr))
        order = np.lexsort((-row if last else row, rank, corr))
        ids = corr[order]
        head = np.ones(len(ids), bool)
        head[1:] = ids[1:] != ids[:-1]
        self.keys, self.values = ids[head], values[order][head]

    def __len__(self) -> int:
        return int(self.found.sum()) if self.space is not None else len(self.keys)

    def lookup(self, corr: np.ndarray) -> np.ndarray:
        corr = np.asarray(corr).astype(np.int64, copy=False)
        out = np.full(len(corr), self.default, np.int64)
        if not len(corr):
            return out
        if self.space is not None:
            off = corr - self.space.lo
            inside = (off >= 0) & (off < self.space.span)
            if inside.all():
                return self.table[off]
            out[inside] = self.table[off[inside]]
            return out
        if not len(self.keys):
            return out
        pos = np.minimum(np.searchsorted(self.keys, corr), len(self.keys) - 1)
        hit = self.keys[pos] == corr
        out[hit] = self.values[pos[hit]]
        return out


# ----------------------------------------------------------------------------- flows
class FlowIds:
    """The ids that get an ``ac2g`` arrow: carried by a start (a host call) and an end (device work),
    each arrow drawn once, from the first start to the first end carrying the id (a vendor with
    several kinds of ends puts the preferred ones first)."""

    def __init__(self, start_corr: np.ndarray, end_corr: np.ndarray) -> None:
        self.space = CorrelationSpace.over(start_corr, end_corr)
        if self.space is not None:
            self.table = self.space.members(start_corr) & self.space.members(end_corr)
            return
        starts = np.unique(start_corr[start_corr != 0])
        ends = np.unique(end_corr[end_corr != 0])
        self.ids = np.intersect1d(starts, ends, assume_unique=True)

    def starts(self, corr: np.ndarray) -> np.ndarray:
        """Mask: the first record of each flow id among ``corr`` (where its arrow starts or ends)."""
        if self.space is not None:
            if not len(corr):
                return np.zeros(0, bool)
            return self.table[self.space.offsets(corr)] & self.space.first_rows(corr)
        mask = np.zeros(len(corr), bool)
        if not len(corr) or not len(self.ids):
            return mask
        _, first = np.unique(corr, return_index=True)
        first = first[np.isin(corr[first], self.ids, assume_unique=False)]
        mask[first] = True
        return mask


def _one_value(col: np.ndarray) -> bool:
    return col.ndim == 1 and len(col) > 0 and col.strides[0] == 0


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """One column from its parts; parts that all hold the same single value stay one value."""
    total = sum(len(p) for p in parts)
    if all(_one_value(p) for p in parts) and len({p[0].item() for p in parts}) == 1:
        return np.broadcast_to(parts[0][:1], (total,))
    return np.concatenate(parts)


def _kept_column(col: np.ndarray, keep: np.ndarray, n_kept: int) -> np.ndarray:
    if n_kept == len(col):
        return col
    return np.broadcast_to(col[:1], (n_kept,)) if _one_value(col) else col[keep]


def add_flow_ends(builder, device_parts: list[tuple], host_parts: list[tuple]) -> None:
    """``s`` on each host call and ``f`` on each device row sharing a correlation id, drawn only
    where both ends are in the trace. Each part is (correlation ids, ts, pid, tid) of the rows one
    call wrote; columns holding one value (one process, one device) stay one value."""
    if not device_parts or not host_parts:
        return
    d_corr = np.concatenate([p[0] for p in device_parts])
    h_corr = np.concatenate([p[0] for p in host_parts])
    space = CorrelationSpace.over(d_corr, h_corr)
    if space is not None:  # table reads; np.isin sorts both columns
        d_keep = space.isin(d_corr, space.members(h_corr, zero=True))
        h_keep = space.isin(h_corr, space.members(d_corr, zero=True))
    else:
        d_keep, h_keep = np.isin(d_corr, h_corr), np.isin(h_corr, d_corr)
    for parts, corr, keep, start in ((host_parts, h_corr, h_keep, True), (device_parts, d_corr, d_keep, False)):
        n = int(np.count_nonzero(keep))
        if not n:
            continue
        ts, pid, tid = (stored_once(_joined([p[i] for p in parts])) for i in (1, 2, 3))
        builder.add_flows(flow_ids=_kept_column(corr, keep, n), ts=_kept_column(ts, keep, n),
                          pid=_kept_column(pid, keep, n), tid=_kept_column(tid, keep, n), start=start)
