"""Kineto-compatible Chrome/Perfetto JSON writer.

Contract (see the Kineto trace reference): top-level keys in Kineto's order, ``ts``/``dur`` in
µs relative to ``baseTimeNanoseconds`` (clamped at 0), M rows, "X" slices with ``External id``
first in args, ``ac2g`` flows with ``"bp": "e"`` on "f" only, "C" counters, trace spans, the
closing ``Record Window End`` instant. Every string goes through a real JSON encoder.

The file is written to ``<path>.tmp`` in chunks and renamed atomically; ``.json.gz`` paths are
gzip-compressed (python-isal when installed, zlib level 1 otherwise).
"""
from __future__ import annotations

import gc
import gzip
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

from ..clock import BASE_TIME_NS
from .builder import ArgColumn, CounterBatch, FlowBatch, InstantBatch, SliceBatch, TraceBuilder, encode_json

CHUNK_EVENTS = 32768
SPANS_PID = "Spans"
SPANS_SORT_INDEX = 0x20000000


def _open_sink(tmp: Path, gz: bool, level: int):
    if not gz:
        return open(tmp, "wb", buffering=1 << 20)
    try:
        from isal import igzip  # python-isal: ~4x faster than zlib at level 1
        return igzip.open(tmp, "wb", compresslevel=min(level, 3))
    except ImportError:
        return gzip.open(tmp, "wb", compresslevel=level)


@contextmanager
def _gc_paused():
    # Building many short-lived dicts triggers needless GC passes; pause it for the write.
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _us(ns: np.ndarray) -> list[float]:
    """Absolute ns -> µs relative to the base time, clamped at 0 (Kineto's fmtTs)."""
    rel = np.maximum(ns.astype(np.int64, copy=False) - np.int64(BASE_TIME_NS), 0)
    return (rel / 1000.0).round(3).tolist()


def _dur_us(ns: np.ndarray) -> list[float]:
    return (np.maximum(ns, 0) / 1000.0).round(3).tolist()


def _rows(col: np.ndarray) -> list:
    return col.tolist()


def _arg_values(col: ArgColumn, strings: list[str], sl: slice) -> tuple[list, list | None]:
    vals = col.values[sl]
    if col.kind == "str":
        out = [strings[i] for i in vals.tolist()]
    elif col.kind == "hex":
        out = [f"0x{v:016x}" for v in vals.tolist()]
    elif col.kind == "obj":
        out = list(vals)
    else:
        if vals.dtype.kind == "f" and not np.isfinite(vals).all():
            out = [v if np.isfinite(v) else str(v) for v in vals.tolist()]
        else:
            out = vals.tolist()
    present = None if col.present is None else col.present[sl].tolist()
    return out, present


def _slice_events(b: SliceBatch, strings: list[str], legacy: bool) -> Iterator[list[dict]]:
    cats = b.legacy_cat if legacy else b.cat
    for lo in range(0, len(b), CHUNK_EVENTS):
        sl = slice(lo, lo + CHUNK_EVENTS)
        ts, dur = _us(b.ts[sl]), _dur_us(b.dur[sl])
        pid, tid = _rows(b.pid[sl]), _rows(b.tid[sl])
        names = [strings[i] for i in b.name[sl].tolist()]
        cat = [strings[i] for i in cats[sl].tolist()]
        ext = b.external_id[sl].tolist()
        arg_cols = [(k, *_arg_values(c, strings, sl)) for k, c in b.args.items()]
        row_args = b.row_args[sl] if b.row_args is not None else None
        out = []
        for i in range(len(ts)):
            ev = {"ph": "X", "cat": cat[i], "name": names[i], "pid": pid[i], "tid": tid[i], "ts": ts[i], "dur": dur[i]}
            args = {}
            if ext[i]:
                args["External id"] = ext[i]
            for k, vals, present in arg_cols:
                if present is None or present[i]:
                    args[k] = vals[i]
            if row_args is not None and row_args[i] is not None:
                args.update(orjson.loads(row_args[i]))
            if args:
                ev["args"] = args
            out.append(ev)
        yield out


def _instant_events(b: InstantBatch, strings: list[str], legacy: bool) -> Iterator[list[dict]]:
    cats = b.legacy_cat if legacy else b.cat
    ts = _us(b.ts)
    pid, tid = _rows(b.pid), _rows(b.tid)
    out = []
    for i, (n, c, s) in enumerate(zip(b.name.tolist(), cats.tolist(), b.scope.tolist())):
        ev = {"ph": "i"}
        if c:
            ev["cat"] = strings[c]
        ev.update({"s": chr(s), "name": strings[n], "pid": pid[i], "tid": tid[i], "ts": ts[i]})
        if b.row_args is not None and b.row_args[i] is not None:
            ev["args"] = orjson.loads(b.row_args[i])
        out.append(ev)
    yield out


def _counter_events(b: CounterBatch, strings: list[str], legacy: bool) -> Iterator[list[dict]]:
    cats = b.legacy_cat if legacy else b.cat
    for lo in range(0, len(b), CHUNK_EVENTS):
        sl = slice(lo, lo + CHUNK_EVENTS)
        ts = _us(b.ts[sl])
        pid, tid = _rows(b.pid[sl]), _rows(b.tid[sl])
        names = [strings[i] for i in b.name[sl].tolist()]
        cat = [strings[i] for i in cats[sl].tolist()]
        cols = [(k, [v if np.isfinite(v) else str(v) for v in arr[sl].tolist()]) for k, arr in b.values.items()]
        rows = b.row_values[sl] if b.row_values is not None else None
        out = []
        for i in range(len(ts)):
            args = {k: vals[i] for k, vals in cols}
            if rows is not None:
                args.update({k: (v if np.isfinite(v) else str(v)) for k, v in rows[i].items()})
            out.append({"ph": "C", "cat": cat[i], "name": names[i], "pid": pid[i], "tid": tid[i], "ts": ts[i],
                        "args": args})
        yield out


