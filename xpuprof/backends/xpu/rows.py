"""The column helpers of the XPU emit stage: record columns -> trace columns.

``XpuRows`` (an ``Emitter``) turns PTI record columns into what ``TraceBuilder.add_slices`` takes:
epoch times, names interned once per distinct pointer, API id or enum value (``factorize``, linear),
device indices from UUIDs, the device (stream) rows, the time args. ``emit.XpuEmitter`` derives from
it and says what each record kind writes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...activity import ActivityType
from ...clock import BASE_TIME_NS
from ...trace.builder.columns import ArgColumn
from ...trace.builder.keyindex import factorize
from ..common import intern_keys
from ..emitter import Emitter
from .context import RecordContext

VENDOR = "xpu"


def _us(ns: np.ndarray) -> np.ndarray:
    """ns -> µs with 3 decimals (the trace's own time resolution): the float nearest ns / 1000 (one
    rounding; ``np.round(x, 3)`` would round a second time, and the writer formats these in C)."""
    return ns.astype(np.float64) / 1000.0


class XpuRows(Emitter):
    """PTI record columns of one batch -> trace columns (see the module docstring)."""

    vendor = VENDOR

    def __init__(self, ctx: RecordContext, activities) -> None:
        super().__init__(activities)
        self.ctx = ctx
        self._device_pids: set[int] = set()
        self._streams: set[tuple[int, int]] = set()

    def start_batch(self) -> None:
        self._device_pids, self._streams = set(), set()

    def _epoch(self, a: np.ndarray) -> np.ndarray:
        return a.astype(np.int64, copy=False) + np.int64(self.ctx.clock_offset_ns)

    def _in_window(self, rec: np.ndarray, start_field: str, end_field: str, what: str) -> np.ndarray:
        start = rec[start_field]
        bad = rec[end_field] < start
        if bad.any():
            self.errors.append(f"{int(bad.sum())} {what} records end before they start")
        if self.window is None:
            return rec
        return self.in_window(rec, self._epoch(start))

    def _device_index(self, uuids: np.ndarray) -> np.ndarray:
        """(n, 16) uint8 UUIDs -> device index; unseen UUIDs get the next free index."""
        if not len(uuids):
            return np.zeros(0, np.int64)
        words = np.ascontiguousarray(uuids).view(np.uint64).reshape(-1, 2)
        high, low = factorize(words[:, 0]), factorize(words[:, 1])
        pairs = factorize(high.codes.astype(np.uint64, copy=False) * np.uint64(len(low.uniq)) + low.codes.astype(np.uint64, copy=False))
        known = self.ctx.device_uuids
        raws = [np.ascontiguousarray(uuids[row]).tobytes() for row in pairs.first.tolist()]
        for raw in sorted(raws):  # unseen UUIDs take the next indices in byte order
            if raw not in known:
                known.append(raw)
        return np.array([known.index(raw) for raw in raws], np.int64)[pairs.codes]

    def _interned(self, keys: np.ndarray, text_of: Callable[[int], str]) -> np.ndarray:
        """String id per row: ``text_of`` once per distinct key, interned once."""
        return intern_keys(self.b, keys, text_of)

    def _intern_ptrs(self, ptrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pointers -> (string ids, present mask)."""
        return self._interned(ptrs, self.ctx.strings), ptrs != 0

    def _api_name_ids(self, group: np.ndarray, api_id: np.ndarray) -> np.ndarray:
        key = (group.astype(np.uint64, copy=False) << np.uint64(32)) | api_id.astype(np.uint64, copy=False)
        return self._interned(key, lambda k: self.ctx.api_names(k >> 32, k & 0xFFFFFFFF))

    def _table_names(self, codes: np.ndarray, fmt: Callable[[int], str]) -> np.ndarray:
        if codes.dtype.kind == "i" and len(codes) and int(codes.min()) < 0:
            uniq, inverse = np.unique(codes, return_inverse=True)  # negative codes: keep their sign
            ids = np.fromiter((self.b.strings.intern(fmt(int(c))) for c in uniq.tolist()), np.int32, len(uniq))
            return ids[inverse.reshape(-1)]
        return self._interned(codes, fmt)

    def _str_column(self, texts: list[str], codes: np.ndarray) -> ArgColumn:
        """Arg column of strings chosen by small integer codes (enum values)."""
        ids = np.array([self.b.strings.intern(t) for t in texts], np.int32)
        return ArgColumn("str", ids[np.clip(codes.astype(np.int64, copy=False), 0, len(ids) - 1)])

    def _memory_column(self, codes: np.ndarray) -> ArgColumn:
        """Memory-type arg column named by the context (PTI's strings when loaded)."""
        return ArgColumn("str", self._table_names(codes, self.ctx.memory_type_name))

    def _add(self, cat: ActivityType, name_ids, ts, dur, pid, tid, args, external_id=None) -> None:
        # add_slices stores columns that hold one value in every row once (stride-0 views).
        self.slices(cat, ts, dur, pid, tid, name_ids=name_ids, args=args, external_id=external_id)

    def _device_rows(self, pid: np.ndarray, queue: np.ndarray) -> None:
        pairs = self.name_streams(pid, queue, "Stream {}".format)
        self._streams.update(pairs)
        self._device_pids.update(d for d, _ in pairs)

    def _time_args(self, rec: np.ndarray, start: np.ndarray, fields: list[tuple[str, str]]) -> dict:
        args = {}
        for key, f in fields:
            raw = rec[f]
            present = raw != 0
            if not present.any():
                continue
            t = self._epoch(raw)
            args[key] = ArgColumn("num", _us(t - BASE_TIME_NS), present)
            args[f"{key}_rel_to_start"] = ArgColumn("num", _us(t - start), present)
        return args
