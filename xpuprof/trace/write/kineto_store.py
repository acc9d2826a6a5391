"""A Kineto JSON trace into one rank of a store, chunk by chunk (``xpuprof convert``).

Events are read by ``trace.read.kineto_stream`` and written as they come, so memory is bounded by a
chunk. Most events go column-wise; the few the columns cannot hold exactly (a string pid, an
escaped key, counters, metadata) are read as objects by the same rules. Events the store has no
table for (``B``/``E`` pairs, async and sample events) are counted by phase in the rank's
``not_stored_json`` and said once.

The rank: ``rank`` when given, else ``distributedInfo.rank``, else ``rank<N>``/``rank-N`` in the file
name, else ``position``; the rank's ``rank_source`` says which.
"""
from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..read.kineto_stream import EventChunk, KinetoStream, TraceStreamError
from ..read.scan import ABSENT, DOUBLE, DUR, ID, INT, PID, TID, TS
from .arrowcols import ArgColumns, dict_column, float_column, int_column, ints, strings, text_dict_column
from .rankwriter import RankWriter, writer_version, StoreWriteError

log = logging.getLogger("xpuprof")

_RANK_IN_NAME = re.compile(r"(?:^|[^A-Za-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_NS_LIMIT = (1 << 63) // 1000 - 1  # |µs| that fit int64 ns
_FLOW = frozenset(b"sft")
_INSTANT = frozenset(b"iI")
_NUMERIC_STRINGS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "Infinity": math.inf,
                    "-Infinity": -math.inf, "NaN": math.nan}


class ConvertError(ValueError):
    """One input that could not be converted; the message names it."""


@dataclass
class Converted:
    path: Path
    rank: int
    rank_source: str
    events: int
    rows: dict[str, int]
    not_stored: dict[str, int] = field(default_factory=dict)


def rank_from_name(path: Path) -> int | None:
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def _distributed_rank(header: dict) -> int | None:
    info = header.get("distributedInfo")
    r = info.get("rank") if isinstance(info, dict) else None
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None


def convert_trace(path, store, *, rank: int | None = None, position: int | None = None, replace: bool = False,
                  taken: dict[int, str] | None = None, chunk_bytes: int | None = None) -> Converted:
    """Converts one trace file into rank partition of ``store``. ``taken``: ranks already written by
    this run (rank -> file), never replaced. Raises ConvertError naming the file."""
    path = Path(path)
    stream = KinetoStream(path) if chunk_bytes is None else KinetoStream(path, chunk_bytes)
    try:
        with RankWriter(store, replace=replace) as writer:
            rows = _Rows(writer)
            checked = False
            for chunk in stream.chunks():
                if "mergedRanks" in stream.header:
                    break
                if not checked and (rank is not None or _distributed_rank(stream.header) is not None):
                    _check_rank(path, writer, *_resolve_rank(path, stream.header, rank, position), taken)
                checked = True
                rows.add(chunk)
            header = stream.header
            if "mergedRanks" in header:
                ranks = (header["mergedRanks"] or {}).get("ranks") if isinstance(header["mergedRanks"], dict) else None
                raise ConvertError(f"{path}: is a merged view of ranks {ranks} (xpuprof merge); convert the per-rank "
                                   "traces instead")
            got, source = _resolve_rank(path, header, rank, position)
            _check_rank(path, writer, got, source, taken)
            meta = rows.metadata(header, path, source)
            writer.commit(got, meta)
    except (TraceStreamError, StoreWriteError) as exc:
        raise ConvertError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    if rows.not_stored:
        log.warning("xpuprof convert: %s: %d events not stored (%s); counted in rank %d's not_stored_json", path,
                    sum(rows.not_stored.values()), ", ".join(f"{k}: {v}" for k, v in rows.not_stored.items()), got)
    if taken is not None:
        taken[got] = str(path)
    return Converted(path, got, source, stream.events_read, dict(writer.rows), dict(rows.not_stored))