def _flow_events(b: FlowBatch, strings: list[str]) -> Iterator[list[dict]]:
    for lo in range(0, len(b), CHUNK_EVENTS):
        sl = slice(lo, lo + CHUNK_EVENTS)
        ts = _us(b.ts[sl])
        pid, tid = _rows(b.pid[sl]), _rows(b.tid[sl])
        ids, st = b.flow_id[sl].tolist(), b.is_start[sl].tolist()
        cat = [strings[i] for i in b.cat[sl].tolist()]
        out = []
        for i in range(len(ts)):
            ev = {"ph": "s" if st[i] else "f", "id": ids[i], "pid": pid[i], "tid": tid[i], "ts": ts[i],
                  "cat": cat[i], "name": cat[i]}
            if not st[i]:
                ev["bp"] = "e"
            out.append(ev)
        yield out


def _meta_events(builder: TraceBuilder, ts: float) -> list[dict]:
    out = []
    for pid, name in builder.process_names.items():
        out.append({"ph": "M", "name": "process_name", "ts": ts, "pid": pid, "tid": 0, "args": {"name": name}})
        if pid in builder.process_labels:
            out.append({"ph": "M", "name": "process_labels", "ts": ts, "pid": pid, "tid": 0,
                        "args": {"labels": builder.process_labels[pid]}})
        out.append({"ph": "M", "name": "process_sort_index", "ts": ts, "pid": pid, "tid": 0,
                    "args": {"sort_index": builder.process_sort.get(pid, pid if isinstance(pid, int) else 0)}})
    for (pid, tid), name in builder.thread_names.items():
        out.append({"ph": "M", "name": "thread_name", "ts": ts, "pid": pid, "tid": tid, "args": {"name": name}})
        sort = builder.thread_sort.get((pid, tid), tid if isinstance(tid, int) else 0)
        out.append({"ph": "M", "name": "thread_sort_index", "ts": ts, "pid": pid, "tid": tid,
                    "args": {"sort_index": sort}})
    return out


def _span_events(builder: TraceBuilder) -> list[dict]:
    out = []
    for sp in builder.spans:
        ts = _us(np.array([sp.start_ns]))[0]
        dur = 0.0 if sp.end_ns == 0 else round((sp.end_ns - sp.start_ns) / 1000.0, 3)
        out.append({"ph": "X", "cat": "Trace", "name": f"{sp.prefix}{sp.name} ({sp.iteration})", "pid": SPANS_PID,
                    "tid": sp.name, "ts": ts, "dur": dur, "args": {"Op count": sp.op_count}})
        out.append({"ph": "M", "name": "process_sort_index", "ts": ts, "pid": SPANS_PID, "tid": 0,
                    "args": {"sort_index": SPANS_SORT_INDEX}})
        out.append({"ph": "i", "s": "g", "name": f"Iteration Start: {sp.name}", "pid": "Traces",
                    "tid": f"Trace {sp.name}", "ts": ts})
    return out


def iter_event_chunks(builder: TraceBuilder, *, legacy_categories: bool = False) -> Iterator[list[dict]]:
    """Every trace event as lists of dicts, in file order (without the closing instant)."""
    builder.flush()
    strings = builder.strings.strings
    window_ts = _us(np.array([builder.window_start_ns]))[0]
    yield _meta_events(builder, window_ts)
    for b in builder.slices:
        yield from _slice_events(b, strings, legacy_categories)
    for b in builder.instants:
        yield from _instant_events(b, strings, legacy_categories)
    for b in builder.counters:
        yield from _counter_events(b, strings, legacy_categories)
    for b in builder.flows:
        yield from _flow_events(b, strings)
    yield _span_events(builder)


def _header(builder: TraceBuilder) -> bytes:
    parts = [b'{"schemaVersion": 1, "deviceProperties": ', encode_json(builder.device_properties)]
    meta = dict(builder.metadata)
    if builder.dropped:
        meta["dropped_records"] = dict(builder.dropped)
    for k, v in meta.items():
        if k == "distributedInfo":
            continue
        parts += [b", ", encode_json(k), b": ", encode_json(v)]
    dist = builder.distributed_info if builder.distributed_info is not None else meta.get("distributedInfo")
    if dist is not None:
        # json.dumps's default separators keep the space after "rank": that HTA's regex needs.
        parts += [b', "distributedInfo": ', json.dumps(json.loads(encode_json(dist))).encode()]
    parts.append(f', "displayTimeUnit": "ms", "baseTimeNanoseconds": {BASE_TIME_NS}, "traceEvents": ['.encode())
    return b"".join(parts)


def write_chrome_trace(builder: TraceBuilder, path, *, legacy_categories: bool = False, gzip_level: int = 1) -> Path:
    """Write the builder as a Kineto-compatible trace; returns the final path."""
    path = Path(path)
    gz = path.name.endswith(".gz")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    trace_name = str(path).replace("\\", "/").replace("\n", "")
    end_ts = _us(np.array([builder.window_end_ns or builder.window_start_ns]))[0]
    try:
        with _gc_paused(), _open_sink(tmp, gz, gzip_level) as out:
            out.write(_header(builder))
            for chunk in iter_event_chunks(builder, legacy_categories=legacy_categories):
                if chunk:
                    out.write(b"\n")
                    out.write(orjson.dumps(chunk)[1:-1])
                    out.write(b",")
            closing = {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": end_ts}
            out.write(b"\n" + orjson.dumps(closing) + b"\n], ")
            out.write(b'"traceName": ' + encode_json(trace_name) + b"}\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    return path
