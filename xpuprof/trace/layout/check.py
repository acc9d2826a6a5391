"""The strict-nesting checker: how many slices of a trace a viewer cannot nest on their track, and whether
two traces hold the same slices (what the tests run over every trace we write).

A slice is *improperly nested* when a viewer's one-stack walk of its (pid, tid) track, in start order
(longer first on a tie), finds it starting inside the innermost open slice and ending after it: what
Perfetto's JSON importer moves to an overflow track (``slice_spill_overlapping_complete_event``, one per
such slice) and Chrome's trace viewer draws over its neighbour.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..table.model import TraceTable
from .apply import _plain
from .lanes import spilled
from .tracks import slice_rows


@dataclass
class NestingReport:
    """``slices`` looked at, ``improper`` of them improperly nested, per track (trace, pid, tid) -> count."""

    slices: int
    improper: int
    tracks: dict = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.improper:
            return f"all {self.slices} slices nest on their tracks"
        worst = sorted(self.tracks.items(), key=lambda kv: -kv[1])[:3]
        where = ", ".join(f"pid {p} tid {t}: {n}" for (_, p, t), n in worst)
        return f"{self.improper} of {self.slices} slices improperly nested ({where})"


def _table(source) -> TraceTable:
    if isinstance(source, TraceTable):
        return source
    if isinstance(source, (str, Path)):
        from ..read.kineto import read_trace

        return read_trace(source)
    return source.freeze()  # a TraceBuilder


def nesting_report(source) -> NestingReport:
    """The checker over a TraceTable, a TraceBuilder or a trace file, as it is (not laid out)."""
    rows = slice_rows(_table(source))
    bad = spilled(rows.track, rows.start, rows.end)
    tracks = Counter(rows.track[bad].tolist())
    return NestingReport(len(bad), int(bad.sum()),
                         {tuple(_plain(k) if i else k for i, k in enumerate(rows.tracks.keys[t])): n
                          for t, n in tracks.items()})


def slice_multiset(source) -> Counter:
    """Every slice as (name, category, ts, dur) in ns: what must survive a layout whatever row it is drawn on."""
    table = _table(source)
    c = table.slices
    names, cats = c.text("name"), c.text("cat")
    dur = np.asarray(c.dur, np.int64)
    if c.dur_present is not None:
        dur = np.where(c.dur_present, dur, -1)
    return Counter(zip(names, cats, np.asarray(c.ts, np.int64).tolist(), dur.tolist()))


__all__ = ["NestingReport", "nesting_report", "slice_multiset"]
