"""``lay_out(table)``: the layout pass every writer runs on a TraceTable (see ``trace.layout``)."""
from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from .. import ids as idrules
from ..table.builder_view import builder_table
from ..table.flatten import clamp_ts, sanitize_tid
from ..table.model import BatchSegment, FlatSegment, RankInfo, TraceTable
from .apply import (HOLDS, Rewrite, _key, _plain, bind_flows, lane_name, out_of_range, rewrite_batch,
                    rewrite_columns, thread_names, used_tids)
from .lanes import distinct, plan_lanes
from .tracks import SliceRows, segment_where, slice_rows

log = logging.getLogger("xpuprof")
LANES_KEY = "laneLayout"  # the trace metadata saying which slices went to which lane
IDS_KEY = "idMap"  # the trace metadata saying which out-of-range ids were given which
# Perfetto reads a JSON ts as a double of µs, rounded to the ns: exact below 2**43 µs (~100 days) after the
# trace's base time, where doubles are 2**-10 µs apart (HTA's ns_resolution trace, epoch µs with base 0: 774
# slices off their track). A read trace whose times lie further from its base is written against a base at
# its first event's second instead, as Kineto writes (the times themselves do not change).
REBASE_BEYOND_NS = (1 << 43) * 1000


@dataclass
class LayoutSummary:
    """What the pass did: ``slices`` looked at, ``moved`` to lanes, one dict per lane (``lanes``: trace, pid,
    tid, lane_tid, name, holds, slices), flow ends moved with their slice, ids remapped per trace."""

    slices: int = 0
    moved: int = 0
    lanes: list[dict] = field(default_factory=list)
    flow_ends_moved: int = 0
    ids: dict[int, dict] = field(default_factory=dict)

    def metadata(self, trace: int) -> dict | None:
        """The ``laneLayout`` value written into trace ``trace`` (None when nothing of it moved)."""
        lanes = [{k: v for k, v in d.items() if k not in ("trace", "sort_index")} for d in self.lanes
                 if d["trace"] == trace]
        if not lanes:
            return None
        moved = sum(d["slices"] for d in lanes)
        return {"moved_slices": moved, "lanes": lanes,
                "flow_ends_moved": sum(d.get("flow_ends", 0) for d in lanes),
                "why": "slices that overlap without nesting on one thread or stream are drawn on lanes of their "
                       "own, so every viewer shows them; each keeps its thread's tid in the 'original tid' arg"}

    def id_metadata(self, trace: int) -> dict | None:
        got = self.ids.get(trace)
        if not got:
            return None
        return {"pids": [[_plain(k), v] for k, v in got["pid"].items()],
                "tids": [[_plain(p), t, v] for (p, t), v in got["tid"].items()],
                "why": f"ids outside 0..{idrules.MAX_ID} (what every viewer keeps), and tid 0 of a process that "
                       "also has a tid equal to its pid (one thread to Perfetto), were given free ones"}

    def __str__(self) -> str:
        if not self.moved and not self.ids:
            return f"all {self.slices} slices nest on their tracks"
        parts = []
        if self.moved:
            parts.append(f"{self.moved} of {self.slices} slices moved to {len(self.lanes)} lane(s) of their own")
        if self.ids:
            n = sum(len(v["pid"]) + len(v["tid"]) for v in self.ids.values())
            parts.append(f"{n} id(s) outside 0..{idrules.MAX_ID} given free ones")
        return "; ".join(parts)


def lay_out(table: TraceTable) -> TraceTable:
    """The table with every slice on a track it nests on and every id in range; ``table.layout`` says
    what moved (the same table when nothing had to: a laid-out table is returned as it is)."""
    if getattr(table, "layout", None) is not None:
        return table
    rows = slice_rows(table)
    lane, lanes = plan_lanes(rows.track, rows.start, rows.end, rows.klass, lambda: rows.group)
    remap = out_of_range(table)
    summary = LayoutSummary(slices=len(rows.track), ids=remap)
    if not lanes and not remap:
        table.layout = summary
        return table
    rewrites: dict[int, Rewrite] = {}

    def rewrite(si: int) -> Rewrite:
        got = rewrites.get(si)
        if got is None:
            w = rows.wheres.get(si) or segment_where(table, table.segments[si])
            got = rewrites[si] = Rewrite(w)
        return got

    _remap_ids(table, remap, rewrite)
    if lanes:
        lane_tids = _place_lanes(table, rows, lane, lanes, remap, rewrite, summary)
        _move_flows(table, rows, lane, lanes, lane_tids, rewrite, summary)
    out = _rebuild(table, rewrites, summary, remap)
    out.layout = summary
    if summary.moved:
        log.info("xpuprof: %s (the trace's %s metadata says which)", summary, LANES_KEY)
    return out


