"""Applying the layout to a TraceTable: lanes of their own for slices that do not nest, ids in range, and
the flows, thread names and metadata that go with them (see ``trace.layout`` for the contract).

A lane is a thread row of its own under the same process: a tid no real row of the trace uses (from
``ids.LANE_TID_FIRST`` up; a row label gets a label of its own), named after the thread it came from
(``thread 5344 (MainThread) · lane 2``, ``stream 7 · metrics``, ``stream 7 · annotations of thread 5344``)
and sorted beside it. A moved slice keeps its original tid in its args (``original tid``); a flow end bound
to a moved slice (an ``ac2g`` arrow at a launch call) moves with it. Ids out of range get free ids.

A frozen builder's table is rebuilt from a shallow copy of its builder with the changed batches (the
Chrome writer renders them as before: columns, not dicts); a read table gets new flat columns.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..builder.columns import ArgColumn, RowArgs, encode_json, stored_once
from .. import ids as idrules
from ..table.columns import NO_VALUE, RowText
from ..table.model import TraceTable
from .lanes import ANNOTATION, METRIC, PRIMARY, Lane, distinct
from .tracks import SliceRows, Where, segment_where

ORIGINAL_TID = "original tid"  # the arg a moved slice keeps its original tid in
SEPARATOR = " \u00b7 "  # "thread 5344 (MainThread) · lane 2"


# ----------------------------------------------------------------------------- names
def thread_names(table: TraceTable, trace: int) -> dict:
    """(pid key, tid key) -> (name, sort index or None) from the trace's metadata rows."""
    out: dict = {}
    for ev in table.traces[trace].metadata_events:
        if not isinstance(ev, dict) or ev.get("ph") != "M" or ev.get("name") not in ("thread_name", "thread_sort_index"):
            continue
        key = (_key(ev.get("pid")), _key(ev.get("tid")))
        name, sort = out.get(key, (None, None))
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if ev["name"] == "thread_name" and isinstance(args.get("name"), str):
            name = args["name"]
        elif ev["name"] == "thread_sort_index" and isinstance(args.get("sort_index"), int):
            sort = args["sort_index"]
        out[key] = (name, sort)
    return out


def _key(v):
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return ("label", str(v))


def _plain(key):
    """A pid/tid key as the JSON value it was (an int or a label's text)."""
    return key[1] if isinstance(key, tuple) else key


def lane_name(base: str, lane: Lane, host_tid) -> str:
    if lane.klass == PRIMARY:
        return f"{base}{SEPARATOR}lane {lane.index + 1}"  # the thread's own row is its lane 1
    if lane.klass == METRIC:
        return f"{base}{SEPARATOR}metrics" + (f" {lane.index}" if lane.index > 1 else "")
    what = f"annotations of thread {host_tid}" if host_tid is not None else "annotations"
    return f"{base}{SEPARATOR}{what}" + (f" {lane.index}" if lane.index > 1 else "")


HOLDS = {PRIMARY: "slices overlapping the thread's own", ANNOTATION: "device annotations", METRIC: "per-kernel metrics"}


# ----------------------------------------------------------------------------- the ids a trace uses
def used_tids(table: TraceTable, trace: int) -> set[int]:
    """Every int tid a row or metadata row of the trace uses (any process)."""
    used: set[int] = set()
    for seg in table.segments:
        if seg.trace == trace and len(seg):
            w = segment_where(table, seg)
            used.update(distinct(np.asarray(w.tid)[w.tid_label == -1]).tolist())
    for (_, tid) in thread_names(table, trace):
        if isinstance(tid, int):
            used.add(tid)
    return used


