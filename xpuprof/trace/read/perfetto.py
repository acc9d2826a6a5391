"""The Perfetto protobuf reader: a ``.pftrace`` (TracePacket/TrackEvent) as a TraceTable, the rows the Kineto
JSON trace of the same profile gives (docs/consumers.md, "Perfetto protobuf").

The file is decoded in C (``_native/pfdec.c``: slices paired from their BEGIN/END events, instants, counter
values, flow ends, each event's debug annotations as the JSON object a Kineto trace holds, times through the
clock snapshots). What Perfetto's events do not carry - the Kineto pid and tid of each track, the args
written once on a track, the categories of counters and flows, the trace's top-level keys and metadata rows -
comes from the trace's metadata, as xpuprof's writer puts it there (``trace.write.perfetto``). A trace from
another tool is read through its track descriptors instead: a thread's pid and tid, a process's pid, any
other track's name as its row label.

Push-down as the JSON reader: ``kinds``, ``slice_args`` (every slice's args, none, or those whose name a
function accepts) and ``counters`` (every counter, or those whose category a function accepts).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from ..table.args import TypedArgs
from ..table.columns import NO_VALUE, CounterColumns, FlowColumns, InstantColumns, RowText, SliceColumns, constant
from ..table.model import FlatSegment, RankInfo, TraceTable
from .kineto import _merged_row_ranks, base_time, merged_ranks, resolve_rank
from .source import TraceInput, TraceLoadError

LAYOUT_KEY = "xpuprof.pftrace"  # the writer's map (``trace.write.perfetto.LAYOUT_KEY``)
KINDS = ("slices", "counters", "flows", "instants")


def _native():
    from ... import _native

    try:
        return _native.load("pfdec", "reading a Perfetto protobuf trace")
    except _native.NativeUnavailable as exc:
        raise TraceLoadError(str(exc)) from exc


def _metadata_value(kind: str, value):
    if kind == "json":
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


class _Where:
    """Each track uuid's Kineto pid and tid (an int, a row label, or None), as label-coded columns."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self._ids: dict[str, int] = {}
        self.of: dict[int, tuple] = {}

    def code(self, v) -> tuple[int, int]:
        """(int value, label id): -1 for an int, NO_VALUE for none."""
        if v is None:
            return 0, NO_VALUE
        if isinstance(v, bool) or not isinstance(v, int):
            text = v if isinstance(v, str) else orjson.dumps(v).decode()
            got = self._ids.get(text)
            if got is None:
                got = self._ids[text] = len(self.labels)
                self.labels.append(text)
            return 0, got
        return int(v), -1

    def columns(self, uuids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        uuids = np.asarray(uuids, np.uint64)
        distinct, inverse = np.unique(uuids, return_inverse=True)
        table = np.array([(*self.code(self.of.get(int(u), (None, None))[0]),
                           *self.code(self.of.get(int(u), (None, None))[1])) for u in distinct.tolist()]
                         or np.zeros((0, 4)), np.int64).reshape(-1, 4)
        rows = table[inverse.reshape(-1)] if len(uuids) else np.zeros((0, 4), np.int64)
        return (rows[:, 0].copy(), rows[:, 1].astype(np.int32), rows[:, 2].copy(), rows[:, 3].astype(np.int32))


def _descriptor_rows(descriptors: list) -> tuple[dict, dict, list[dict]]:
    """From the track descriptors (another tool's trace): uuid -> (pid, tid) of event tracks, uuid -> counter
    track (pid, tid, name), and metadata rows naming processes and threads."""
    by_uuid = {d[0]: d for d in descriptors}

    def pid_of(uuid, seen=0):
        d = by_uuid.get(uuid)
        if d is None or seen > 64:
            return None
        if d[3] in ("process", "thread") and d[4] is not None:
            return d[4]
        return pid_of(d[1], seen + 1) if d[1] is not None else (d[2] or f"track {uuid}")

    where, counter_tracks, meta = {}, {}, []
    for uuid, parent, name, kind, pid, tid, pname, labels, _ in descriptors:
        if kind == "process":
            where[uuid] = (pid, 0)
            if pname:
                meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pname}})
            for label in labels:
                meta.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}})
        elif kind == "thread":
            where[uuid] = (pid, tid)
            if pname:
                meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": pname}})
        elif kind == "counter":
            p = pid_of(parent) if parent is not None else name
            t = where.get(parent, (p, 0))[1] if parent is not None else 0
            counter_tracks[uuid] = (p, t, None, name or f"counter {uuid}", "value")
        else:
            where[uuid] = (pid_of(parent) if parent is not None else (name or f"track {uuid}"), name or f"track {uuid}")
    return where, counter_tracks, meta


