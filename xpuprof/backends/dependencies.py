"""Inter-stream dependencies, shared by every vendor: which event record a wait waited on.

Every event-record call (``cudaEventRecord``, ``hipEventRecord``, a Level Zero signal / SYCL
event) is kept as {correlation id, stream} in a per-event-handle history sorted by correlation
id. A wait or synchronize on a handle resolves to the most recent record whose correlation id
is strictly before the wait's: a record that arrives late but belongs earlier is still found,
and a later re-record of the same handle is never taken. The null/default stream is a real
stream: only the correlation id decides, never whether a stream id is 0.

Storage is one sorted int64 key column, ``(dense handle id << CORR_BITS) | correlation id``,
so each handle's history is a contiguous, corr-sorted block; inserts are vectorized binary
searches (``np.searchsorted`` + ``np.insert``) and so is resolution.

Output names follow CUPTI/Kineto (``wait_on_stream``, ``wait_on_cuda_event_record_corr_id``,
``wait_on_cuda_event_id``), with ``cuda`` replaced by ``hip`` or ``xpu`` for those vendors.

An unresolved wait (its producer record is not in the trace), per vendor:
- cuda: as Kineto HEAD (and its tests): ``wait_on_stream`` and ``wait_on_cuda_event_record_corr_id``
  are -1, ``wait_on_cuda_event_id`` is the CUPTI event id.
- hip: as the ROCm inter-stream-dependency design: the raw ``wait_on_hip_event_id`` always, the
  producer fields omitted.
- xpu: as cuda (-1), stated in the README.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VENDORS = ("cuda", "hip", "xpu")
OMIT_UNRESOLVED_PRODUCER = frozenset({"hip"})  # the others write -1
CORR_BITS = 40  # correlation ids up to 2**40 - 1
HANDLE_BITS = 23  # up to 8M distinct event handles per session
_CORR_MASK = np.int64((1 << CORR_BITS) - 1)

# Dependency arrows use ids far above any correlation id (ordinary ac2g flows use the
# correlation id itself), one block per vendor so two backends never collide.
DEPENDENCY_FLOW_BASE = 1 << 48


class DependencyError(ValueError):
    """A correlation id or handle count outside what the resolver can key."""


@dataclass
class Resolution:
    """Per wait: the producer record found (or -1 everywhere when none was)."""

    found: np.ndarray  # bool
    stream: np.ndarray  # int64, -1 when unresolved
    record_corr_id: np.ndarray  # int64, -1 when unresolved
    record_ts: np.ndarray  # int64, 0 when unresolved
    record_pid: np.ndarray  # int64
    record_tid: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.found)


class DependencyResolver:
    """Event-record history for one vendor and one session."""

    def __init__(self, vendor: str) -> None:
        if vendor not in VENDORS:
            raise ValueError(f"unknown dependency vendor {vendor!r}; valid: {', '.join(VENDORS)}")
        self.vendor = vendor
        self.flow_base = DEPENDENCY_FLOW_BASE * (1 + VENDORS.index(vendor))
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget every record (a new session never resolves into an old one)."""
        self._handle_ids: dict[int, int] = {}
        self._keys = np.empty(0, np.int64)
        self._stream = np.empty(0, np.int64)
        self._ts = np.empty(0, np.int64)
        self._pid = np.empty(0, np.int64)
        self._tid = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self._keys)

    def _dense_ids(self, handles: np.ndarray, create: bool) -> np.ndarray:
        """Handle -> dense id (-1 for unknown handles when not creating)."""
        uniq, inverse = np.unique(handles, return_inverse=True)
        table = np.empty(len(uniq), np.int64)
        ids = self._handle_ids
        for i, h in enumerate(uniq.tolist()):  # one dict lookup per distinct handle
            got = ids.get(h)
            if got is None:
                if not create:
                    got = -1
                else:
                    got = len(ids)
                    if got >= (1 << HANDLE_BITS):
                        raise DependencyError(f"more than {1 << HANDLE_BITS} distinct event handles in one session")
                    ids[h] = got
            table[i] = got
        return table[inverse.reshape(-1)]

    @staticmethod
    def _corr(corr_ids) -> np.ndarray:
        corr = np.asarray(corr_ids).astype(np.int64, copy=False)
        if len(corr) and (corr.min() < 0 or corr.max() > int(_CORR_MASK)):
            raise DependencyError(f"correlation ids must be in [0, 2**{CORR_BITS}); got {int(corr.min())}..{int(corr.max())}")
        return corr

    @staticmethod
    def _handles(handles, n: int) -> np.ndarray:
        arr = np.asarray(handles)
        if arr.shape != (n,):
            raise ValueError(f"handles has shape {arr.shape}, expected ({n},)")
        return arr.astype(np.uint64, copy=False)

    # ------------------------------------------------------------------ records
    def add_records(self, handles, corr_ids, streams, *, ts=None, pid=None, tid=None) -> None:
        """Event-record calls (any order). ``ts``/``pid``/``tid`` locate the producer row for flows."""
        corr = self._corr(corr_ids)
        n = len(corr)
        if n == 0:
            return
        dense = self._dense_ids(self._handles(handles, n), create=True)
        keys = (dense << CORR_BITS) | corr

        def col(v):
            if v is None:
                return np.zeros(n, np.int64)
            if np.isscalar(v):
                return np.full(n, int(v), np.int64)
            out = np.asarray(v).astype(np.int64, copy=False)
            if out.shape != (n,):
                raise ValueError(f"record column has shape {out.shape}, expected ({n},)")
            return out

        stream, ts_c, pid_c, tid_c = col(streams), col(ts), col(pid), col(tid)
        order = np.argsort(keys, kind="stable")
        keys, stream, ts_c, pid_c, tid_c = keys[order], stream[order], ts_c[order], pid_c[order], tid_c[order]
        # Binary-search insert into the sorted history; equal keys go after existing ones.
        pos = np.searchsorted(self._keys, keys, side="right")
        self._keys = np.insert(self._keys, pos, keys)
        self._stream = np.insert(self._stream, pos, stream)
        self._ts = np.insert(self._ts, pos, ts_c)
        self._pid = np.insert(self._pid, pos, pid_c)
        self._tid = np.insert(self._tid, pos, tid_c)

    def add_record(self, handle: int, corr_id: int, stream: int, *, ts: int = 0, pid: int = 0, tid: int = 0) -> None:
        self.add_records([handle], [corr_id], [stream], ts=[ts], pid=[pid], tid=[tid])

    # ------------------------------------------------------------------ waits
    def resolve(self, handles, corr_ids) -> Resolution:
        """For each wait (handle, correlation id): the latest record with a smaller correlation id."""
        corr = self._corr(corr_ids)
        n = len(corr)
        if n == 0 or len(self._keys) == 0:
            return Resolution(np.zeros(n, bool), np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                              np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64))
        dense = self._dense_ids(self._handles(handles, n), create=False)
        keys = (np.maximum(dense, 0) << CORR_BITS) | corr
        idx = np.searchsorted(self._keys, keys, side="left") - 1  # strictly before the wait
        safe = np.maximum(idx, 0)
        found = (dense >= 0) & (idx >= 0) & ((self._keys[safe] >> CORR_BITS) == dense)
        return Resolution(
            found=found,
            stream=np.where(found, self._stream[safe], -1),
            record_corr_id=np.where(found, self._keys[safe] & _CORR_MASK, -1),
            record_ts=np.where(found, self._ts[safe], 0),
            record_pid=np.where(found, self._pid[safe], 0),
            record_tid=np.where(found, self._tid[safe], 0),
        )

    # ------------------------------------------------------------------ output
    @property
    def event_id_arg(self) -> str:
        return f"wait_on_{self.vendor}_event_id"

    @property
    def record_corr_arg(self) -> str:
        return f"wait_on_{self.vendor}_event_record_corr_id"

    @property
    def sync_kind_arg(self) -> str:
        return f"{self.vendor}_sync_kind"

    def wait_args(self, handles, res: Resolution, event_based=None, *, hex_handles: bool = False) -> dict:
        """``wait_on_*`` arg columns for a batch of syncs (rows not event-based carry none).

        The event id is written even when unresolved; the producer fields (stream, record corr
        id) are then -1, or omitted for vendors in ``OMIT_UNRESOLVED_PRODUCER`` (hip).
        """
        from ..trace.builder.columns import ArgColumn, hex_column

        n = len(res)
        present = np.ones(n, bool) if event_based is None else np.asarray(event_based, dtype=bool)
        producer = present & res.found if self.vendor in OMIT_UNRESOLVED_PRODUCER else present
        ids = self._handles(handles, n)
        ev = hex_column(ids, present) if hex_handles else ArgColumn("num", ids, present)
        return {
            "wait_on_stream": ArgColumn("num", res.stream, producer),
            self.record_corr_arg: ArgColumn("num", res.record_corr_id, producer),
            self.event_id_arg: ev,
        }

    def flow_ids(self, wait_corr_ids) -> np.ndarray:
        return self.flow_base + np.asarray(wait_corr_ids, dtype=np.int64)

    def add_flows(self, builder, res: Resolution, *, wait_corr_ids, wait_ts, wait_pid, wait_tid,
                  cat: str = "ac2g") -> int:
        """One producer-record -> wait arrow per resolved wait; returns how many were drawn."""
        m = res.found
        k = int(m.sum())
        if not k:
            return 0
        ids = self.flow_ids(np.asarray(wait_corr_ids)[m])
        wait_ts = np.broadcast_to(np.asarray(wait_ts), m.shape)[m]
        wait_pid = wait_pid if np.isscalar(wait_pid) else np.asarray(wait_pid)[m]
        wait_tid = wait_tid if np.isscalar(wait_tid) else np.asarray(wait_tid)[m]
        builder.add_flows(flow_ids=ids, ts=res.record_ts[m], pid=res.record_pid[m], tid=res.record_tid[m],
                          start=True, cat=cat)
        builder.add_flows(flow_ids=ids, ts=wait_ts, pid=wait_pid, tid=wait_tid, start=False, cat=cat)
        return k
