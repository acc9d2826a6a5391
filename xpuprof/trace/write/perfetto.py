"""Perfetto's native trace format: a TraceTable (or a TraceBuilder, frozen here) as TracePacket/TrackEvent
protobuf, ``.pftrace`` (docs/consumers.md, "Perfetto protobuf").

The same events as the Kineto JSON trace, one for one: every slice (a TYPE_SLICE_BEGIN / TYPE_SLICE_END
pair), instant (TYPE_INSTANT, its scope in the legacy scope field), counter event (TYPE_COUNTER: its first
metric, the others as extra values) and flow (the flow ids of the slices it binds: launch -> kernel, sync
dependencies), args as debug annotations, on process, thread, device-stream and counter tracks; the trace's
top-level keys as trace metadata, with a map that gives every event back its Kineto pid and tid
(``perfetto_tracks``).

Encoded in C (``_native/pfenc.c``) straight from the table's columns - a builder's batches as they are - with
names, categories, arg names and string values interned per sequence and times as deltas of an incremental
clock; no Python object per event, no protobuf package at run time (Perfetto's own Python protos decode the
files in the tests). Why not a protobuf library: the Python protobuf runtime builds a message object per
event (the cost this format exists to avoid), and a C++ runtime would be a build dependency for ~1,000 lines
of field writing.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import orjson

from ..table.builder_view import metadata_json
from ..table.model import TraceTable
from . import perfetto_proto as pb
from .perfetto_rows import Keys, StringPool, counter_rows, event_rows, flow_rows
from .perfetto_rows import pfenc as native
from .perfetto_tracks import Tracks

log = logging.getLogger("xpuprof")
LAYOUT_KEY = "xpuprof.pftrace"  # the metadata entry holding the reader's map
FORMAT_VERSION = 1
FLOW_CATEGORY_BITS = 4  # a flow's Perfetto id: (its id << 4) | its category's index, when both fit


def _laid_out(table: TraceTable) -> TraceTable:
    """The table as a viewer must see it: the one place the lane layout pass (issue 38) is applied before
    encoding. Until it runs here, the encoder itself puts a slice that overlaps another on its track without
    nesting on a lane of its own (a child track), and says so in the trace's metadata."""
    return table


def encode_perfetto(source, *, vendor_categories: bool = True, trace_name: str | None = None) -> list[bytes]:
    """The trace as Perfetto protobuf, in parts to write one after the other (a ``Trace`` message is its packets
    concatenated). ``source``: a one-trace TraceTable, or a TraceBuilder (frozen here)."""
    enc = native()
    table = source if isinstance(source, TraceTable) else source.freeze(vendor_categories=vendor_categories)
    if len(table.traces) != 1:
        raise ValueError(f"a Perfetto trace file holds one trace; the table holds {len(table.traces)}")
    table = _laid_out(table)
    info = table.traces[0]
    vendor = table.vendor_categories
    pool = StringPool(table.builder.strings if table.builder is not None else [])
    keys = Keys()
    rows = event_rows(table, pool, keys, vendor)
    flows = flow_rows(table, keys)
    codes, pairs = _track_codes(enc, rows, flows)
    flow_columns, flow_scheme = _flow_columns(flows, codes[rows.rows:], keys)
    event_codes = codes[:rows.rows]
    counts = np.bincount(event_codes[event_codes >= 0], minlength=len(pairs)) if len(pairs) else np.zeros(0, np.int64)
    tracks = Tracks(pairs, counts, keys, info.metadata_events)
    t0 = _first_time(table)
    blob, offsets = pool.utf8()
    events, lanes, hoisted, counts = enc.encode(blob, offsets, rows.rows, rows.segments, np.ascontiguousarray(
        event_codes, np.int32), tracks.encoder_tracks(), flow_columns, t0, t0, tracks.next_uuid + (1 << 32),
        tracks.next_seq)
    tracks.add_results(lanes, hoisted, pool)
    tracks.add_counters(counter_rows(table, pool, keys, vendor), pool, enc.pair_codes)
    counter_bytes = b""
    c = tracks.counters
    if c is not None:
        counter_bytes = enc.counters(np.ascontiguousarray(c.ts, np.int64), np.ascontiguousarray(c.group, np.int32),
                                     c.offsets, np.ascontiguousarray(c.uuids, np.uint64), np.ascontiguousarray(
                                         c.values, np.float64), c.group_seq, c.group_offsets,
                                     np.ascontiguousarray(c.group_uuids, np.uint64), t0, t0)
    notes = _notes(counts, len(flows), table)
    head = [pb.clock_snapshot(t0), pb.metadata(_metadata(info, tracks, flow_scheme, notes, trace_name)),
            tracks.descriptors()]
    return [b"".join(head), events, counter_bytes]


def _first_time(table: TraceTable) -> int:
    """The clock snapshot's time: the trace's base time, never after its first event (a builder's events are
    never before it: the JSON clamps them there too), never below 0."""
    info = table.traces[0]
    first = None if table.builder is not None else info.first_ts_ns
    t0 = info.base_time_ns if first is None else min(info.base_time_ns, first)
    return max(int(t0), 0)


def _track_codes(enc, rows, flows) -> tuple[np.ndarray, np.ndarray]:
    """A track code per event row and then per flow row ((pid, tid) pairs numbered in row order), and the pairs."""
    parts, known = [], b""
    for pid, tid in zip(rows.pid, rows.tid):
        got, known = enc.pair_codes(pid, tid, known)
        c = np.frombuffer(got, np.int32)
        parts.append(c)
    n_seg = [s[2] - s[1] for s in rows.segments]
    parts = [np.broadcast_to(p, (n,)) if len(p) == 1 and n != 1 else p for p, n in zip(parts, n_seg)]
    for pid, tid in zip(flows.pid, flows.tid):
        got, known = enc.pair_codes(np.ascontiguousarray(pid), np.ascontiguousarray(tid), known)
        parts.append(np.frombuffer(got, np.int32))
    codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    return codes, np.frombuffer(known, np.int64).reshape(-1, 2)


