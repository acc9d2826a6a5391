"""A TraceBuilder's state as a file, exactly: every batch's columns (dtypes, stride-0 constants, object
rows), arg columns of every kind, per-row args (lists or the recorder's ``RowArgs`` blob), the string
table (interned strings and bulk segments), metadata, spans, dropped records and the window.

The golden corpus (``tests/data/golden``) keeps one snapshot per producer: what that producer put into a
builder, captured once from a live run (``capture.py``). The writers are then checked against the JSON
main's writer wrote from the same snapshot, byte for byte, however the producers' clocks run.

Times are stored relative to the capture's ``BASE_TIME_NS`` and shifted to this process's on load, so
the trace's relative times (what the file holds) do not depend on the day the test runs.
"""
from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path

import numpy as np

from xpuprof.trace.builder import builder as builder_mod
from xpuprof.trace.builder.columns import (ArgColumn, CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch,
                                           Span)
from xpuprof.trace.builder.dropped import DroppedRecords
from xpuprof.trace.builder.strings import StringTable, _Segment

FORMAT = 1
_BATCHES = {"SliceBatch": SliceBatch, "InstantBatch": InstantBatch, "CounterBatch": CounterBatch,
            "FlowBatch": FlowBatch}
_TIME_FIELDS = ("ts",)  # absolute epoch ns columns of every batch kind


class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, arr: np.ndarray):
        if arr.dtype == object:
            return {"$objarr": [self.value(v) for v in arr.tolist()], "shape": list(arr.shape),
                    "bcast": bool(arr.ndim and len(arr) > 1 and arr.strides[0] == 0)}
        key = f"a{len(self.arrays)}"
        if arr.ndim and len(arr) > 1 and arr.strides[0] == 0:  # stored once (np.broadcast_to): keep it so
            self.arrays[key] = np.ascontiguousarray(arr[:1])
            return {"$bcast": key, "shape": list(arr.shape)}
        self.arrays[key] = np.ascontiguousarray(arr)
        return {"$arr": key, "owned": arr.base is None}

    def value(self, v):
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, (bool, type(None), str)):
            return v
        if isinstance(v, int):
            return v if abs(v) < 2**53 else {"$int": str(v)}
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.generic):
            return {"$np": v.dtype.str, "v": self.value(v.item())}
        if isinstance(v, bytes):
            return {"$bytes": base64.b64encode(v).decode()}
        if isinstance(v, tuple):
            return {"$tuple": [self.value(x) for x in v]}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {"$dict": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, ArgColumn):
            return {"$arg": v.kind, "values": self.value(v.values), "present": self.value(v.present)}
        if isinstance(v, RowArgs):
            return {"$rowargs": [self.array(v.blob), self.array(v.starts), self.array(v.lens)]}
        if isinstance(v, Span):
            return {"$span": [v.name, v.start_ns, v.end_ns, v.op_count, v.iteration, v.prefix]}
        if type(v).__name__ in _BATCHES:
            return {"$batch": type(v).__name__, "fields": {k: self.value(x) for k, x in vars(v).items()}}
        raise TypeError(f"snapshot: cannot store a {type(v).__name__}: {v!r}"[:300])


