"""A TraceTable's slices as the arrays the layout's rule reads (``lanes``): one row per slice, where a
viewer draws it and when, as the file being written will say it.

A frozen builder's batches are read as they are (no args rendered, nothing flattened): ts clamped at the
trace's base time and tids sanitized exactly as the Chrome writer writes them (``table.flatten``). A read
table's flat columns are taken as they are. Each row also says its class (``lanes.PRIMARY``,
``ANNOTATION``, ``METRIC``, by category), its group (an annotation's host thread, found through its
``External id``), and the ids a flow binds by (``correlation``, ``External id``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..table.columns import NO_VALUE
from ..table.flatten import clamp_ts, where_ids
from ..table.model import BatchSegment, FlatSegment, TraceTable
from .lanes import ANNOTATION, METRIC, PRIMARY

ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation"})
# Per-kernel metric slices ("metrics: <kernel>", 1 ns wider than their kernel on its row): every vendor's
# spelling of the metric categories (activity.ActivityType: XPU_SCOPE_PROFILER, GPU_PM_COUNTER's vendor names).
METRIC_CATEGORIES = frozenset({"xpu_scope_profiler", "gpu_pm_counter", "hardware_counters", "mtia_counters"})
HOST_ANNOTATION_CATEGORIES = frozenset({"user_annotation"})


@dataclass
class Where:
    """The rows of one segment: pid/tid as ints with label ids into ``labels`` (-1 for an int row,
    ``NO_VALUE`` for an event without one)."""

    pid: np.ndarray
    pid_label: np.ndarray
    tid: np.ndarray
    tid_label: np.ndarray
    labels: list


def segment_where(table: TraceTable, seg) -> Where:
    """Where a segment's rows are drawn (tids as the writer writes them)."""
    if isinstance(seg, BatchSegment):
        labels: list[str] = []
        pid, pid_label = where_ids(seg.batch.pid, labels)
        tid, tid_label = where_ids(seg.batch.tid, labels, tid=True)
        return Where(pid, pid_label, tid, tid_label, labels)
    c = seg.columns
    return Where(np.asarray(c.pid, np.int64), np.asarray(c.pid_label, np.int32), np.asarray(c.tid, np.int64),
                 np.asarray(c.tid_label, np.int32), list(c.labels))


def row_key(value: int, label: int, labels: list):
    """A pid or tid as a hashable key: the int, ("label", text), or None for an event without one."""
    if label == NO_VALUE:
        return None
    return ("label", labels[label]) if label >= 0 else int(value)


class TrackCodes:
    """(trace, pid key, tid key) -> an int code, in the order tracks are first seen."""

    def __init__(self) -> None:
        self.codes: dict[tuple, int] = {}
        self.keys: list[tuple] = []

    def code(self, key: tuple) -> int:
        got = self.codes.get(key)
        if got is None:
            got = self.codes[key] = len(self.keys)
            self.keys.append(key)
        return got

    def of_rows(self, trace: int, w: Where) -> np.ndarray:
        """The track code of every row of a segment (a few distinct rows per segment: one dict look-up each)."""
        n = len(w.pid)
        if not n:
            return np.zeros(0, np.int64)
        cols = [np.asarray(w.pid, np.int64), np.asarray(w.pid_label, np.int64), np.asarray(w.tid, np.int64),
                np.asarray(w.tid_label, np.int64)]
        varying = [c for c in cols if not _constant(c)]
        if not varying:
            key = (trace, row_key(cols[0][0], int(cols[1][0]), w.labels), row_key(cols[2][0], int(cols[3][0]), w.labels))
            return np.full(n, self.code(key), np.int64)
        if n <= SMALL_SEGMENT_ROWS:
            got = self._few_rows(trace, w, cols, varying)
            if got is not None:
                return got
        return self._factorized(trace, w, cols, varying)

    def _factorized(self, trace: int, w: Where, cols: list, varying: list) -> np.ndarray:
        got = factorize(varying[0])  # one pass over the column (a C hash), not a sort
        for c in varying[1:]:
            more = factorize(c)
            got = factorize(got.codes.astype(np.int64) * len(more.uniq) + more.codes)  # codes < n: no overflow
        local = np.empty(len(got.uniq), np.int64)
        for j, i in enumerate(got.first.tolist()):
            key = (trace, row_key(cols[0][i], int(cols[1][i]), w.labels), row_key(cols[2][i], int(cols[3][i]), w.labels))
            local[j] = self.code(key)
        return local[got.codes]

    def _few_rows(self, trace: int, w: Where, cols: list, varying: list) -> np.ndarray | None:
        """``_factorized`` of a small segment in plain Python (1,000 small traces: its numpy calls were most
        of the layout's time), new tracks coded in the same order: when every varying column is one the
        factorizer reads by a dense table (values within ``max(2n, 65536)`` of each other as uint64, and so
        their combinations), its codes ascend with the values, so new tracks are met in the lexicographic
        order of the varying columns' uint64 values. None when a column is wider (the factorizer's hash
        order then: ``_factorized``)."""
        n = len(cols[0])
        floor = max(2 * n, 1 << 16)
        values = []
        for c in varying:
            u = [v & _U64 for v in c.tolist()]
            if max(u) - min(u) + 1 > floor:
                return None
            values.append(u)
        rows = list(zip(*values))
        first: dict = {}
        for i, r in enumerate(rows):
            first.setdefault(r, i)
        pid, pid_label, tid, tid_label = (c.tolist() for c in cols)
        local = {r: self.code((trace, row_key(pid[i], pid_label[i], w.labels), row_key(tid[i], tid_label[i], w.labels)))
                 for r, i in sorted(first.items())}
        return np.array([local[r] for r in rows], np.int64)


