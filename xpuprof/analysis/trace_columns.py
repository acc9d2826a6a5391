"""The columns ``key_averages`` reads (``averages.Columns``), from a TraceTable whichever producer or reader made
it (a live profile's frozen builders, Kineto JSON files, a store): slices with their thread, External id,
``flops``, ``Input Dims`` and the overload name (only when grouping by them), the ``[memory]`` records, and
per-kernel metric samples (``metrics: <kernel>`` slices and ``"<metric>::<unit>"`` args on any slice).

Args other than the typed columns are JSON text per row; only the rows whose text holds a key asked for are
parsed (the key is found in the text blob, not row by row)."""
from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np
import orjson

from ..trace.store_schema import FLOAT_ARGS, INT_ARGS
from .averages import Columns, METRICS_PREFIX

NON_METRIC_ARGS = frozenset({"External id", "kernel_id"})  # ids Kineto puts on "metrics: <kernel>" slices
MEMORY_EVENT = "[memory]"
SHAPES_ARG = "Input Dims"
OVERLOAD_ARG = "Overload Name"
_TYPED_KEY = {col: key for key, col in {**INT_ARGS, **FLOAT_ARGS}.items()}  # typed column -> its args key


def rows_holding(text, key: str) -> np.ndarray:
    """The rows (sorted, distinct) of a ``RowText`` whose JSON text holds ``key`` as a member name."""
    return rows_holding_text(text, orjson.dumps(key))


def _args(text, rows: np.ndarray) -> list[dict]:
    got = []
    for r in rows.tolist():
        raw = text[r]
        value = orjson.loads(raw) if raw else {}
        got.append(value if isinstance(value, dict) else {})
    return got


def _trace_columns(table, trace: int, shapes: bool, overloads: bool, out: dict, samples: dict) -> None:
    from .event_table import thread_codes

    s = table.columns("slices", trace, keep=False)
    n = len(s)
    texts = np.array([*s.strings, ""], dtype=object)  # [-1]: no name or category, read as ""
    names = texts[s.name]
    out["name"].append(names)
    out["cat"].append(texts[s.cat])
    is_int = (np.asarray(s.pid_label) == -1) & (np.asarray(s.tid_label) == -1)
    codes = thread_codes(s.pid, s.pid_label, s.tid, s.tid_label) + out["threads"]  # distinct across traces
    out["threads"] = int(codes.max()) + 1 if n else out["threads"]
    out["thread"].append(np.where(is_int, codes, -1))
    out["ts"].append(np.asarray(s.ts, np.int64))
    out["dur"].append(np.where(np.ones(n, bool) if s.dur_present is None else s.dur_present, s.dur, 0).astype(np.int64))
    ext, present = s.ints.get("external_id", (np.zeros(n, np.int64), np.zeros(n, bool)))
    out["ext"].append(np.where(np.asarray(present, bool) & (np.asarray(ext) > 0), ext, 0).astype(np.int64))
    flops = np.zeros(n, np.int64)
    rows = rows_holding(s.args, "flops")
    for r, a in zip(rows.tolist(), _args(s.args, rows)):
        f = a.get("flops")
        flops[r] = int(f) if type(f) in (int, float) and f == f and abs(f) < 2**62 else 0
    out["flops"].append(flops)
    for wanted, key, column in ((shapes, SHAPES_ARG, "shapes"), (overloads, OVERLOAD_ARG, "overload")):
        if wanted:
            values: list = [None] * n
            rows = rows_holding(s.args, key)
            for r, a in zip(rows.tolist(), _args(s.args, rows)):
                values[r] = a.get(key)
            out[column].extend(values)
    # metric samples: every numeric arg of a "metrics: <kernel>" slice, "<metric>::<unit>" args anywhere
    is_metric = np.array([t.startswith(METRICS_PREFIX) for t in s.strings] + [False], bool)[s.name]
    kernel = np.array([t[len(METRICS_PREFIX):] if t.startswith(METRICS_PREFIX) else t for t in s.strings] + [""],
                      dtype=object)[s.name]
    metric_rows = np.flatnonzero(is_metric)
    for group in (s.ints, s.floats):
        for col, (values, has) in group.items():
            key = _TYPED_KEY[col]
            rows = metric_rows[np.asarray(has, bool)[metric_rows]] if key not in NON_METRIC_ARGS else metric_rows[:0]
            if len(rows):
                ks, vs = samples.setdefault(key, ([], []))
                ks.append(kernel[rows])
                vs.append(np.asarray(values, np.float64)[rows])
    rows = np.union1d(metric_rows[s.args.present()[metric_rows]] if n else metric_rows, rows_holding_text(s.args, b"::"))
    for r, a in zip(rows.tolist(), _args(s.args, rows)):
        for key, v in a.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and key not in NON_METRIC_ARGS \
                    and ("::" in key or is_metric[r]):
                ks, vs = samples.setdefault(key, ([], []))
                ks.append(np.array([kernel[r]], dtype=object))
                vs.append(np.array([v], np.float64))
    # [memory] records: instants
    i = table.columns("instants", trace, keep=False)
    if MEMORY_EVENT in i.strings:
        memory = np.array([t == MEMORY_EVENT for t in i.strings] + [False], bool)[i.name]
        rows = np.flatnonzero(memory & i.args.present())
        for r, a in zip(rows.tolist(), _args(i.args, rows)):
            nbytes, kind = a.get("Bytes"), a.get("Device Type")
            if type(nbytes) is int and type(kind) is int:
                out["mem_ts"].append(int(i.ts[r]))
                out["mem_bytes"].append(nbytes)
                out["mem_type"].append(kind)