def out_of_range(table: TraceTable) -> dict[int, dict]:
    """Per trace: {"pid": {old: new}, "tid": {(pid key, old): new}} for the int ids outside 0..MAX_ID (a
    trace whose ids are all in range is left out: one min/max per column)."""
    bad_pids: dict[int, set] = {}
    bad_tids: dict[int, set] = {}
    for seg in table.segments:
        if not len(seg):
            continue
        w = segment_where(table, seg)
        p_int, t_int = w.pid_label == -1, w.tid_label == -1
        pid, tid = np.asarray(w.pid)[p_int], np.asarray(w.tid)[t_int]
        if len(pid) and (pid.min() < 0 or pid.max() > idrules.MAX_ID):
            bad_pids.setdefault(seg.trace, set()).update(distinct(pid[(pid < 0) | (pid > idrules.MAX_ID)]).tolist())
        if len(tid) and (tid.min() < 0 or tid.max() > idrules.MAX_ID):
            odd = t_int & ((w.tid < 0) | (w.tid > idrules.MAX_ID))
            for p, pl, t in zip(w.pid[odd].tolist(), w.pid_label[odd].tolist(), w.tid[odd].tolist()):
                pkey = None if pl == NO_VALUE else ("label", w.labels[pl]) if pl >= 0 else p
                bad_tids.setdefault(seg.trace, set()).add((pkey, t))
    for trace, pids in tid_zero_aliases(table).items():  # tid 0 beside a tid equal to the pid: one thread
        bad_tids.setdefault(trace, set()).update((p, 0) for p in pids)
    for i, info in enumerate(table.traces):
        for ev in info.metadata_events:
            p = _key(ev.get("pid")) if isinstance(ev, dict) else None
            if isinstance(p, int) and not idrules.in_range(p):
                bad_pids.setdefault(i, set()).add(p)
    out: dict[int, dict] = {}
    for trace in sorted(set(bad_pids) | set(bad_tids)):
        pid_map = {}
        if bad_pids.get(trace):
            free = idrules.FreeIds(used_pids(table, trace), idrules.REMAPPED_PID_FIRST, -1)
            pid_map = {p: free.take() for p in sorted(bad_pids[trace])}
        tid_map = {}
        if bad_tids.get(trace):
            free_t = idrules.FreeIds(used_tids(table, trace), idrules.LANE_TID_FIRST)
            tid_map = {k: free_t.take() for k in sorted(bad_tids[trace], key=repr)}
        out[trace] = {"pid": pid_map, "tid": tid_map}
    return out


def tid_zero_aliases(table: TraceTable) -> dict[int, set[int]]:
    """Per trace, the int pids whose rows use both tid 0 and a tid equal to the pid: Perfetto's JSON importer
    gives tid 0 the pid's own thread (a process's main thread), so the two would be drawn as one (Kineto writes
    stream 0 as tid 0: device 2's streams 0 and 2)."""
    zero: dict[int, set] = {}
    own: dict[int, set] = {}
    for seg in table.segments:
        if not len(seg) or seg.kind not in ("slices", "instants"):  # what Perfetto draws on thread tracks
            continue
        w = segment_where(table, seg)
        ints = (w.pid_label == -1) & (w.tid_label == -1)
        if not ints.any():
            continue
        pid, tid = np.asarray(w.pid)[ints], np.asarray(w.tid)[ints]
        hit0 = tid == 0
        if hit0.any():
            zero.setdefault(seg.trace, set()).update(distinct(pid[hit0]).tolist())
        same = (tid == pid) & (pid != 0)
        if same.any():
            own.setdefault(seg.trace, set()).update(distinct(pid[same]).tolist())
    return {t: zero[t] & own[t] for t in zero if t in own and zero[t] & own[t]}


def used_pids(table: TraceTable, trace: int) -> set[int]:
    """Every int pid a row or metadata row of the trace uses."""
    used: set[int] = set()
    for seg in table.segments:
        if seg.trace == trace and len(seg):
            w = segment_where(table, seg)
            used.update(distinct(np.asarray(w.pid)[w.pid_label == -1]).tolist())
    for ev in table.traces[trace].metadata_events:
        p = _key(ev.get("pid")) if isinstance(ev, dict) else None
        if isinstance(p, int):
            used.add(p)
    return used


