"""Merge per-rank traces into one: every rank gets its own process rows (pids remapped, names
prefixed ``[rank r]``), flow ids stay unique, and all clocks are put on one reference.

Read -> table -> write, like every command: each rank is read by the one reader (``trace.read.inputs``: the
files ``report DIR`` reads, Kineto JSON or Perfetto protobuf), laid out (``trace.layout``: a rank trace
torch.profiler wrote may hold slices that do not nest), and its rows become the merged view's rows as columns
(pids, times, flow ids and file order rewritten in numpy, no object per event); the view is one TraceTable
that the writers render (Kineto JSON, ``.json.gz``, or Perfetto protobuf when the output is named
``.pftrace``).

Pids: ``trace.ids.merged_pid_assignment``, the one place they are given (in range for any number of ranks;
the view's ``mergedRanks`` says each pid's rank and original pid).

Alignment (``align``):
- ``epoch``: trust each file's absolute clock (``baseTimeNanoseconds`` + ts): ranks on one host
  or on hosts with synchronized clocks.
- ``start``: each rank's first event is moved to the same instant (unsynchronized hosts).
- ``step``: each rank's first ``ProfilerStep#`` annotation starts at the same instant (ranks that
  start collecting at different times but step in lockstep).
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..progress import bar
from ..trace import ids
from ..trace.read.inputs import InputsError, expand_inputs, read_inputs
from ..trace.read.kineto import time_error
from ..trace.read.source import TraceLoadError
from ..trace.table.columns import COLUMN_SETS, KINDS, InstantColumns, RowText
from ..trace.table.model import FlatSegment, RankInfo, TraceTable

ALIGN_MODES = ("epoch", "start", "step")
FLOW_ID_STRIDE = 1 << 40
WINDOW_END = "Record Window End"
_STEP = re.compile(r"^ProfilerStep#\d+")
RANK_TRACE_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$")


class MergeError(ValueError):
    """Rank traces that cannot be merged (duplicate ranks, no step to align on ...)."""


@dataclass
class MergeInfo:
    path: Path
    ranks: list[int]
    shifts_ns: dict[int, int]  # rank -> ns added to its events relative to its own clock
    events: int
    note: str = ""  # said to the user once (CLI: stderr; API: a MergeWarning)


class MergeWarning(UserWarning):
    """A merged view was written where a per-rank tool will misread it."""


def placement_note(out: Path) -> str:
    """Why ``out`` is in the way of HTA, or "" when it is not. HTA's ``TraceAnalysis(trace_dir=...)``
    reads EVERY *.json / *.gz in the directory as a rank (a file without ``"rank": N`` counts as rank
    0), whatever its name: a merged view beside rank traces takes rank 0's place or collides with it."""
    out = Path(out)
    beside = sorted(p.name for p in out.parent.iterdir() if p != out and RANK_TRACE_NAME.search(p.name))
    if not beside:
        return ""
    return (f"{out} sits beside {len(beside)} rank trace(s) in {out.parent} (e.g. {beside[0]}): HTA's "
            f"TraceAnalysis(trace_dir=...) reads every .json/.gz there as a rank and would take this merged view "
            f"for rank 0; give HTA a directory holding only the rank traces, or write the merged view elsewhere "
            f"(TensorBoard skips it: not *.pt.trace.json)")


def _check_output_name(out) -> None:
    if RANK_TRACE_NAME.search(Path(out).name):
        # TensorBoard parses every *.pt.trace.json* in a logdir as one rank's trace (a merged file made its
        # overview divide by zero) and HTA reads one rank per file: a merged view must not look like one.
        stem = RANK_TRACE_NAME.sub("", Path(out).name)
        stem = stem[:-len(".merged")] if stem.endswith(".merged") else stem  # job.merged.pt.trace.json: job.merged.json
        raise MergeError(f"{out}: a merged view must not be named like a rank trace (*.pt.trace.json[.gz]), or "
                         f"TensorBoard and HTA read it as one; name it e.g. {stem}.merged.json")


def read_ranks(paths: Sequence[str | Path]) -> TraceTable:
    """The rank traces the paths stand for (the one directory rule), one trace each in the table, each checked
    the way every command checks a trace's times; a merged view or a store given is refused."""
    try:
        files = expand_inputs(paths)
    except InputsError as exc:
        raise MergeError(str(exc)) from None
    if files.stores:
        raise MergeError(f"{files.stores[0]} is a trace store; merge reads trace files")
    try:
        table = read_inputs(paths, inputs=files)
    except (TraceLoadError, ValueError) as exc:
        raise MergeError(str(exc)) from None
    for info in table.traces:
        bad = time_error(info)
        if bad:
            raise MergeError(f"{info.origin}: {bad}")
        if info.merged_ranks:
            raise MergeError(f"{info.origin} is a merged view already (ranks {info.merged_ranks}); merge the rank "
                             f"traces it was made of")
    return table