class PerfettoFile:
    """One decoded ``.pftrace`` (see the module docstring)."""

    def __init__(self, path, *, limit: int | None = None) -> None:
        self.path = Path(path)
        with TraceInput(self.path, limit=limit, accept=("perfetto",)) as src:
            data = src.read(-1)
        dec = _native()
        try:
            entries = dec.metadata(data)
            self.header = {name: _metadata_value(kind, value) for name, (kind, value) in entries}
            layout = self.header.pop(LAYOUT_KEY, None)
            self.layout = layout if isinstance(layout, dict) else None
            self.decoded = dec.decode(data, self._hoisted())
        except ValueError as exc:
            raise TraceLoadError(f"{self.path}: {exc}") from None
        del data
        d = self.decoded
        blob, offsets = d["strings"]
        offs = np.frombuffer(offsets, np.int64).tolist()
        self.strings = [blob[offs[i]:offs[i + 1]].decode("utf-8", "replace") for i in range(len(offs) - 1)]
        self.where = _Where()
        self._counter_tracks: dict[int, tuple] = {}
        self.meta_events: list[dict] = []
        self._map_tracks()

    # ------------------------------------------------------------------ the writer's map, or the descriptors
    def _hoisted(self) -> list:
        if not self.layout:
            return []
        out = []
        by_track: dict = {}
        lanes: dict = {}
        for lane_uuid, parent, _lane in self.layout.get("lanes", []):  # a lane's slices: their track's args
            lanes.setdefault(int(parent), []).append(int(lane_uuid))
        for uuid, cat, key, value in self.layout.get("hoisted", []):
            member = orjson.dumps(key) + b":" + orjson.dumps(value)
            for u in (int(uuid), *lanes.get(int(uuid), ())):
                by_track.setdefault((u, cat), []).append(member)
        for (uuid, cat), members in by_track.items():
            out.append((uuid, cat, b",".join(members)))
        return out

    def _map_tracks(self) -> None:
        where, counters, meta = _descriptor_rows(self.decoded["descriptors"])
        layout = self.layout
        if layout:
            where = {int(u): (p, t) for u, p, t in layout.get("tracks", [])}
            for lane_uuid, parent, _lane in layout.get("lanes", []):
                where[int(lane_uuid)] = where.get(int(parent), (None, None))
            counters = {int(u): (p, t, cat, name, metric) for u, p, t, cat, name, metric in layout.get("counters", [])}
            meta = [e for e in layout.get("metadata_events", []) if isinstance(e, dict)]
        self.where.of = where
        self._counter_tracks = counters
        self.meta_events = meta

    # ------------------------------------------------------------------ columns
    def _sid(self, text: str) -> int:
        index = getattr(self, "_index", None)
        if index is None:
            index = self._index = {s: i for i, s in enumerate(self.strings)}
        got = index.get(text)
        if got is None:
            got = index[text] = len(self.strings)
            self.strings.append(text)
        return got

    def _common(self, ts, uuid, order, rank: int) -> dict:
        pid, pid_label, tid, tid_label = self.where.columns(uuid)
        n = len(ts)
        return {"strings": self.strings, "labels": self.where.labels, "rank": constant(rank, n, np.int32),
                "order": np.asarray(order, np.int64), "ts": np.asarray(ts, np.int64), "pid": pid,
                "pid_label": pid_label, "tid": tid, "tid_label": tid_label}

    def slices(self, rank: int, slice_args=True) -> SliceColumns:
        ts, dur, uuid, name, cat, order, args_off, args = self.decoded["slices"]
        ts, dur = np.frombuffer(ts, np.int64), np.frombuffer(dur, np.int64)
        name, cat = np.frombuffer(name, np.int64).astype(np.int32), np.frombuffer(cat, np.int64).astype(np.int32)
        common = self._common(ts, np.frombuffer(uuid, np.uint64), np.frombuffer(order, np.int64), rank)
        n = len(ts)
        offsets = np.frombuffer(args_off, np.int64)
        if slice_args is False or not len(args):
            typed = TypedArgs(n)
        else:
            spans = np.stack([offsets[:-1], offsets[1:]], axis=1).astype(np.int64)
            spans[spans[:, 0] == spans[:, 1]] = -1
            if callable(slice_args):
                keep = np.array([bool(slice_args(self.strings[i])) if i >= 0 else False
                                 for i in name.tolist()], bool) if n else np.zeros(0, bool)
                spans[~keep] = -1
            typed = TypedArgs.from_text(args, spans)
        ints, floats, rest = typed.columns()
        unended = dur < 0
        return SliceColumns(**common, name=name, cat=cat, dur=np.where(unended, 0, dur),
                            dur_present=~unended if unended.any() else None, ints=ints, floats=floats, args=rest)

    def instants(self, rank: int) -> InstantColumns:
        ts, uuid, name, cat, scope, order, args_off, args = self.decoded["instants"]
        ts = np.frombuffer(ts, np.int64)
        common = self._common(ts, np.frombuffer(uuid, np.uint64), np.frombuffer(order, np.int64), rank)
        return InstantColumns(**common, name=np.frombuffer(name, np.int64).astype(np.int32),
                              cat=np.frombuffer(cat, np.int64).astype(np.int32),
                              scope=np.frombuffer(scope, np.uint8).copy(),
                              args=RowText(np.frombuffer(args_off, np.int64), args))

    def counters(self, rank: int, counters=True) -> CounterColumns:
        ts, uuid, value, order = self.decoded["counters"]
        ts, value, order = np.frombuffer(ts, np.int64), np.frombuffer(value, np.float64), np.frombuffer(order, np.int64)
        uuid = np.frombuffer(uuid, np.uint64)
        distinct, inverse = np.unique(uuid, return_inverse=True)
        tracks = [self._counter_tracks.get(int(u), (None, None, None, f"counter {int(u)}", "value"))
                  for u in distinct.tolist()]
        per_track = np.array([[self._sid(name or ""), -1 if cat is None else self._sid(cat), self._sid(metric or "value")]
                              for _, _, cat, name, metric in tracks] or np.zeros((0, 3)), np.int64).reshape(-1, 3)
        rows = per_track[inverse.reshape(-1)] if len(uuid) else np.zeros((0, 3), np.int64)
        where = _Where.__new__(_Where)
        where.labels, where._ids = self.where.labels, self.where._ids
        where.of = {int(u): (t[0], t[1]) for u, t in zip(distinct.tolist(), tracks)}
        pid, pid_label, tid, tid_label = where.columns(uuid)
        order = self._counter_order(uuid, ts, order)
        keep = np.ones(len(ts), bool)
        if callable(counters) and len(ts):
            ok = np.array([bool(counters(None if cat is None else cat)) for _, _, cat, _, _ in tracks], bool)
            keep = ok[inverse.reshape(-1)]
        out = CounterColumns(strings=self.strings, labels=self.where.labels, rank=constant(rank, len(ts), np.int32),
                             order=order.copy(), ts=ts.copy(), pid=pid, pid_label=pid_label, tid=tid, tid_label=tid_label,
                             name=rows[:, 0].astype(np.int32), cat=rows[:, 1].astype(np.int32),
                             metric=rows[:, 2].astype(np.int32), value=value.copy())
        return out if keep.all() else out.take(keep)

    def _counter_order(self, uuid: np.ndarray, ts: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Counter events in the order their series first appeared in the Kineto trace: a Perfetto trace holds
        each counter series as a sequence of its own, and what reads counters "in file order" (the report's
        telemetry rows) must meet them as the JSON trace had them. An event's rank: its first track in the
        writer's list (first-seen order), then its time; its values keep one order."""
        listed = {int(u): k for k, (u, *_) in enumerate((self.layout or {}).get("counters", []))}
        if not listed or not len(uuid):
            return order.copy()
        distinct, inverse = np.unique(uuid, return_inverse=True)
        position = np.array([listed.get(int(u), len(listed)) for u in distinct.tolist()], np.int64)[inverse.reshape(-1)]
        first = np.ones(len(order), bool)
        first[1:] = order[1:] != order[:-1]
        event = np.cumsum(first) - 1  # the rows of one event are consecutive
        event_position = np.minimum.reduceat(position, np.flatnonzero(first))
        event_ts = ts[first]
        rank = np.empty(len(event_ts), np.int64)
        rank[np.lexsort((np.arange(len(event_ts)), event_ts, event_position))] = np.arange(len(event_ts))
        return rank[event]

    def flows(self, rank: int) -> FlowColumns:
        ts, uuid, fid, terminating, order = self.decoded["flows"]
        ts, fid = np.frombuffer(ts, np.int64), np.frombuffer(fid, np.uint64)
        terminating = np.frombuffer(terminating, np.uint8).astype(bool)
        order = np.frombuffer(order, np.int64)
        n = len(ts)
        cats, ids, id_label = self._flow_ids(fid)
        # per flow id in time order: an end that follows no end or a terminating one starts a flow ("s"), a
        # terminating end ends it ("f", bound to its slice), any other end continues it ("t")
        by = np.lexsort((order, ts, fid)) if n else np.zeros(0, np.int64)
        first = np.zeros(n, bool)
        if n:
            sf, st = fid[by], terminating[by]
            head = np.ones(n, bool)
            head[1:] = (sf[1:] != sf[:-1]) | st[:-1]
            first[by[head]] = True
        phase = np.where(terminating, ord("f"), np.where(first, ord("s"), ord("t"))).astype(np.uint8)
        common = self._common(ts, np.frombuffer(uuid, np.uint64), order, rank)
        return FlowColumns(**common, name=cats, cat=cats, flow_id=ids, id_label=id_label, phase=phase,
                           bp=np.where(terminating, ord("e"), 0).astype(np.uint8))

    def _flow_ids(self, fid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(category sid, Kineto id, id label) per flow end, by the writer's scheme (or the Perfetto id)."""
        scheme = (self.layout or {}).get("flows") or {}
        names = [self._sid(c) for c in scheme.get("categories", [])]
        n = len(fid)
        id_label = constant(-1, n, np.int32)
        if "id_bits" in scheme and names:
            bits = np.uint64(int(scheme["id_bits"]))
            code = (fid & ((np.uint64(1) << bits) - np.uint64(1))).astype(np.int64)
            cats = np.asarray(names, np.int32)[np.clip(code, 0, len(names) - 1)]
            return cats, (fid >> bits).astype(np.int64), id_label
        numbered = scheme.get("numbered")
        if numbered:
            cat_of = np.array([self._sid(c) for c, _ in numbered], np.int32)
            idx = np.clip(fid.astype(np.int64) - 1, 0, len(numbered) - 1)
            ids = np.array([i if isinstance(i, int) else 0 for _, i in numbered], np.int64)
            labels = np.array([-1 if isinstance(i, int) else self.where.code(str(i))[1] for _, i in numbered], np.int32)
            return cat_of[idx], ids[idx], labels[idx]
        flow = self._sid("flow")
        return constant(flow, n, np.int32).copy(), fid.astype(np.int64), id_label

    # ------------------------------------------------------------------ the rank table's row
    def info(self, rank=None, position=None, events: int = 0, first_ts=None) -> RankInfo:
        header = dict(self.header)
        base, bad_base = base_time(header)
        merged = merged_ranks(header)
        if merged:
            r, source = -1, "merged view"
        else:
            r, source = resolve_rank(self.path, header, rank, position)
        warnings = []
        notes = (self.layout or {}).get("notes") or {}
        if notes.get("slices_on_lanes"):
            warnings.append(f"{notes['slices_on_lanes']} slices were written on lanes of their own (they overlapped "
                            "another slice of their row without nesting)")
        if notes.get("flows_without_slice"):
            warnings.append(f"{notes['flows_without_slice']} flow ends had no slice to join and are not in the file")
        counts = self.decoded["counts"]
        if counts["unmatched_ends"]:
            warnings.append(f"{counts['unmatched_ends']} slice ends without a begin on their track were not read")
        if counts["unsupported_events"]:
            warnings.append(f"{counts['unsupported_events']} events of kinds xpuprof does not read were skipped")
        if counts["unknown_clock"]:
            warnings.append(f"{counts['unknown_clock']} timestamps were on clocks no snapshot relates to the trace's "
                            "clock: read as they are")
        if source in ("position", "default"):
            warnings.append(f"rank taken from the input's {'position' if source == 'position' else 'default (0)'}: "
                            "the trace has no distributedInfo.rank and its name no rank<N>")
        info = RankInfo(r, source, header=header, metadata_events=self.meta_events, base_time_ns=base,
                        first_ts_ns=first_ts, sources=[str(self.path)], warnings=warnings, ts_kind="int",
                        writer="perfetto")
        info.bad_base = bad_base
        info.merged_ranks = merged
        info.events = events
        return info


def read_perfetto(path, *, rank: int | None = None, position: int | None = None, kinds=None, slice_args=True,
                  counters=True, limit: int | None = None) -> TraceTable:
    """A ``.pftrace`` as a one-trace TraceTable (see the module docstring; the rank rule is the JSON reader's)."""
    f = PerfettoFile(path, limit=limit)
    kinds = KINDS if kinds is None else tuple(kinds)
    cols = {}
    provisional = 0
    if "slices" in kinds:
        cols["slices"] = f.slices(provisional, slice_args)
    if "instants" in kinds:
        cols["instants"] = f.instants(provisional)
    if "counters" in kinds:
        cols["counters"] = f.counters(provisional, counters)
    if "flows" in kinds:
        cols["flows"] = f.flows(provisional)
    events = sum(len(c) for c in cols.values())
    firsts = [int(np.min(c.ts)) for c in cols.values() if len(c)]
    base = base_time(f.header)[0]
    firsts += [base + round(e["ts"] * 1000) for e in f.meta_events  # metadata rows: µs after the base time
               if isinstance(e.get("ts"), (int, float)) and not isinstance(e.get("ts"), bool) and e["ts"] == e["ts"]
               and abs(e["ts"]) < 1e15]
    info = f.info(rank, position, events, min(firsts) if firsts else None)
    segments = []
    for kind in KINDS:
        c = cols.get(kind)
        if c is None or not len(c):
            continue
        from dataclasses import replace

        row_rank = _merged_row_ranks(c) if info.merged_ranks else constant(info.rank, len(c), np.int32)
        segments.append(FlatSegment(replace(c, rank=row_rank), info.rank, 0, 0))
    return TraceTable(segments, [info])


__all__ = ["PerfettoFile", "read_perfetto"]
