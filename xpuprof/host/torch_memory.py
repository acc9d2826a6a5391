"""``[memory]`` events: what torch's allocators report while ``profile_memory=True``, in our trace.

torch's profiler (run by ``host.torch_ops`` for the ops) records one ``[memory]`` instant per allocation
and free of every allocator that reports to it (CPU, CUDA's caching allocator, XPU's, PrivateUse1's), and
``[OutOfMemory]`` when an allocation fails. They are read back from torch's trace with the op columns, put
on our clock and written as torch writes them: ``cat: "cpu_instant_event"``, ``s: "t"``, on the allocating
thread, with torch's args ``Device Type``, ``Device Id``, ``Addr``, ``Bytes``, ``Total Allocated`` and
``Total Reserved`` (``Bytes`` negative for a free). Kineto's own bookkeeping (``Ev Idx``, ``finished``) is
not carried. An event whose args cannot be read as those integers is counted, never silently lost.

Without torch, device allocations come from Level Zero's tracing layer instead (backends/xpu/allocations.py),
written with the same name and args.
"""
from __future__ import annotations

import numpy as np
import orjson

from ..trace.builder.builder import TraceBuilder
from ..trace.builder.columns import encode_json
from .distinct import distinct

MEMORY_EVENT = "[memory]"
OOM_EVENT = "[OutOfMemory]"
EVENT_NAMES = (MEMORY_EVENT, OOM_EVENT)
# torch's args of a [memory] instant, in the order TensorBoard's and HTA's readers name them
MEMORY_ARGS = ("Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved")
KINETO_BOOKKEEPING = ("Ev Idx", "finished")
# c10::DeviceType values torch writes in "Device Type"
DEVICE_TYPES = {0: "CPU", 1: "CUDA", 12: "XPU", 13: "MPS", 20: "PrivateUse1"}


