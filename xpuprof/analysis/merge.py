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
from ..trace.table.columns import KINDS, InstantColumns, RowText
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
    per = {t: {k: table.columns(k, t, keep=False) for k in KINDS} for t in range(len(table.traces))}
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

    lanes = {ranks[t]: {k: h[k] for k in (LANES_KEY, IDS_KEY) if k in h}
             for t, h in ((t, info.header) for t, info in enumerate(table.traces))}
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
    orders = info.metadata_order if info.metadata_order is not None else [-1] * len(info.metadata_events)
    for at, ev in zip(orders, info.metadata_events):
        pid = _pid_key(ev.get("pid"))
        if pid is None:
            continue
        first[pid] = min(first.get(pid, at), at)
        if ev.get("name") == "process_sort_index":
            idx = (ev.get("args") or {}).get("sort_index")
            if isinstance(idx, int) and not isinstance(idx, bool):
                sort.setdefault(pid, idx)
    for c in cols.values():
        if not len(c):
            continue
        code, order = np.asarray(c.pid_label), np.asarray(c.order, np.int64)
        value = np.where(code == -1, np.asarray(c.pid, np.int64), 0)
        key = np.where(code >= 0, code, -3).astype(np.int64)  # label rows keyed by code, int rows by value
        for is_label, keys in ((False, value), (True, key)):
            rows = (code >= 0) if is_label else (code == -1)
            if not rows.any():
                continue
            got, at = _first_rows(keys[rows], order[rows])
            for k, o in zip(got.tolist(), at.tolist()):
                pid = _pid_key(c.labels[k] if is_label else k)
                if pid is not None:
                    first[pid] = min(first.get(pid, o), o)
    return [(pid, sort.get(pid)) for pid in sorted(first, key=lambda p: first[p])]


def _first_rows(keys: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct key and the least order of its rows."""
    by = np.lexsort((order, keys))
    keys, order = keys[by], order[by]
    head = np.ones(len(keys), bool)
    head[1:] = keys[1:] != keys[:-1]
    return keys[head], order[head]


def _anchor_ns(info: RankInfo, cols: dict, rank: int, align: str) -> int:
    """The instant a rank is aligned on: its first timed event, or its first ``ProfilerStep#`` slice."""
    s = cols["slices"]
    if align == "step":
        steps = np.array([bool(_STEP.match(n)) for n in s.strings], bool)
        name = np.asarray(s.name)
        hit = (name >= 0) & steps[np.clip(name, 0, max(len(steps) - 1, 0))] if len(steps) else np.zeros(len(s), bool)
        if not hit.any():
            raise MergeError(f"{info.origin}: rank {rank} has no ProfilerStep# annotation to align on; "
                             "use --align epoch or --align start")
        return int(np.asarray(s.ts)[hit].min())
    times = [np.asarray(s.ts), np.asarray(cols["counters"].ts)]
    f = cols["flows"]
    times.append(np.asarray(f.ts)[np.isin(np.asarray(f.phase), (ord("s"), ord("f")))])
    i = cols["instants"]
    if len(i):
        times.append(np.asarray(i.ts)[np.asarray(i.name) != _string_id(i.strings, WINDOW_END)])
    times = [t for t in times if len(t)]
    if not times:
        raise MergeError(f"{info.origin}: rank {rank} has no timed events")
    return int(min(t.min() for t in times))


def _string_id(strings, text: str) -> int:
    try:
        return list(strings).index(text)
    except ValueError:
        return -3


def _rank_rows(c, rank: int, shift_ns: int, base_ns: int, pid_map: dict, start: int):
    """A rank's rows of one kind as the merged view holds them: its pids remapped, times shifted (clamped at
    the view's base time), flow ids made unique, the file order after the ranks before it."""
    if c.KIND == "instants" and len(c):
        c = c.take(np.asarray(c.name) != _string_id(c.strings, WINDOW_END))  # one closing instant for the view
    if not len(c):
        return c
    code = np.asarray(c.pid_label)
    pid = np.asarray(c.pid, np.int64).copy()
    new_code = code.astype(np.int32).copy()
    ints = [k for k in pid_map if isinstance(k, int)]
    if ints and (code == -1).any():
        keys = np.array(sorted(ints), np.int64)
        vals = np.array([pid_map[k] for k in keys.tolist()], np.int64)
        rows = np.flatnonzero(code == -1)
        at = np.clip(np.searchsorted(keys, pid[rows]), 0, len(keys) - 1)
        hit = keys[at] == pid[rows]
        pid[rows[hit]] = vals[at[hit]]
    if (code >= 0).any():
        by_label = np.array([pid_map.get(lb, -1) if _pid_key(lb) is not None else -1 for lb in c.labels], np.int64)
        rows = np.flatnonzero(code >= 0)
        got = by_label[code[rows]]
        rows, got = rows[got >= 0], got[got >= 0]
        pid[rows], new_code[rows] = got, -1
    ts = np.maximum(np.asarray(c.ts, np.int64) + np.int64(shift_ns), np.int64(base_ns))
    changes = {"pid": pid, "pid_label": new_code, "ts": ts,
               "order": np.asarray(c.order, np.int64) + np.int64(start),
               "rank": np.full(len(c), rank, np.int32)}
    if c.KIND == "flows":
        ints_id = np.asarray(c.id_label) == -1
        changes["flow_id"] = np.where(ints_id, np.asarray(c.flow_id, np.int64) + np.int64(rank) * FLOW_ID_STRIDE,
                                      np.asarray(c.flow_id, np.int64))
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
