"""The events HTA 0.5's analyses see, per rank, as numpy columns of a trace table (``Frame``).

HTA (``hta.common.trace`` / ``trace_parser``) reads each rank's trace into a DataFrame and, before
any analysis:
- keeps the events with a ``dur`` and a ``cat``, except category ``Trace``;
- in a trace whose ``ts`` are floats, rounds each event to whole µs inwards: ``ts = ceil(ts)``,
  ``end = floor(ts + dur)``, ``dur = end - ts`` (an event under 1 µs can get ``dur = -1``);
- reads ``stream`` (-1 when absent) and ``correlation`` (-1 when absent) from args;
- links each GPU kernel and its CPU launch by correlation (``index_correlation``: the other side's
  event index, the last one when several match);
- when the traces hold two or more distinct ``ProfilerStep`` names (all ranks together), keeps per
  rank only the CPU events that start before the last ``ProfilerStep`` starts, and the GPU events
  whose correlation one of those carries (a join: a correlation several kept CPU events carry
  repeats the GPU event once per carrier). GPU events here: ``stream >= 0 and correlation >= 0``, or
  the names ``Event Sync`` and ``Context Sync``.

Whether that step filter applies depends on every rank, yet each rank is read once: ``hta_map`` runs
an analysis's per-rank function with the filter when the rank alone holds two step symbols (then
all ranks do), both ways when it holds fewer, and keeps the answer the symbols of all ranks decide.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..engines.base import Reads, per_rank_slices

# Communication kernels: NCCL's and RCCL's (HTA's rule, ``^nccl.*Kernel``) and oneCCL's SYCL kernels
# (``oneccl_reduce_base<...>`` ...), which HTA does not know.
COMMUNICATION_KERNEL = re.compile(r"(^nccl.*Kernel)|(^oneccl_)")
MEMORY_KERNEL = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(^oneccl_)|(.*(Memcpy)|(Memset))|(.*Sync)")
COMMUNICATION, MEMORY, COMPUTATION, OTHER = "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"
GPU_SYNC_NAMES = ("Event Sync", "Context Sync")
STEP_MARK = "ProfilerStep"
# What a frame is made of: the slices' times, names, categories and the three args HTA reads.
READS = Reads(("slices",), {"slices": ["dur", "stream", "correlation", "memory_bw_gbps"]})


def kernel_type(name: str) -> str:
    """HTA's ``get_kernel_type``, oneCCL's kernels counted as communication too."""
    if COMMUNICATION_KERNEL.match(name):
        return COMMUNICATION
    if MEMORY_KERNEL.match(name):
        return MEMORY
    if not NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def memory_kernel_type(name: str) -> str:
    """HTA's ``get_memory_kernel_type``: "Memcpy DtoH" and the like, "Memset", "Memcpy Unknown"."""
    if name[:6] == "Memset":
        return "Memset"
    if name[:6] != "Memcpy":
        return "Memcpy Unknown"
    return name[:11]


