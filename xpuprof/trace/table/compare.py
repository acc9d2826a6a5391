"""Whether two trace tables hold the same trace: the comparer every reader's parity is checked with.

Two tables are equal when their rank tables agree (rank, where it came from, base time, first event,
top-level keys, metadata rows) and, kind by kind, their rows agree after decoding strings, in
(rank, pid, tid, ts, dur, name) order: every column, a row label as its text, the typed args by value,
the other args as parsed JSON objects (so the same object spelled with other whitespace is equal).
``differences`` lists what differs (empty: equal); ``assert_equal`` raises with the first few. ``orders=False``
leaves out each row's index in its file (``order``): a Perfetto protobuf trace holds the events of a Kineto
trace in another order (a sequence per track).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import orjson

from .columns import KINDS, Columns, CounterColumns, FlowColumns, InstantColumns, SliceColumns
from .model import TraceTable

MAX_REPORTED = 8


def _where(c: Columns, column: str) -> list:
    """pid/tid per row as a sort-safe key: (0, int), (1, label) or (2,) for none."""
    return [(2,) if v is None else (1, v) if isinstance(v, str) else (0, v) for v in c.where(column)]


def _text_or_empty(c: Columns, column: str) -> list:
    return [("",) if t is None else (t,) for t in c.text(column)]  # None sorts apart from "" without comparing


def _args(c, n: int) -> list:
    out = []
    for i in range(n):
        raw = c.args[i]
        out.append(orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS) if raw else b"")
    return out


def canonical_rows(c: Columns, orders: bool = True) -> list[tuple]:
    """Every row as a tuple of plain values, sorted by (rank, pid, tid, ts, dur, name, the rest)."""
    n = len(c)
    rank = np.asarray(c.rank).tolist()
    ts = np.asarray(c.ts).tolist()
    pid, tid = _where(c, "pid"), _where(c, "tid")
    name = [None if t is None else t for t in c.text("name")]
    cat = c.text("cat")
    cols: list[list] = [rank, pid, tid, ts]
    if isinstance(c, SliceColumns):
        present = np.ones(n, bool) if c.dur_present is None else np.asarray(c.dur_present, bool)
        cols.append([d if p else None for d, p in zip(np.asarray(c.dur).tolist(), present.tolist())])
    else:
        cols.append([None] * n)
    cols += [[(t is None, t or "") for t in name], [(t is None, t or "") for t in cat],
             np.asarray(c.order).tolist() if orders else [0] * n]
    if isinstance(c, SliceColumns):
        for group in (c.ints, c.floats):
            for key in sorted(group):
                vals, present = group[key]
                cols.append([(key, v) if p else None for v, p in zip(np.asarray(vals).tolist(),
                                                                    np.asarray(present, bool).tolist())])
        cols.append(_args(c, n))
    elif isinstance(c, CounterColumns):
        cols += [[(t is None, t or "") for t in c.text("metric")], [_float_key(v) for v in np.asarray(c.value).tolist()]]
    elif isinstance(c, FlowColumns):
        ids = np.asarray(c.flow_id).tolist()
        codes = np.asarray(c.id_label).tolist()
        cols += [[(2,) if k == -2 else (1, lb) if lb is not None else (0, v)
                  for v, lb, k in zip(ids, c.text("id_label"), codes)],
                 np.asarray(c.phase).tolist(), np.asarray(c.bp).tolist()]
    elif isinstance(c, InstantColumns):
        cols += [np.asarray(c.scope).tolist(), _args(c, n)]
    rows = [tuple(_sortable(v) for v in row) for row in zip(*cols)] if n else []
    rows.sort()
    return rows


def _float_key(v: float):
    return ("nan",) if v != v else (v,)


def _sortable(v):
    """None sorts first and never meets an int in a comparison."""
    return (0,) if v is None else (1, v)


def differences(a: TraceTable, b: TraceTable, *, ignore_header: Iterable[str] = ("traceName",),
                kinds: Iterable[str] = KINDS, compare_ranks: bool = True, orders: bool = True) -> list[str]:
    """What differs between two tables (see the module docstring); [] when they are equal."""
    out: list[str] = []
    if compare_ranks:
        out += _rank_differences(a, b, set(ignore_header))
    for kind in kinds:
        ca, cb = a.columns(kind), b.columns(kind)
        if len(ca) != len(cb):
            out.append(f"{kind}: {len(ca)} rows vs {len(cb)}")
            continue
        ra, rb = canonical_rows(ca, orders), canonical_rows(cb, orders)
        bad = [i for i, (x, y) in enumerate(zip(ra, rb)) if x != y]
        for i in bad[:MAX_REPORTED]:
            out.append(f"{kind}: row {i} differs:\n  {ra[i]}\n  {rb[i]}")
        if len(bad) > MAX_REPORTED:
            out.append(f"{kind}: ... {len(bad) - MAX_REPORTED} more rows differ")
    return out


def _rank_differences(a: TraceTable, b: TraceTable, ignore: set[str]) -> list[str]:
    out = []
    if len(a.traces) != len(b.traces):
        return [f"{len(a.traces)} traces vs {len(b.traces)}"]
    for i, (x, y) in enumerate(zip(a.traces, b.traces)):
        for attr in ("rank", "source", "base_time_ns", "first_ts_ns"):
            if getattr(x, attr) != getattr(y, attr):
                out.append(f"trace {i}: {attr} {getattr(x, attr)!r} vs {getattr(y, attr)!r}")
        hx = {k: v for k, v in x.header.items() if k not in ignore}
        hy = {k: v for k, v in y.header.items() if k not in ignore}
        if _json(hx) != _json(hy):
            keys = sorted(k for k in set(hx) | set(hy) if _json(hx.get(k)) != _json(hy.get(k)))
            out.append(f"trace {i}: header keys differ: {keys}")
        if _json(x.metadata_events) != _json(y.metadata_events):
            out.append(f"trace {i}: metadata events differ ({len(x.metadata_events)} vs {len(y.metadata_events)})")
    return out


def _json(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def assert_equal(a: TraceTable, b: TraceTable, **kw) -> None:
    diff = differences(a, b, **kw)
    if diff:
        raise AssertionError("trace tables differ:\n" + "\n".join(diff[:3 * MAX_REPORTED]))