def _flow_columns(flows, codes: np.ndarray, keys: Keys):
    """The flows as ``pfenc.encode`` takes them, and how their Perfetto ids were made (for the reader).

    A Perfetto flow id names one flow in the whole trace, where a Kineto id is unique within its category:
    the id is ``(id << 4) | category index`` when every id is in [0, 2**59) and there are at most 16
    categories, else each distinct (category, id) is numbered from 1 and the numbering is written out."""
    if not len(flows):
        return None, None
    ts = np.concatenate(flows.ts)
    ids = np.concatenate(flows.flow_id)
    is_label = np.concatenate(flows.id_is_label)
    cat_texts: list[str] = []
    cat_index: dict[str, int] = {}
    cats = []
    for cat_ids, text in flows.cat:
        table = np.zeros(max(text) + 2 if text else 1, np.int64)
        for i, t in text.items():
            table[i + 1] = cat_index.setdefault(t, len(cat_index))
        cats.append(table[np.asarray(cat_ids, np.int64) + 1])
    cat_texts = list(cat_index)
    cat = np.concatenate(cats)
    direct = (not is_label.any() and len(cat_texts) <= 1 << FLOW_CATEGORY_BITS and len(ids)
              and ids.min() >= 0 and ids.max() < 1 << (64 - 1 - FLOW_CATEGORY_BITS))
    if direct:
        fid = (ids.astype(np.uint64) << np.uint64(FLOW_CATEGORY_BITS)) | cat.astype(np.uint64)
        scheme = {"categories": cat_texts, "id_bits": FLOW_CATEGORY_BITS}
    else:
        pairs = np.stack([cat, ids], axis=1)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        fid = inverse.reshape(-1).astype(np.uint64) + np.uint64(1)
        numbered = []
        for c, i in uniq.tolist():  # few distinct flows beside the direct case; labels spelled out
            numbered.append([cat_texts[c], keys.labels[i] if _is_label_id(ids, is_label, i) else i])
        scheme = {"categories": cat_texts, "numbered": numbered}
    columns = (np.ascontiguousarray(ts), np.ascontiguousarray(codes, np.int32), fid,
               np.ascontiguousarray(np.concatenate(flows.direction), np.uint8),
               np.ascontiguousarray(np.concatenate(flows.next_slice), np.uint8))
    return columns, scheme


def _is_label_id(ids: np.ndarray, is_label: np.ndarray, value: int) -> bool:
    return bool(is_label[ids == value].any())


def _notes(counts: dict, n_flows: int, table: TraceTable) -> dict:
    """What the file holds differently from the table, said once (and logged)."""
    notes = {}
    if counts["lane_slices"]:
        notes["slices_on_lanes"] = counts["lane_slices"]
        log.warning("xpuprof: %d slices overlap another on their track without nesting; the Perfetto trace puts "
                    "them on lanes of their own (child tracks \"... (lane N)\")", counts["lane_slices"])
    if counts["unbound_flows"]:
        notes["flows_without_slice"] = counts["unbound_flows"]
        log.warning("xpuprof: %d of %d flow ends have no slice at their time on their row; Perfetto flows join "
                    "slices, so the Perfetto trace leaves them out", counts["unbound_flows"], n_flows)
    if counts["deep_args"]:
        notes["args_nested_too_deep_as_text"] = counts["deep_args"]
    return notes


def _metadata(info, tracks: Tracks, flow_scheme, notes: dict, trace_name: str | None) -> list[tuple[str, bytes]]:
    header = {k: v for k, v in info.header.items() if k not in ("traceEvents", "traceName")}
    if "baseTimeNanoseconds" in header or info.base_time_ns:  # (a trace that had none keeps having none)
        header["baseTimeNanoseconds"] = info.base_time_ns
    if trace_name is not None:
        header["traceName"] = trace_name
    entries = []
    for k, v in header.items():
        text = json.dumps(v, ensure_ascii=False).encode() if k == "distributedInfo" else metadata_json(k, v)
        entries.append((str(k), text))
    layout = {"version": FORMAT_VERSION, **tracks.layout(), "flows": flow_scheme, "notes": notes,
              "metadata_events": tracks.meta}
    entries.append((LAYOUT_KEY, orjson.dumps(layout, option=orjson.OPT_NON_STR_KEYS, default=str)))
    return entries


def write_perfetto(source, path, *, vendor_categories: bool = True, trace_name: str | None = None) -> Path:
    """Write a trace as Perfetto protobuf (``.pftrace``); returns the path. Written atomically (a private
    temporary file beside it, renamed into place), like every trace xpuprof writes."""
    from ...outputs import open_output, output_file

    path = Path(path)
    name = str(path if trace_name is None else trace_name).replace("\\", "/").replace("\n", "")
    parts = encode_perfetto(source, vendor_categories=vendor_categories, trace_name=name)
    try:
        with output_file(path) as dest:
            with open_output(dest, buffering=0) as f:
                for part in parts:
                    view = memoryview(part)
                    while len(view):
                        view = view[f.write(view):]
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            exc.filename = str(path)
        raise
    return path


__all__ = ["encode_perfetto", "write_perfetto"]