# ----------------------------------------------------------------------------- steps
_I64_MIN, _I64_MAX = -(2 ** 63), 2 ** 63 - 1


def _remap_ids(table: TraceTable, remap: dict, rewrite) -> None:
    for si, seg in enumerate(table.segments):
        got = remap.get(seg.trace)
        if not got or not len(seg):
            continue
        rw = rewrite(si)
        ints = rw.pid_label == -1
        # a metadata row may name a pid no int64 holds (its id is remapped with the metadata); the int
        # columns cannot hold one, so only pids within int64 are looked for there
        row_pids = {k: v for k, v in got["pid"].items() if _I64_MIN <= k <= _I64_MAX}
        if row_pids:
            keys = np.array(sorted(row_pids), np.int64)
            vals = np.array([row_pids[k] for k in keys.tolist()], np.int64)
            hit = ints & np.isin(rw.pid, keys)
            if hit.any():
                rw.pid[hit] = vals[np.searchsorted(keys, rw.pid[hit])]
                rw.changed = True
        for (pkey, old), new in got["tid"].items():
            if seg.kind == "counters" and idrules.in_range(old):  # tid 0's own thread: counters are the process's
                continue
            w = rw.w
            same_pid = (w.pid_label == -1) & (w.pid == pkey) if isinstance(pkey, int) else \
                np.array([lb >= 0 and ("label", w.labels[lb]) == pkey for lb in w.pid_label.tolist()], bool)
            hit = same_pid & (w.tid_label == -1) & (w.tid == old)
            if hit.any():
                rw.set_tid(np.flatnonzero(hit), new)


def _place_lanes(table, rows: SliceRows, lane, lanes, remap, rewrite, summary: LayoutSummary) -> dict:
    """Gives each lane its tid and name, moves its slices there; returns (track, lane number) -> tid."""
    out: dict = {}
    free: dict[int, idrules.FreeIds] = {}
    names: dict[int, dict] = {}
    moved = np.flatnonzero(lane != 0)
    top = int(lane.max()) + 1
    which = {}  # track * top + lane number -> index into lanes
    lane_int = np.zeros(len(lanes), np.int64)
    lane_text: list = []
    for i, ln in enumerate(lanes):
        trace, pid_key, tid_key = rows.tracks.keys[ln.track]
        if trace not in names:
            names[trace] = thread_names(table, trace)
        base, sort = names[trace].get((pid_key, tid_key), (None, None))
        if base is None:
            base = tid_key[1] if isinstance(tid_key, tuple) else f"thread {tid_key}"
        host = rows.tracks.keys[ln.group][2] if ln.group >= 0 and ln.klass != 0 else None
        name = lane_name(base, ln, None if host is None else _plain(host))
        if isinstance(tid_key, tuple):
            tid = name  # a row label's lane: a label of its own
            lane_text.append(name)
        else:
            if trace not in free:
                taken = used_tids(table, trace) | {v for v in remap.get(trace, {}).get("tid", {}).values()}
                free[trace] = idrules.FreeIds(taken, idrules.LANE_TID_FIRST)
            tid = free[trace].take()
            lane_int[i] = tid
            lane_text.append(None)
        out[(ln.track, ln.number)] = tid
        which[ln.track * top + ln.number] = i
        pid = remap.get(trace, {}).get("pid", {}).get(pid_key, pid_key)
        summary.lanes.append({"trace": trace, "pid": _plain(pid), "tid": _plain(tid_key), "lane_tid": tid,
                              "name": name, "holds": HOLDS[ln.klass], "slices": ln.slices, "sort_index": sort,
                              "flow_ends": 0})
    summary.moved += len(moved)
    keys = np.array(sorted(which), np.int64)
    index = np.array([which[k] for k in keys.tolist()], np.int64)
    of_row = index[np.searchsorted(keys, rows.track[moved] * top + lane[moved])]  # each moved slice's lane
    by_segment = np.argsort(rows.segment[moved], kind="stable")
    segs = rows.segment[moved][by_segment]
    cuts = np.flatnonzero(np.diff(segs)) + 1
    for part in np.split(by_segment, cuts):
        if not len(part):
            continue
        si = int(rows.segment[moved[part[0]]])
        mine = of_row[part]
        texts = [lane_text[i] for i in mine.tolist()] if any(t is not None for t in lane_text) else ()
        rewrite(si).move(rows.row[moved[part]], lane_int[mine], texts)
    return out


