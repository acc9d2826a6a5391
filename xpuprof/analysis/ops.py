"""Operators grouped by name, as torch's ``prof.key_averages().table()`` shows them.

Per op name (an op that is its same-named parent's only child merges into it, as torch does): calls,
self and total host time (self = the op's time minus its direct children's on
the same thread), self and total device time (kernels, copies and fills whose External id is the
op's; total adds every op nested inside). Built from a ``TraceBuilder`` (``key_averages(group_by=
"op")``) or from trace events (``xpuprof report --by op``), vectorized: parents come from the
interval join (``trace.builder.intervals``), device time by External id through one sorted lookup.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..trace.builder.intervals import parents
from .summary import format_ns, unique_inverse

OP_CATEGORIES = ("cpu_op", "user_annotation")
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COLUMNS = ("name", "calls", "self_host", "host_total", "host_avg", "self_device", "device_total", "device_avg")
# torch's sort keys (key_averages().table(sort_by=...)) and short forms.
_SORT_ALIASES = {
    "count": "calls", "self_cpu_time_total": "self_host", "cpu_time_total": "host_total", "cpu_time": "host_avg",
    "self_cuda_time_total": "self_device", "self_xpu_time_total": "self_device",
    "self_device_time_total": "self_device", "cuda_time_total": "device_total", "xpu_time_total": "device_total",
    "device_time_total": "device_total", "cuda_time": "device_avg", "xpu_time": "device_avg",
    "device_time": "device_avg", "total": "host_total", "self": "self_host",
}


@dataclass
class OpRow:
    name: str
    calls: int
    self_host_ns: float
    host_total_ns: float
    self_device_ns: float
    device_total_ns: float

    def value(self, column: str):
        return {"name": self.name, "calls": self.calls, "self_host": self.self_host_ns,
                "host_total": self.host_total_ns, "host_avg": self.host_total_ns / self.calls,
                "self_device": self.self_device_ns, "device_total": self.device_total_ns,
                "device_avg": self.device_total_ns / self.calls}[column]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "calls": self.calls, "self_host_ns": self.self_host_ns,
                "host_total_ns": self.host_total_ns, "self_device_ns": self.self_device_ns,
                "device_total_ns": self.device_total_ns}


def _merge_same_name_only_children(parent: np.ndarray, codes: np.ndarray, self_dev: np.ndarray) -> np.ndarray:
    """torch's key_averages merges an op into its parent when the parent has the same name and no other
    child (``aten::div_`` calling ``aten::div_``): the child's children and kernels move up. Updates
    ``parent`` and ``self_dev`` in place; returns the mask of ops kept."""
    alive = np.ones(len(parent), bool)
    while True:
        has_parent = alive & (parent >= 0)
        nchild = np.bincount(parent[has_parent], minlength=len(parent)) if len(parent) else np.zeros(0, np.int64)
        p = np.where(has_parent, parent, 0)
        dup = has_parent & (codes[p] == codes) & (nchild[p] == 1)
        dup &= ~dup[p]  # a chain of same-named ops merges one link per pass (its top stays)
        if not dup.any():
            return alive
        gone = np.flatnonzero(dup)
        np.add.at(self_dev, parent[gone], self_dev[gone])
        alive[gone] = False
        up = np.full(len(parent), -1, np.int64)
        up[gone] = parent[gone]
        moved = (parent >= 0) & dup[np.maximum(parent, 0)]  # children of a merged op now hang on its parent
        parent[moved] = up[parent[moved]]


class OpSummary:
    """Ops grouped by name; ``table()`` renders it, ``rows()``/``to_dicts()`` give the numbers."""

    def __init__(self, names: Sequence[str], tid: np.ndarray, ts: np.ndarray, dur: np.ndarray, ext: np.ndarray,
                 dev_ext: np.ndarray, dev_dur: np.ndarray) -> None:
        ts, dur = np.asarray(ts, np.int64), np.maximum(np.asarray(dur, np.int64), 0)
        ext, dev_ext, dev_dur = np.asarray(ext, np.int64), np.asarray(dev_ext, np.int64), np.asarray(dev_dur, np.float64)
        n = len(ts)
        parent, depth = parents(np.asarray(tid, np.int64), ts, ts + dur)
        uniq, codes = unique_inverse(np.asarray(names, dtype=object)) if n else (np.zeros(0, object),
                                                                                 np.zeros(0, np.int64))
        # Device time per External id (ids 0 link nothing), then per op: its own.
        self_dev = np.zeros(n)
        if n and len(dev_ext):
            linked = dev_ext > 0
            ids, inv = np.unique(dev_ext[linked], return_inverse=True)
            if len(ids):
                per_id = np.bincount(inv, weights=dev_dur[linked], minlength=len(ids))
                pos = np.minimum(np.searchsorted(ids, ext), len(ids) - 1)
                hit = (ext > 0) & (ids[pos] == ext)
                self_dev[hit] = per_id[pos[hit]]
        alive = _merge_same_name_only_children(parent, codes, self_dev)
        has_parent = alive & (parent >= 0)
        child_host = np.bincount(parent[has_parent], weights=dur[has_parent], minlength=n) if n else np.zeros(0)
        self_host = dur - child_host
        total_dev = self_dev.copy()
        for d in range(int(depth.max()) if n else 0, 1, -1):  # children before parents, one level at a time
            level = np.flatnonzero((depth == d) & has_parent)
            np.add.at(total_dev, parent[level], total_dev[level])
        self._rows: list[OpRow] = []
        if n:
            k, live = len(uniq), codes[alive]
            calls = np.bincount(live, minlength=k)
            sums = [np.bincount(live, weights=w[alive], minlength=k) for w in (self_host, dur, self_dev, total_dev)]
            for i, name in enumerate(uniq.tolist()):
                if calls[i]:
                    self._rows.append(OpRow(str(name), int(calls[i]), *(float(s[i]) for s in sums)))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_builder(cls, builder) -> "OpSummary":
        builder.flush()
        strings = np.array(builder.strings.strings, dtype=object)
        want = {builder.strings.intern(c) for c in OP_CATEGORIES}
        dev = {builder.strings.intern(c) for c in DEVICE_CATEGORIES}
        cols: dict[str, list] = {k: [] for k in ("name", "tid", "ts", "dur", "ext")}
        dev_ext, dev_dur = [], []
        for b in builder.slices:
            m = np.isin(b.cat, list(want))
            if m.any():
                try:
                    tid = b.tid[m].astype(np.int64)
                except (TypeError, ValueError):  # rows named by strings are not host threads
                    tid = None
                if tid is not None:
                    cols["name"].append(strings[b.name[m]])
                    cols["tid"].append(tid)
                    cols["ts"].append(b.ts[m])
                    cols["dur"].append(b.dur[m])
                    cols["ext"].append(b.external_id[m])
            d = np.isin(b.cat, list(dev))
            if d.any():
                dev_ext.append(b.external_id[d])
                dev_dur.append(b.dur[d])
        cat = {k: np.concatenate(v) if v else np.zeros(0, object if k == "name" else np.int64) for k, v in cols.items()}
        return cls(cat["name"], cat["tid"], cat["ts"], cat["dur"], cat["ext"],
                   np.concatenate(dev_ext) if dev_ext else np.zeros(0, np.int64),
                   np.concatenate(dev_dur) if dev_dur else np.zeros(0, np.int64))

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> "OpSummary":
        """From Chrome trace events (``ts``/``dur`` in µs), e.g. ``xpuprof.trace.read.load.events(path)``."""
        names, tid, ts, dur, ext, dev_ext, dev_dur = [], [], [], [], [], [], []
        for ev in events:
            if ev.get("ph") != "X":
                continue
            cat = ev.get("cat")
            if not isinstance(cat, str):
                continue
            if cat in OP_CATEGORIES and isinstance(ev.get("tid"), int) and abs(ev["tid"]) < 2**63:
                names.append(str(ev.get("name", "")))
                tid.append(ev["tid"])
                ts.append(_micros(ev, "ts", 0.0))
                dur.append(_micros(ev, "dur", 0.0))
                ext.append(_external_id(ev))
            elif cat in DEVICE_CATEGORIES:
                dev_ext.append(_external_id(ev))
                dev_dur.append(_micros(ev, "dur", 0.0))
        us = lambda v: np.rint(np.asarray(v, np.float64) * 1000).astype(np.int64)  # noqa: E731
        return cls(names, np.asarray(tid, np.int64), us(ts), us(dur), np.asarray(ext, np.int64),
                   np.asarray(dev_ext, np.int64), us(dev_dur))

    # ------------------------------------------------------------------ reading
    def _column(self, sort_by: str) -> str:
        key = str(sort_by).strip().lower()
        key = _SORT_ALIASES.get(key, key)
        if key not in COLUMNS:
            raise ValueError(f"cannot sort ops by {sort_by!r}. Valid: {', '.join(COLUMNS)} (or torch's names: "
                             f"{', '.join(sorted(_SORT_ALIASES))})")
        return key

    def rows(self, sort_by: str = "host_total") -> list[OpRow]:
        col = self._column(sort_by)
        if col == "name":
            return sorted(self._rows, key=lambda r: r.name)
        return sorted(self._rows, key=lambda r: (-r.value(col), r.name))

    def to_dicts(self, sort_by: str = "host_total") -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows(sort_by)]

    def __len__(self) -> int:
        return len(self._rows)

    def table(self, sort_by: str = "host_total", row_limit: int | None = None, width: int | None = None) -> str:
        """torch's key_averages table: self/total host time and self/total device time per op name."""
        from .text import Column, render_table

        rows = self.rows(sort_by)
        if not rows:
            return "(no operators recorded: profile torch code with 'cpu_op' in activities)\n"
        shown = rows[:row_limit] if row_limit and row_limit > 0 else rows
        host_sum = sum(r.self_host_ns for r in rows) or 1.0
        dev_sum = sum(r.self_device_ns for r in rows) or 1.0
        title = f"Operators: {len(rows)} names, {sum(r.calls for r in rows)} calls"
        if len(shown) < len(rows):
            title += f" (top {len(shown)} by {sort_by})"
        columns = [Column("Name", "left", shrink=True, min_width=24)] + [Column(h) for h in (
            "Self Host %", "Self Host", "Host Total", "Host Avg", "Self Device", "Self Device %", "Device Total",
            "Device Avg", "Calls")]
        cells = [[r.name, f"{100 * r.self_host_ns / host_sum:.2f}%", format_ns(r.self_host_ns),
                  format_ns(r.host_total_ns), format_ns(r.host_total_ns / r.calls), format_ns(r.self_device_ns),
                  f"{100 * r.self_device_ns / dev_sum:.2f}%", format_ns(r.device_total_ns),
                  format_ns(r.device_total_ns / r.calls), str(r.calls)] for r in shown]
        return (render_table(columns, cells, title=title, width=width)
                + f"Self host time total: {format_ns(host_sum)}; self device time total: "
                  f"{format_ns(dev_sum if any(r.self_device_ns for r in rows) else 0)}\n")

    def __str__(self) -> str:
        return self.table()


MAX_MICROS = 2**62 / 1000  # times the int64 ns columns hold


def _micros(ev: Mapping[str, Any], key: str, default: float) -> float:
    """A time field (µs) as a float; ``ValueError`` naming the event when it is not a usable time."""
    v = ev.get(key, default)
    if v is None:
        return default
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = math.nan
    if not abs(f) < MAX_MICROS:
        raise ValueError(f"event {str(ev.get('name', ''))[:80]!r} has {key} {v!r}, which is not a time a trace can hold "
                         f"(a finite number of microseconds below {MAX_MICROS:.3g} in magnitude)"[:300])
    return f


def _external_id(ev: Mapping[str, Any]) -> int:
    args = ev.get("args")
    v = args.get("External id") if isinstance(args, dict) else None
    return v if type(v) is int and 0 <= v < 2**63 else 0