def us(ns: np.ndarray) -> np.ndarray:
    """int64 ns as the double µs the trace's JSON number parses to: whole µs and the ns remainder converted
    apart (ns reach 1e18, beyond a double's exact integers), truncated towards zero as integer division."""
    ns = np.asarray(ns, np.int64)
    whole = np.where(ns < 0, -(-ns // 1000), ns // 1000)
    return whole.astype(np.float64) + (ns - whole * 1000).astype(np.float64) / 1e3


@dataclass
class Frame:
    """One rank's events as HTA's analyses see them, in HTA's row order: ``part`` (0: GPU rows, 1: CPU rows
    when the step filter applies; else 0), then ``idx`` (the event's index in its trace). Times in µs;
    ``name`` and ``cat`` are codes into ``texts`` (one code per distinct text; None: none)."""

    rank: int
    texts: list
    name: np.ndarray
    cat: np.ndarray
    idx: np.ndarray
    part: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    memory_bw: np.ndarray
    index_correlation: np.ndarray  # HTA's, computed over the rank's events before the step filter

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def take(self, rows) -> "Frame":
        return Frame(self.rank, self.texts, *(getattr(self, c)[rows] for c in _ROW_COLUMNS))

    def where(self, column: str, test) -> np.ndarray:
        """Rows whose ``column`` ("name" or "cat") text passes ``test``, decided once per text."""
        return np.array([bool(test(t)) for t in self.texts], bool)[getattr(self, column)]

    def named(self, names: Sequence[str]) -> np.ndarray:
        return self.where("name", names.__contains__)

    def of_types(self, types: Sequence[str]) -> np.ndarray:
        """Rows whose name is a kernel of one of ``types``."""
        return self.where("name", lambda n: n is not None and kernel_type(n) in types)

    @property
    def kernel_types(self) -> np.ndarray:
        """The kernel type of each row's name (object; None for an event without a name)."""
        return np.array([None if n is None else kernel_type(n) for n in self.texts], dtype=object)[self.name]

    def on_streams(self) -> "Frame":
        """The rows with a stream (HTA's GPU kernels, copies and fills)."""
        return self.take(self.stream != -1)


_ROW_COLUMNS = ("name", "cat", "idx", "part", "ts", "dur", "stream", "correlation", "memory_bw", "index_correlation")


def frames(s, rank: int, base_time_ns: int, int_ts: bool) -> tuple[set[str], Callable[[bool, bool], "Frame"]]:
    """One rank's step symbols (HTA's symbol-table test: the distinct names and categories of its kept events
    holding "ProfilerStep"), and ``make(steps_filter, include_last_step)`` giving its frame."""
    canonical: dict = {}  # a store's row groups may hold one text under several ids: codes by text
    code = np.array([canonical.setdefault(t, len(canonical)) for t in [*s.strings, None]], np.int64)
    texts = list(canonical)
    name, cat = code[np.asarray(s.name)], code[np.asarray(s.cat)]  # id -1: the last, None
    keep = np.array([t is not None and t != "Trace" for t in texts], bool)[cat]
    if s.dur_present is not None:
        keep &= np.asarray(s.dur_present, bool)
    rows = np.flatnonzero(keep)
    if len(rows) > 1 and not (np.diff(np.asarray(s.order)[rows]) > 0).all():
        rows = rows[np.argsort(np.asarray(s.order)[rows], kind="stable")]
    name, cat = name[rows], cat[rows]
    ts_us, dur_us = us(np.asarray(s.ts)[rows] - np.int64(base_time_ns)), us(np.asarray(s.dur)[rows])
    if int_ts:
        ts, dur = ts_us, dur_us
    else:
        ts = np.ceil(ts_us)
        dur = np.floor(ts_us + dur_us) - ts
    stream, correlation = _arg(s.ints, "stream", rows, -1), _arg(s.ints, "correlation", rows, -1)
    idx = np.asarray(s.order, np.int64)[rows]
    base = Frame(rank, texts, name, cat, idx, np.zeros(len(rows), np.int64), ts, dur, stream, correlation,
                 _arg(s.floats, "memory_bw_gbps", rows, 0.0), np.zeros(len(rows), np.int64))
    is_gpu = ((stream >= 0) & (correlation >= 0)) | base.named(GPU_SYNC_NAMES)
    base.index_correlation = _index_correlation(idx, correlation, is_gpu)
    used = np.bincount(np.concatenate([name, cat]), minlength=len(texts)) > 0
    symbols = {t for t, u in zip(texts, used.tolist()) if u and t is not None and STEP_MARK in t}
    is_step = base.where("name", lambda n: n is not None and STEP_MARK in n)

    def make(steps_filter: bool, include_last_step: bool) -> Frame:
        if not steps_filter:
            return base
        steps = np.flatnonzero(is_step & ~is_gpu)
        if not len(steps):  # no step on this rank: HTA keeps none of its events
            return base.take(np.zeros(0, np.int64))
        last_start, last_end = base.ts[steps].max(), (base.ts[steps] + base.dur[steps]).max()
        cpu = np.flatnonzero(~is_gpu & ((base.ts <= last_end) if include_last_step else (base.ts < last_start)))
        carried, count = np.unique(base.correlation[cpu], return_counts=True)
        gpu = np.flatnonzero(is_gpu & np.isin(base.correlation, carried))
        repeat = count[np.searchsorted(carried, base.correlation[gpu])]
        out = base.take(np.concatenate([np.repeat(gpu, repeat), cpu]))
        out.part = np.concatenate([np.zeros(int(repeat.sum()), np.int64), np.ones(len(cpu), np.int64)])
        return out

    return symbols, make


def _arg(group: dict, column: str, rows: np.ndarray, default):
    got = group.get(column)
    if got is None:
        return np.full(len(rows), default, np.float64 if isinstance(default, float) else np.int64)
    values, present = got
    return np.where(np.asarray(present, bool)[rows], np.asarray(values)[rows], default)


def _index_correlation(idx: np.ndarray, correlation: np.ndarray, is_gpu: np.ndarray) -> np.ndarray:
    """HTA's index_correlation: the largest index of an event on the other side (CPU/GPU) with the row's
    correlation; else 0 for a row with a correlation and -1 without."""
    out = np.minimum(correlation, 0)
    linked = correlation != -1
    for side in (False, True):  # the rows of one side look up the other side's last index per correlation
        there = np.flatnonzero(linked & (is_gpu != side))
        here = np.flatnonzero(linked & (is_gpu == side))
        if not len(there) or not len(here):
            continue
        keys, inverse = np.unique(correlation[there], return_inverse=True)
        last = np.full(len(keys), np.iinfo(np.int64).min, np.int64)
        np.maximum.at(last, inverse.reshape(-1), idx[there])
        pos = np.minimum(np.searchsorted(keys, correlation[here]), len(keys) - 1)
        found = keys[pos] == correlation[here]
        out[here[found]] = last[pos[found]]
    return out


# ----------------------------------------------------------------------------- running per rank
def _hta_ranks(table, params: dict) -> dict[int, tuple[set[str], dict[bool, Any]]]:
    """Task (``Engine.map``): per rank of the group, its step symbols and the analysis's answer with the step
    filter, without it, or both (``hta_map``)."""
    analysis, options = params["analysis"], params["options"]
    include_last = bool(options.get("include_last_step"))
    out = {}
    for rank, info, s in per_rank_slices(table):
        symbols, make = frames(s, rank, info.base_time_ns, info.ts_kind == "int")
        ways = (True,) if len(symbols) >= 2 else (False, True)
        out[rank] = (symbols, {way: analysis(make(way, include_last), options) for way in ways})
    return out


def hta_map(engine, analysis: Callable[[Frame, dict], Any], options: dict) -> dict[int, Any]:
    """rank -> ``analysis(frame, options)`` of every rank, each with HTA's step filter as all the ranks'
    step symbols decide it (``analysis`` is a module-level function: Ray ships it by reference)."""
    found: dict[int, tuple] = {}
    for part in engine.map(_hta_ranks, {"analysis": analysis, "options": options}, READS):
        found.update(part)
    symbols = set().union(*(s for s, _ in found.values())) if found else set()
    steps_filter = len(symbols) >= 2
    return {rank: ways[steps_filter] for rank, (_, ways) in sorted(found.items())}


# ----------------------------------------------------------------------------- shared arithmetic
def merged_intervals(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's ``merge_kernel_intervals`` of intervals already in HTA's row order (ts, then row): (start, end)
    of each merged group, in time order."""
    if not len(ts):
        return ts, end
    covered = np.maximum.accumulate(end)
    new = np.empty(len(ts), bool)
    new[0] = True
    np.greater(ts[1:], covered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return ts[starts], np.maximum.reduceat(end, starts)


def hta_order(f: Frame) -> np.ndarray:
    """The rows by (ts, part, idx): HTA's time order with its row order breaking ties."""
    return np.lexsort((f.idx, f.part, f.ts))


def state_times(f: Frame, types: Sequence[str]) -> dict[int, float]:
    """HTA's overlap sweep (``_get_gpu_kernel_type_time``): per combination of kernel types running at once
    (a bit mask, bit i for ``types[i]``), the time spent in it. The kernels of each type are merged into
    intervals first; ties at one instant only make zero-length states, which are left out."""
    k = f.on_streams()
    k = k.take(hta_order(k))
    t, d = [], []
    for i, kind in enumerate(types):
        sel = k.of_types((kind,))
        s, e = merged_intervals(k.ts[sel], k.end[sel])
        t += [s, e]
        d += [np.full(len(s), 1 << i, np.int64), np.full(len(e), -(1 << i), np.int64)]
    if not t:
        return {}
    t, d = np.concatenate(t), np.concatenate(d)
    order = np.lexsort((d, t))
    t, state = t[order], np.cumsum(d[order])
    span = np.diff(t)
    keep = (state[:-1] > 0) & (span > 0)
    out: dict[int, float] = {}
    for s, v in zip(state[:-1][keep].tolist(), span[keep].tolist()):
        out[s] = out.get(s, 0.0) + v
    return out


def state_name(state: int, types: Sequence[str]) -> str:
    return " overlapping ".join(t for i, t in enumerate(types) if state & (1 << i))


def describe(values: np.ndarray) -> dict:
    """pandas' ``describe()`` of one column (std with ddof 1, quartiles linearly interpolated)."""
    v = np.asarray(values, np.float64)
    n = len(v)
    q = np.quantile(v, [0.25, 0.5, 0.75]) if n else [np.nan] * 3
    return {"count": n, "mean": float(v.mean()) if n else None, "std": float(v.std(ddof=1)) if n > 1 else None,
            "min": float(v.min()) if n else None, "p25": float(q[0]), "p50": float(q[1]), "p75": float(q[2]),
            "max": float(v.max()) if n else None}


DESCRIBE = ("count", "mean", "std", "min", "p25", "p50", "p75", "max")