def _move_flows(table, rows: SliceRows, lane, lanes, lane_tids: dict, rewrite, summary: LayoutSummary) -> None:
    moved_tracks = distinct(np.array([ln.track for ln in lanes], np.int64))
    for si, seg in enumerate(table.segments):
        if seg.kind != "flows" or not len(seg):
            continue
        w = segment_where(table, seg)
        track = rows.tracks.of_rows(seg.trace, w)
        if not np.isin(track, moved_tracks).any():
            continue
        if isinstance(seg, BatchSegment):
            ts, fid = np.asarray(clamp_ts(seg.batch.ts), np.int64), np.asarray(seg.batch.flow_id, np.int64)
        else:
            c = seg.flat()
            ts = np.asarray(c.ts, np.int64)
            fid = np.where(np.asarray(c.id_label) == -1, np.asarray(c.flow_id, np.int64), -1)
        got = bind_flows(rows, lane, track, ts, fid, moved_tracks)
        for t, number in {(int(a), int(b)) for a, b in zip(track[got > 0].tolist(), got[got > 0].tolist())}:
            sel = np.flatnonzero((track == t) & (got == number))
            tid = lane_tids[(t, number)]
            rewrite(si).set_tid(sel, tid)
            summary.flow_ends_moved += len(sel)
            trace = rows.tracks.keys[t][0]
            for d in summary.lanes:
                if d["trace"] == trace and d["lane_tid"] == tid:
                    d["flow_ends"] += len(sel)


def _rebuild(table: TraceTable, rewrites: dict, summary: LayoutSummary, remap: dict) -> TraceTable:
    if table.builder is not None:
        return _rebuild_builder(table, rewrites, summary, remap)
    segments = list(table.segments)
    for si, rw in rewrites.items():
        seg = segments[si]
        if rw.changed:
            segments[si] = replace_flat(seg, rewrite_columns(seg.columns, rw))
    traces = [_rank_info(info, i, summary, remap) for i, info in enumerate(table.traces)]
    return TraceTable(segments, traces, vendor_categories=table.vendor_categories)


def replace_flat(seg: FlatSegment, columns) -> FlatSegment:
    return FlatSegment(columns, seg.rank, seg.trace, seg.ts_base)


def _lane_rows(summary: LayoutSummary, trace: int, ts) -> list[dict]:
    out = []
    for d in summary.lanes:
        if d["trace"] != trace:
            continue
        out.append({"ph": "M", "name": "thread_name", "ts": ts, "pid": d["pid"], "tid": d["lane_tid"],
                    "args": {"name": d["name"]}})
        sort = d["sort_index"] if d["sort_index"] is not None else d["tid"] if isinstance(d["tid"], int) else 0
        out.append({"ph": "M", "name": "thread_sort_index", "ts": ts, "pid": d["pid"], "tid": d["lane_tid"],
                    "args": {"sort_index": sort}})
    return out


def _remapped_meta(ev, got: dict):
    if not got or not isinstance(ev, dict):
        return ev
    ev = dict(ev)
    pkey, tkey = _key(ev.get("pid")), _key(ev.get("tid"))
    if (pkey, tkey) in got["tid"] and str(ev.get("name", "")).startswith("thread_"):  # process rows keep tid 0
        ev["tid"] = got["tid"][(pkey, tkey)]
    if pkey in got["pid"]:
        ev["pid"] = got["pid"][pkey]
    return ev


def far_base(info: RankInfo) -> int | None:
    """A base time for a read trace whose times lie too far from its own for a viewer (``REBASE_BEYOND_NS``):
    its first event's second; None when its own serves (a builder's, or times close to it)."""
    first = info.first_ts_ns
    if first is None or abs(first - info.base_time_ns) < REBASE_BEYOND_NS:
        return None
    return first - first % 1_000_000_000


