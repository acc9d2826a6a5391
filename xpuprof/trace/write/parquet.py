"""The trace store writer: a TraceBuilder's columns straight into one rank of a Parquet store.

No JSON document on the way and no Python object per event: numpy columns become Arrow arrays,
interned strings dictionary-encoded, args objects rendered by the same C formatter the JSON writer
uses and split into typed columns by the converter's C splitter (``arrowcols``). The rows are the
ones ``xpuprof convert`` reads from the JSON trace this builder would write (same events, same
order, same args), so a store does not depend on which path filled it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import orjson

from ...clock import BASE_TIME_NS
from ..builder.builder import TraceBuilder
from ..builder.columns import CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch, encode_json
from .chrome import SPANS_PID, SPANS_SORT_INDEX, generic_slice_events, meta_events
from .rows import _EXTERNAL_ID_KEY, _fast_arg, _key, _row_args_blob
from .rows_native import CompactWriter, _mask, _rowfmt, _Segments, _TokenTable
from ..store_schema import FLOAT_ARGS, INT_ARGS, RANK_SOURCES
from .arrowcols import (ArgColumns, dict_column, float_column, int_column, ints, strings, text_dict_column,
                        where_columns)
from .rankwriter import RankWriter, writer_version

log = logging.getLogger("xpuprof")

CHUNK_ROWS = 1 << 17  # rows rendered and written at a time: bounds the Arrow copies held at once
_SCOPES = {ord("t"): "t", ord("g"): "g", ord("p"): "p"}


def write_store(builder: TraceBuilder, path, *, rank: int | None = None, rank_source: str = "given",
                replace: bool = False, vendor_categories: bool = True, trace_name: str | None = None) -> Path:
    """Writes the builder as rank ``rank`` of the store at ``path`` (created when new); returns the
    rank's partition directory. ``rank`` None: the builder's ``distributedInfo`` rank, else 0
    (``rank_source`` "default", said in the rank's metadata)."""
    builder.flush()
    if rank is None:
        info = builder.distributed_info if builder.distributed_info is not None else builder.metadata.get(
            "distributedInfo")
        got = info.get("rank") if isinstance(info, Mapping) else None
        rank, rank_source = (int(got), "distributedInfo") if isinstance(got, int) else (0, "default")
    if rank_source not in RANK_SOURCES:
        raise ValueError(f"rank_source {rank_source!r}: valid values are {', '.join(RANK_SOURCES)}")
    with RankWriter(path, int(rank), replace=replace, compression="lz4") as writer:
        rows = _BuilderRows(builder, int(rank), vendor_categories)
        rows.write(writer)
        name = trace_name if trace_name is not None else str(Path(path))
        return writer.commit(int(rank), rows.metadata(rank_source, name))


def _rel(ts: np.ndarray) -> np.ndarray:
    """ns after the trace's base time, clamped at 0, as the JSON writer writes ``ts``."""
    return np.maximum(np.asarray(ts, np.int64) - np.int64(BASE_TIME_NS), 0)


def _part(col: np.ndarray, sel: slice) -> np.ndarray:
    return col[sel]


class _BuilderRows:
    def __init__(self, builder: TraceBuilder, rank: int, vendor: bool) -> None:
        self.b = builder
        self.rank = rank
        self.vendor = vendor
        self.strings = builder.strings.strings
        self._tokens: dict[int, bytes] = {}
        self.meta = meta_events(builder, lambda ns: [v / 1000.0 for v in np.asarray(ns).tolist()])
        self.idx = len(self.meta)  # events in the JSON file's order: metadata rows come first
        self.first_ts = [int(_rel([builder.window_start_ns])[0])] if self.meta else []

    def encode(self, sid: int) -> bytes:
        tok = self._tokens.get(sid)
        if tok is None:  # an exact-size copy: orjson's result keeps a 4 KiB buffer
            tok = self._tokens[sid] = bytes(memoryview(orjson.dumps(self.strings[sid])))
        return tok

    def tokens(self, used: np.ndarray) -> tuple[bytes, np.ndarray]:
        """JSON tokens of the string ids ``used`` as one blob and offsets (what the JSON writer's string
        columns take): bulk strings escaped together, the others cached one by one."""
        table = self.b.strings
        if hasattr(table, "json_tokens"):
            return table.json_tokens(used, self.encode)
        toks = [self.encode(int(i)) for i in np.asarray(used).tolist()]
        offsets = np.zeros(len(toks) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, toks), np.int64, len(toks)), out=offsets[1:])
        return b"".join(toks), offsets

    def _index(self, n: int) -> np.ndarray:
        out = np.arange(self.idx, self.idx + n, dtype=np.int64)
        self.idx += n
        return out

    def _common(self, b, sel: slice, ts: np.ndarray) -> dict[str, Any]:
        n = len(ts)
        if n:
            self.first_ts.append(int(ts.min()))
        pid, pid_label = where_columns(_part(b.pid, sel))
        tid, tid_label = where_columns(_part(b.tid, sel), tid=True)
        return {"idx": int_column(self._index(n)),
                "ts": int_column(ts), "pid": pid, "pid_label": pid_label, "tid": tid, "tid_label": tid_label}

    def _categories(self, b, sel: slice, null_empty: bool = False):
        ids = _part(b.vendor_cat if self.vendor else b.cat, sel)
        null = (np.asarray(ids) == 0) if null_empty else None
        return dict_column(ids, self.strings, null=None if null is None or not null.any() else null)

    # ------------------------------------------------------------------ tables
    def write(self, w: RankWriter) -> None:
        for b in self.b.slices:
            for sel in _chunks(len(b)):
                self._slices(w, b, sel)
        for b in self.b.instants:
            for sel in _chunks(len(b)):
                self._instants(w, b, sel)
        for b in self.b.counters:
            for sel in _chunks(len(b)):
                self._counters(w, b, sel)
        for b in self.b.flows:
            for sel in _chunks(len(b)):
                self._flows(w, b, sel)
        self._spans_and_end(w)

    def _slices(self, w: RankWriter, b: SliceBatch, sel: slice) -> None:
        ts = _rel(_part(b.ts, sel))
        cols = self._common(b, sel, ts)
        dur = np.maximum(np.asarray(_part(b.dur, sel), np.int64), 0)
        cols.update(dur=int_column(dur), name=dict_column(_part(b.name, sel), self.strings),
                    cat=self._categories(b, sel))
        w.summary.add(self.strings, _part(b.name, sel), self.strings, _part(b.vendor_cat if self.vendor else b.cat, sel),
                      dur)
        cols.update(self._args(b, sel).arrow())
        w.write("slices", cols)

    def _args(self, b: SliceBatch, sel: slice) -> ArgColumns:
        """Each row's args object as the JSON writer writes it, split into typed columns and the rest.
        Numeric columns of the typed args (and External id) go straight into their columns; the other
        args are rendered as the JSON writer renders them and split by the converter's C splitter."""
        n = sel.stop - sel.start
        direct = {k: c for k, c in b.args.items() if _direct(k, c, sel)} if b.row_args is None else {}
        if b.row_args is None and (direct or not b.args) and (_rowfmt is not None or len(direct) == len(b.args)):
            rest = [k for k in b.args if k not in direct]
            out = self._split(b, sel, rest, external_id=False) if rest else ArgColumns(n)
            ext = np.asarray(_part(b.external_id, sel), np.int64)
            out.set_int("external_id", ext, ext != 0)
            for k, c in direct.items():
                present = None if c.present is None else np.asarray(c.present[sel], bool)
                if k in INT_ARGS:
                    out.set_int(INT_ARGS[k], np.asarray(c.values[sel]), present)
                else:
                    out.set_float(FLOAT_ARGS[k], np.asarray(c.values[sel]), present)
            return out
        return self._split(b, sel, list(b.args), external_id=True)

    def _split(self, b: SliceBatch, sel: slice, keys: list[str], *, external_id: bool) -> ArgColumns:
        text = self._args_text(b, sel, keys, external_id)
        n = sel.stop - sel.start
        if text is None:
            events = generic_slice_events(b, self.strings, self.vendor, sel, lambda ns: [0] * len(ns))
            objs = [ev.get("args") for ev in events]
            if not external_id or len(keys) != len(b.args):
                objs = [{k: v for k, v in o.items() if k in keys} if o else o for o in objs]
            return ArgColumns.from_dicts(objs)
        buf = np.frombuffer(text, np.uint8)
        ends = np.flatnonzero(buf == 10)  # one "\n" per row: JSON text never holds a raw newline
        starts = np.concatenate([[0], ends[:-1] + 1])
        spans = np.stack([starts, ends], axis=1).astype(np.int64)
        spans[starts == ends] = -1
        assert len(spans) == n
        return ArgColumns.from_text(text, spans)

    def _args_text(self, b: SliceBatch, sel: slice, keys: list[str], external_id: bool) -> bytes | None:
        """The rows' args objects (``keys`` of them, and External id when asked) rendered in C (``{...}\\n``
        per row, ``\\n`` for none); None when a column needs the generic path."""
        if _rowfmt is None or not all(_fast_arg(b.args[k]) for k in keys):
            return None
        row_args = None if b.row_args is None else _row_args_part(b.row_args, sel)
        if row_args is not None and (b.args or _mentions_external_id(row_args)):
            return None  # the generic path merges these (one object per row)
        segs = _Segments()
        items = []
        if external_id:
            ext = np.ascontiguousarray(_part(b.external_id, sel), np.int64)
            mask = _mask(ext != 0)
            if mask is not False:
                items.append((None, ext, mask))
        tables = {k: _TokenTable(b.args[k].values, self.tokens) for k in keys if b.args[k].kind == "str"}
        for k in keys:
            col = b.args[k]
            mask = _mask(None if col.present is None else col.present[sel])
            if mask is not False:
                items.append((k, col, mask))
        if row_args is not None:  # each row's members copied from one blob (the host recorder's args area)
            spans = _row_args_blob(row_args)
            mask = _mask(spans[2] > 0)
            if mask is not False:
                items.append(("", spans, mask))
        if items:
            optional = any(m is not None for _, _, m in items)
            entry = _rowfmt.ENTRY if optional else 0
            if optional:
                segs.add(_rowfmt.LIT, prefix=b"{", flags=_rowfmt.OPEN)
            else:
                segs.lit(b"{")
            for j, (k, col, mask) in enumerate(items):
                first = not optional and j == 0
                if k is None:
                    segs.add(_rowfmt.INT, col, prefix=b'"External id":' if first else b',"External id":', mask=mask,
                             flags=entry)
                elif k == "":
                    segs.add(_rowfmt.SPANS, col[0], col[1], col[2], prefix=b"" if first else b",", mask=mask,
                             flags=entry)
                else:
                    key = _key(k) if first else b"," + _key(k)
                    CompactWriter._arg(segs, col, sel, key, mask, tables.get(k), entry)
            if optional:
                segs.add(_rowfmt.LIT, prefix=b"}", flags=_rowfmt.CLOSE)
            else:
                segs.lit(b"}")
        segs.lit(b"\n")
        return segs.render(sel.stop - sel.start)

    def _instants(self, w: RankWriter, b: InstantBatch, sel: slice) -> None:
        ts = _rel(_part(b.ts, sel))
        cols = self._common(b, sel, ts)
        scope = np.asarray(_part(b.scope, sel))
        row_args = _row_args_part(b.row_args, sel) if b.row_args is not None else None
        args = None
        if row_args is not None:
            args = [None if a is None or a == b"{}" else a.decode() for a in row_args]
        cols.update(name=dict_column(_part(b.name, sel), self.strings), cat=self._categories(b, sel, null_empty=True),
                    scope=text_dict_column([_SCOPES[c] for c in scope.tolist()]) if len(np.unique(scope)) > 1
                    else text_dict_column([_SCOPES[int(scope[0])]] * len(scope)),
                    args=None if args is None else strings(args))
        w.write("instants", cols)

    def _counters(self, w: RankWriter, b: CounterBatch, sel: slice) -> None:
        ts = _rel(_part(b.ts, sel))
        n = len(ts)
        if b.row_values is not None:  # the scalar path: one dict per row
            rows = [(i, k, float(v)) for i, vals in enumerate(b.row_values[sel]) for k, v in vals.items()]
            if not rows:
                return
            which = np.array([r[0] for r in rows], np.int64)
            metric = text_dict_column([r[1] for r in rows])
            values = np.array([r[2] for r in rows], np.float64)
        else:
            keys = list(b.values)
            if not keys:
                self.idx += n
                return
            which = np.repeat(np.arange(n), len(keys))  # event-major: each event's metrics together
            metric = dict_column(np.tile(np.arange(len(keys)), n), keys)
            values = np.stack([np.asarray(b.values[k][sel], np.float64) for k in keys], axis=1).ravel()
        idx = self._index(n)
        self.first_ts.append(int(ts.min()))
        pid, pid_label = where_columns(np.asarray(_part(b.pid, sel))[which])
        tid, tid_label = where_columns(np.asarray(_part(b.tid, sel))[which], tid=True)
        w.write("counters", {"idx": int_column(idx[which]), "ts": int_column(ts[which]),
                             "name": dict_column(np.asarray(_part(b.name, sel))[which], self.strings),
                             "cat": dict_column(np.asarray(_part(b.vendor_cat if self.vendor else b.cat, sel))[which],
                                                self.strings),
                             "pid": pid, "pid_label": pid_label, "tid": tid, "tid_label": tid_label,
                             "metric": metric, "value": float_column(values)})

    def _flows(self, w: RankWriter, b: FlowBatch, sel: slice) -> None:
        ts = _rel(_part(b.ts, sel))
        cols = self._common(b, sel, ts)
        start = np.asarray(_part(b.is_start, sel), bool)
        cat = dict_column(_part(b.cat, sel), self.strings)
        cols.update(id=int_column(_part(b.flow_id, sel)), name=cat, cat=cat,
                    phase=dict_column(start.astype(np.int32), ["f", "s"]),
                    bp=dict_column(np.zeros(len(start), np.int32), ["e"], null=start if start.any() else None))
        w.write("flows", cols)

    def _spans_and_end(self, w: RankWriter) -> None:
        """The trace spans (a "Trace" slice, an iteration-start instant) and the closing instant."""
        b = self.b
        spans = b.spans
        slices, instants = [], []
        for sp in spans:
            ts = int(_rel([sp.start_ns])[0])
            dur = 0 if sp.end_ns == 0 else sp.end_ns - sp.start_ns
            slices.append((ts, dur, f"{sp.prefix}{sp.name} ({sp.iteration})", sp.name, sp.op_count))
            instants.append((ts, f"Iteration Start: {sp.name}", "g", "Traces", f"Trace {sp.name}"))
            self.meta.append({"ph": "M", "name": "process_sort_index", "ts": ts / 1000.0, "pid": SPANS_PID, "tid": 0,
                              "args": {"sort_index": SPANS_SORT_INDEX}})
        end_ns = b.window_end_ns or b.window_start_ns
        if slices:
            n = len(slices)
            self.first_ts.append(min(s[0] for s in slices))
            objs = [{"Op count": s[4]} for s in slices]
            cols = {"idx": None, "ts": ints([s[0] for s in slices]),
                    "dur": ints([s[1] for s in slices]), "name": text_dict_column([s[2] for s in slices]),
                    "cat": text_dict_column(["Trace"] * n), "pid_label": text_dict_column([SPANS_PID] * n),
                    "tid_label": text_dict_column([s[3] for s in slices])}
            cols.update(ArgColumns.from_dicts(objs).arrow())
            w.summary.add_rows([(s[2], "Trace", s[1]) for s in slices])
            # In the JSON file each span is an X, an M and an i event: their indices interleave.
            cols["idx"] = ints([self.idx + 3 * i for i in range(n)])
            w.write("slices", cols)
        rows = [(s[0], s[1], s[2], s[3], s[4], self.idx + 3 * i + 2) for i, s in enumerate(instants)]
        self.idx += 3 * len(spans)
        rows.append((int(_rel([end_ns])[0]), "Record Window End", "g", "", "", self.idx))
        self.idx += 1
        self.first_ts.append(min(r[0] for r in rows))
        w.write("instants", {"idx": ints([r[5] for r in rows]), "ts": ints([r[0] for r in rows]),
                             "name": text_dict_column([r[1] for r in rows]), "scope": text_dict_column([r[2] for r in rows]),
                             "pid_label": text_dict_column([r[3] for r in rows]),
                             "tid_label": text_dict_column([r[4] for r in rows])})

    # ------------------------------------------------------------------ metadata
    def metadata(self, rank_source: str, trace_name: str) -> dict[str, Any]:
        b = self.b
        header: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": b.device_properties}
        meta = dict(b.metadata)
        if b.strings.invalid_utf8:
            meta.setdefault("invalid_utf8_names", b.strings.invalid_utf8)
        if b.dropped:
            meta["dropped_records"] = dict(b.dropped)
        header.update((k, v) for k, v in meta.items() if k != "distributedInfo")
        dist = b.distributed_info if b.distributed_info is not None else meta.get("distributedInfo")
        if dist is not None:
            header["distributedInfo"] = dist
        header.update(displayTimeUnit="ms", baseTimeNanoseconds=BASE_TIME_NS, traceName=trace_name)
        return {"rank_source": rank_source, "writer": f"xpuprof {writer_version()} export_parquet", "sources": [],
                "base_time_ns": BASE_TIME_NS, "ts_kind": "float",
                "first_ts_ns": min(self.first_ts) if self.first_ts else None, "not_stored_json": "{}",
                "header_json": _json_object(header), "metadata_events_json": encode_json(self.meta).decode(),
                "warnings": list(b.warnings)}