def _assign_ranks(table: TraceTable) -> list[int]:
    """Each trace's rank: the one it names, else its position among the inputs (the reader's rule)."""
    ranks = [info.rank for info in table.traces]
    dup = sorted({r for r in ranks if ranks.count(r) > 1})
    if dup:
        raise MergeError(f"several input traces claim rank(s) {dup}: "
                         + "; ".join(f"{info.origin} -> {r}" for info, r in zip(table.traces, ranks) if r in dup))
    return ranks


def merge_traces(paths: Sequence[str | Path], out: str | Path, *, align: str = "epoch") -> MergeInfo:
    """Write the merged trace to ``out`` (``.json``, ``.json.gz``, or ``.pftrace`` for Perfetto protobuf)."""
    if align not in ALIGN_MODES:
        raise MergeError(f"unknown alignment {align!r}; valid: {', '.join(ALIGN_MODES)}")
    _check_output_name(out)
    from ..trace.layout.layout import lay_out
    from ..trace.write.files import write_trace

    table = read_ranks(paths)
    ranks = _assign_ranks(table)
    try:
        table = lay_out(table)  # each rank's rows on tracks they nest on, its ids in range (per trace)
        view = merged_table(table, ranks, align)
    except ValueError as exc:
        raise MergeError(str(exc)) from None
    out = Path(out)
    write_trace(view, out, trace_name=str(out))
    shifts = {int(r): int(s) for r, s in view.traces[0].header["mergedRanks"]["shift_ns"].items()}
    info = MergeInfo(out, sorted(ranks), shifts, view.traces[0].events, placement_note(out))
    if info.note:
        warnings.warn(info.note, MergeWarning, stacklevel=2)
    return info


