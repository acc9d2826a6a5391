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
    the writers render (see the module docstring). The rows of each kind are remapped once over all ranks
    (one column set per kind, each row's trace index telling its rank): 1,000 small ranks cost a few numpy
    passes, not 4,000 small ones."""
    cols, trace_of = _kind_columns(table)
    firsts = _first_rows(cols, trace_of)
    processes = {ranks[t]: rank_processes(info, firsts.get(t, {})) for t, info in enumerate(table.traces)}
    pids, stride = ids.merged_pid_assignment(processes)
    anchors = _anchors_ns(table, cols, trace_of, ranks, align)
    ref = min(anchors.values())
    shifts = {r: 0 if align == "epoch" else ref - a for r, a in anchors.items()}
    base_ns = min(info.base_time_ns for info in table.traces)

    keep = _names(cols["instants"], WINDOW_END.__ne__)  # one closing instant for the view
    cols["instants"], trace_of["instants"] = cols["instants"].take(keep), trace_of["instants"][keep]
    last_order = np.full(len(table.traces), -1, np.int64)  # each trace's last row in its file
    for kind in KINDS:
        np.maximum.at(last_order, trace_of[kind], np.asarray(cols[kind].order, np.int64))

    meta: list = []
    meta_order: list[int] = []
    device_props: list = []
    starts = np.zeros(len(table.traces), np.int64)
    offset = 0
    with bar("merging", len(table.traces), unit="ranks") as shown:
        for t in sorted(range(len(table.traces)), key=lambda t: ranks[t]):
            info, rank = table.traces[t], ranks[t]
            prefix, own, own_order = _rank_metadata(info, rank, pids[rank])
            start = offset + len(prefix)
            meta += prefix + own
            meta_order += list(range(offset, start)) + [start + o for o in own_order]
            starts[t] = start
            for props in info.header.get("deviceProperties") or []:
                device_props.append({**props, "rank": rank} if isinstance(props, dict) else props)
            offset = start + max(max(own_order, default=-1), int(last_order[t])) + 1
            shown.advance()

    per_trace = {"rank": np.array(ranks, np.int64), "shift": np.array([shifts[r] for r in ranks], np.int64),
                 "start": starts}
    segments: list[FlatSegment] = []
    end_ns, first_ns, events = base_ns, None, 0
    for kind in KINDS:
        c = _remapped_rows(cols[kind], trace_of[kind], per_trace, pids, ranks, base_ns)
        if not len(c):
            continue
        segments.append(FlatSegment(c, -1, 0))
        ends = np.asarray(c.ts) + (np.maximum(np.asarray(c.dur), 0) if kind == "slices" else 0)
        end_ns = max(end_ns, int(ends.max()))
        first_ns = int(np.min(c.ts)) if first_ns is None else min(first_ns, int(np.min(c.ts)))
        events += len(np.unique(c.order)) if kind == "counters" else len(c)  # a counter event: a row per value
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


def _kind_columns(table: TraceTable) -> tuple[dict, dict]:
    """Every row of each kind as one column set (epoch times), and each row's trace index."""
    cols, trace_of = {}, {}
    for kind in KINDS:
        segs = [s for s in table.segments if s.kind == kind and len(s)]
        cols[kind] = COLUMN_SETS[kind].concat([s.flat() for s in segs])
        trace_of[kind] = np.repeat(np.array([s.trace for s in segs], np.int64), [len(s) for s in segs])
    return cols, trace_of


def _first_rows(cols: dict, trace_of: dict) -> dict[int, dict]:
    """trace -> {pid (an int, or a row label): the least file order of its rows}."""
    first: dict[int, dict] = {}
    for kind, c in cols.items():
        code, order, tr = np.asarray(c.pid_label), np.asarray(c.order, np.int64), trace_of[kind]
        for rows, keys, value in ((code == -1, np.asarray(c.pid, np.int64), None), (code >= 0, code, c.labels)):
            if not rows.any():
                continue
            t, k, o = tr[rows], np.asarray(keys)[rows], order[rows]
            by = np.lexsort((o, k, t))  # each distinct (trace, pid)'s first row: the least order
            t, k, o = t[by], k[by], o[by]
            head = np.ones(len(t), bool)
            head[1:] = (t[1:] != t[:-1]) | (k[1:] != k[:-1])
            for ti, key, at in zip(t[head].tolist(), k[head].tolist(), o[head].tolist()):
                pid = key if value is None else value[key]
                if _pid_key(pid) is not None:
                    got = first.setdefault(ti, {})
                    got[pid] = min(got.get(pid, at), at)
    return first


def _pid_key(v):
    """A pid as the merged view's pid table keys it (an int or a row label); None for none ("" included: the
    closing instant's)."""
    if isinstance(v, bool) or not isinstance(v, (int, str)) or v == "":
        return None
    return v


def rank_processes(info: RankInfo, rows_first: dict) -> list[tuple]:
    """A rank's processes as ``trace.ids.merged_pid_assignment`` takes them: (pid, its process_sort_index or
    None) for each pid its events name, in the order they first appear in the file (``rows_first``: each pid
    of its rows -> the least order of them)."""
    first: dict = {}
    sort: dict = {}
    orders = info.metadata_order if info.metadata_order is not None else [-1] * len(info.metadata_events)
    for at, ev in zip(orders, info.metadata_events):
        pid = ev.get("pid")
        if _pid_key(pid) is not None:
            first[pid] = min(first.get(pid, at), at)
        idx = (ev.get("args") or {}).get("sort_index") if ev.get("name") == "process_sort_index" else None
        if isinstance(idx, int) and not isinstance(idx, bool) and _pid_key(pid) is not None:
            sort.setdefault(pid, idx)
    for pid, at in rows_first.items():
        first[pid] = min(first.get(pid, at), at)
    return [(pid, sort.get(pid)) for pid in sorted(first, key=lambda p: first[p])]


def _anchors_ns(table: TraceTable, cols: dict, trace_of: dict, ranks: list[int], align: str) -> dict[int, int]:
    """Each rank's instant it is aligned on: its first timed event, or its first ``ProfilerStep#`` slice."""
    s, f, i = cols["slices"], cols["flows"], cols["instants"]
    if align == "step":
        steps = _names(s, lambda n: bool(_STEP.match(n)))
        times = [(np.asarray(s.ts)[steps], trace_of["slices"][steps])]
    else:
        ends = np.isin(np.asarray(f.phase), (ord("s"), ord("f")))
        timed = _names(i, WINDOW_END.__ne__)
        times = [(np.asarray(s.ts), trace_of["slices"]), (np.asarray(cols["counters"].ts), trace_of["counters"]),
                 (np.asarray(i.ts)[timed], trace_of["instants"][timed]),
                 (np.asarray(f.ts)[ends], trace_of["flows"][ends])]
    none = np.iinfo(np.int64).max
    first = np.full(len(table.traces), none, np.int64)
    has = np.zeros(len(table.traces), bool)
    for ts, tr in times:
        np.minimum.at(first, tr, np.asarray(ts, np.int64))
        has[tr] = True
    for t in np.flatnonzero(~has).tolist()[:1]:
        info, rank = table.traces[t], ranks[t]
        if align == "step":
            raise MergeError(f"{info.origin}: rank {rank} has no ProfilerStep# annotation to align on; "
                             "use --align epoch or --align start")
        raise MergeError(f"{info.origin}: rank {rank} has no timed events")
    return {ranks[t]: int(v) for t, v in enumerate(first.tolist())}


def _names(c, keep) -> np.ndarray:
    """Which rows' names satisfy ``keep`` (a row without a name: its name read as "")."""
    return np.array([bool(keep(n)) for n in c.strings] + [bool(keep(""))], bool)[np.asarray(c.name)]


def _remapped_rows(c, tr: np.ndarray, per_trace: dict, pid_maps: dict, ranks: list[int], base_ns: int):
    """The rows of one kind (``tr``: each row's trace) as the merged view holds them: pids remapped by their
    rank's map, times shifted (clamped at the view's base time), flow ids made unique, each rank's file order
    after the ranks before it (``per_trace``: rank, shift and start per trace)."""
    if not len(c):
        return c
    code, pid = np.asarray(c.pid_label).astype(np.int32), np.asarray(c.pid, np.int64).copy()
    ints = np.flatnonzero(code == -1)
    if len(ints):  # each distinct (trace, pid) looked up once
        got, back = np.unique(pid[ints], return_inverse=True)
        keys, inv = np.unique(tr[ints] * len(got) + back.reshape(-1), return_inverse=True)
        new = [pid_maps[ranks[k // len(got)]].get(v, v) for k, v in zip(keys.tolist(), got[keys % len(got)].tolist())]
        pid[ints] = np.array(new, np.int64)[inv.reshape(-1)]
    labelled = np.flatnonzero(code >= 0)
    if len(labelled):  # (trace, row label) -> its merged pid, -1: left as it is (no pid of a process)
        width = len(c.labels)
        keys, inv = np.unique(tr[labelled] * width + code[labelled], return_inverse=True)
        by = [pid_maps[ranks[k // width]].get(lb, -1) if _pid_key(lb := c.labels[k % width]) is not None else -1
              for k in keys.tolist()]
        new = np.array(by, np.int64)[inv.reshape(-1)]
        hit = new >= 0
        pid[labelled[hit]] = new[hit]
        code[labelled[hit]] = -1
    changes = {"pid": pid, "pid_label": code, "rank": per_trace["rank"][tr].astype(np.int32),
               "ts": np.maximum(np.asarray(c.ts, np.int64) + per_trace["shift"][tr], np.int64(base_ns)),
               "order": np.asarray(c.order, np.int64) + per_trace["start"][tr]}
    if c.KIND == "flows":
        fid = np.asarray(c.flow_id, np.int64)
        changes["flow_id"] = np.where(np.asarray(c.id_label) == -1, fid + changes["rank"] * np.int64(FLOW_ID_STRIDE), fid)
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
