"""The layout pass for a trace read a chunk at a time (``xpuprof convert``: memory bounded by a chunk, not by
the trace): the pass needs every slice of a track at once, so the rows it reads are kept *slim* (where and
when, the category, the two ids a flow binds by; no args text, no names) while they stream to the writer,
and the pass runs on that light table at the end (``SlimRows.plan``). A trace that already nests - the usual
one - was written right in the one pass. Otherwise the result is a ``RowPlan``: the new pid/tid of each row
that moves, by its index in the file (``order``), and the moved slices' ``original tid`` member, which the
writer applies to the rows as it reads the trace a second time (``RowPlan.apply``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..table.columns import COLUMN_SETS, RowText
from ..table.model import FlatSegment, RankInfo, TraceTable
from .apply import _with_member
from .layout import lay_out

_KEEP_INTS = ("external_id", "correlation")  # what a flow binds by and an annotation's thread is found by


def slim(c):
    """A column set without what the layout never reads (args text, typed args other than the two ids)."""
    if c.KIND == "slices":
        return replace(c, ints={k: v for k, v in c.ints.items() if k in _KEEP_INTS}, floats={},
                       args=RowText.empty(len(c)))
    if c.KIND == "instants":
        return replace(c, args=RowText.empty(len(c)))
    return c


class SlimRows:
    """The slim rows of one trace, segment after segment, as they stream by."""

    def __init__(self) -> None:
        self.segments: list[FlatSegment] = []

    def add(self, seg: FlatSegment) -> None:
        self.segments.append(FlatSegment(slim(seg.columns), seg.rank, seg.trace, seg.ts_base))

    def plan(self, info: RankInfo) -> "RowPlan | None":
        """The layout of the rows seen, with the trace's rank table row ``info``: None when nothing moves."""
        before = TraceTable(self.segments, [info])
        after = lay_out(before)
        if after is before:
            return None
        return RowPlan.between(before, after)


@dataclass
class KindPlan:
    """The rows of one kind that move, by ``order``, and where to."""

    order: np.ndarray
    pid: np.ndarray
    pid_text: list  # a row label's text, or None for an int pid
    tid: np.ndarray
    tid_text: list
    member: list  # slices: the "original tid" member's JSON text to splice into the row's args, or None


class RowPlan:
    """What the layout changed, row by row (see the module docstring); ``info``: the trace's rank table row
    laid out (its ``laneLayout``/``idMap`` metadata, the lanes' thread names)."""

    def __init__(self, kinds: dict[str, KindPlan], info: RankInfo, summary) -> None:
        self.kinds, self.info, self.summary = kinds, info, summary

    @classmethod
    def between(cls, before: TraceTable, after: TraceTable) -> "RowPlan":
        parts: dict[str, list] = {}
        for old, new in zip(before.segments, after.segments):
            if new is old:
                continue
            a, b = old.columns, new.columns
            pid_a, pid_b = _where_text(a, "pid"), _where_text(b, "pid")
            tid_a, tid_b = _where_text(a, "tid"), _where_text(b, "tid")
            changed = (pid_a != pid_b) | (tid_a != tid_b)
            rows = np.flatnonzero(changed)
            if not len(rows):
                continue
            member = [None] * len(rows)
            if b.KIND == "slices":
                member = [_member_of(b.args[r]) for r in rows.tolist()]
            parts.setdefault(b.KIND, []).append((np.asarray(b.order)[rows], np.asarray(b.pid)[rows],
                                                 [pid_b[r] if isinstance(pid_b[r], str) else None for r in rows],
                                                 np.asarray(b.tid)[rows],
                                                 [tid_b[r] if isinstance(tid_b[r], str) else None for r in rows],
                                                 member))
        kinds = {}
        for kind, got in parts.items():
            order = np.concatenate([g[0] for g in got])
            first = np.unique(order, return_index=True)[1]  # a counter event's metrics share one order
            cols = [np.concatenate([g[i] for g in got]) if i in (0, 1, 3) else sum((g[i] for g in got), [])
                    for i in range(6)]
            kinds[kind] = KindPlan(cols[0][first], cols[1][first], [cols[2][i] for i in first.tolist()],
                                   cols[3][first], [cols[4][i] for i in first.tolist()],
                                   [cols[5][i] for i in first.tolist()])
        return cls(kinds, after.traces[0], after.layout)

    def apply(self, c):
        """The rows of column set ``c`` (read again from the same file) as the layout placed them."""
        plan = self.kinds.get(c.KIND)
        if plan is None or not len(c):
            return c
        order = np.asarray(c.order)
        pos = np.clip(np.searchsorted(plan.order, order), 0, len(plan.order) - 1)
        hit = np.flatnonzero(plan.order[pos] == order)
        if not len(hit):
            return c
        at = pos[hit]
        labels = list(c.labels)

        def label(text):
            if text not in labels:
                labels.append(text)
            return labels.index(text)

        changes = {}
        for key, ints, texts in (("pid", plan.pid, plan.pid_text), ("tid", plan.tid, plan.tid_text)):
            values = np.array(getattr(c, key), np.int64)
            codes = np.array(getattr(c, f"{key}_label"), np.int32)
            values[hit] = ints[at]
            codes[hit] = [-1 if texts[j] is None else label(texts[j]) for j in at.tolist()]
            changes[key], changes[f"{key}_label"] = values, codes
        changes["labels"] = labels
        if c.KIND == "slices" and any(plan.member[j] is not None for j in at.tolist()):
            texts = [c.args[i] for i in range(len(c))]
            for r, j in zip(hit.tolist(), at.tolist()):
                if plan.member[j] is not None:
                    texts[r] = _with_member(texts[r], plan.member[j])
            changes["args"] = RowText.from_rows(texts)
        return replace(c, **changes)


def _where_text(c, key: str) -> np.ndarray:
    """A pid/tid column as objects: the int, the label's text, or None for an event without one."""
    return np.array(c.where(key), dtype=object)


def _member_of(args: bytes | None) -> bytes | None:
    """The "original tid" member of a slim row's args (the only member a slim row can have)."""
    if not args or len(args) <= 2:
        return None
    return args.strip()[1:-1]


assert set(COLUMN_SETS) == {"slices", "counters", "flows", "instants"}
__all__ = ["KindPlan", "RowPlan", "SlimRows", "slim"]
