"""A read TraceTable's rows as Kineto JSON events (the Chrome writer's path for a table no builder stands
behind: what a reader of JSON or of a store made).

Every row becomes the event it was read from, in file order (``order``), after the trace's metadata rows:
times in µs after the trace's base time with exactly 3 decimals, a row label where the event named its row by
a string, typed args back under their keys beside the other args, a counter event's metrics in one args
object. Reading the written file gives an equal table (``trace.table.compare``). One dict per event: the
reference path, not a fast one.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import orjson

from ..store_schema import FLOAT_ARGS, INT_ARGS
from ..table.columns import NO_VALUE, CounterColumns, FlowColumns, InstantColumns, SliceColumns
from ..table.model import TraceTable

CHUNK_EVENTS = 32768
_KEY = {col: key for key, col in {**INT_ARGS, **FLOAT_ARGS}.items()}


def _micros(ns: int) -> orjson.Fragment:
    ns = int(ns)
    sign = b"-" if ns < 0 else b""
    ns = abs(ns)
    return orjson.Fragment(b"%s%d.%03d" % (sign, ns // 1000, ns % 1000))


def _where(c, column: str, i: int, codes: list, values: list):
    code = codes[i]
    if code == NO_VALUE:
        return None
    return c.labels[code] if code >= 0 else values[i]


def _common(c, i: int, base: int, cols: dict) -> dict:
    ev = {}
    name, cat = cols["name"][i], cols["cat"][i]
    if cat >= 0:
        ev["cat"] = c.strings[cat]
    if name >= 0:
        ev["name"] = c.strings[name]
    for key in ("pid", "tid"):
        v = _where(c, key, i, cols[f"{key}_label"], cols[key])
        if v is not None or cols[f"{key}_label"][i] != NO_VALUE:
            ev[key] = v
    ev["ts"] = _micros(cols["ts"][i] - base)
    return ev


def _lists(c, names) -> dict:
    return {n: np.asarray(getattr(c, n)).tolist() for n in names}


def _slices(c: SliceColumns, base: int):
    cols = _lists(c, ("name", "cat", "pid", "pid_label", "tid", "tid_label", "ts", "dur", "order"))
    present = None if c.dur_present is None else np.asarray(c.dur_present).tolist()
    typed = [(_KEY[k], np.asarray(v).tolist(), np.asarray(p).tolist()) for group in (c.ints, c.floats)
             for k, (v, p) in group.items()]
    for i in range(len(c)):
        ev = {"ph": "X", **_common(c, i, base, cols)}
        if present is None or present[i]:
            ev["dur"] = _micros(cols["dur"][i])
        args = {key: vals[i] for key, vals, p in typed if p[i]}
        raw = c.args[i]
        if raw:
            args.update(orjson.loads(raw))
        if args:
            ev["args"] = args
        yield cols["order"][i], ev


def _counters(c: CounterColumns, base: int):
    cols = _lists(c, ("name", "cat", "pid", "pid_label", "tid", "tid_label", "ts", "order", "metric", "value"))
    current, at = None, None
    for i in range(len(c)):
        if cols["order"][i] != at:
            if current is not None:
                yield at, current
            at = cols["order"][i]
            current = {"ph": "C", **_common(c, i, base, cols), "args": {}}
        v = cols["value"][i]
        current["args"][c.strings[cols["metric"][i]]] = v if v == v and abs(v) != float("inf") else str(v)
    if current is not None:
        yield at, current


def _flows(c: FlowColumns, base: int):
    cols = _lists(c, ("name", "cat", "pid", "pid_label", "tid", "tid_label", "ts", "order", "flow_id", "id_label",
                      "phase", "bp"))
    for i in range(len(c)):
        ev = {"ph": chr(cols["phase"][i]) if cols["phase"][i] else None}
        if ev["ph"] is None:
            del ev["ph"]
        fid = _where(c, "id", i, cols["id_label"], cols["flow_id"])
        if cols["id_label"][i] != NO_VALUE:
            ev["id"] = fid
        ev.update(_common(c, i, base, cols))
        if cols["bp"][i]:
            ev["bp"] = chr(cols["bp"][i])
        yield cols["order"][i], ev


def _instants(c: InstantColumns, base: int):
    cols = _lists(c, ("name", "cat", "pid", "pid_label", "tid", "tid_label", "ts", "order", "scope"))
    for i in range(len(c)):
        ev = {"ph": "i"}
        if cols["scope"][i]:
            ev["s"] = chr(cols["scope"][i])
        ev.update(_common(c, i, base, cols))
        raw = c.args[i]
        if raw:
            ev["args"] = orjson.Fragment(raw)
        yield cols["order"][i], ev


_KINDS = {"slices": _slices, "counters": _counters, "flows": _flows, "instants": _instants}


def flat_bodies(table: TraceTable) -> Iterator[bytes]:
    """The events of a one-trace table, as the ``traceEvents`` array's rows (separated, the last without
    its comma: the writer closes the array)."""
    info = table.traces[0]
    base = info.base_time_ns
    meta = info.metadata_events
    at = info.metadata_order if info.metadata_order and len(info.metadata_order) == len(meta) else [-1] * len(meta)
    events = list(zip(at, meta))
    for kind, rows in _KINDS.items():
        c = table.columns(kind)
        if len(c):
            events += list(rows(c, base))
    events.sort(key=lambda oe: oe[0])
    for lo in range(0, len(events), CHUNK_EVENTS):
        part = events[lo:lo + CHUNK_EVENTS]
        last = lo + len(part) == len(events)
        out = bytearray()
        for j, (_, ev) in enumerate(part):
            out += orjson.dumps(ev)
            out += b"\n" if last and j == len(part) - 1 else b",\n"
        yield bytes(out)
