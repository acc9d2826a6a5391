"""Process and thread ids every viewer keeps, and the pids of a merged view (``xpuprof merge``).

What the viewers keep (measured with Perfetto v58.2's trace processor, Chrome's trace viewer and
TensorBoard's plugin): Perfetto's JSON importer keeps pids and tids within 32 bits unsigned and maps a
negative or larger one to 0 (or to the process's main thread), merging rows that were apart; its protobuf
descriptors hold int32. So every id we write is in ``0 .. MAX_ID`` (2**31 - 1): an id outside it (Kineto's
pid -1, a 64-bit thread handle) is given a free id in range, and the trace's ``idMap`` metadata says which.

A merged view gives each (rank, process) a pid of its own: ``(rank + 1) * stride + i``, ``i`` the process's
place among its rank's processes in their sort order, ``stride`` the smallest power of ten above every
rank's process count (``merged_pid_stride``), so a pid reads as its rank and process (3002: rank 2, its
third process) and stays in range for any number of ranks a job has (2**31 / 10 of them at least). The view's
``mergedRanks`` metadata holds the stride and every pid's (rank, original pid) (``merged_pid_table``);
views written before it used ``(rank + 1) * 10**9 + i`` (``LEGACY_MERGED_PID_STRIDE``) and still read.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

MAX_ID = (1 << 31) - 1
REMAPPED_PID_FIRST = 0x7FFFFFFE  # pids given to out-of-range ones, counting down: Kineto's -1 (XPU sync and
# overhead rows) becomes the pid xpuprof's own XPU rows have (backends.emitter.VENDOR_PROCESS_PIDS)
LANE_TID_FIRST = 0x7E000000  # tids of lanes and remapped tids, counting up: above every OS's thread ids
LEGACY_MERGED_PID_STRIDE = 1_000_000_000  # merged views before ids stayed in range: (rank + 1) * 10**9 + i


def in_range(value) -> bool:
    """Whether an id (an int, or a row label) is one every viewer keeps as it is; labels always are."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return 0 <= int(value) <= MAX_ID
    return True


class FreeIds:
    """Ids in range that no real row uses, handed out from ``first`` on, counting up (``step`` 1) or down."""

    def __init__(self, used: Iterable[int], first: int, step: int = 1) -> None:
        self.used = {int(u) for u in used}
        self.next, self.step = first, step

    def take(self) -> int:
        while self.next in self.used:
            self.next += self.step
        if not 0 <= self.next <= MAX_ID:
            raise ValueError(f"no free id left in 0..{MAX_ID}")
        got = self.next
        self.used.add(got)
        self.next += self.step
        return got


# ----------------------------------------------------------------------------- merged views
def merged_pid_stride(processes_per_rank: Iterable[int], ranks: Iterable[int]) -> int:
    """The stride of a merged view's pids: the smallest power of ten above every rank's process count
    (so a pid's digits read as rank and process), and the pids of the highest rank still in range."""
    most = max(processes_per_rank, default=0)
    top = max(ranks, default=0)
    stride = 10
    while stride <= most:
        stride *= 10
    if (top + 2) * stride - 1 > MAX_ID:
        raise ValueError(f"a merged view of rank {top} with {most} processes in one rank has no pids in range "
                         f"(at most {MAX_ID})")
    return stride


def merged_pid(rank: int, index: int, stride: int) -> int:
    """The pid of a rank's ``index``-th process in a merged view."""
    return (int(rank) + 1) * stride + int(index)


def merged_pid_assignment(processes: Mapping[int, list[tuple]]) -> tuple[dict[int, dict], int]:
    """The merged view's pids: ``processes`` is, per rank, its processes as (pid, sort index or None) in the
    order they first appear; each rank's are numbered in their sort order (a process without one sorts by its
    pid when it is an int, else first), ties in appearance order. Returns ({rank: {pid: merged pid}}, stride).
    Raises ValueError when no pids in range can hold the view."""
    order: dict[int, list] = {}
    for rank, procs in processes.items():
        keyed = [((sort if sort is not None else pid if isinstance(pid, int) else 0), i, pid)
                 for i, (pid, sort) in enumerate(procs)]
        order[rank] = [pid for _, _, pid in sorted(keyed, key=lambda k: (k[0], k[1]))]
    stride = merged_pid_stride([len(v) for v in order.values()], order)
    return {r: {p: merged_pid(r, i, stride) for i, p in enumerate(ps)} for r, ps in order.items()}, stride


def merged_pid_table(assigned: Mapping[int, tuple[int, object]]) -> list[list]:
    """The ``mergedRanks.pids`` metadata: [[pid, rank, original pid], ...] in pid order."""
    return [[pid, rank, original] for pid, (rank, original) in sorted(assigned.items())]


def merged_row_ranks(pid: np.ndarray, is_int: np.ndarray, merged: Mapping | None) -> np.ndarray:
    """Each row's rank in a merged view from its pid (int32, -1 where a pid names no rank): the view's
    ``pids`` table, else its ``pid_stride``, else the stride of views written before ids stayed in range."""
    pid = np.asarray(pid, np.int64)
    is_int = np.asarray(is_int, bool)
    merged = merged if isinstance(merged, Mapping) else {}
    table = merged.get("pids")
    if isinstance(table, list) and table:
        rows = [r for r in table if isinstance(r, list) and len(r) >= 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in r[:2])]
        if rows:
            keys = np.array([r[0] for r in rows], np.int64)
            ranks = np.array([r[1] for r in rows], np.int64)
            order = np.argsort(keys, kind="stable")
            keys, ranks = keys[order], ranks[order]
            pos = np.clip(np.searchsorted(keys, pid), 0, len(keys) - 1)
            hit = is_int & (keys[pos] == pid)
            return np.where(hit, ranks[pos], -1).astype(np.int32)
    stride = merged.get("pid_stride")
    if not (isinstance(stride, int) and not isinstance(stride, bool) and stride > 0):
        stride = LEGACY_MERGED_PID_STRIDE
    return np.where(is_int & (pid >= stride), pid // stride - 1, -1).astype(np.int32)


__all__ = ["LANE_TID_FIRST", "LEGACY_MERGED_PID_STRIDE", "MAX_ID", "REMAPPED_PID_FIRST", "FreeIds", "in_range",
           "merged_pid", "merged_pid_assignment", "merged_pid_stride", "merged_pid_table", "merged_row_ranks"]
