"""The timeline overview of one trace, for the HTML report: its ProfilerStep ranges and, per kind of work, the
time the device was busy with it (merged intervals), from the trace's first event.

Kinds of work: kernels by HTA's kernel type (computation, communication - NCCL's, RCCL's, oneCCL's -, memory,
other; ``cluster.frame.kernel_type``, the one rule), copies and fills; a trace without device work shows its
host ranges and operators instead. Steps are the host's ``ProfilerStep#N`` ranges (the device's copies of
them, ``gpu_user_annotation``, are not steps of their own)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..activity import category_spellings

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
DEVICE_LANES = ("compute kernels", "communication kernels", "memory kernels", "other kernels", "copies", "fills")
HOST_LANES = ("host ranges", "operators")
_KERNEL_LANE = {"COMPUTATION": 0, "COMMUNICATION": 1, "MEMORY": 2, "OTHER": 3}


@dataclass
class Lane:
    """One kind of work: its busy time as disjoint intervals (ns since the timeline's origin, in order)."""

    name: str
    starts: np.ndarray
    ends: np.ndarray
    events: int = 0

    @property
    def busy_ns(self) -> int:
        return int((self.ends - self.starts).sum())

    def busy_between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The busy time inside each window [a, b) (arrays of ns since the origin)."""
        if not len(self.starts):
            return np.zeros(len(a))
        covered = np.r_[0, np.cumsum(self.ends - self.starts)]

        def before(t):
            j = np.searchsorted(self.starts, t, side="right") - 1
            inside = np.clip(t - self.starts[np.maximum(j, 0)], 0, (self.ends - self.starts)[np.maximum(j, 0)])
            return np.where(j < 0, 0, covered[np.maximum(j, 0)] + inside)

        return before(np.asarray(b, np.int64)) - before(np.asarray(a, np.int64))


@dataclass
class StepTimeline:
    source: str  # the trace it shows
    rank: int | None
    span_ns: int  # the origin (the trace's first event) to its last event's end
    step_names: list[str] = field(default_factory=list)
    step_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step_ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lanes: list[Lane] = field(default_factory=list)
    device: bool = True  # lanes of device work (else of host ranges)


def _spelled(*names: str) -> frozenset[str]:
    return frozenset(c for n in names for c in category_spellings(n))


def step_timeline(table, trace: int = 0) -> StepTimeline | None:
    """The timeline of trace ``trace`` of a TraceTable; None when it has no slice."""
    from .cluster.frame import kernel_type
    from .cluster.temporal import merged_intervals

    info = table.traces[trace]
    s = table.columns("slices", trace, keep=False)
    if not len(s):
        return None
    strings = list(s.strings)
    name = np.asarray(s.name, np.int64)
    cat = np.asarray(s.cat, np.int64)
    ts = np.asarray(s.ts, np.int64)
    dur = np.maximum(np.asarray(s.dur, np.int64), 0)
    origin = int(info.first_ts_ns) if info.first_ts_ns is not None else int(ts.min())
    origin = min(origin, int(ts.min()))
    span = int((ts + dur).max()) - origin
    cat_text = [*strings, ""]
    kernels, copies, fills = _spelled("kernel"), _spelled("gpu_memcpy"), _spelled("gpu_memset")
    device_notes = _spelled("gpu_user_annotation")
    # per string id: its lane (-1: none), its step number (-1: not a step name)
    step_no = np.full(len(strings) + 1, -1, np.int64)
    for i, text in enumerate(strings):
        m = _STEP.match(text)
        if m:
            step_no[i] = int(m.group(1))
    cat_kind = np.array([0 if c in kernels else 4 if c in copies else 5 if c in fills else
                         -2 if c in device_notes else -1 for c in cat_text], np.int64)
    lane_of_cat = cat_kind[cat]
    steps = np.flatnonzero((step_no[name] >= 0) & (lane_of_cat != -2))
    device = lane_of_cat >= 0
    out = StepTimeline(str(info.origin), info.rank if info.named else None, span)
    if len(steps):
        order = steps[np.argsort(ts[steps], kind="stable")]
        out.step_names = [strings[i] for i in name[order].tolist()]
        out.step_starts, out.step_ends = ts[order] - origin, ts[order] + dur[order] - origin
    if device.any():
        lane = lane_of_cat.copy()
        is_kernel = np.flatnonzero(lane_of_cat == 0)
        ids = np.unique(name[is_kernel])
        kind = np.full(len(strings) + 1, 3, np.int64)
        for i in ids.tolist():
            kind[i] = _KERNEL_LANE.get(kernel_type(strings[i] if i >= 0 else ""), 3)
        lane[is_kernel] = kind[name[is_kernel]]
        names = DEVICE_LANES
    else:
        out.device = False
        ops, ranges = _spelled("cpu_op"), _spelled("user_annotation")
        host_kind = np.array([1 if c in ops else 0 if c in ranges else -1 for c in cat_text], np.int64)
        lane = host_kind[cat]
        lane[step_no[name] >= 0] = -1
        names = HOST_LANES
    for k, lane_name in enumerate(names):
        rows = np.flatnonzero(lane == k)
        if not len(rows):
            continue
        rows = rows[np.lexsort((rows, ts[rows]))]
        a, b = merged_intervals(ts[rows] - origin, ts[rows] + dur[rows] - origin)
        out.lanes.append(Lane(lane_name, a, b, len(rows)))
    return out