def _json_object(header: Mapping[str, Any]) -> str:
    """The header as JSON; a value JSON cannot hold becomes a note (never a lost store)."""
    parts = []
    for k, v in header.items():
        try:
            text = encode_json(v)
        except Exception as exc:  # noqa: BLE001 - one bad metadata value must not lose the trace
            log.warning("xpuprof: metadata %r could not be written as JSON (%s); the store holds a note instead",
                        str(k)[:80], type(exc).__name__)
            text = encode_json({"xpuprof_invalid_metadata": f"a {type(v).__name__} could not be written"})
        parts.append(encode_json(str(k)) + b":" + text)
    return (b"{" + b",".join(parts) + b"}").decode()


def _direct(key: str, col, sel: slice) -> bool:
    """Whether a numeric column of a typed arg goes straight into its column: exactly what the JSON
    writer's text would give through the splitter (ints for int args; finite numbers for float args)."""
    if col.kind != "num" or not isinstance(col.values, np.ndarray) or col.values.ndim != 1:
        return False
    kind = col.values.dtype.kind
    if key in INT_ARGS:
        if kind == "i":
            return True
        return kind == "u" and (col.values.dtype.itemsize < 8 or not len(col.values[sel])
                                or int(col.values[sel].max()) < 1 << 63)
    if key in FLOAT_ARGS:
        return kind in "iuf" and bool(np.isfinite(col.values[sel]).all())
    return False


def _chunks(n: int):
    for lo in range(0, n, CHUNK_ROWS):
        yield slice(lo, min(lo + CHUNK_ROWS, n))


def _row_args_part(row_args, sel: slice):
    """Rows ``sel`` of a batch's pre-encoded args: a list's slice, or a RowArgs over the same blob."""
    if isinstance(row_args, RowArgs):
        return RowArgs(row_args.blob, row_args.starts[sel], row_args.lens[sel])
    return row_args[sel]


def _mentions_external_id(row_args) -> bool:
    """Whether a row's pre-encoded args may hold "External id" (which the writer also adds): the
    generic path merges those."""
    if isinstance(row_args, RowArgs):
        return _EXTERNAL_ID_KEY.search(row_args.blob) is not None
    return any(a is not None and b'"External id"' in a for a in row_args)
