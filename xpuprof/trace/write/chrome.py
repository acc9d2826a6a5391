"""Kineto-compatible Chrome/Perfetto JSON writer: a TraceTable (or a TraceBuilder, frozen here) into a file.

Contract (see the Kineto trace reference): top-level keys in Kineto's order, ``ts``/``dur`` in
µs with exactly 3 decimals relative to ``baseTimeNanoseconds`` (clamped at 0), M rows, "X"
slices with ``External id`` first in args (omitted when 0), ``ac2g`` flows with ``"bp": "e"``
on "f" only, "C" counters (``args`` always present), trace spans, and the closing
``Record Window End`` instant. Every string goes through a real JSON encoder.

Two renderings of the same events of a frozen builder's segments (its batches):

* the vectorized path (``rows``, ``rows_native``): bulk slice/counter/flow batches become compact
  rows rendered in C from their numpy columns (``rows_native.CompactWriter``; the pure-numpy
  fixed-width layout of ``rows`` when the C part is not built), no Python object per event;
* the generic path: one dict per event, encoded by orjson. It renders what the vectorized path
  cannot (``obj`` arg columns, per-row host args, instants, metadata, spans, over-long strings)
  and is the reference the tests compare the vectorized output against.

A table a reader made (flat columns, no builder behind it) is written through the generic path: its rows
in file order, its metadata rows and top-level keys as the file it came from held them.

The file is written in chunks through ``outputs.output_file`` (a private temporary file beside it,
renamed atomically, for a regular file); chunks render (and, for ``.gz`` paths, compress: python-isal
when installed, zlib otherwise) on worker threads and are written in file order by the worker holding
the next one: see ``sinks``.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import orjson

from ... import diagnostics
from ...clock import BASE_TIME_NS
from ...cpus import WRITER_THREADS_ENV, free_cpus
from ...outputs import output_file
from ..builder.builder import TraceBuilder
from ..builder.columns import CounterBatch, FlowBatch, InstantBatch, SliceBatch, encode_json
from ..layout.layout import json_times, lay_out
from ..table.args import args_objects, plain
from ..table.builder_view import header_bytes, metadata_json
from ..table.flatten import SPANS_PID, SPANS_SORT_INDEX, meta_events as _meta_events, sanitize_tid
from ..table.model import BatchSegment, TraceTable
from .flat_events import flat_bodies
from .rows import sanitize_tids
from .rows_native import DeferredChunk, PooledChunk, make_writer
from .sinks import ChunkSink, gc_paused, gzip_codec

GENERIC_CHUNK_EVENTS = 32768
MAX_WRITER_THREADS = 4  # rendering / compressing threads; more only contend for memory bandwidth and the file
# Below this many events one thread writes the trace: starting the render threads and handing chunks between
# them cost more than they save (a ResNet-18 training cycle's 20 k events: 5.6 ms on the calling thread, 7-12 ms
# with two; two threads gain only from about 100 k events, .json.gz earlier than .json).
SMALL_TRACE_EVENTS = 50_000
INT64_MIN = -(1 << 63)


# ----------------------------------------------------------------------------- value formats
def rel_ns(ns: np.ndarray) -> np.ndarray:
    """Absolute epoch ns -> ns after ``BASE_TIME_NS``, clamped at 0 (Kineto's fmtTs input)."""
    return np.maximum(np.asarray(ns, dtype=np.int64) - np.int64(BASE_TIME_NS), 0)


def micros_bytes(ns: int) -> bytes:
    """``<ns // 1000>.<ns % 1000:03d>``: µs with exactly 3 decimals, exact for any int64."""
    ns = int(ns)
    sign = b"-" if ns < 0 else b""
    ns = abs(ns)
    return b"%s%d.%03d" % (sign, ns // 1000, ns % 1000)


def _fragments(ns) -> list:
    return [orjson.Fragment(micros_bytes(v)) for v in np.asarray(ns).tolist()]


def _floats(ns) -> list:
    # For in-memory consumers (iter_event_chunks): the same value as a float.
    return [v / 1000.0 for v in np.asarray(ns).tolist()]


_sanitize_tid = sanitize_tid


def _rows(col: np.ndarray, sel, tid: bool = False) -> list:
    vals = col[sel].tolist()
    return [_sanitize_tid(v) for v in vals] if tid else vals


def _indices(sel, n: int) -> list[int]:
    if isinstance(sel, slice):
        return list(range(*sel.indices(n)))
    return np.asarray(sel).tolist()


_plain = plain


# ----------------------------------------------------------------------------- generic events
def generic_slice_events(b: SliceBatch, strings: list[str], vendor_categories: bool, sel, fmt_ns: Callable) -> list[dict]:
    cats = b.vendor_cat if vendor_categories else b.cat
    ts, dur = fmt_ns(rel_ns(b.ts[sel])), fmt_ns(np.maximum(b.dur[sel], 0))
    pid, tid = _rows(b.pid, sel), _rows(b.tid, sel, tid=True)
    names = [strings[i] for i in b.name[sel].tolist()]
    cat = [strings[i] for i in cats[sel].tolist()]
    out = []
    for i, args in enumerate(args_objects(b, strings, sel)):  # the one rule of a row's args object
        ev = {"ph": "X", "cat": cat[i], "name": names[i], "pid": pid[i], "tid": tid[i], "ts": ts[i], "dur": dur[i]}
        if args:
            ev["args"] = args
        out.append(ev)
    return out


def generic_instant_events(b: InstantBatch, strings: list[str], vendor_categories: bool, fmt_ns: Callable,
                           sel=slice(None), *, raw_args: bool = False) -> list[dict]:
    """The rows ``sel`` selects. ``raw_args``: splice each row's encoded args as they are (the file
    writer) instead of parsing them into dicts (readers of ``iter_event_chunks``)."""
    cats = b.vendor_cat if vendor_categories else b.cat
    ts = fmt_ns(rel_ns(b.ts[sel]))
    pid, tid = _rows(b.pid, sel), _rows(b.tid, sel, tid=True)
    row_args = [b.row_args[i] for i in _indices(sel, len(b))] if b.row_args is not None else None
    out = []
    for i, (n, c, s) in enumerate(zip(b.name[sel].tolist(), cats[sel].tolist(), b.scope[sel].tolist())):
        ev = {"ph": "i"}
        if c:
            ev["cat"] = strings[c]
        ev.update({"s": chr(s), "name": strings[n], "pid": pid[i], "tid": tid[i], "ts": ts[i]})
        if row_args is not None and row_args[i] is not None and row_args[i] != b"{}":
            ev["args"] = orjson.Fragment(row_args[i]) if raw_args else orjson.loads(row_args[i])
        out.append(ev)
    return out


def generic_counter_events(b: CounterBatch, strings: list[str], vendor_categories: bool, sel, fmt_ns: Callable) -> list[dict]:
    cats = b.vendor_cat if vendor_categories else b.cat
    ts = fmt_ns(rel_ns(b.ts[sel]))
    pid, tid = _rows(b.pid, sel), _rows(b.tid, sel, tid=True)
    names = [strings[i] for i in b.name[sel].tolist()]
    cat = [strings[i] for i in cats[sel].tolist()]
    cols = [(k, [_plain(v) for v in arr[sel].tolist()]) for k, arr in b.values.items()]
    rows = [b.row_values[i] for i in _indices(sel, len(b))] if b.row_values is not None else None
    out = []
    for i in range(len(ts)):
        args = {k: vals[i] for k, vals in cols}
        if rows is not None:
            args.update({k: _plain(float(v)) for k, v in rows[i].items()})
        out.append({"ph": "C", "cat": cat[i], "name": names[i], "pid": pid[i], "tid": tid[i], "ts": ts[i],
                    "args": args})
    return out


def generic_flow_events(b: FlowBatch, strings: list[str], sel, fmt_ns: Callable) -> list[dict]:
    ts = fmt_ns(rel_ns(b.ts[sel]))
    pid, tid = _rows(b.pid, sel), _rows(b.tid, sel, tid=True)
    ids, st = b.flow_id[sel].tolist(), b.is_start[sel].tolist()
    cat = [strings[i] for i in b.cat[sel].tolist()]
    out = []
    for i in range(len(ts)):
        ev = {"ph": "s" if st[i] else "f", "id": ids[i], "pid": pid[i], "tid": tid[i], "ts": ts[i],
              "cat": cat[i], "name": cat[i]}
        if not st[i]:
            ev["bp"] = "e"
        out.append(ev)
    return out


def meta_events(builder: TraceBuilder, fmt_ns: Callable) -> list[dict]:
    """The process and thread metadata rows, first in the file (``table.flatten.meta_events``)."""
    return _meta_events(builder, fmt_ns)


def span_events(builder: TraceBuilder, fmt_ns: Callable) -> list[dict]:
    out = []
    for sp in builder.spans:
        (ts,) = fmt_ns(rel_ns([sp.start_ns]))
        (dur,) = fmt_ns([0 if sp.end_ns == 0 else sp.end_ns - sp.start_ns])  # Kineto: no clamp for spans
        out.append({"ph": "X", "cat": "Trace", "name": f"{sp.prefix}{sp.name} ({sp.iteration})", "pid": SPANS_PID,
                    "tid": sp.name, "ts": ts, "dur": dur, "args": {"Op count": sp.op_count}})
        out.append({"ph": "M", "name": "process_sort_index", "ts": ts, "pid": SPANS_PID, "tid": 0,
                    "args": {"sort_index": SPANS_SORT_INDEX}})
        out.append({"ph": "i", "s": "g", "name": f"Iteration Start: {sp.name}", "pid": "Traces",
                    "tid": f"Trace {sp.name}", "ts": ts})
    return out


def _chunks(n: int, size: int) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(lo + size, n))


def iter_event_chunks(builder: TraceBuilder, *, vendor_categories: bool = True,
                      fmt_ns: Callable = _floats) -> Iterator[list[dict]]:
    """Every trace event as lists of dicts, in file order (without the closing instant).

    ``ts``/``dur`` are floats in µs by default; the writer passes exact 3-decimal fragments.
    """
    builder.flush()
    strings = builder.strings.strings
    yield meta_events(builder, fmt_ns)
    for b in builder.slices:
        for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
            yield generic_slice_events(b, strings, vendor_categories, sel, fmt_ns)
    for b in builder.instants:
        for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
            yield generic_instant_events(b, strings, vendor_categories, fmt_ns, sel)
    for b in builder.counters:
        for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
            yield generic_counter_events(b, strings, vendor_categories, sel, fmt_ns)
    for b in builder.flows:
        for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
            yield generic_flow_events(b, strings, sel, fmt_ns)
    yield span_events(builder, fmt_ns)


# ----------------------------------------------------------------------------- file
def encode_events(events: list[dict]) -> bytes:
    """Events as ``{...},\\n`` rows (the separator every event row in the file carries).

    Each row is copied out as soon as it is encoded: orjson's result keeps a 4 KiB buffer, so joining
    a chunk's results held ~4.3 KB per event at once (134 MB for a 32k-event chunk); this way the
    chunk's text is all that is held, and it is several times faster."""
    if not events:
        return b""
    out = bytearray()
    dumps = orjson.dumps
    for ev in events:
        out += dumps(ev)
        out += b",\n"
    return bytes(out)


_metadata_json = metadata_json
_header = header_bytes


def _event_bodies(table: TraceTable, columnar: bool,
                  defer: bool = False) -> Iterator[bytes | np.ndarray | PooledChunk | DeferredChunk]:
    builder, vendor_categories = table.builder, table.vendor_categories
    if builder is None:
        yield from flat_bodies(table)
        return
    strings = builder.strings.strings
    yield encode_events(meta_events(builder, _fragments))
    fast = make_writer(builder.strings, vendor_categories, defer=defer) if columnar else None
    generic = {"slices": lambda b, sel: generic_slice_events(b, strings, vendor_categories, sel, _fragments),
               "counters": lambda b, sel: generic_counter_events(b, strings, vendor_categories, sel, _fragments),
               "flows": lambda b, sel: generic_flow_events(b, strings, sel, _fragments)}
    for seg in table.segments:
        if not isinstance(seg, BatchSegment):
            continue  # the spans and the closing instant: written from the builder below, as Kineto orders them
        b = seg.batch
        if seg.kind == "instants":  # chunked, args spliced as encoded: memory bounded by a chunk, not the batch
            if fast is not None and fast.can_write(b):
                yield from fast.instants(b, None)
                continue
            for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
                yield encode_events(generic_instant_events(b, strings, vendor_categories, _fragments, sel, raw_args=True))
            continue
        # The columnar writer where it can take the batch (with the generic path for the rows it cannot), the
        # generic dict path otherwise.
        render = (lambda sel, b=b, g=generic[seg.kind]: encode_events(g(b, sel)))
        if fast is not None and fast.can_write(b):
            yield from getattr(fast, seg.kind)(b, render)
        else:
            for sel in _chunks(len(b), GENERIC_CHUNK_EVENTS):
                yield render(sel)
    yield encode_events(span_events(builder, _fragments))


def writer_threads(events: int | None = None) -> int:
    """How many threads render (and compress) a trace of ``events`` events: the CPUs free for this process now
    (see ``cpus.free_cpus``), at most ``MAX_WRITER_THREADS``, and one for a trace under
    ``SMALL_TRACE_EVENTS``; ``XPUPROF_WRITER_THREADS`` fixes the count."""
    fixed = os.environ.get(WRITER_THREADS_ENV, "").strip()
    if fixed:
        if fixed.isdigit() and int(fixed) >= 1:
            return int(fixed)
        diagnostics.warn_once(logging.getLogger("xpuprof"), ("writer-threads", fixed),
                              "xpuprof: %s=%r is not a whole number >= 1; the trace writer sizes its threads "
                              "to the free CPUs instead", WRITER_THREADS_ENV, fixed)
    if events is not None and events < SMALL_TRACE_EVENTS:
        return 1
    return max(1, min(free_cpus(), MAX_WRITER_THREADS))


def write_chrome_trace(source, path, *, vendor_categories: bool = True, gzip_level: int = 1,
                       columnar: bool = True, threads: int | None = None, trace_name: str | None = None) -> Path:
    """Write a trace as a Kineto-compatible trace; returns the final path.

    ``source``: a TraceTable (one trace), or a TraceBuilder, frozen here with ``vendor_categories`` (a table
    keeps the spelling it was frozen with); laid out first (``trace.layout.lay_out``). ``.gz`` names are gzip-compressed. ``columnar=False`` renders
    every event through the generic dict path (same events, slower; kept as the reference for tests).
    ``threads``: how many threads render chunks and compress (default ``writer_threads(events)``; 1 = the calling
    thread alone); the bytes written are the same for any count. ``trace_name``: the name the trace calls
    itself (``traceName``) when ``path`` is a staging file that is renamed into place.
    """
    table = source if isinstance(source, TraceTable) else source.freeze(vendor_categories=vendor_categories)
    if len(table.traces) != 1:
        raise ValueError(f"a Kineto trace file holds one trace; the table holds {len(table.traces)}")
    table = json_times(lay_out(table))  # every slice on a track it nests on, ids and times viewers keep (trace.layout)
    threads = writer_threads(sum(map(len, table.segments))) if threads is None else max(1, int(threads))
    path = Path(path)
    gz = path.name.endswith(".gz")
    trace_name = str(path if trace_name is None else trace_name).replace("\\", "/").replace("\n", "")
    try:
        _write(table, path, gz, gzip_level, threads, columnar, trace_name)
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:  # a write() error (a full disk) names no file
            exc.filename = str(path)
        raise
    return path


def _write(table: TraceTable, path: Path, gz: bool, gzip_level: int, threads: int, columnar: bool,
           trace_name: str) -> None:
    # Regular files are replaced atomically; a symlink is followed; a device/FIFO is written directly.
    with output_file(path) as dest, gc_paused():
        sink = ChunkSink(dest, threads, gzip_codec(gzip_level) if gz else None)
        try:
            builder = table.builder
            sink.put(_header(builder) if builder is not None else _table_header(table))
            for body in _event_bodies(table, columnar, defer=True):
                if isinstance(body, DeferredChunk) or len(body):  # a deferred render's size is not known yet
                    sink.put(body)
            if builder is not None:
                end_ns = builder.window_end_ns or builder.window_start_ns
                closing = {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "",
                           "ts": orjson.Fragment(micros_bytes(rel_ns([end_ns])[0]))}
                sink.put(orjson.dumps(closing) + b"\n], " + b'"traceName": ' + encode_json(trace_name) + b"}\n")
            else:
                sink.put(b"], " + b'"traceName": ' + encode_json(trace_name) + b"}\n")
        except BaseException:
            sink.abort()
            raise
        sink.close()


def table_json(table: TraceTable) -> bytes:
    """A one-trace read table (no builder behind it) as Kineto JSON in memory: the file ``write_chrome_trace``
    writes of it (for the readers that still take a trace as one dict, ``trace.read.load``)."""
    if table.builder is not None or len(table.traces) != 1:
        raise ValueError("table_json renders a one-trace table a reader made")
    parts = [_table_header(table), *flat_bodies(table), b"]}\n"]
    return b"".join(parts)


def _table_header(table: TraceTable) -> bytes:
    """A read table's top-level keys (its own order; ``baseTimeNanoseconds`` the base its rows are written
    against), then the opening of ``traceEvents``."""
    info = table.traces[0]
    header = {k: v for k, v in info.header.items() if k not in ("traceEvents", "traceName")}
    header["baseTimeNanoseconds"] = info.base_time_ns
    parts = [b"{"]
    for k, v in header.items():
        value = json.dumps(v, ensure_ascii=False).encode() if k == "distributedInfo" else _metadata_json(k, v)
        parts += [encode_json(k), b": ", value, b", "]
    parts.append(b'"traceEvents": [\n')
    return b"".join(parts)


__all__ = ["iter_event_chunks", "micros_bytes", "rel_ns", "sanitize_tids", "write_chrome_trace"]
