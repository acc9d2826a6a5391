"""Which Perfetto track each (pid, tid) row of a trace becomes, the descriptors that say so, and the map a
reader uses to give every event back its Kineto pid and tid.

- A pid that fits Perfetto's 32-bit pids (0 <= pid < 2**31) is a process (``ProcessDescriptor``: its
  ``process_name`` and ``process_labels`` metadata rows); any other pid (a row label such as "Spans", a
  negative or wider pid) is a top-level track of that name.
- A (pid, tid) row is a thread (``ThreadDescriptor``) when its tid is a thread id (0 < tid < 2**31) and, of
  the rows that share that tid under other pids (device streams: stream 1 of two devices; sync rows keyed by
  a host thread's tid), it holds the most events; the others are tracks of their own under their process,
  named as the trace names the row. Perfetto keys threads by tid alone, so one tid under two pids would
  merge their rows.
- Queue args hoisted by the encoder (one value over every slice of a category on the track) are written once:
  in the track's description, and exactly in the map.
- Counters: one counter track per (pid, tid, category, name, metric), named "<name> <metric>" as Perfetto's
  JSON importer names them, under the row's track when it has one, else under its process.

The map (``layout``) goes into the trace's metadata (``xpuprof.pftrace``): per track uuid its pid and tid as
the JSON trace holds them, the lanes, the hoisted args, the counter tracks, the flow id scheme, and the
trace's metadata rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import perfetto_proto as pb
from .perfetto_rows import CounterRows, Keys, StringPool

PID_LIMIT = 1 << 31
FIRST_SEQUENCE = 2  # sequence 1 holds the descriptors and metadata


def _meta_index(meta_events: list[dict]) -> tuple[dict, dict, dict, dict]:
    """(process names, process labels, thread names, thread sort indices) from a trace's "M" rows."""
    pnames, plabels, tnames, tsort = {}, {}, {}, {}
    for ev in meta_events:
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        pid, tid, what = ev.get("pid"), ev.get("tid"), ev.get("name")
        try:
            if what == "process_name":
                pnames[pid] = str(args.get("name", ""))
            elif what == "process_labels":
                plabels[pid] = str(args.get("labels", ""))
            elif what == "thread_name":
                tnames[(pid, tid)] = str(args.get("name", ""))
            elif what == "thread_sort_index" and isinstance(args.get("sort_index"), int):
                tsort[(pid, tid)] = args["sort_index"]
        except TypeError:  # an unhashable pid/tid in a hand-made trace: no name for it
            continue
    return pnames, plabels, tnames, tsort


def _hashable(v):
    return v if isinstance(v, (int, str)) or v is None else repr(v)


def _fits(v) -> bool:
    return isinstance(v, int) and 0 <= v < PID_LIMIT


def _value_text(v) -> str:
    return v if isinstance(v, str) else str(v)


@dataclass
class Counters:
    """Counter tracks and their events as ``pfenc.counters`` takes them."""

    ts: np.ndarray
    group: np.ndarray
    offsets: np.ndarray
    uuids: np.ndarray
    values: np.ndarray
    group_seq: np.ndarray
    group_offsets: np.ndarray
    group_uuids: np.ndarray
    tracks: list = field(default_factory=list)  # (uuid, parent, name, pid, tid, cat, series name, metric)


