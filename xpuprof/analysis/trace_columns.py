"""The columns ``key_averages`` reads (``averages.Columns``), from a live trace (``TraceBuilder`` batches: no
Python object per slice) or from a trace file's events: slices with their thread, External id, ``flops``,
``Input Dims`` (only when grouping by shape), the ``[memory]`` records, and per-kernel metric samples
(``metrics: <kernel>`` slices and ``"<metric>::<unit>"`` args on kernels)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import orjson

from ..activity import category_spellings
from .averages import Columns, METRICS_PREFIX, unique_inverse

NON_METRIC_ARGS = frozenset({"External id", "kernel_id"})  # ids Kineto puts on "metrics: <kernel>" slices
MEMORY_EVENT = "[memory]"
SHAPES_ARG = "Input Dims"
OVERLOAD_ARG = "Overload Name"
_OP_CATEGORIES = frozenset(category_spellings("cpu_op")) | frozenset(category_spellings("user_annotation"))


def _column(values, n: int) -> np.ndarray:
    arr = np.asarray(values)
    return np.broadcast_to(arr, (n,)) if arr.shape != (n,) else arr


def _threads(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """A code per distinct integer (pid, tid) row; -1 where either is not an integer (a named row)."""
    n = len(pid)
    if pid.dtype.kind in "iu" and tid.dtype.kind in "iu":
        ok = np.ones(n, bool)
        p, t = pid.astype(np.int64), tid.astype(np.int64)
    else:
        ok = np.fromiter((type(a) is int and type(b) is int for a, b in zip(pid.tolist(), tid.tolist())), bool, n)
        p = np.array([a if k else 0 for a, k in zip(pid.tolist(), ok.tolist())], np.int64) if n else np.zeros(0, np.int64)
        t = np.array([b if k else 0 for b, k in zip(tid.tolist(), ok.tolist())], np.int64) if n else np.zeros(0, np.int64)
    if not n:
        return np.zeros(0, np.int64)
    pairs = np.stack([p, t], axis=1)
    _, codes = np.unique(pairs, axis=0, return_inverse=True)
    return np.where(ok, codes.reshape(-1), -1).astype(np.int64)


def columns_of_builders(builders: list, *, shapes: bool = False, overloads: bool = False) -> Columns:
    parts: dict[str, list] = {k: [] for k in ("name", "cat", "pid", "tid", "ts", "dur", "ext", "flops")}
    shape_rows: list = []
    overload_rows: list = []
    mem: dict[str, list] = {"ts": [], "bytes": [], "type": []}
    samples: dict[str, tuple[list, list]] = {}
    for builder in builders:
        builder.flush()
        strings = np.array(builder.strings.strings, dtype=object)
        for b in builder.slices:
            n = len(b)
            names = strings[b.name]
            cats = strings[b.cat]
            parts["name"].append(names)
            parts["cat"].append(cats)
            parts["pid"].append(np.asarray(_column(b.pid, n), dtype=object))
            parts["tid"].append(np.asarray(_column(b.tid, n), dtype=object))
            parts["ts"].append(np.asarray(b.ts, np.int64))
            parts["dur"].append(np.asarray(b.dur, np.int64))
            parts["ext"].append(np.asarray(_column(b.external_id, n), np.int64))
            flops = b.args.get("flops")
            if flops is not None and flops.kind == "num":
                values = np.asarray(_column(flops.values, n), np.float64)
                present = np.ones(n, bool) if flops.present is None else np.asarray(flops.present, bool)
                parts["flops"].append(np.where(present & np.isfinite(values), values, 0).astype(np.int64))
            else:
                parts["flops"].append(np.zeros(n, np.int64))
            if shapes or overloads:
                decoded = _decoded(b, cats)
                if shapes:
                    shape_rows.extend(None if a is None else a.get(SHAPES_ARG) for a in decoded)
                if overloads:
                    overload_rows.extend(None if a is None else a.get(OVERLOAD_ARG) for a in decoded)
            _metric_samples(b, names, samples)
        _memory_of_builder(builder, strings, mem)
    if not parts["ts"]:
        return Columns(np.zeros(0, object), np.zeros(0, object), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       np.zeros(0, np.int64), np.zeros(0, np.int64))
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return Columns(cat["name"], cat["cat"], _threads(cat["pid"], cat["tid"]), cat["ts"], cat["dur"], cat["ext"],
                   shape_rows if shapes else None, overload_rows if overloads else None, cat["flops"],
                   np.asarray(mem["ts"], np.int64), np.asarray(mem["bytes"], np.int64), np.asarray(mem["type"], np.int64),
                   {k: (np.concatenate(ks), np.concatenate(vs)) for k, (ks, vs) in samples.items()})


def _decoded(b, cats: np.ndarray) -> list:
    """Each row's args object (ops and ranges only: the rows that carry shapes), None elsewhere."""
    if b.row_args is None:
        return [None] * len(b)
    cat_u, cat_i = unique_inverse(cats)
    is_op = np.array([c in _OP_CATEGORIES for c in cat_u.tolist()], bool)[cat_i]
    return [orjson.loads(a) if a is not None and op else None for a, op in zip(b.row_args, is_op.tolist())]