class _Reader:
    def __init__(self, arrays) -> None:
        self.arrays = arrays

    def value(self, v):
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "$arr" in v:
            arr = np.array(self.arrays[v["$arr"]])
            return arr
        if "$bcast" in v:
            return np.broadcast_to(self.arrays[v["$bcast"]], tuple(v["shape"]))
        if "$objarr" in v:
            vals = [self.value(x) for x in v["$objarr"]]
            arr = np.empty(len(vals), dtype=object)
            arr[:] = vals
            if v.get("bcast"):
                return np.broadcast_to(arr[:1], tuple(v["shape"]))
            return arr.reshape(tuple(v["shape"]))
        if "$int" in v:
            return int(v["$int"])
        if "$float" in v:
            return float(v["$float"])
        if "$np" in v:
            return np.dtype(v["$np"]).type(self.value(v["v"]))
        if "$bytes" in v:
            return base64.b64decode(v["$bytes"])
        if "$tuple" in v:
            return tuple(self.value(x) for x in v["$tuple"])
        if "$dict" in v:
            return {_hashable(self.value(k)): self.value(x) for k, x in v["$dict"]}
        if "$arg" in v:
            return ArgColumn(v["$arg"], self.value(v["values"]), self.value(v["present"]))
        if "$rowargs" in v:
            blob, starts, lens = (self.value(x) for x in v["$rowargs"])
            return RowArgs(blob, starts, lens)
        if "$span" in v:
            return Span(*v["$span"])
        if "$batch" in v:
            return _BATCHES[v["$batch"]](**{k: self.value(x) for k, x in v["fields"].items()})
        raise ValueError(f"snapshot: unknown entry {sorted(v)}")


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def dumps(b, base_time_ns: int) -> bytes:
    """The builder's state as bytes (an .npz: a JSON manifest and the arrays it names)."""
    b.flush()
    w = _Writer()
    st = b.strings
    manifest = {
        "format": FORMAT, "base_time_ns": base_time_ns, "pid": w.value(b.pid),
        "strings": {"list": list(st._list), "size": st._size, "invalid_utf8": st.invalid_utf8,
                    "segments": [[s.first, s.count, w.array(s.blob), w.array(s.ends)] for s in st._segments]},
        "batches": {k: [w.value(x) for x in getattr(b, k)] for k in ("slices", "instants", "counters", "flows")},
        "spans": [w.value(s) for s in b.spans],
        "fields": {k: w.value(getattr(b, k)) for k in ("process_names", "process_labels", "process_sort",
                                                        "thread_names", "thread_sort", "device_properties",
                                                        "metadata", "distributed_info", "window_start_ns",
                                                        "window_end_ns", "warnings")},
        "dropped": [[k, v, b.dropped.reasons.get(k, k)] for k, v in b.dropped.items()],
    }
    out = io.BytesIO()
    np.savez_compressed(out, manifest=np.frombuffer(json.dumps(manifest).encode(), np.uint8), **w.arrays)
    return out.getvalue()


def loads(data: bytes, base_time_ns: int):
    """A TraceBuilder holding the snapshot's state, its times moved from the capture's base time to
    ``base_time_ns`` (the trace's relative times stay as captured)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    manifest = json.loads(arrays.pop("manifest").tobytes())
    if manifest["format"] != FORMAT:
        raise ValueError(f"snapshot format {manifest['format']}, this reader takes {FORMAT}")
    r = _Reader(arrays)
    shift = int(base_time_ns) - int(manifest["base_time_ns"])
    b = builder_mod.TraceBuilder(pid=r.value(manifest["pid"]))
    st = StringTable()
    s = manifest["strings"]
    st._list = list(s["list"])
    st._ids = {v: i for i, v in enumerate(st._list)} if not s["segments"] else {}
    if s["segments"]:  # interned ids are those not in a segment
        seg_ranges = [(first, first + count) for first, count, _, _ in s["segments"]]
        sid, i = 0, 0
        for text in st._list:
            while any(lo <= sid < hi for lo, hi in seg_ranges):
                sid += 1
            st._ids.setdefault(text, sid)
            sid += 1
            i += 1
    st._segments = [_Segment(first, count, r.value(blob), r.value(ends)) for first, count, blob, ends in s["segments"]]
    st._size = s["size"]
    st.invalid_utf8 = s["invalid_utf8"]
    b.strings = st
    for kind, batches in manifest["batches"].items():
        loaded = [r.value(x) for x in batches]
        for batch in loaded:
            _shift_times(batch, shift)
        setattr(b, kind, loaded)
    b.spans = [r.value(x) for x in manifest["spans"]]
    for sp in b.spans:
        sp.start_ns += shift
        if sp.end_ns:
            sp.end_ns += shift
    for k, v in manifest["fields"].items():
        setattr(b, k, r.value(v))
    b.window_start_ns += shift if b.window_start_ns else 0
    b.window_end_ns += shift if b.window_end_ns else 0
    b.dropped = DroppedRecords()
    for label, count, reason in manifest["dropped"]:
        b.dropped.add(label, reason, count)
    return b


def _shift_times(batch, shift: int) -> None:
    if not shift:
        return
    for f in _TIME_FIELDS:
        col = getattr(batch, f)
        if col.strides and col.strides[0] == 0 and len(col) > 1:
            setattr(batch, f, np.broadcast_to(col[:1] + np.int64(shift), col.shape))
        else:
            setattr(batch, f, col + np.int64(shift))


def dump(b, path: Path, base_time_ns: int) -> None:
    Path(path).write_bytes(dumps(b, base_time_ns))


def load(path: Path, base_time_ns: int):
    return loads(Path(path).read_bytes(), base_time_ns)