class MemoryEvents:
    """torch's ``[memory]``/``[OutOfMemory]`` instants of one cycle as columns (epoch ns)."""

    def __init__(self, names: list[str], name_codes: np.ndarray, ts: np.ndarray, tid: np.ndarray,
                 values: np.ndarray, present: np.ndarray, others: list | None, unreadable: int = 0) -> None:
        self.names = names  # distinct names; name_codes index them
        self.name_codes = name_codes
        self.ts = ts
        self.tid = tid
        self.values = values  # int64 [n, len(MEMORY_ARGS)]
        self.present = present  # bool [n, len(MEMORY_ARGS)]
        self.others = others  # per row the JSON text of any other arg torch wrote, or None
        self.unreadable = unreadable  # events torch wrote that could not be carried

    def __len__(self) -> int:
        return len(self.ts)

    @classmethod
    def empty(cls, unreadable: int = 0) -> "MemoryEvents":
        z = np.zeros(0, np.int64)
        k = len(MEMORY_ARGS)
        return cls([], z, z, z, np.zeros((0, k), np.int64), np.zeros((0, k), bool), None, unreadable)

    @classmethod
    def from_scan(cls, raw: bytes, sc, to_epoch_ns) -> "MemoryEvents":
        """The instants of a scanned torch trace (``trace.read.scan``); ``to_epoch_ns``: µs column -> epoch ns."""
        from .. import _native
        from ..trace.read.scan import INT, TID, TS

        tracescan = _native.load("tracescan", "reading torch's memory events from the scanned trace")  # scanned: built
        table = {text: i for i, text in enumerate(sc.strings)}
        codes = [table[n] for n in EVENT_NAMES if n in table]
        rows = np.flatnonzero((sc.ph == ord("i")) & np.isin(sc.name, codes)) if codes else np.zeros(0, np.int64)
        if not len(rows):
            return cls.empty()
        readable = (~sc.complex[rows]) & (sc.kind[rows, TID] == INT) & (sc.kind[rows, TS] != 0)
        ints, present, others, complex_rows = tracescan.members(
            raw, np.ascontiguousarray(sc.args_span[rows]), tuple(k.encode() for k in MEMORY_ARGS),
            tuple(k.encode() for k in KINETO_BOOKKEEPING))
        readable &= ~np.asarray(list(complex_rows), bool)
        keep = np.flatnonzero(readable)
        k = len(MEMORY_ARGS)
        values = np.frombuffer(ints, np.int64).reshape(len(rows), k)[keep]
        present = np.frombuffer(present, np.uint8).reshape(len(rows), k).astype(bool)[keep]
        others = [others[i] for i in keep.tolist()] if any(o is not None for o in others) else None
        name_ids = sc.name[rows[keep]]
        names = [sc.strings[i] for i in distinct(name_ids).tolist()]
        name_codes = np.searchsorted(np.array([table[n] for n in names]), name_ids).astype(np.int64)
        return cls(names, name_codes, to_epoch_ns(sc.numbers(TS)[rows[keep]]), sc.ints(TID)[rows[keep]].copy(),
                   values.copy(), present, others, unreadable=int(len(rows) - len(keep)))

    @classmethod
    def from_events(cls, events: list, to_epoch_ns) -> "MemoryEvents":
        """The general path: torch's trace parsed as dicts (one per event)."""
        rows = [e for e in events if e.get("ph") == "i" and e.get("name") in EVENT_NAMES]
        good, bad = [], 0
        for e in rows:
            args = e.get("args") or {}
            if isinstance(e.get("tid"), int) and all(type(args.get(k, 0)) is int for k in MEMORY_ARGS):
                good.append(e)
            else:
                bad += 1
        if not good:
            return cls.empty(bad)
        names = sorted({e["name"] for e in good})
        codes = np.array([names.index(e["name"]) for e in good], np.int64)
        values = np.array([[e["args"].get(k, 0) for k in MEMORY_ARGS] for e in good], np.int64)
        present = np.array([[k in e["args"] for k in MEMORY_ARGS] for e in good], bool)
        rest = [{k: v for k, v in e["args"].items() if k not in MEMORY_ARGS and k not in KINETO_BOOKKEEPING}
                for e in good]
        others = [encode_json(r) if r else None for r in rest] if any(rest) else None
        return cls(names, codes, to_epoch_ns(np.array([e["ts"] for e in good], np.float64)),
                   np.array([e["tid"] for e in good], np.int64), values, present, others, unreadable=bad)

    def add_to(self, builder: TraceBuilder, pid: int) -> set[int]:
        """The instants on the allocating threads' rows (torch's pid is this process: ours)."""
        if not len(self):
            return set()
        name_ids = builder.strings.intern_many(self.names)[self.name_codes]
        builder.add_instants(name_ids=name_ids, ts=self.ts, pid=pid, tid=self.tid, cat="cpu_instant_event",
                             scope=np.full(len(self), ord("t"), np.uint8), row_args=self.encoded_args())
        return set(distinct(self.tid).tolist())

    def encoded_args(self) -> list[bytes]:
        """Each event's args as torch writes them (one JSON object per row: instants carry encoded args)."""
        keys = [orjson.dumps(k) for k in MEMORY_ARGS]
        if self.others is None and self.present.all():  # the usual case: every row one format, filled in C
            row = b"{" + b",".join(k + b":%d" for k in keys) + b"}\n"
            return (row * len(self) % tuple(self.values.ravel().tolist())).split(b"\n")[:-1]
        rows = []
        others = self.others
        for i, (vals, have) in enumerate(zip(self.values.tolist(), self.present.tolist())):
            body = b",".join(k + b":" + str(v).encode() for k, v, h in zip(keys, vals, have) if h)
            extra = others[i] if others is not None else None
            if extra is not None and len(extra) > 2:
                body = body + b"," + bytes(extra)[1:-1] if body else bytes(extra)[1:-1]
            rows.append(b"{" + body + b"}")
        return rows


def count_by_device(events: MemoryEvents) -> dict[str, int]:
    """How many [memory] events each device type reported (the trace's ``memory_events`` metadata)."""
    if not len(events):
        return {}
    col = MEMORY_ARGS.index("Device Type")
    kinds, counts = np.unique(events.values[:, col], return_counts=True)
    return {DEVICE_TYPES.get(int(k), f"device type {int(k)}"): int(c) for k, c in zip(kinds.tolist(), counts.tolist())}