def _check_rank(path: Path, writer: RankWriter, rank: int, source: str, taken: dict[int, str] | None) -> None:
    if taken is not None and rank in taken:
        raise ConvertError(f"{path}: rank {rank} (from {source}) is also {taken[rank]}'s rank in this run: "
                           "mixed ranks; give each rank's trace once")
    writer.check_rank(rank)


def _resolve_rank(path: Path, header: dict, rank: int | None, position: int | None) -> tuple[int, str]:
    if rank is not None:
        return int(rank), "given"
    got = _distributed_rank(header)
    if got is not None:
        return got, "distributedInfo"
    got = rank_from_name(path)
    if got is not None:
        return got, "file name"
    if position is not None:
        return int(position), "position"
    return 0, "default"


def _ns(v) -> int | None:
    """A JSON µs value as int ns (round half to even, as the report reads it), None when not a number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000 if abs(v) <= _NS_LIMIT else None
    if isinstance(v, float) and math.isfinite(v) and abs(v) <= _NS_LIMIT:
        return int(round(v * 1000))
    return None


def _text(v) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else orjson.dumps(v).decode()


class _Rows:
    """Turns chunks into store rows and writes them."""

    def __init__(self, writer: RankWriter) -> None:
        self.w = writer
        self.not_stored: Counter = Counter()
        self.meta_events: list[dict] = []
        self.float_ts = False
        self.first_ts: int | None = None

    def _seen_ts(self, values: np.ndarray) -> None:
        if len(values):
            m = int(values.min())
            self.first_ts = m if self.first_ts is None else min(self.first_ts, m)

    def add(self, c: EventChunk) -> None:
        if c.objects is not None:  # parsed whole (no C part): their types decide
            objects = [(i, e, _ns(e.get("ts")), _ns(e.get("dur"))) for i, e in enumerate(c.objects)]
            for _, e, _, _ in objects:
                v = e.get("ts")
                self.float_ts |= isinstance(v, float) or not isinstance(v, int) or isinstance(v, bool)
        else:
            objects = self._columns(c)
        if objects:
            self._objects(c.first_idx, objects)

    # ------------------------------------------------------------------ column-wise
    def _columns(self, c: EventChunk) -> list[tuple]:
        kind = c.kind
        ts_kind = kind[:, TS]
        self.float_ts |= bool(((ts_kind == DOUBLE) | (ts_kind == ABSENT)).any())
        ts_i, ts_f = c.ints(TS), c.floats(TS)
        ts_ok = ((ts_kind == INT) & (np.abs(ts_i) <= _NS_LIMIT)) | ((ts_kind == DOUBLE) & (np.abs(ts_f) <= _NS_LIMIT))
        ts = c.exact[:, 0]
        self._seen_ts(ts[ts_ok])
        where_ok = np.isin(kind[:, PID], (INT, ABSENT)) & np.isin(kind[:, TID], (INT, ABSENT))
        simple = ~c.complex & ts_ok & where_ok
        ph = c.ph
        is_x = ph == ord("X")
        dur_kind = kind[:, DUR]
        dur_ok = (dur_kind == ABSENT) | ((dur_kind == INT) & (np.abs(c.ints(DUR)) <= _NS_LIMIT)) \
            | ((dur_kind == DOUBLE) & (np.abs(c.floats(DUR)) <= _NS_LIMIT))
        x = np.flatnonzero(simple & is_x & dur_ok)
        flows = np.flatnonzero(simple & np.isin(ph, list(_FLOW)) & np.isin(kind[:, ID], (INT,)))
        inst = np.flatnonzero(simple & np.isin(ph, list(_INSTANT)))
        done = np.zeros(c.n, bool)
        done[x] = done[flows] = done[inst] = True
        # Phases the store keeps no table for, whole: counted, never parsed.
        kept = np.isin(ph, [ord("X"), ord("C"), ord("M"), *_FLOW, *_INSTANT])
        other = ~kept & ~c.complex & (ph != 0xFF)
        if other.any():
            letters, counts = np.unique(ph[other], return_counts=True)
            for letter, count in zip(letters.tolist(), counts.tolist()):
                self.not_stored[f"'{chr(letter)}' events" if letter else "events without ph"] += count
            done |= other
        if len(x):
            self._slices(c, x, ts[x])
        if len(flows):
            self._flows(c, flows, ts[flows])
        if len(inst):
            self._instants(c, inst, ts[inst])
        out = []
        for i in np.flatnonzero(~done).tolist():  # read whole; ts and dur keep their exact ns
            e = c.event(i)
            k = c.kind[i]
            ts = int(c.exact[i, 0]) if k[TS] in (INT, DOUBLE) and _ns(e.get("ts")) is not None else None
            dur = int(c.exact[i, 1]) if k[DUR] in (INT, DOUBLE) and _ns(e.get("dur")) is not None else None
            out.append((i, e, ts, dur))
        return out

    def _common(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> dict[str, Any]:
        pid_present = c.kind[rows, PID] == INT
        tid_present = c.kind[rows, TID] == INT
        return {"idx": int_column(c.first_idx + rows), "ts": int_column(ts),
                "pid": int_column(c.ints(PID)[rows], pid_present), "tid": int_column(c.ints(TID)[rows], tid_present),
                "name": _ids(c.name[rows], c.strings), "cat": _ids(c.cat[rows], c.strings)}

    def _slices(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> None:
        cols = self._common(c, rows, ts)
        k = c.kind[rows, DUR]
        cols["dur"] = int_column(c.exact[rows, 1], k != ABSENT)
        self.w.summary.add(c.strings, c.name[rows], c.strings, c.cat[rows], np.where(k != ABSENT, c.exact[rows, 1], 0),
                           timed=k != ABSENT)
        cols.update(ArgColumns.from_text(c.buf, c.args_span[rows]).arrow())
        self.w.write("slices", cols)

    def _flows(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> None:
        cols = self._common(c, rows, ts)
        cols["id"] = int_column(c.ints(ID)[rows])
        cols["phase"] = _letters(c.ph[rows])
        cols["bp"] = _letters(c.aux[rows])
        self.w.write("flows", cols)

    def _instants(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> None:
        cols = self._common(c, rows, ts)
        cols["scope"] = _letters(c.aux[rows])
        spans = c.args_span[rows].tolist()
        cols["args"] = strings([None if s < 0 else c.buf[s:e].decode() for s, e in spans])
        self.w.write("instants", cols)

    # ------------------------------------------------------------------ one object at a time
    def _objects(self, first_idx: int, objects: list[tuple]) -> None:
        """(index in the chunk, event, its ts in ns or None, its dur in ns or None) per event."""
        tables: dict[str, list] = {"slices": [], "counters": [], "flows": [], "instants": []}
        for i, e, ts, dur in objects:
            ph = e.get("ph")
            idx = first_idx + i
            if ph == "M":
                self.meta_events.append(e)
                if ts is not None:
                    self._seen_ts(np.array([ts]))
                continue
            table = {"X": "slices", "C": "counters", "i": "instants", "I": "instants", "s": "flows", "f": "flows",
                     "t": "flows"}.get(ph) if isinstance(ph, str) else None
            if table is None:
                self.not_stored[f"'{ph}' events" if isinstance(ph, str) else "events without ph"] += 1
                continue
            if ts is None:
                self.not_stored[f"'{ph}' events without a numeric ts"] += 1
                continue
            self._seen_ts(np.array([ts]))
            tables[table].append((idx, ts, e, dur))
        for table, rows in tables.items():
            if rows:
                getattr(self, f"_object_{table}")(rows)

    @staticmethod
    def _where(rows: list) -> dict[str, Any]:
        out: dict[str, Any] = {"idx": ints([r[0] for r in rows]), "ts": ints([r[1] for r in rows])}
        for key in ("pid", "tid"):
            vals = [r[2].get(key) for r in rows]
            whole = [v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63 else None for v in vals]
            out[key] = ints(whole)
            labels = [None if i is not None or v is None else _text(v) for i, v in zip(whole, vals)]
            out[f"{key}_label"] = text_dict_column(labels) if any(lb is not None for lb in labels) else None
        out["name"] = text_dict_column([_text(r[2].get("name")) for r in rows])
        out["cat"] = text_dict_column([_text(r[2].get("cat")) for r in rows])
        return out

    def _object_slices(self, rows: list) -> None:
        cols = self._where(rows)
        cols["dur"] = ints([r[3] for r in rows])
        self.w.summary.add_rows([(_text(r[2].get("name")), _text(r[2].get("cat")), r[3]) for r in rows])
        cols.update(ArgColumns.from_dicts([r[2].get("args") for r in rows]).arrow())
        self.w.write("slices", cols)

    def _object_counters(self, rows: list) -> None:
        out = []
        for r in rows:
            args = r[2].get("args")
            if not isinstance(args, dict):
                continue
            for k, v in args.items():
                if isinstance(v, str):
                    v = _NUMERIC_STRINGS.get(v)
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    self.not_stored["counter values that are not numbers"] += 1
                    continue
                out.append((r, str(k), float(v)))
        if not out:
            return
        cols = self._where([o[0] for o in out])
        cols["metric"] = text_dict_column([o[1] for o in out])
        cols["value"] = float_column(np.array([o[2] for o in out], np.float64))
        self.w.write("counters", cols)

    def _object_flows(self, rows: list) -> None:
        cols = self._where(rows)
        ids = [r[2].get("id") for r in rows]
        whole = [v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63 else None for v in ids]
        cols["id"] = ints(whole)
        cols["id_label"] = text_dict_column([None if i is not None else _text(v) for i, v in zip(whole, ids)])
        cols["phase"] = text_dict_column([r[2]["ph"] for r in rows])
        cols["bp"] = text_dict_column([r[2].get("bp") if isinstance(r[2].get("bp"), str) else None for r in rows])
        self.w.write("flows", cols)

    def _object_instants(self, rows: list) -> None:
        cols = self._where(rows)
        cols["scope"] = text_dict_column([r[2].get("s") if isinstance(r[2].get("s"), str) else None for r in rows])
        cols["args"] = strings([None if r[2].get("args") is None else orjson.dumps(r[2]["args"]).decode()
                                for r in rows])
        self.w.write("instants", cols)

    # ------------------------------------------------------------------ metadata
    def metadata(self, header: dict, path: Path, source: str) -> dict[str, Any]:
        base = header.get("baseTimeNanoseconds")
        warnings = []
        if self.not_stored:
            warnings.append(f"{sum(self.not_stored.values())} events not stored: "
                            + ", ".join(f"{k}: {v}" for k, v in self.not_stored.items()))
        if source in ("position", "default"):
            warnings.append(f"rank taken from the input's {'position' if source == 'position' else 'default (0)'}: "
                            "the trace has no distributedInfo.rank and its name no rank<N>")
        return {"rank_source": source, "writer": f"xpuprof {writer_version()} convert", "sources": [str(path)],
                "base_time_ns": int(base) if isinstance(base, int) and not isinstance(base, bool) else 0,
                "ts_kind": "float" if self.float_ts else "int", "first_ts_ns": self.first_ts,
                "not_stored_json": orjson.dumps(dict(self.not_stored)).decode(),
                "header_json": orjson.dumps(header).decode(),
                "metadata_events_json": orjson.dumps(self.meta_events).decode(), "warnings": warnings}


def _ids(ids: np.ndarray, strings: list[str]):
    null = ids < 0
    return dict_column(np.maximum(ids, 0), strings or [""], null=null if null.any() else None)


def _letters(codes: np.ndarray):
    """A one-letter column from byte codes (0: none)."""
    codes = np.asarray(codes, np.uint8)
    letters = [chr(x) for x in np.unique(codes).tolist() if x]
    if not letters:
        return None
    lookup = np.zeros(256, np.int32)
    lookup[[ord(x) for x in letters]] = np.arange(len(letters), dtype=np.int32)
    null = codes == 0
    return dict_column(lookup[codes], letters, null=null if null.any() else None)