SMALL_SEGMENT_ROWS = 64  # up to this many rows a segment's tracks are found in Python (see TrackCodes._few_rows)
_U64 = (1 << 64) - 1


def _constant(col: np.ndarray) -> bool:
    return len(col) < 2 or col.strides[0] == 0 or bool((col == col[0]).all())


def factorize(col: np.ndarray):
    from ..builder.keyindex import factorize as linear

    return linear(np.asarray(col, np.int64).view(np.uint64))


class SliceRows:
    """Every slice of a table as the layout reads it, segment after segment (``segment``, ``row``). What the
    nesting check reads (``track``, ``start``, ``end``, ``klass``) is joined at once; the rest only when a
    track does not nest and a column is asked for (most traces nest: their check joins four columns, not
    nine)."""

    def __init__(self, parts: dict, tracks: TrackCodes, wheres: dict) -> None:
        self._parts = parts
        self.tracks = tracks
        self.wheres = wheres  # segment index -> Where
        self.track = self._join("track", np.int64)
        self.start = self._join("start", np.int64)
        self.end = self._join("end", np.int64)
        self.klass = self._join("klass", np.int8)

    def _join(self, key: str, dtype) -> np.ndarray:
        got = self._parts.get(key)
        return np.concatenate(got) if got else np.zeros(0, dtype)

    @cached_property
    def segment(self) -> np.ndarray:  # index into table.segments
        return self._join("segment", np.int32)

    @cached_property
    def row(self) -> np.ndarray:  # row within the segment
        return self._join("row", np.int64)

    @cached_property
    def external_id(self) -> np.ndarray:
        return self._join("ext", np.int64)

    @cached_property
    def correlation(self) -> np.ndarray:  # -1: none
        return self._join("corr", np.int64)

    @cached_property
    def group(self) -> np.ndarray:
        return annotation_groups(self.track, self.klass, self.external_id, self._join("host_ann", bool))


def _per_category(cat_ids: np.ndarray, strings, of_text, dtype) -> np.ndarray:
    """``of_text(category text)`` for each row (ids < 0: no category, the text ""): once per distinct id."""
    ids = np.asarray(cat_ids, np.int64)
    if not len(ids):
        return np.zeros(0, dtype)
    if _constant(ids):  # a batch's category is one value, stored once
        return np.full(len(ids), of_text(strings[int(ids[0])] if ids[0] >= 0 else ""), dtype)
    if len(ids) <= SMALL_SEGMENT_ROWS:  # a small segment: a dict, not a sort (np.unique)
        seen: dict = {}
        return np.array([seen[i] if i in seen else seen.setdefault(i, of_text(strings[i] if i >= 0 else ""))
                         for i in ids.tolist()], dtype)
    u, inv = np.unique(ids, return_inverse=True)
    table = np.array([of_text(strings[i] if i >= 0 else "") for i in u.tolist()], dtype)
    return table[inv.reshape(-1)]