class Tracks:
    """The tracks of one trace (see the module docstring). ``pairs``: the (pid key, tid key) of each track code
    (``pfenc.pair_codes``); ``used``: whether a code has events."""

    def __init__(self, pairs: np.ndarray, counts: np.ndarray, keys: Keys, meta_events: list[dict]) -> None:
        self.pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        self.counts = np.asarray(counts, np.int64)
        self.used = self.counts > 0
        self.keys = keys
        self.meta = list(meta_events)
        self.pnames, self.plabels, self.tnames, self.tsort = _meta_index(self.meta)
        self.values = [(keys.value(p), keys.value(t)) for p, t in self.pairs.tolist()]
        n = len(self.values)
        self.uuid = np.arange(1, n + 1, dtype=np.int64)
        self.seq = np.arange(FIRST_SEQUENCE, FIRST_SEQUENCE + n, dtype=np.int64)
        self.next_uuid = n + 1
        self.next_seq = FIRST_SEQUENCE + n
        self.thread_owner: dict[int, int] = {}  # tid -> the code that gets its thread descriptor
        for code, ((pid, tid), n) in enumerate(zip(self.values, self.counts.tolist())):
            if n and _fits(pid) and isinstance(tid, int) and 0 < tid < PID_LIMIT:
                best = self.thread_owner.get(tid)
                if best is None or n > self.counts[best]:
                    self.thread_owner[tid] = code
        self.process_uuid: dict = {}  # hashable pid -> its process (or top-level) track
        self.pids: dict = {}  # hashable pid -> the pid
        for pid, _ in self.values:
            self._process(pid)
        self.lanes: list[tuple[int, int, int, int]] = []
        self.hoisted: dict[int, list[tuple[str | None, str, object]]] = {}
        self.counters: Counters | None = None

    def _process(self, pid) -> int:
        h = _hashable(pid)
        got = self.process_uuid.get(h)
        if got is None:
            got = self.process_uuid[h] = self._new_uuid()
            self.pids[h] = pid
        return got

    def _new_uuid(self) -> int:
        u = self.next_uuid
        self.next_uuid += 1
        return u

    def encoder_tracks(self) -> np.ndarray:
        """(uuid, sequence, 0) per track code, as ``pfenc.encode`` takes them."""
        return np.ascontiguousarray(np.stack([self.uuid, self.seq, np.zeros_like(self.uuid)], axis=1), np.int64)

    def is_thread(self, code: int) -> bool:
        tid = self.values[code][1]
        return isinstance(tid, int) and self.thread_owner.get(tid) == code

    def row_name(self, code: int) -> str:
        pid, tid = self.values[code]
        got = self.tnames.get((_hashable(pid), _hashable(tid)))
        return got if got else _value_text(tid) if tid is not None else "(no tid)"

    # ------------------------------------------------------------------ results of the encoder
    def add_results(self, lanes, hoisted, pool: StringPool) -> None:
        self.lanes = [tuple(map(int, lane)) for lane in lanes]
        if self.lanes:
            self.next_uuid = max(self.next_uuid, max(lane[2] for lane in self.lanes) + 1)
            self.next_seq = max(self.next_seq, max(lane[3] for lane in self.lanes) + 1)
        from .perfetto_rows import pfenc

        enc = pfenc()
        for code, cat, key, kind, value in hoisted:
            if kind == enc.HEX:
                value = f"0x{int(value) & ((1 << 64) - 1):016x}"
            elif kind == enc.STR:
                value = pool.text(int(value))
            elif isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
                value = str(value)
            self.hoisted.setdefault(int(code), []).append(
                (None if cat < 0 else pool.text(int(cat)), pool.text(int(key)), value))

    # ------------------------------------------------------------------ counters
    def add_counters(self, rows: CounterRows, pool: StringPool, pair_codes) -> None:
        if not rows.ts:
            return
        ts = np.concatenate(rows.ts)
        pid = np.concatenate([np.asarray(p, np.int64) for p in rows.pid])
        tid = np.concatenate([np.asarray(t, np.int64) for t in rows.tid])
        name = np.concatenate([np.asarray(x, np.int64) for x in rows.name])
        cat = np.concatenate([np.asarray(x, np.int64) for x in rows.cat])
        counts = np.concatenate(rows.counts)
        metric = np.concatenate(rows.metric)
        value = np.concatenate(rows.value)
        rows_codes, row_pairs = pair_codes(pid, tid, b"")
        row_code = np.frombuffer(rows_codes, np.int32).astype(np.int64)
        series_codes, series_pairs = pair_codes(row_code, (name << 32) | (cat + 1), b"")
        series = np.frombuffer(series_codes, np.int32).astype(np.int64)
        series_of_metric = np.repeat(series, counts)
        track_codes, track_pairs = pair_codes(series_of_metric, metric, b"")
        track = np.frombuffer(track_codes, np.int32)
        row_pairs = np.frombuffer(row_pairs, np.int64).reshape(-1, 2)
        series_pairs = np.frombuffer(series_pairs, np.int64).reshape(-1, 2)
        track_pairs = np.frombuffer(track_pairs, np.int64).reshape(-1, 2)
        base_uuid = self.next_uuid
        self.next_uuid += len(track_pairs)
        slice_tracks = {(int(p), int(t)): c for c, (p, t) in enumerate(self.pairs.tolist()) if self.used[c]}
        out = Counters(ts=ts, group=series.astype(np.int32), offsets=np.concatenate([[0], np.cumsum(counts)]).astype(
            np.int64), uuids=(track.astype(np.int64) + base_uuid).astype(np.uint64), values=value,
            group_seq=np.zeros(len(series_pairs), np.int64), group_offsets=np.zeros(len(series_pairs) + 1, np.int64),
            group_uuids=np.zeros(len(track_pairs), np.uint64))
        order = np.argsort(track_pairs[:, 0], kind="stable")  # each series' tracks together, first seen first
        out.group_uuids = (order + base_uuid).astype(np.uint64)
        np.cumsum(np.bincount(track_pairs[:, 0], minlength=len(series_pairs)), out=out.group_offsets[1:])
        out.group_seq = np.arange(self.next_seq, self.next_seq + len(series_pairs), dtype=np.int64)
        self.next_seq += len(series_pairs)
        for k, (s, m) in enumerate(track_pairs.tolist()):
            row, packed = series_pairs[s]
            pid_key, tid_key = row_pairs[row]
            series_name, cat_sid = pool.text(int(packed >> 32)), int(packed & 0xFFFFFFFF) - 1
            p, t = self.keys.value(pid_key), self.keys.value(tid_key)
            code = slice_tracks.get((int(pid_key), int(tid_key)))
            parent = int(self.uuid[code]) if code is not None else self._process(p)
            out.tracks.append((base_uuid + k, parent, f"{series_name} {pool.text(int(m))}", p, t,
                               None if cat_sid < 0 else pool.text(cat_sid), series_name, pool.text(int(m))))
        self.counters = out

    # ------------------------------------------------------------------ descriptors and the map
    def descriptors(self) -> bytes:
        parts = []
        pids_seen = set()
        parents_used = {self.process_uuid[_hashable(p)] for (p, _), u in zip(self.values, self.used.tolist()) if u}
        parents_used |= {t[1] for t in (self.counters.tracks if self.counters else [])}
        for h, pid in self.pids.items():
            if h in pids_seen or self.process_uuid[h] not in parents_used:
                continue
            pids_seen.add(h)
            uuid = self.process_uuid[h]
            name = self.pnames.get(h)
            if _fits(pid):
                labels = [self.plabels[h]] if self.plabels.get(h) else []
                parts.append(pb.track_descriptor(uuid, process=(pid, name, labels), explicit_children=True))
            else:
                parts.append(pb.track_descriptor(uuid, name=name or _value_text(pid) if pid is not None else "(no pid)",
                                                 explicit_children=True))
        for code, (pid, tid) in enumerate(self.values):
            if not self.used[code]:
                continue
            parent = self.process_uuid[_hashable(pid)]
            order = self.tsort.get((_hashable(pid), _hashable(tid)), tid if isinstance(tid, int) else None)
            desc = ", ".join(f"{k} {v}" for _, k, v in self.hoisted.get(code, [])) or None
            if self.is_thread(code):
                parts.append(pb.track_descriptor(int(self.uuid[code]), parent=parent, description=desc, order=order,
                                                 thread=(pid, tid, self.tnames.get((pid, tid)))))
            else:
                parts.append(pb.track_descriptor(int(self.uuid[code]), parent=parent, name=self.row_name(code),
                                                 description=desc, order=order))
        for code, lane, uuid, _ in self.lanes:
            parts.append(pb.track_descriptor(uuid, parent=int(self.uuid[code]), name=f"{self.row_name(code)} (lane {lane})",
                                             order=lane))
        for uuid, parent, name, *_ in (self.counters.tracks if self.counters else []):
            parts.append(pb.track_descriptor(uuid, parent=parent, name=name, counter=True))
        return b"".join(parts)

    def layout(self) -> dict:
        """The reader's map (see the module docstring)."""
        tracks = [[int(self.uuid[c]), p, t] for c, (p, t) in enumerate(self.values) if self.used[c]]
        lanes = [[uuid, int(self.uuid[code]), lane] for code, lane, uuid, _ in self.lanes]
        hoisted = [[int(self.uuid[code]), cat, key, value] for code, entries in self.hoisted.items()
                   for cat, key, value in entries]
        counters = [[uuid, p, t, cat, name, metric] for uuid, _, _, p, t, cat, name, metric in
                    (self.counters.tracks if self.counters else [])]
        return {"tracks": tracks, "lanes": lanes, "hoisted": hoisted, "counters": counters}
