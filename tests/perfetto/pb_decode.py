"""A ``.pftrace`` decoded with Perfetto's own protos (``perfetto_trace_pb2`` from the ``perfetto`` wheel), written
from the proto definitions alone - not xpuprof's reader - so the tests check the file against what Perfetto
means by it: incremental clocks per sequence, interned data per sequence, defaults, BEGIN/END pairing per
track, flow ids, extra counter values. ``kineto_events`` gives a Kineto JSON file's events in the same shape,
so the two compare one for one.

Shapes (plain tuples/dicts, ts and dur in ns):
- slices: (pid, tid, ts, dur, name, cat, args)      - instants: (pid, tid, ts, name, cat, scope, args)
- counters: (pid, tid, ts, name, cat, metric, value) - flows: (phase, cat, id, pid, tid, ts)
"""
from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                         reason="the perfetto wheel (Perfetto's Python protos) is not installed: pip install perfetto")

LAYOUT_KEY = "xpuprof.pftrace"


def _value(a, names, strings):
    """A DebugAnnotation's value as the JSON value a Kineto trace holds."""
    which = a.WhichOneof("value")
    if a.dict_entries:
        entries = list(a.dict_entries)
        if len(entries) == 1 and not entries[0].HasField("name") and not entries[0].HasField("name_iid") \
                and entries[0].WhichOneof("value") is None and not entries[0].dict_entries and not entries[0].array_values:
            return {}
        return {(e.name if e.HasField("name") else names[e.name_iid]): _value(e, names, strings) for e in entries}
    if a.array_values:
        items = list(a.array_values)
        if len(items) == 1 and items[0].HasField("name") and items[0].name == "" and items[0].WhichOneof("value") is None:
            return []
        return [_value(e, names, strings) for e in items]
    if which is None:
        return None
    if which == "string_value_iid":
        return strings[a.string_value_iid]
    if which == "pointer_value":
        return f"0x{a.pointer_value:016x}"
    if which == "double_value":
        d = a.double_value
        return d if math.isfinite(d) else str(d)
    return getattr(a, which)


