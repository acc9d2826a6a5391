"""What ``stragglers`` reads: per rank its ProfilerStep ranges and the collectives it ran, and from them
one row per (rank, step): when the step started, how long it took, and how long the rank spent in
collectives in it, from a rank group's TraceTable (``trace_rows``, an engine's task over a store or Kineto
JSON files alike): one rule, ``step_rows``.

- Steps: the ``ProfilerStep#N`` ranges torch.profiler's and xpuprof's ``step()`` record on the host
  (categories ``HOST_CATEGORIES``); one per (rank, N): the longest (the earliest of equal ones).
- Collectives on the device: communication kernels (``frame.COMMUNICATION_KERNEL``: NCCL's and RCCL's
  names, HTA's rule, and oneCCL's) with a stream. A rank's kernel runs from when it is issued until every rank has
  joined and the data has moved: its time holds the rank's wait for the last one to arrive.
- Collectives on the host: the ranges torch's process groups record (``gloo:all_reduce``, ...; category
  ``user_annotation``). gloo's span the whole collective on its worker thread, the wait included
  (NCCL's only the enqueue, which is why device kernels win when a job has them).
- A collective belongs to the step whose range holds the moment it was issued: a kernel's launching
  host call (the latest host event with its correlation id: HTA's rule for a kernel's iteration), else
  its own start. A rank's collective time in a step is the union of those collectives' intervals
  (collectives that overlap, on several streams or threads, count once).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..engines.base import Reads
from ..event_table import TIME_LIMIT_NS
from .frame import COMMUNICATION_KERNEL

STEP_NAME = re.compile(r"^ProfilerStep#([0-9]{1,19})$")  # 19 digits: what an int64 can hold
HOST_CATEGORIES = ("user_annotation", "cpu_op", "python_function")
HOST_COLLECTIVE = re.compile(r"^(gloo|nccl|xccl|mpi|ucc):")
HOST_COLLECTIVE_CATEGORY = "user_annotation"
# One row per (rank, step): int64 columns.
COLUMNS = ("rank", "step", "start_ns", "dur_ns", "device_ns", "device_n", "host_ns", "host_n")
_INT64_MAX = np.iinfo(np.int64).max


@dataclass
class RankInputs:
    """One rank's rows, times in epoch ns (int64)."""

    rank: int
    step: np.ndarray  # per ProfilerStep range: its N (-1: a name that is not ProfilerStep#N)
    step_start: np.ndarray
    step_dur: np.ndarray
    device: np.ndarray  # (n, 3): issued, start, dur of each communication kernel
    host: np.ndarray  # (n, 2): start, dur of each collective range


def step_number(name) -> int:
    """N of ``ProfilerStep#N``; -1 for another name or an N no int64 holds."""
    m = STEP_NAME.match(name) if isinstance(name, str) else None
    n = int(m.group(1)) if m else -1
    return n if n <= _INT64_MAX else -1