# ----------------------------------------------------------------------------- rewriting rows
class Rewrite:
    """New pid/tid values for some rows of one segment, and the arg moved slices carry."""

    def __init__(self, w: Where) -> None:
        self.w = w
        self.pid = np.array(w.pid, np.int64)
        self.tid = np.array(w.tid, np.int64)
        self.pid_label = np.array(w.pid_label, np.int32)
        self.tid_label = np.array(w.tid_label, np.int32)
        self.labels = list(w.labels)
        self.changed = False
        self.moved_rows = np.zeros(0, np.int64)  # slices given a lane
        self.original_tid = np.zeros(0, np.int64)  # their tid before (an int, or 0 for a label)
        self.original_label = np.zeros(0, np.int32)  # their tid's label id before (-1: an int tid)

    def label(self, text: str) -> int:
        if text not in self.labels:
            self.labels.append(text)
        return self.labels.index(text)

    def set_tid(self, rows: np.ndarray, value) -> None:
        if isinstance(value, str):
            self.tid[rows], self.tid_label[rows] = 0, self.label(value)
        else:
            self.tid[rows], self.tid_label[rows] = int(value), -1
        self.changed = True

    def move(self, rows: np.ndarray, tid: np.ndarray, label_text: list) -> None:
        """Slices ``rows`` to lanes: int tids ``tid`` where ``label_text`` is None, else that label."""
        self.moved_rows = np.concatenate([self.moved_rows, rows])
        self.original_tid = np.concatenate([self.original_tid, self.tid[rows]])
        self.original_label = np.concatenate([self.original_label, self.tid_label[rows]])
        self.tid[rows] = tid
        self.tid_label[rows] = -1
        if any(t is not None for t in label_text):
            for r, text in zip(rows.tolist(), label_text):
                if text is not None:
                    self.tid[r], self.tid_label[r] = 0, self.label(text)
        self.changed = True

    def originals(self) -> list:
        """The moved slices' original tids as JSON values (ints, or label texts)."""
        if (self.original_label < 0).all():
            return self.original_tid.tolist()
        return [self.labels[lb] if lb >= 0 else t for t, lb in zip(self.original_tid.tolist(),
                                                                      self.original_label.tolist())]

    def raw(self, which: str) -> np.ndarray:
        """A pid/tid column as a builder batch holds it: int64, or objects where some row is a label."""
        ints, labels = (self.pid, self.pid_label) if which == "pid" else (self.tid, self.tid_label)
        if (labels == -1).all():
            return stored_once(ints)
        out = np.empty(len(ints), object)
        for i, (v, lb) in enumerate(zip(ints.tolist(), labels.tolist())):
            out[i] = self.labels[lb] if lb >= 0 else v
        return out


def _with_member(obj: bytes | None, member: bytes) -> bytes:
    """A JSON object's text with one more member (``{}`` or nothing: an object of that member alone)."""
    text = (obj or b"").strip()
    if len(text) <= 2:
        return b"{" + member + b"}"
    return text[:-1] + b"," + member + b"}"


def _member(value) -> bytes:
    return encode_json(ORIGINAL_TID) + b":" + encode_json(value)


def rewrite_batch(b, kind: str, rw: Rewrite):
    """A builder batch with the rewrite's ids (and, for slices, the moved rows' original tid)."""
    changes = {"pid": rw.raw("pid"), "tid": rw.raw("tid")}
    if kind == "slices" and len(rw.moved_rows):
        rows = rw.moved_rows
        if b.row_args is not None:  # host rows: the member spliced into each row's object (the C path stays)
            members = [_member(v) for v in rw.originals()]
            if isinstance(b.row_args, RowArgs):
                blob = b.row_args.blob
                texts = [_with_member(b.row_args[r], m) for r, m in zip(rows.tolist(), members)]
                lens = np.fromiter(map(len, texts), np.int64, len(texts))
                starts = np.array(b.row_args.starts, np.int64)
                new_lens = np.array(b.row_args.lens, np.int64)
                starts[rows] = len(blob) + np.concatenate([[0], np.cumsum(lens)[:-1]])
                new_lens[rows] = lens
                changes["row_args"] = RowArgs(np.concatenate([blob, np.frombuffer(b"".join(texts), np.uint8)]),
                                              starts, new_lens)
            else:
                row_args = list(b.row_args)
                for r, m in zip(rows.tolist(), members):
                    row_args[r] = _with_member(row_args[r], m)
                changes["row_args"] = row_args
        else:
            present = np.zeros(len(b), bool)
            present[rows] = True
            if (rw.original_label < 0).all():
                values = np.zeros(len(b), np.int64)
                values[rows] = rw.original_tid
                col = ArgColumn("num", values, present)
            else:
                values = [None] * len(b)
                for r, v in zip(rows.tolist(), rw.originals()):
                    values[r] = v
                col = ArgColumn("obj", values, present)
            changes["args"] = {**b.args, ORIGINAL_TID: col}
    return replace(b, **changes)


def rewrite_columns(c, rw: Rewrite):
    """Flat columns with the rewrite's ids (and, for slices, the moved rows' original tid in ``args``)."""
    changes = {"pid": rw.pid, "pid_label": rw.pid_label, "tid": rw.tid, "tid_label": rw.tid_label,
               "labels": rw.labels}
    if c.KIND == "slices" and len(rw.moved_rows):
        texts = [c.args[i] for i in range(len(c))]
        for r, v in zip(rw.moved_rows.tolist(), rw.originals()):
            texts[r] = _with_member(texts[r], _member(v))
        changes["args"] = RowText.from_rows(texts)
    return replace(c, **changes)


