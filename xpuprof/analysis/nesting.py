"""Self time of nested ranges: a range's duration minus the ranges directly inside it on its thread.

Host ranges and ops nest (``ProfilerStep#3`` holds ``forward`` holds ``aten::mm``), so adding their
durations counts a nested second once per level; their self times add up to the time the ranges
cover. Most traces of plain ``record_function`` loops do not nest at all: that is checked first
with one sort, and the interval join (``trace.builder.intervals.parents``) runs only when some range
starts inside another.
"""
from __future__ import annotations

import numpy as np

from ..trace.builder.intervals import parents


def self_times(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """int64 self time per range: ``dur`` minus the durations of its direct children (never below 0)."""
    thread, start = np.asarray(thread, np.int64), np.asarray(start, np.int64)
    dur = np.maximum(np.asarray(dur, np.int64), 0)
    if len(dur) < 2 or not _any_nesting(thread, start, dur):
        return dur.copy()
    parent, _ = parents(thread, start, start + dur)
    nested = parent >= 0
    children = np.bincount(parent[nested], weights=dur[nested], minlength=len(dur))
    return np.maximum(dur - children.astype(np.int64), 0)


def _any_nesting(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> bool:
    """Whether some range starts before an earlier range on its thread has ended."""
    order = np.lexsort((-dur, start, thread))
    th, s = thread[order], start[order]
    end = s + dur[order]
    reach = np.maximum.accumulate(end)  # crosses threads; the check below only looks within one
    same_thread = th[1:] == th[:-1]
    return bool((same_thread & (s[1:] < reach[:-1])).any())