def _metric_samples(b, names: np.ndarray, samples: dict) -> None:
    """Numeric metric args: every arg of a ``metrics: <kernel>`` slice, ``"<metric>::<unit>"`` args anywhere."""
    n = len(b)
    name_u, name_i = unique_inverse(names)
    is_metric = np.array([str(x).startswith(METRICS_PREFIX) for x in name_u.tolist()], bool)[name_i]
    kernel_u = np.array([str(x)[len(METRICS_PREFIX):] if str(x).startswith(METRICS_PREFIX) else str(x)
                         for x in name_u.tolist()], dtype=object)
    kernel_names = kernel_u[name_i] if n else np.zeros(0, object)
    for key, col in b.args.items():
        if col.kind != "num" or key in NON_METRIC_ARGS:
            continue
        rows = np.ones(n, bool) if col.present is None else np.asarray(col.present, bool).copy()
        if "::" not in key:
            rows &= is_metric
        if rows.any():
            ks, vs = samples.setdefault(key, ([], []))
            ks.append(kernel_names[rows])
            vs.append(np.asarray(_column(col.values, n), np.float64)[rows])
    if b.row_args is not None:
        for i, enc in enumerate(b.row_args):
            if enc is not None and (is_metric[i] or b"::" in enc):
                for key, v in orjson.loads(enc).items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and ("::" in key or is_metric[i]) \
                            and key not in NON_METRIC_ARGS:
                        ks, vs = samples.setdefault(key, ([], []))
                        ks.append(np.array([kernel_names[i]], dtype=object))
                        vs.append(np.array([v], np.float64))


def _memory_of_builder(builder, strings: np.ndarray, mem: dict) -> None:
    if MEMORY_EVENT not in builder.strings.strings:
        return
    code = builder.strings.intern(MEMORY_EVENT)
    for b in builder.instants:
        rows = np.flatnonzero(np.asarray(b.name) == code)
        if not len(rows) or b.row_args is None:
            continue
        ts = np.asarray(b.ts, np.int64)
        for i in rows.tolist():
            enc = b.row_args[i]
            args = orjson.loads(enc) if enc is not None else {}
            _memory_record(args, int(ts[i]), mem)


def _memory_record(args: Mapping[str, Any], ts_ns: int, mem: dict) -> None:
    nbytes, kind = args.get("Bytes"), args.get("Device Type")
    if type(nbytes) is int and type(kind) is int:
        mem["ts"].append(ts_ns)
        mem["bytes"].append(nbytes)
        mem["type"].append(kind)


def columns_of_events(events: Iterable[Mapping[str, Any]], *, shapes: bool = False, overloads: bool = False) -> Columns:
    """From Chrome trace events (``ts``/``dur`` in µs)."""
    name, cat, pid, tid, ts, dur, ext, flops = [], [], [], [], [], [], [], []
    shape_rows: list = []
    overload_rows: list = []
    mem: dict[str, list] = {"ts": [], "bytes": [], "type": []}
    samples: dict[str, tuple[list, list]] = {}
    for ev in events:
        ph = ev.get("ph")
        if ph == "i" and ev.get("name") == MEMORY_EVENT:
            args = ev.get("args")
            if isinstance(args, dict):
                _memory_record(args, round(_micros(ev, "ts") * 1000), mem)
            continue
        if ph != "X":
            continue
        t, d = _micros(ev, "ts"), _micros(ev, "dur")
        nm = str(ev.get("name", ""))
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        name.append(nm)
        cat.append(str(ev.get("cat", "")))
        pid.append(ev.get("pid") if type(ev.get("pid")) is int else None)
        tid.append(ev.get("tid") if type(ev.get("tid")) is int else None)
        ts.append(round(t * 1000))
        dur.append(round(d * 1000))
        e = args.get("External id")
        ext.append(e if type(e) is int and 0 <= e < 2**63 else 0)
        f = args.get("flops")
        flops.append(int(f) if type(f) in (int, float) and f == f and abs(f) < 2**62 else 0)
        if shapes:
            shape_rows.append(args.get(SHAPES_ARG))
        if overloads:
            overload_rows.append(args.get(OVERLOAD_ARG))
        is_metric = nm.startswith(METRICS_PREFIX)
        kernel = nm[len(METRICS_PREFIX):] if is_metric else nm
        for key, v in args.items():
            if key in NON_METRIC_ARGS or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if is_metric or "::" in key:
                ks, vs = samples.setdefault(key, ([], []))
                ks.append(kernel)
                vs.append(float(v))
    n = len(ts)
    ok = np.fromiter((p is not None and q is not None for p, q in zip(pid, tid)), bool, n)
    threads = _threads(np.array([p if p is not None else 0 for p in pid], np.int64),
                       np.array([q if q is not None else 0 for q in tid], np.int64))
    return Columns(np.array(name, dtype=object), np.array(cat, dtype=object), np.where(ok, threads, -1),
                   np.array(ts, np.int64), np.array(dur, np.int64), np.array(ext, np.int64),
                   shape_rows if shapes else None, overload_rows if overloads else None, np.array(flops, np.int64),
                   np.asarray(mem["ts"], np.int64), np.asarray(mem["bytes"], np.int64), np.asarray(mem["type"], np.int64),
                   {k: (np.array(ks, dtype=object), np.array(vs, np.float64)) for k, (ks, vs) in samples.items()})


MAX_MICROS = 2**62 / 1000  # times the int64 ns columns hold


def _micros(ev: Mapping[str, Any], key: str) -> float:
    """A time field (µs) as a float (absent: 0); ``ValueError`` naming the event when it is not a time."""
    v = ev.get(key, 0.0)
    if v is None:
        return 0.0
    f = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")
    if not abs(f) < MAX_MICROS:
        raise ValueError(f"event {str(ev.get('name', ''))[:80]!r} has {key} {v!r}, which is not a time a trace can "
                         f"hold (a finite number of microseconds below {MAX_MICROS:.3g} in magnitude)"[:300])
    return f


def guess_use_device(cols: Columns, metadata: Mapping[str, Any]) -> str | None:
    """torch's ``use_device`` for a trace file: the vendor its runtime calls or backends name, None when it
    holds no device work."""
    from .averages import DEVICE_CATEGORIES

    cats = set(np.unique(np.asarray(cols.cat, dtype=str)).tolist()) if len(cols.cat) else set()
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