def step_rows(inputs: RankInputs) -> np.ndarray:
    """int64 (steps, len(COLUMNS)): the rank's steps in step order with their collective time."""
    ok = inputs.step >= 0
    number, start, dur = inputs.step[ok], inputs.step_start[ok], np.maximum(inputs.step_dur[ok], 0)
    # one range per step: the longest, then the earliest
    order = np.lexsort((start, -dur, number))
    number, start, dur = number[order], start[order], dur[order]
    first = np.ones(len(number), bool)
    first[1:] = number[1:] != number[:-1]
    number, start, dur = number[first], start[first], dur[first]
    out = np.zeros((len(number), len(COLUMNS)), np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = inputs.rank, number, start, dur
    if not len(number):
        return out
    by_start = np.argsort(start, kind="stable")
    dev = inputs.device.reshape(-1, 3)
    host = inputs.host.reshape(-1, 2)
    for col, issued, begin, length in ((4, dev[:, 0], dev[:, 1], dev[:, 2]), (6, host[:, 0], host[:, 0], host[:, 1])):
        step_of = _step_of(start[by_start], dur[by_start], issued)
        held = step_of >= 0
        group = by_start[step_of[held]]
        total, count = union_per_group(group, begin[held], begin[held] + np.maximum(length[held], 0), len(number))
        out[:, col], out[:, col + 1] = total, count
    return out


def _step_of(starts: np.ndarray, durs: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Index (into ``starts``, sorted) of the step range holding each moment, -1 for none."""
    i = np.searchsorted(starts, when, "right") - 1
    inside = (i >= 0) & (when < starts[np.maximum(i, 0)] + durs[np.maximum(i, 0)])
    return np.where(inside, i, -1)


def union_per_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group 0..n-1: the time the union of its [start, end) intervals covers, and how many intervals
    it has (int64 each)."""
    total = np.zeros(n, np.int64)
    count = np.bincount(group, minlength=n).astype(np.int64) if len(group) else np.zeros(n, np.int64)
    if not len(group):
        return total, count
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    first = np.ones(len(g), bool)
    first[1:] = g[1:] != g[:-1]
    covered = _running_max(e, first, s)  # the furthest end so far within the group
    new = first.copy()
    new[1:] |= s[1:] > covered[:-1]
    at = np.flatnonzero(new)
    np.add.at(total, g[at], np.maximum.reduceat(e, at) - s[at])
    return total, count


def _running_max(values: np.ndarray, first: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """np.maximum.accumulate restarted where ``first``: each group's values are shifted to count from its
    first ``floor`` and the groups laid one after another, so one accumulate serves all of them."""
    seg = np.cumsum(first) - 1
    base = floor[first][seg]
    rel = values - base  # >= 0: intervals end after their start, groups are sorted by start
    span = int(rel.max()) + 1
    if span * (int(seg[-1]) + 1) < (1 << 62):
        shift = seg * span
        return np.maximum.accumulate(rel + shift) - shift + base
    out = np.empty_like(values)
    bounds = np.append(np.flatnonzero(first), len(values))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        out[lo:hi] = np.maximum.accumulate(values[lo:hi])
    return out


def combine(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The rows of several ranks' (or tasks') parts together, by rank then step."""
    rows = [p for p in parts if len(p)]
    if not rows:
        return np.zeros((0, len(COLUMNS)), np.int64)
    out = np.concatenate(rows)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


# ----------------------------------------------------------------------------- a rank group's table
READS = Reads(("slices",), {"slices": ["dur", "stream", "correlation"]})


def trace_rows(table, params: dict) -> list[tuple]:
    """Task (``Engine.map``): per trace of the group, (where it was read from, its rank: -1 when it does not
    name one and ``named_only``, whether it is a merged view, its per-(rank, step) rows as lists)."""
    out = []
    for trace, info in enumerate(table.traces):
        if info.merged_ranks:
            out.append((info.origin, -1, True, []))
            continue
        rank = info.rank if info.named or not params.get("named_only") else -1
        out.append((info.origin, rank, False, step_rows(table_inputs(table, trace, rank)).tolist()))
    return out


# ----------------------------------------------------------------------------- Kineto JSON files
def _flags(strings: Sequence, test) -> np.ndarray:
    """``test`` of each distinct string, indexable by string id (id -1, absent: False)."""
    return np.fromiter((isinstance(t, str) and bool(test(t)) for t in list(strings) + [None]), bool, len(strings) + 1)


class _Rows:
    """The rows ``step_rows`` needs, gathered chunk by chunk (times on the trace's own clock)."""

    def __init__(self) -> None:
        self.steps: list[np.ndarray] = []  # (n, 3): step number, ts, dur
        self.kernels: list[np.ndarray] = []  # (n, 4): ts, dur, correlation, has correlation
        self.launchers: list[np.ndarray] = []  # (n, 2): correlation, ts
        self.host: list[np.ndarray] = []  # (n, 2): ts, dur

    def add(self, strings: Sequence, name: np.ndarray, cat: np.ndarray, ts: np.ndarray, dur: np.ndarray,
            args: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Slices with a ts and a dur (ns): name and category as ids into ``strings`` (-1: absent), and
        the correlation and stream args (values, present)."""
        timed = (np.abs(ts) < TIME_LIMIT_NS) & (np.abs(dur) < TIME_LIMIT_NS)
        number = np.array([step_number(t) for t in strings] + [-1], np.int64)[name]
        step = _flags(strings, lambda t: t in HOST_CATEGORIES)[cat] & (number >= 0) & timed
        if step.any():
            self.steps.append(np.stack([number[step], ts[step], dur[step]], 1))
        corr, has_corr = args["correlation"]
        stream, has_stream = args["stream"]
        gpu = has_stream & (stream >= 0)
        kernel = gpu & _flags(strings, COMMUNICATION_KERNEL.match)[name] & timed
        if kernel.any():
            self.kernels.append(np.stack([ts[kernel], dur[kernel], corr[kernel], has_corr[kernel]], 1))
        launcher = has_corr & ~gpu & (np.abs(ts) < TIME_LIMIT_NS)
        if launcher.any():
            self.launchers.append(np.stack([corr[launcher], ts[launcher]], 1))
        host = (_flags(strings, lambda t: t == HOST_COLLECTIVE_CATEGORY)[cat]
                & _flags(strings, HOST_COLLECTIVE.match)[name] & timed)
        if host.any():
            self.host.append(np.stack([ts[host], dur[host]], 1))

    def inputs(self, rank: int, base: int) -> RankInputs:
        st = np.concatenate(self.steps) if self.steps else np.zeros((0, 3), np.int64)
        k = np.concatenate(self.kernels) if self.kernels else np.zeros((0, 4), np.int64)
        issued = k[:, 0].copy()
        if self.launchers and len(k):
            lc = np.concatenate(self.launchers)
            lc = lc[np.lexsort((lc[:, 1], lc[:, 0]))]
            last = np.ones(len(lc), bool)  # the latest launcher of each correlation id
            last[:-1] = lc[1:, 0] != lc[:-1, 0]
            ids, when = lc[last, 0], lc[last, 1]
            at = np.minimum(np.searchsorted(ids, k[:, 2]), len(ids) - 1)
            found = (k[:, 3] == 1) & (ids[at] == k[:, 2])
            issued[found] = when[at[found]]
        device = np.stack([issued + base, k[:, 0] + base, k[:, 1]], 1)
        h = np.concatenate(self.host) if self.host else np.zeros((0, 2), np.int64)
        return RankInputs(rank, st[:, 0], st[:, 1] + base, st[:, 2], device, h + np.array([base, 0], np.int64))


def read_trace(path) -> tuple[dict, RankInputs]:
    """One trace file's rows (its rank as the trace names it: ``distributedInfo`` or ``rank<N>`` in its name;
    -1 when neither says) and its top-level keys, read through the one Kineto reader as a TraceTable (its
    slices, their typed args: correlation and stream). ``TraceLoadError`` for a file that is not a readable trace."""
    from ...trace.read.kineto import read_trace as read_table

    table = read_table(path, kinds=("slices",))
    info = table.traces[0]
    return info.header, table_inputs(table, 0, info.rank if info.named else -1)


def table_inputs(table, trace: int, rank: int) -> RankInputs:
    """One trace of a TraceTable as ``step_rows``' inputs (times: the table's epoch ns), segment by segment
    (each with its own strings: ``_Rows`` gathers chunks, so no concatenation merges their dictionaries)."""
    rows = _Rows()
    for segment in table.segments_of("slices"):
        if segment.trace != trace:
            continue
        c = segment.flat()
        if not len(c):
            continue
        ts = np.asarray(c.ts, np.int64)
        dur = np.asarray(c.dur, np.int64)
        timed = np.ones(len(c), bool) if c.dur_present is None else np.asarray(c.dur_present, bool)
        none = (np.zeros(len(c), np.int64), np.zeros(len(c), bool))
        args = {k: tuple(np.asarray(a) for a in c.ints.get(k, none)) for k in ("correlation", "stream")}
        sel = np.flatnonzero(timed)
        rows.add(c.strings, np.asarray(c.name)[sel], np.asarray(c.cat)[sel], ts[sel], dur[sel],
                 {k: (v[sel].astype(np.int64), pr[sel].astype(bool)) for k, (v, pr) in args.items()})
    return rows.inputs(rank, 0)