class Decoded:
    def __init__(self, path) -> None:
        trace = pb.Trace()
        trace.ParseFromString(Path(path).read_bytes())
        self.packets = list(trace.packet)
        self.header: dict = {}
        self.layout: dict = {}
        for p in self.packets:
            if p.HasField("chrome_events"):
                for m in p.chrome_events.metadata:
                    value = json.loads(m.json_value)
                    if m.name == LAYOUT_KEY:
                        self.layout = value
                    else:
                        self.header[m.name] = value
        self.descriptors = {p.track_descriptor.uuid: p.track_descriptor for p in self.packets
                            if p.HasField("track_descriptor")}
        where = {u: (pid, tid) for u, pid, tid in self.layout.get("tracks", [])}
        for lane, parent, _ in self.layout.get("lanes", []):
            where[lane] = where[parent]
        hoisted = defaultdict(dict)
        for u, cat, key, value in self.layout.get("hoisted", []):
            hoisted[(u, cat)][key] = value
        for lane, parent, _ in self.layout.get("lanes", []):
            for (u, cat), kv in list(hoisted.items()):
                if u == parent:
                    hoisted[(lane, cat)].update(kv)
        counters = {u: (pid, tid, cat, name, metric) for u, pid, tid, cat, name, metric in self.layout.get("counters", [])}
        scheme = self.layout.get("flows") or {}
        self.slices, self.instants, self.counters, self.flow_ends = [], [], [], []
        state: dict[int, dict] = {}
        open_slices: dict[int, list] = defaultdict(list)
        clock_offsets: dict[int, int] = {}
        for p in self.packets:
            seq = p.trusted_packet_sequence_id
            st = state.setdefault(seq, {"names": {}, "cats": {}, "ann": {}, "strings": {}, "clocks": {}, "defaults": None})
            if p.sequence_flags & 1:
                st.update(names={}, cats={}, ann={}, strings={}, defaults=None)
            if p.HasField("clock_snapshot"):
                builtin = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks if c.clock_id < 64}
                realtime = builtin.get(1, next(iter(builtin.values()), 0))
                for c in p.clock_snapshot.clocks:
                    if 64 <= c.clock_id < 128:
                        st["clocks"][c.clock_id] = [c.is_incremental, c.timestamp, c.timestamp, realtime]
            if p.HasField("trace_packet_defaults"):
                st["defaults"] = p.trace_packet_defaults
            if p.HasField("interned_data"):
                d = p.interned_data
                st["names"].update({e.iid: e.name for e in d.event_names})
                st["cats"].update({e.iid: e.name for e in d.event_categories})
                st["ann"].update({e.iid: e.name for e in d.debug_annotation_names})
                st["strings"].update({e.iid: e.str.decode() for e in d.debug_annotation_string_values})
            if not p.HasField("track_event"):
                continue
            defaults = st["defaults"]
            clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else (
                defaults.timestamp_clock_id if defaults is not None and defaults.HasField("timestamp_clock_id") else 6)
            ts = p.timestamp
            if clock in st["clocks"]:
                c = st["clocks"][clock]
                if c[0]:
                    c[2] += ts
                    ts = c[2]
                ts = ts - c[1] + c[3]
            ev = p.track_event
            track = ev.track_uuid if ev.HasField("track_uuid") else defaults.track_event_defaults.track_uuid
            name = st["names"].get(ev.name_iid) if ev.HasField("name_iid") else (ev.name if ev.HasField("name") else None)
            cat = ",".join([st["cats"][i] for i in ev.category_iids] + list(ev.categories)) or None
            args = {}
            for a in ev.debug_annotations:
                key = st["ann"][a.name_iid] if a.HasField("name_iid") else a.name
                args[key] = _value(a, st["ann"], st["strings"])
            pid, tid = where.get(track, (None, None))
            if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                args.update(hoisted.get((track, cat), {}))
                row = [pid, tid, ts, None, name, cat, args]
                open_slices[track].append(row)
                self.slices.append(row)
            elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
                row = open_slices[track].pop()
                row[3] = ts - row[2]
            elif ev.type == pb.TrackEvent.TYPE_INSTANT:
                scope = {1: "g", 2: "p", 3: "t"}.get(ev.legacy_event.instant_event_scope) \
                    if ev.HasField("legacy_event") else None
                self.instants.append((pid, tid, ts, name, cat, scope, args))
            elif ev.type == pb.TrackEvent.TYPE_COUNTER:
                uuids = [track] + list(ev.extra_double_counter_track_uuids or
                                       (defaults.track_event_defaults.extra_double_counter_track_uuids
                                        if defaults is not None else []))
                values = [ev.double_counter_value] + list(ev.extra_double_counter_values)
                for u, v in zip(uuids, values):
                    cp, ct, ccat, cname, metric = counters[u]
                    self.counters.append((cp, ct, ts, cname, ccat, metric, v))
            for fid in ev.flow_ids:
                self.flow_ends.append((False, fid, pid, tid, ts))
            for fid in ev.terminating_flow_ids:
                self.flow_ends.append((True, fid, pid, tid, ts))
        self.slices = [tuple(s[:6]) + (s[6],) for s in self.slices]
        self.flows = []
        cats = scheme.get("categories", [])
        bits = scheme.get("id_bits")
        last_terminated: dict = {}
        for terminating, fid, pid, tid, ts in sorted(self.flow_ends, key=lambda f: (f[1], f[4])):
            cat, ident = (cats[fid & ((1 << bits) - 1)], fid >> bits) if bits else tuple(scheme["numbered"][fid - 1])
            if terminating:
                phase = "f"
            else:
                phase = "s" if last_terminated.get(fid, True) else "t"
            last_terminated[fid] = terminating
            self.flows.append((phase, cat, ident, pid, tid, ts))


def _ns(text) -> int:
    return int((Decimal(str(text)) * 1000).to_integral_value())


def kineto_events(path) -> dict:
    """A Kineto JSON trace's events in the shapes above (ts in ns after its ``baseTimeNanoseconds``, clamped at
    it as Kineto writes them; times from the numbers' text, exactly)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    base = int(doc.get("baseTimeNanoseconds") or 0)

    def plain(v):
        if isinstance(v, Decimal):
            return float(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    out = {"slices": [], "instants": [], "counters": [], "flows": []}
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        ts = base + _ns(e["ts"]) if "ts" in e else None
        if ph == "X":
            out["slices"].append((e.get("pid"), e.get("tid"), ts, _ns(e.get("dur", 0)), e.get("name"), e.get("cat"),
                                  plain(e.get("args", {}))))
        elif ph in ("i", "I"):
            out["instants"].append((e.get("pid"), e.get("tid"), ts, e.get("name"), e.get("cat"), e.get("s"),
                                    plain(e.get("args", {}))))
        elif ph == "C":
            for k, v in (e.get("args") or {}).items():
                out["counters"].append((e.get("pid"), e.get("tid"), ts, e.get("name"), e.get("cat"), k,
                                        float(v) if not isinstance(v, str) else float(v)))
        elif ph in ("s", "t", "f"):
            out["flows"].append((ph, e.get("cat"), e.get("id"), e.get("pid"), e.get("tid"), ts))
    return out


def _number(v):
    """ints and integral floats alike, at any depth: a JSON ``32`` the table keeps as its typed float column and
    an annotation 32.0 are one value."""
    if isinstance(v, dict):
        return {k: _number(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_number(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def canonical(rows) -> list:
    """Rows in a stable order, dict args as sorted JSON, numbers as ``_number`` makes them."""
    def key(v):
        v = _number(v)
        if isinstance(v, dict):
            return json.dumps(v, sort_keys=True, default=str)
        return v
    return sorted((tuple(key(x) for x in r) for r in rows), key=lambda r: json.dumps(r, default=str))