def _klass(text: str) -> int:
    return ANNOTATION if text in ANNOTATION_CATEGORIES else METRIC if text in METRIC_CATEGORIES else PRIMARY


def _class_of(cat_ids: np.ndarray, strings) -> np.ndarray:
    """The class of each row from its category id."""
    return _per_category(cat_ids, strings, _klass, np.int8)


def _host_annotation(cat_ids: np.ndarray, strings) -> np.ndarray:
    return _per_category(cat_ids, strings, HOST_ANNOTATION_CATEGORIES.__contains__, bool)


def slice_rows(table: TraceTable) -> SliceRows:
    """The layout's view of every slice of ``table`` (see the module docstring)."""
    parts: dict[str, list] = {k: [] for k in ("segment", "row", "track", "start", "end", "klass", "ext", "corr",
                                               "host_ann")}
    tracks = TrackCodes()
    wheres = {}
    builder = table.builder
    for si, seg in enumerate(table.segments):
        if seg.kind != "slices" or not len(seg):
            continue
        w = segment_where(table, seg)
        wheres[si] = w
        n = len(seg)
        if isinstance(seg, BatchSegment):
            b = seg.batch
            strings = builder.strings.strings if builder is not None else seg.flattener.strings
            cats = b.vendor_cat if table.vendor_categories else b.cat
            start = np.asarray(clamp_ts(b.ts), np.int64)
            dur = np.maximum(np.asarray(b.dur, np.int64), 0)
            ext = np.asarray(b.external_id, np.int64)
            corr_col = b.args.get("correlation")
            if corr_col is not None and corr_col.kind == "num":
                corr = np.asarray(corr_col.values, np.int64)
                if corr_col.present is not None:
                    corr = np.where(corr_col.present, corr, -1)
            else:
                corr = np.full(n, -1, np.int64)
        elif isinstance(seg, FlatSegment):
            c = seg.flat()
            strings, cats = c.strings, c.cat
            start = np.asarray(c.ts, np.int64)
            dur = np.maximum(np.asarray(c.dur, np.int64), 0)
            if c.dur_present is not None:
                dur = np.where(c.dur_present, dur, 0)
            ext = _typed(c.ints, "external_id", n, 0)
            corr = _typed(c.ints, "correlation", n, -1)
        else:  # a segment kind this layout does not know: its rows are left where they are
            continue
        parts["segment"].append(np.full(n, si, np.int32))
        parts["row"].append(np.arange(n, dtype=np.int64))
        parts["track"].append(tracks.of_rows(seg.trace, w))
        parts["start"].append(start)
        parts["end"].append(start + dur)
        parts["klass"].append(_class_of(cats, strings))
        parts["ext"].append(np.broadcast_to(ext, (n,)) if ext.ndim == 0 else ext)
        parts["corr"].append(corr)
        parts["host_ann"].append(_host_annotation(cats, strings))
    return SliceRows(parts, tracks, wheres)


def _typed(ints: dict, column: str, n: int, missing: int) -> np.ndarray:
    got = ints.get(column)
    if got is None:
        return np.full(n, missing, np.int64)
    values, present = got
    return np.where(np.asarray(present, bool), np.asarray(values, np.int64), missing)


def annotation_groups(track: np.ndarray, klass: np.ndarray, ext: np.ndarray, host_ann: np.ndarray) -> np.ndarray:
    """Per slice: for a device annotation, the track code of the host annotation with its ``External id``
    (the thread it was drawn from; -1 when none is in the trace); 0 for every other slice."""
    group = np.zeros(len(track), np.int64)
    ann = np.flatnonzero(klass == ANNOTATION)
    if not len(ann):
        return group
    host = np.flatnonzero(host_ann & (ext != 0))
    if not len(host):
        group[ann] = -1
        return group
    order = np.argsort(ext[host], kind="stable")
    keys, owners = ext[host][order], track[host][order]
    pos = np.clip(np.searchsorted(keys, ext[ann]), 0, len(keys) - 1)
    group[ann] = np.where(keys[pos] == ext[ann], owners[pos], -1)
    return group


__all__ = ["ANNOTATION_CATEGORIES", "METRIC_CATEGORIES", "SliceRows", "TrackCodes", "Where", "row_key",
           "segment_where", "slice_rows"]
