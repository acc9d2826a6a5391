"""Kineto JSON events (``kineto_stream.EventChunk``) as the trace table's flat columns.

Most events go column-wise from the scanner's columns (complete "X" slices, flow ends, instants), their args
split in C (``table.args.TypedArgs.from_text``); the few the columns cannot hold exactly (a string pid, an
escaped key, a ts that is no plain number), counters and metadata rows are read as objects, by the same
rules (``_objects``). Times are ns after the trace's base time, exact from the numbers' text
(``exact_ns``); the base time may follow the events in the file, so the table adds it at the end.

What the table has no rows for is counted, never silently lost: events of other phases ("B"/"E" pairs,
async and sample events) by phase in ``not_stored``; events whose ts or dur is not a time a trace can hold
(|ns| < 2**62) in ``not_stored`` too, the first of them kept in ``bad_times`` for the commands that refuse
such a trace (``xpuprof report`` names it): a ts that is a number out of range, a dur that is not a number
in range (a ts that is no number - absent, a string, a bool - is an event without a time: counted only).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import orjson

from ..table.args import TypedArgs
from ..table.columns import (KINDS, CounterColumns, FlowColumns, InstantColumns, RowText, SliceColumns, constant)
from .kineto_stream import ABSENT, DOUBLE, DUR, ID, INT, PID, TID, TS, EventChunk

TIME_LIMIT_NS = 2**62  # |ns| a trace's times may reach (room for sums and differences in int64)
_LIMIT_US = TIME_LIMIT_NS // 1000
_FLOW = frozenset(b"sft")
_INSTANT = frozenset(b"iI")


def _lut(codes) -> np.ndarray:
    """A uint8 code -> bool table: ``_lut(b"sft")[ph]`` is ``np.isin(ph, ...)`` in one gather (np.isin costs
    tens of µs per call: 1,000 small files made it a tenth of their read)."""
    out = np.zeros(256, bool)
    out[list(codes)] = True
    return out


_IS_FLOW, _IS_INSTANT = _lut(_FLOW), _lut(_INSTANT)
_IS_KEPT = _lut([ord("X"), ord("C"), ord("M"), *_FLOW, *_INSTANT])  # phases the table has rows for
_IS_PLAIN_ID = _lut([INT, ABSENT])  # a pid/tid the columns hold (an int, or none)
_LETTERS = {"slices": _lut(b"X"), "counters": _lut(b"C"), "flows": _IS_FLOW, "instants": _IS_INSTANT}
_TABLE_OF = {"X": "slices", "C": "counters", "i": "instants", "I": "instants", "s": "flows", "f": "flows", "t": "flows"}
_NUMERIC_STRINGS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "Infinity": math.inf,
                    "-Infinity": -math.inf, "NaN": math.nan}


def exact_ns(v) -> int | None:
    """A JSON µs value as int ns, None when it is not a time a trace can hold. Exact for an int, and for a
    float whose shortest text has 3 decimals or fewer (every value below 2**43 µs written that way: the C
    scanner reads those from the text); else the float times 1000, rounded half to even (as the scanner)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000 if abs(v) < _LIMIT_US else None
    if not isinstance(v, float) or not math.isfinite(v) or abs(v) >= _LIMIT_US:
        return None
    text = getattr(v, "text", None) or repr(v)  # kineto_stream.ExactFloat keeps the number's own text
    if "e" not in text and "E" not in text:
        whole, _, frac = text.partition(".")
        if len(frac) <= 3 and whole.lstrip("-").isdigit():
            neg = whole.startswith("-")
            ns = int(whole.lstrip("-")) * 1000 + int((frac + "000")[:3])
            return -ns if neg else ns
    return int(round(v * 1000))


def _exact(v, scanned: int | None) -> int | None:
    """``exact_ns`` of a value, the scanner's ns for it when it read the number (same value, from its text)."""
    ns = exact_ns(v)
    return scanned if ns is not None and scanned is not None else ns