def rows_holding_text(text, needle: bytes) -> np.ndarray:
    """The rows (sorted, distinct) of a ``RowText`` whose JSON text holds ``needle`` anywhere."""
    found = [m.start() for m in re.finditer(re.escape(needle), text.blob)] if text.blob else []
    rows = np.searchsorted(text.offsets, np.asarray(found, np.int64), "right") - 1
    return np.unique(rows[(rows >= 0) & (rows < len(text))])


def columns_of_table(table, *, shapes: bool = False, overloads: bool = False) -> Columns:
    """``key_averages``' columns of every trace of a TraceTable (threads told apart per trace)."""
    out: dict[str, Any] = {k: [] for k in ("name", "cat", "thread", "ts", "dur", "ext", "flops", "shapes", "overload",
                                           "mem_ts", "mem_bytes", "mem_type")}
    out["threads"] = 0
    samples: dict[str, tuple[list, list]] = {}
    for trace in range(len(table.traces)):
        _trace_columns(table, trace, shapes, overloads, out, samples)

    def cat(key: str, dtype) -> np.ndarray:
        return np.concatenate(out[key]) if out[key] else np.zeros(0, dtype)

    return Columns(cat("name", object), cat("cat", object), cat("thread", np.int64), cat("ts", np.int64),
                   cat("dur", np.int64), cat("ext", np.int64), out["shapes"] if shapes else None,
                   out["overload"] if overloads else None, cat("flops", np.int64),
                   np.asarray(out["mem_ts"], np.int64), np.asarray(out["mem_bytes"], np.int64),
                   np.asarray(out["mem_type"], np.int64),
                   {k: (np.concatenate(ks), np.concatenate(vs)) for k, (ks, vs) in samples.items()})


def guess_use_device(cols: Columns, metadata: Mapping[str, Any]) -> str | None:
    """torch's ``use_device`` for a trace file: the vendor its runtime calls or backends name, None when it
    holds no device work."""
    from .averages import DEVICE_CATEGORIES

    cats = set(map(str, dict.fromkeys(np.asarray(cols.cat, dtype=object).tolist())))  # distinct, at C speed
    if not cats & DEVICE_CATEGORIES:
        return None
    if cats & {"cuda_runtime", "cuda_driver"}:
        return "cuda"
    if cats & {"xpu_runtime", "xpu_driver"}:
        return "xpu"
    backends = metadata.get("backends") if isinstance(metadata, Mapping) else None
    if isinstance(backends, list) and any(b in ("cuda", "rocm") for b in backends):
        return "cuda"
    return "xpu"