# ----------------------------------------------------------------------------- the merged view
def merged_table(table: TraceTable, ranks: list[int], align: str = "epoch") -> TraceTable:
    """One trace of the laid-out rank traces in ``table`` (``ranks``: each trace's rank): the merged view
    the writers render (see the module docstring)."""
    parts: dict = {}
    for seg in table.segments:  # each trace's rows of each kind (one pass: 1,000 ranks are 4,000 groups)
        parts.setdefault((seg.trace, seg.kind), []).append(seg.flat())
    per = {t: {k: COLUMN_SETS[k].concat(parts.get((t, k), [])) for k in KINDS} for t in range(len(table.traces))}
    processes = {ranks[t]: rank_processes(info, per[t]) for t, info in enumerate(table.traces)}
    pids, stride = ids.merged_pid_assignment(processes)
    anchors = {ranks[t]: _anchor_ns(info, per[t], ranks[t], align) for t, info in enumerate(table.traces)}
    ref = min(anchors.values())
    shifts = {r: 0 if align == "epoch" else ref - a for r, a in anchors.items()}
    base_ns = min(info.base_time_ns for info in table.traces)

    segments: list[FlatSegment] = []
    meta: list = []
    meta_order: list[int] = []
    device_props: list = []
    offset, end_ns, first_ns, events = 0, base_ns, None, 0
    with bar("merging", len(table.traces), unit="ranks") as shown:
        for t in sorted(range(len(table.traces)), key=lambda t: ranks[t]):
            info, rank = table.traces[t], ranks[t]
            prefix, own, own_order = _rank_metadata(info, rank, pids[rank])
            start = offset + len(prefix)
            meta += prefix + own
            meta_order += list(range(offset, start)) + [start + o for o in own_order]
            span = max(own_order, default=-1) + 1
            for kind in KINDS:
                c = _rank_rows(per[t][kind], rank, shifts[rank], base_ns, pids[rank], start)
                if not len(c):
                    continue
                segments.append(FlatSegment(c, rank, 0))
                span = max(span, int(np.max(c.order)) - start + 1)
                ends = np.asarray(c.ts) + (np.maximum(np.asarray(c.dur), 0) if kind == "slices" else 0)
                end_ns = max(end_ns, int(ends.max()))
                first_ns = int(np.min(c.ts)) if first_ns is None else min(first_ns, int(np.min(c.ts)))
                events += len(np.unique(c.order)) if kind == "counters" else len(c)
            for props in info.header.get("deviceProperties") or []:
                device_props.append({**props, "rank": rank} if isinstance(props, dict) else props)
            offset = start + span
            shown.advance()
    segments.append(FlatSegment(_window_end(end_ns, offset), -1, 0))
    events += len(meta) + 1

    from ..trace.layout.layout import IDS_KEY, LANES_KEY

    lanes = {ranks[t]: {k: h[k] for k in (LANES_KEY, IDS_KEY) if k in h} for t, h in enumerate(i.header for i in table.traces)}
    world = {h.get("distributedInfo", {}).get("world_size") for h in (i.header for i in table.traces)
             if isinstance(h.get("distributedInfo"), dict)} - {None}
    # No top-level "rank" key: HTA would read the merged file as rank 0 of a job.
    header = {"schemaVersion": 1, "deviceProperties": device_props,
              "mergedRanks": {"ranks": ranks, "world_size": max(world) if world else len(ranks), "align": align,
                              "shift_ns": {str(r): s for r, s in shifts.items()},
                              "sources": [info.origin for info in table.traces], "pid_stride": stride,
                              "pids": ids.merged_pid_table({new: (r, old) for r, got in pids.items()
                                                            for old, new in got.items()}),
                              **({"layout": {str(r): lanes[r] for r in sorted(lanes) if lanes[r]}}
                                 if any(lanes.values()) else {})},
              "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns}
    view = RankInfo(-1, "merged view", header=header, metadata_events=meta, base_time_ns=base_ns,
                    first_ts_ns=first_ns, sources=[info.origin for info in table.traces])
    view.merged_ranks, view.metadata_order, view.events = sorted(ranks), meta_order, events
    return TraceTable(segments, [view], vendor_categories=table.vendor_categories)


def _pid_key(v):
    """A pid as the merged view's pid table keys it (an int or a row label); None for none ("" included: the
    closing instant's)."""
    if isinstance(v, bool) or not isinstance(v, (int, str)) or v == "":
        return None
    return v


def rank_processes(info: RankInfo, cols: dict) -> list[tuple]:
    """A rank's processes as ``trace.ids.merged_pid_assignment`` takes them: (pid, its process_sort_index or
    None) for each pid its events name, in the order they first appear in the file."""
    first: dict = {}
    sort: dict = {}

    def seen(pid, at: int) -> None:
        if _pid_key(pid) is not None:
            first[pid] = min(first.get(pid, at), at)

    orders = info.metadata_order if info.metadata_order is not None else [-1] * len(info.metadata_events)
    for at, ev in zip(orders, info.metadata_events):
        seen(ev.get("pid"), at)
        idx = (ev.get("args") or {}).get("sort_index") if ev.get("name") == "process_sort_index" else None
        if isinstance(idx, int) and not isinstance(idx, bool) and _pid_key(ev.get("pid")) is not None:
            sort.setdefault(ev["pid"], idx)
    for c in cols.values():
        code, order = np.asarray(c.pid_label), np.asarray(c.order, np.int64)
        for rows, keys, value in ((code == -1, np.asarray(c.pid, np.int64), int), (code >= 0, code, c.labels.__getitem__)):
            if rows.any():  # each distinct pid's first row (the least order)
                by = np.lexsort((order[rows], keys[rows]))
                k, o = keys[rows][by], order[rows][by]
                head = np.concatenate([[True], k[1:] != k[:-1]])
                for key, at in zip(k[head].tolist(), o[head].tolist()):
                    seen(value(key), at)
    return [(pid, sort.get(pid)) for pid in sorted(first, key=lambda p: first[p])]


def _anchor_ns(info: RankInfo, cols: dict, rank: int, align: str) -> int:
    """The instant a rank is aligned on: its first timed event, or its first ``ProfilerStep#`` slice."""
    s, f, i = cols["slices"], cols["flows"], cols["instants"]
    if align == "step":
        steps = np.asarray(s.ts)[_names(s, lambda n: bool(_STEP.match(n)))]
        if not len(steps):
            raise MergeError(f"{info.origin}: rank {rank} has no ProfilerStep# annotation to align on; "
                             "use --align epoch or --align start")
        return int(steps.min())
    times = [np.asarray(s.ts), np.asarray(cols["counters"].ts), np.asarray(i.ts)[_names(i, WINDOW_END.__ne__)],
             np.asarray(f.ts)[np.isin(np.asarray(f.phase), (ord("s"), ord("f")))]]
    times = [t for t in times if len(t)]
    if not times:
        raise MergeError(f"{info.origin}: rank {rank} has no timed events")
    return int(min(t.min() for t in times))


def _names(c, keep) -> np.ndarray:
    """Which rows' names satisfy ``keep`` (a row without a name: its name read as "")."""
    return np.array([bool(keep(n)) for n in c.strings] + [bool(keep(""))], bool)[np.asarray(c.name)]


def _rank_rows(c, rank: int, shift_ns: int, base_ns: int, pid_map: dict, start: int):
    """A rank's rows of one kind as the merged view holds them: its pids remapped, times shifted (clamped at
    the view's base time), flow ids made unique, the file order after the ranks before it."""
    if c.KIND == "instants":
        c = c.take(_names(c, WINDOW_END.__ne__))  # one closing instant for the view
    if not len(c):
        return c
    code, pid = np.asarray(c.pid_label).astype(np.int32), np.asarray(c.pid, np.int64).copy()
    ints = np.flatnonzero(code == -1)
    if len(ints):
        got, back = np.unique(pid[ints], return_inverse=True)
        pid[ints] = np.array([pid_map.get(k, k) for k in got.tolist()], np.int64)[back]
    by_label = np.array([pid_map.get(lb, -1) if _pid_key(lb) is not None else -1 for lb in c.labels] + [-1], np.int64)
    new = by_label[np.where(code >= 0, code, len(c.labels))]  # rows of no label (an int pid, none): -1
    pid, code = np.where(new >= 0, new, pid), np.where(new >= 0, -1, code).astype(np.int32)
    changes = {"pid": pid, "pid_label": code, "rank": np.full(len(c), rank, np.int32),
               "ts": np.maximum(np.asarray(c.ts, np.int64) + np.int64(shift_ns), np.int64(base_ns)),
               "order": np.asarray(c.order, np.int64) + np.int64(start)}
    if c.KIND == "flows":
        fid = np.asarray(c.flow_id, np.int64)
        changes["flow_id"] = np.where(np.asarray(c.id_label) == -1, fid + np.int64(rank) * FLOW_ID_STRIDE, fid)
    return replace(c, **changes)


def _rank_metadata(info: RankInfo, rank: int, pid_map: dict) -> tuple[list, list, list]:
    """(rows put before the rank's own, the rank's metadata rows remapped, each one's order in its file).
    Process names say the rank; each process has one labels row ("rank N" and its own labels: a second row
    would replace the first in viewers); process sort indexes keep ranks in order, each rank's processes in
    their own order; a process without a name row of its own (the Spans rows) still says its rank."""
    named: set = set()
    labels: dict = {}
    own, order = [], []
    orders = info.metadata_order if info.metadata_order is not None else [-1] * len(info.metadata_events)
    for at, ev in zip(orders, info.metadata_events):
        ev = dict(ev)
        original = _pid_key(ev.get("pid"))
        if original is not None:
            ev["pid"] = pid_map.get(original, original)
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            if ev.get("name") == "process_name":
                named.add(original)
                ev["args"] = {**args, "name": f"[rank {rank}] {args.get('name', original)}"}
            elif ev.get("name") == "process_labels":
                labels[original] = str(args.get("labels", ""))
                continue
            elif ev.get("name") == "process_sort_index":
                ev["args"] = {"sort_index": ev["pid"]}
        own.append(ev)
        order.append(at)
    prefix: list = []
    for original, new in pid_map.items():
        if original not in named:
            label = f"[rank {rank}] {'process ' + str(original) if isinstance(original, int) else original}"
            prefix.insert(0, {"ph": "M", "name": "process_name", "ts": 0, "pid": new, "tid": 0, "args": {"name": label}})
        prefix.insert(0, {"ph": "M", "name": "process_labels", "ts": 0, "pid": new, "tid": 0,
                          "args": {"labels": ",".join(filter(None, (f"rank {rank}", labels.get(original))))}})
    return prefix, own, order


def _window_end(end_ns: int, order: int) -> InstantColumns:
    """The view's one closing instant, at the end of its last event."""
    one = np.zeros(1, np.int64)
    return InstantColumns(strings=[WINDOW_END], labels=[""], rank=np.full(1, -1, np.int32),
                          order=np.full(1, order, np.int64), ts=np.full(1, end_ns, np.int64), pid=one,
                          pid_label=np.zeros(1, np.int32), tid=one, tid_label=np.zeros(1, np.int32),
                          name=np.zeros(1, np.int32), cat=np.full(1, -1, np.int32),
                          scope=np.full(1, ord("g"), np.uint8), args=RowText.empty(1))