# ----------------------------------------------------------------------------- flows
def bind_flows(rows: SliceRows, lane: np.ndarray, track: np.ndarray, ts: np.ndarray, fid: np.ndarray,
               moved_tracks: np.ndarray) -> np.ndarray:
    """Per flow end: the lane number of the slice it binds to (0: its track). A flow end binds to the slice of
    its track around its ts (closed) whose ``correlation`` is the flow's id (a kernel before its metric slice),
    else to the innermost slice around it (latest start, then shortest)."""
    out = np.zeros(len(track), np.int32)
    for t in np.intersect1d(distinct(track), moved_tracks, assume_unique=True).tolist():
        fl = np.flatnonzero(track == t)
        sl = np.flatnonzero(rows.track == t)
        s, e, k, corr, ln = rows.start[sl], rows.end[sl], rows.klass[sl], rows.correlation[sl], lane[sl]
        q, f = ts[fl], fid[fl]
        chosen = np.full(len(fl), -1, np.int64)
        has = corr >= 0
        if has.any():  # the slice whose correlation is the flow's id
            cand = np.flatnonzero(has)
            order = cand[np.lexsort((-s[cand], k[cand], corr[cand]))]
            keys = corr[order]
            first = np.searchsorted(keys, f, "left")
            for step in range(3):
                j = np.clip(first + step, 0, len(order) - 1)
                hit = (chosen < 0) & (first + step < len(order)) & (keys[j] == f)
                idx = order[j]
                hit &= (s[idx] <= q) & (q <= e[idx])
                chosen[hit] = idx[hit]
        rest = np.flatnonzero(chosen < 0)
        if len(rest):  # the innermost slice around it, whatever its lane: latest start, then shortest, then first
            # In order of start, end descending, row descending, the slice wanted is the last one that starts
            # at or before the flow end and ends at or after it.
            order = np.lexsort((-np.arange(len(s)), -e, s))
            upto = np.searchsorted(s[order], q[rest], "right")
            last = last_at_least(e[order], upto, q[rest])
            chosen[rest[last >= 0]] = order[last[last >= 0]]
        got = chosen >= 0
        out[fl[got]] = ln[chosen[got]]
    return out


_BLOCK = 64  # positions looked at per query and level in last_at_least
_QUERIES_PER_PASS = 16384  # bounds last_at_least's temporary arrays (queries x _BLOCK)


def last_at_least(values: np.ndarray, upto: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Per query i: the largest position p < ``upto[i]`` with ``values[p] >= floor[i]``, else -1.

    Exact, with no Python loop per query (a flow end per query: a per-query scan of the track was quadratic
    in the trace): the query's own block of ``_BLOCK`` positions is looked at whole; the earlier blocks
    through the same question asked of their maxima, one level up, then the one block that answers."""
    values, upto, floor = np.asarray(values), np.asarray(upto, np.int64), np.asarray(floor)
    out = np.full(len(upto), -1, np.int64)
    for at in range(0, len(upto), _QUERIES_PER_PASS):
        part = slice(at, at + _QUERIES_PER_PASS)
        out[part] = _last_at_least(values, upto[part], floor[part])
    return out


def _last_at_least(values: np.ndarray, upto: np.ndarray, floor: np.ndarray) -> np.ndarray:
    n = len(values)
    upto = np.minimum(upto, n)
    start = (upto // _BLOCK) * _BLOCK  # the query's own (partial) block: [start, upto)
    found = _last_in_blocks(values, start, upto, floor)
    todo = np.flatnonzero((found < 0) & (start > 0))
    if len(todo):  # an earlier, whole block: the last one whose maximum reaches the floor, then within it
        blocks = len(values) // _BLOCK
        peaks = values[:blocks * _BLOCK].reshape(blocks, _BLOCK).max(axis=1)
        block = _last_at_least(peaks, start[todo] // _BLOCK, floor[todo])
        hit = block >= 0
        first = block[hit] * _BLOCK
        found[todo[hit]] = _last_in_blocks(values, first, first + _BLOCK, floor[todo][hit])
    return found


def _last_in_blocks(values: np.ndarray, start: np.ndarray, stop: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Per query: the last position in [start, stop) (at most _BLOCK long) with values >= floor, else -1."""
    pos = start[:, None] + np.arange(_BLOCK)
    ok = pos < stop[:, None]
    ok &= values[np.minimum(pos, len(values) - 1)] >= floor[:, None]
    any_ok = ok.any(axis=1)
    last = _BLOCK - 1 - np.argmax(ok[:, ::-1], axis=1)
    return np.where(any_ok, start + last, -1)


__all__ = ["HOLDS", "ORIGINAL_TID", "Rewrite", "bind_flows", "lane_name", "last_at_least", "out_of_range", "rewrite_batch",
           "rewrite_columns", "thread_names", "used_tids"]