def _in_limit(us: np.ndarray) -> np.ndarray:
    """|us| < the limit for int64 µs - not ``np.abs(us) < limit``: the absolute value of INT64_MIN is INT64_MIN,
    which passed, and the event was stored at ts or dur 0."""
    return (us > -_LIMIT_US) & (us < _LIMIT_US)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)  # past 64 bits too (orjson refuses to write those)
    return v if isinstance(v, str) else orjson.dumps(v).decode()


class _Labels:
    """Strings of a few rows read as objects (names, categories, row labels): one dictionary per chunk."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, text: str | None) -> int:
        if text is None:
            return -1
        got = self.ids.get(text)
        if got is None:
            got = self.ids[text] = len(self.ids)
        return got

    @property
    def list(self) -> list[str]:
        return list(self.ids)


class KinetoRows:
    """Turns a trace's chunks into flat column sets (``add`` returns those of one chunk) and keeps what the
    rank table needs: the metadata rows, the first ts, what was not stored."""

    def __init__(self, rank: int = 0, *, kinds=None, slice_args=True, counters=True) -> None:
        """``kinds``: the kinds of rows to make (None: all; the others are scanned, not built); ``slice_args``:
        the args of every slice (True), of none (False), or of the slices whose name satisfies it (a
        function of the name): the rest carry no args columns (push-down: a report needs only the metric
        slices' args); ``counters``: every counter event (True) or those whose category satisfies a function
        (the others are scanned, never read whole)."""
        self.rank = rank
        self.kinds = frozenset(KINDS if kinds is None else kinds)
        self.slice_args = slice_args
        self.counters = counters
        self.not_stored: Counter = Counter()
        self.meta_events: list[dict] = []
        self.meta_order: list[int] = []  # each metadata row's index in the file
        self.float_ts = False
        self.first_ts: int | None = None  # ns after the base time
        self.bad_times: list[tuple[str, str, Any]] = []  # (event name, "ts" or "dur", the value)

    def _seen_ts(self, values: np.ndarray) -> None:
        if len(values):
            m = int(values.min())
            self.first_ts = m if self.first_ts is None else min(self.first_ts, m)

    def _bad_time(self, name, field: str, value) -> None:
        if len(self.bad_times) < 8:
            self.bad_times.append((str(name if name is not None else "")[:200], field, value))

    def add(self, c: EventChunk) -> list:
        if c.objects is not None:  # parsed whole (no C part): their types decide
            objects = [(i, e, None, None) for i, e in enumerate(c.objects)]
            for _, e, _, _ in objects:
                v = e.get("ts")
                self.float_ts |= isinstance(v, float) or not isinstance(v, int) or isinstance(v, bool)
            return self._objects(c.first_idx, objects)
        return self._columns(c)

    # ------------------------------------------------------------------ column-wise
    def _columns(self, c: EventChunk) -> list:
        kind = c.kind
        ts_kind = kind[:, TS]
        self.float_ts |= bool(((ts_kind == DOUBLE) | (ts_kind == ABSENT)).any())
        ts_i, ts_f = c.ints(TS), c.floats(TS)
        ts_ok = ((ts_kind == INT) & _in_limit(ts_i)) | ((ts_kind == DOUBLE) & (np.abs(ts_f) < _LIMIT_US))
        ts = c.exact[:, 0]
        self._seen_ts(ts[ts_ok])  # every event with a time counts for the trace's first one
        where_ok = _IS_PLAIN_ID[kind[:, PID]] & _IS_PLAIN_ID[kind[:, TID]]
        simple = ~c.complex & ts_ok & where_ok
        ph = c.ph
        is_x = ph == ord("X")
        dur_kind = kind[:, DUR]
        dur_ok = (dur_kind == ABSENT) | ((dur_kind == INT) & _in_limit(c.ints(DUR))) \
            | ((dur_kind == DOUBLE) & (np.abs(c.floats(DUR)) < _LIMIT_US))
        x = np.flatnonzero(simple & is_x & dur_ok)
        flows = np.flatnonzero(simple & _IS_FLOW[ph] & (kind[:, ID] == INT))
        inst = np.flatnonzero(simple & _IS_INSTANT[ph])
        done = np.zeros(c.n, bool)
        done[x] = done[flows] = done[inst] = True
        for table, letters in _LETTERS.items():
            if table not in self.kinds:  # not asked for: scanned (its time counted above), not built
                done |= letters[ph] & ~c.complex
        if "counters" in self.kinds and self.counters is not True:  # only the categories asked for are read whole
            cat_ok = np.array([bool(self.counters(t)) for t in c.strings] + [False], bool)[c.cat]
            done |= (ph == ord("C")) & ~c.complex & ~cat_ok
        # Phases the table keeps no rows for, whole: counted, never parsed.
        other = ~_IS_KEPT[ph] & ~c.complex & (ph != 0xFF)
        if other.any():
            letters, counts = np.unique(ph[other], return_counts=True)
            for letter, count in zip(letters.tolist(), counts.tolist()):
                self.not_stored[f"'{chr(letter)}' events" if letter else "events without ph"] += count
            done |= other
        out = []
        if len(x) and "slices" in self.kinds:
            out.append(self._slices(c, x, ts[x]))
        if len(flows) and "flows" in self.kinds:
            out.append(self._flows(c, flows, ts[flows]))
        if len(inst) and "instants" in self.kinds:
            out.append(self._instants(c, inst, ts[inst]))
        odd = np.flatnonzero(~done).tolist()
        if odd:  # read whole; their ts and dur keep the scanner's exact ns
            numeric = (INT, DOUBLE)
            out += self._objects(c.first_idx, [(i, c.event(i), int(c.exact[i, 0]) if kind[i, TS] in numeric else None,
                                                int(c.exact[i, 1]) if kind[i, DUR] in numeric else None)
                                               for i in odd])
        return out

    def _common(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> dict[str, Any]:
        n = len(rows)
        no = constant(-1, n, np.int32)
        pid_ok = c.kind[rows, PID] == INT
        tid_ok = c.kind[rows, TID] == INT
        return {"strings": c.strings, "labels": [], "rank": constant(self.rank, n, np.int32),
                "order": (c.first_idx + rows).astype(np.int64), "ts": np.asarray(ts, np.int64),
                "pid": np.where(pid_ok, c.ints(PID)[rows], 0), "pid_label": no,
                "tid": np.where(tid_ok, c.ints(TID)[rows], 0), "tid_label": no,
                "name": c.name[rows], "cat": c.cat[rows]}, pid_ok, tid_ok

    def _slices(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> SliceColumns:
        cols, pid_ok, tid_ok = self._common(c, rows, ts)
        present = c.kind[rows, DUR] != ABSENT
        spans = c.args_span[rows]
        if self.slice_args is not True:  # only the slices whose args were asked for
            wanted = self._args_wanted(c.strings, c.name[rows])
            spans = np.where(wanted[:, None], spans, -1) if wanted.any() else None
        if spans is None:
            ints, floats, rest = {}, {}, RowText.empty(len(rows))
        else:
            ints, floats, rest = TypedArgs.from_text(c.buf, spans).columns()
        return _absent_where(SliceColumns(**cols, dur=np.where(present, c.exact[rows, 1], 0),
                                          dur_present=None if present.all() else present, ints=ints, floats=floats,
                                          args=rest), pid_ok, tid_ok)

    def _flows(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> FlowColumns:
        cols, pid_ok, tid_ok = self._common(c, rows, ts)
        return _absent_where(FlowColumns(**cols, flow_id=c.ints(ID)[rows].copy(),
                                         id_label=constant(-1, len(rows), np.int32), phase=c.ph[rows].copy(),
                                         bp=c.aux[rows].copy()), pid_ok, tid_ok)

    def _instants(self, c: EventChunk, rows: np.ndarray, ts: np.ndarray) -> InstantColumns:
        cols, pid_ok, tid_ok = self._common(c, rows, ts)
        spans = c.args_span[rows].tolist()
        args = RowText.from_rows([None if s < 0 else bytes(c.buf[s:e]) for s, e in spans])
        return _absent_where(InstantColumns(**cols, scope=c.aux[rows].copy(), args=args), pid_ok, tid_ok)

    def _args_wanted(self, strings, name_ids: np.ndarray) -> np.ndarray:
        if self.slice_args is False:
            return np.zeros(len(name_ids), bool)
        want = np.array([bool(self.slice_args(t)) for t in strings] + [False], bool)
        return want[name_ids]

    # ------------------------------------------------------------------ one object at a time
    def _objects(self, first_idx: int, objects: list[tuple]) -> list:
        """(index in the chunk, event, its ts and dur in ns from the scanner or None) per event read whole:
        every one by the same rules."""
        tables: dict[str, list] = {"slices": [], "counters": [], "flows": [], "instants": []}
        for i, e, exact_ts, exact_dur in objects:
            ph = e.get("ph")
            if ph == "M":
                self.meta_order.append(first_idx + i)
                self.meta_events.append({k: float(v) if isinstance(v, float) and type(v) is not float else v
                                         for k, v in e.items()})  # kineto_stream.ExactFloat: a plain float
                ts = _exact(e.get("ts"), exact_ts)
                if ts is not None:
                    self._seen_ts(np.array([ts]))
                continue
            table = _TABLE_OF.get(ph) if isinstance(ph, str) else None
            if table is None:
                self.not_stored[f"'{ph}' events" if isinstance(ph, str) else "events without ph"] += 1
                continue
            ts = _exact(e.get("ts"), exact_ts)
            if table not in self.kinds or (table == "counters" and self.counters is not True
                                           and not self.counters(_text(e.get("cat")) or "")):
                # not asked for: its time counts for the trace's first one
                if ts is not None:
                    self._seen_ts(np.array([ts]))
                continue
            if ts is None:  # a number out of range is a time no trace holds; anything else is no time at all
                if table == "slices" and _is_number(e.get("ts")):
                    self._bad_time(e.get("name"), "ts", e.get("ts"))
                self.not_stored[f"'{ph}' events without a numeric ts"] += 1
                continue
            dur = None
            if table == "slices" and "dur" in e:
                dur = _exact(e["dur"], exact_dur)
                if dur is None:
                    self._bad_time(e.get("name"), "dur", e.get("dur"))
                    self.not_stored["'X' events whose dur is not a time"] += 1
                    continue
            self._seen_ts(np.array([ts]))
            tables[table].append((first_idx + i, ts, e, dur))
        out = []
        for table, rows in tables.items():
            if rows:
                got = getattr(self, f"_object_{table}")(rows)
                if got is not None:
                    out.append(got)
        return out

    def _where(self, rows: list, strings: _Labels, labels: _Labels) -> dict[str, Any]:
        n = len(rows)
        out: dict[str, Any] = {"rank": constant(self.rank, n, np.int32),
                               "order": np.array([r[0] for r in rows], np.int64),
                               "ts": np.array([r[1] for r in rows], np.int64)}
        for key in ("pid", "tid"):
            vals = [r[2].get(key) for r in rows]
            whole = [v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63 else None for v in vals]
            out[key] = np.array([0 if w is None else w for w in whole], np.int64)
            out[f"{key}_label"] = np.array([-1 if w is not None or v is None else labels.id(_text(v))
                                            for w, v in zip(whole, vals)], np.int32)
            out[f"_{key}_null"] = np.array([w is None and v is None for w, v in zip(whole, vals)], bool)
        out["name"] = np.array([strings.id(_text(r[2].get("name"))) for r in rows], np.int32)
        out["cat"] = np.array([strings.id(_text(r[2].get("cat"))) for r in rows], np.int32)
        return out

    def _finish(self, cls, cols: dict, strings: _Labels, labels: _Labels, **more):
        pid_null, tid_null = cols.pop("_pid_null"), cols.pop("_tid_null")
        return _absent_where(cls(strings=strings.list, labels=labels.list, **cols, **more), ~pid_null, ~tid_null)

    def _object_slices(self, rows: list) -> SliceColumns:
        strings, labels = _Labels(), _Labels()
        cols = self._where(rows, strings, labels)
        present = np.array([r[3] is not None for r in rows], bool)
        wanted = [self.slice_args is True or (self.slice_args is not False and
                                              bool(self.slice_args(_text(r[2].get("name")) or ""))) for r in rows]
        ints, floats, rest = TypedArgs.from_dicts([r[2].get("args") if w and isinstance(r[2].get("args"), dict)
                                                   else None for r, w in zip(rows, wanted)]).columns()
        return self._finish(SliceColumns, cols, strings, labels, dur=np.array([r[3] or 0 for r in rows], np.int64),
                            dur_present=None if present.all() else present, ints=ints, floats=floats, args=rest)

    def _object_counters(self, rows: list) -> CounterColumns | None:
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
                try:
                    out.append((r, str(k), float(v)))
                except OverflowError:  # an int past a double's range
                    self.not_stored["counter values that are not numbers"] += 1
        if not out:
            return None
        strings, labels = _Labels(), _Labels()
        cols = self._where([o[0] for o in out], strings, labels)
        metric = np.array([strings.id(o[1]) for o in out], np.int32)
        return self._finish(CounterColumns, cols, strings, labels, metric=metric,
                            value=np.array([o[2] for o in out], np.float64))

    def _object_flows(self, rows: list) -> FlowColumns:
        strings, labels = _Labels(), _Labels()
        cols = self._where(rows, strings, labels)
        ids = [r[2].get("id") for r in rows]
        whole = [v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63 else None for v in ids]
        bp = [r[2].get("bp") for r in rows]
        return self._finish(FlowColumns, cols, strings, labels, flow_id=np.array([w or 0 for w in whole], np.int64),
                            id_label=np.array([-1 if w is not None else -2 if v is None else labels.id(_text(v))
                                               for w, v in zip(whole, ids)], np.int32),
                            phase=np.array([ord(r[2]["ph"]) for r in rows], np.uint8),
                            bp=np.array([_letter(b) for b in bp], np.uint8))

    def _object_instants(self, rows: list) -> InstantColumns:
        strings, labels = _Labels(), _Labels()
        cols = self._where(rows, strings, labels)
        args = RowText.from_rows([None if r[2].get("args") is None else orjson.dumps(r[2]["args"]) for r in rows])
        return self._finish(InstantColumns, cols, strings, labels, scope=np.array([_letter(r[2].get("s")) for r in rows],
                                                                                   np.uint8), args=args)


def _letter(v) -> int:
    """One printable ASCII letter (an instant's scope, a flow's binding point) as its code; 0 otherwise."""
    if isinstance(v, str) and len(v) == 1 and 0x20 <= ord(v) < 0x7F and v != "\\":
        return ord(v)
    return 0


def _absent_where(cols, pid_ok: np.ndarray, tid_ok: np.ndarray):
    """pid/tid absent from an event: a null, kept as label -2 (no int, no label) on the columns."""
    if not pid_ok.all():
        cols.pid_label = np.where(pid_ok, cols.pid_label, -2).astype(np.int32)
    if not tid_ok.all():
        cols.tid_label = np.where(tid_ok, cols.tid_label, -2).astype(np.int32)
    return cols