def json_times(table: TraceTable) -> TraceTable:
    """The table with each read trace whose times lie too far from its base time for a viewer (``far_base``)
    written against a base near them (the JSON writer's; a store keeps exact ns whatever the base)."""
    bases = [far_base(info) if table.builder is None else None for info in table.traces]
    if not any(b is not None for b in bases):
        return table
    traces = []
    for info, base in zip(table.traces, bases):
        if base is not None:
            info = copy.copy(info)
            info.base_time_ns = base
        traces.append(info)
    out = TraceTable(table.segments, traces, vendor_categories=table.vendor_categories)
    out.layout = table.layout
    return out


def _rank_info(info: RankInfo, trace: int, summary: LayoutSummary, remap: dict) -> RankInfo:
    lanes, ids = summary.metadata(trace), summary.id_metadata(trace)
    if lanes is None and ids is None:
        return info
    out = copy.copy(info)
    header = info.header
    if lanes is not None:
        header[LANES_KEY] = lanes
    if ids is not None:
        header[IDS_KEY] = ids
    meta = [_remapped_meta(ev, remap.get(trace)) for ev in info.metadata_events]
    first_ts = next((ev.get("ts") for ev in meta if isinstance(ev, dict) and "ts" in ev), 0)
    extra = _lane_rows(summary, trace, first_ts)
    out._header, out._meta = header, meta + extra
    if info.metadata_order is not None and len(info.metadata_order) == len(meta):
        out.metadata_order = list(info.metadata_order) + [-1] * len(extra)
    return out


def _rebuild_builder(table: TraceTable, rewrites: dict, summary: LayoutSummary, remap: dict) -> TraceTable:
    """A shallow copy of the table's builder with the rewritten batches and metadata, frozen again."""
    old = table.builder
    b = copy.copy(old)
    b._lock = threading.RLock()
    b._pending_slices, b._pending_instants, b._pending_counters, b._pending_flows = [], [], [], []
    lists = {"slices": list(old.slices), "instants": list(old.instants), "counters": list(old.counters),
             "flows": list(old.flows)}
    for si, rw in rewrites.items():
        seg = table.segments[si]
        if isinstance(seg, BatchSegment) and rw.changed:
            group = lists[seg.kind]
            at = next(i for i, x in enumerate(group) if x is seg.batch)
            group[at] = rewrite_batch(seg.batch, seg.kind, rw)
    b.slices, b.instants, b.counters, b.flows = lists["slices"], lists["instants"], lists["counters"], lists["flows"]
    got = remap.get(0) or {"pid": {}, "tid": {}}

    def pid_of(p):
        return got["pid"].get(_key(p), p)

    b.process_names = {pid_of(p): v for p, v in old.process_names.items()}
    b.process_labels = {pid_of(p): v for p, v in old.process_labels.items()}
    b.process_sort = {pid_of(p): v for p, v in old.process_sort.items()}

    def thread_of(key):
        p, t = key
        return pid_of(p), got["tid"].get((_key(p), _key(sanitize_tid(t))), t)

    b.thread_names = {thread_of(k): v for k, v in old.thread_names.items()}
    b.thread_sort = {thread_of(k): v for k, v in old.thread_sort.items()}
    for d in summary.lanes:
        pid = d["pid"]
        b.thread_names[(pid, d["lane_tid"])] = d["name"]
        sort = d["sort_index"] if d["sort_index"] is not None else d["tid"] if isinstance(d["tid"], int) else 0
        b.thread_sort[(pid, d["lane_tid"])] = sort
    b.metadata = dict(old.metadata)
    lanes, ids = summary.metadata(0), summary.id_metadata(0)
    if lanes is not None:
        b.metadata[LANES_KEY] = lanes
    if ids is not None:
        b.metadata[IDS_KEY] = ids
    info = table.traces[0]
    out = builder_table(b, vendor_categories=table.vendor_categories, rank=info.rank, rank_source=info.source)
    if len(out.segments) != len(table.segments):
        raise AssertionError("a frozen builder's table no longer matches its builder")
    for si, rw in rewrites.items():
        seg = out.segments[si]
        if isinstance(seg, FlatSegment) and rw.changed:  # the trace spans' rows
            out.segments[si] = replace_flat(seg, rewrite_columns(seg.columns, rw))
    return out


__all__ = ["IDS_KEY", "LANES_KEY", "LayoutSummary", "json_times", "lay_out"]
