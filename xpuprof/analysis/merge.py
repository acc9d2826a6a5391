"""Merge per-rank traces into one: every rank gets its own process rows (pids remapped, names
prefixed ``[rank r]``), flow ids stay unique, and all clocks are put on one reference.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import orjson

from ..outputs import write_output_bytes
from ..progress import bar
from ..trace.builder.columns import encode_json
from ..trace.read.kineto import MERGED_RANK_PID_STRIDE
from .event_table import TIME_LIMIT_NS, ReportError
from .trace_files import TraceFile, load_traces

ALIGN_MODES = ("epoch", "start", "step")
RANK_PID_STRIDE = MERGED_RANK_PID_STRIDE  # merged pid = (rank + 1) * stride + per-rank row index
FLOW_ID_STRIDE = 1 << 40
_STEP = re.compile(r"^ProfilerStep#\d+")


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


def _abs_ns(trace: TraceFile, ev: dict) -> int:
    return trace.base_ns + int(round(float(ev["ts"]) * 1000))


def _anchor_ns(trace: TraceFile, rank: int, align: str) -> int:
    timed = [e for e in trace.data["traceEvents"] if e.get("ph") in ("X", "i", "C", "s", "f")
             and isinstance(e.get("ts"), (int, float)) and e.get("name") != "Record Window End"]
    if align == "step":
        timed = [e for e in timed if e.get("ph") == "X" and _STEP.match(str(e.get("name", "")))]
        if not timed:
            raise MergeError(f"{trace.path}: rank {rank} has no ProfilerStep# annotation to align on; "
                             "use --align epoch or --align start")
    if not timed:
        raise MergeError(f"{trace.path}: rank {rank} has no timed events")
    return min(_abs_ns(trace, e) for e in timed)


def _check_events(trace: TraceFile) -> None:
    """The fields merge computes with: times finite numbers in range, rows named by a string or an
    integer. Anything else is one ``MergeError`` naming the file and the event."""
    try:
        limit_us = (TIME_LIMIT_NS - abs(trace.base_ns)) / 1000
    except ReportError as exc:
        raise MergeError(str(exc)) from None
    for i, e in enumerate(trace.data["traceEvents"]):
        for key in ("ts", "dur"):
            if key in e and not (type(e[key]) in (int, float) and abs(e[key]) < limit_us):
                raise MergeError(f"{trace.path}: traceEvents[{i}] has {key} {e[key]!r}, which is not a time a trace "
                                 f"can hold (a finite number of microseconds below {limit_us:.3g} in magnitude)"[:400])
        for key in ("pid", "tid"):
            v = e.get(key)
            if not (v is None or isinstance(v, str) or (type(v) is int and abs(v) < 2**63)):
                raise MergeError(f"{trace.path}: traceEvents[{i}] has {key} {v!r}, not a string or an integer "
                                 f"row id"[:400])


def _assign_ranks(traces: list[TraceFile]) -> list[int]:
    ranks = []
    for i, t in enumerate(traces):
        ranks.append(t.rank if t.rank is not None else i)
    dup = sorted({r for r in ranks if ranks.count(r) > 1})
    if dup:
        raise MergeError(f"several input traces claim rank(s) {dup}: "
                         + "; ".join(f"{t.path} -> {r}" for t, r in zip(traces, ranks) if r in dup))
    return ranks


RANK_TRACE_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$")


def merge_traces(paths: Sequence[str | Path], out: str | Path, *, align: str = "epoch") -> MergeInfo:
    """Write the merged trace to ``out`` (``.json`` or ``.json.gz``)."""
    if align not in ALIGN_MODES:
        raise MergeError(f"unknown alignment {align!r}; valid: {', '.join(ALIGN_MODES)}")
    if RANK_TRACE_NAME.search(Path(out).name):
        # TensorBoard parses every *.pt.trace.json* in a logdir as one rank's trace (a merged file made its
        # overview divide by zero) and HTA reads one rank per file: a merged view must not look like one.
        stem = RANK_TRACE_NAME.sub("", Path(out).name)
        stem = stem[:-len(".merged")] if stem.endswith(".merged") else stem  # job.merged.pt.trace.json: job.merged.json
        raise MergeError(f"{out}: a merged view must not be named like a rank trace (*.pt.trace.json[.gz]), or "
                         f"TensorBoard and HTA read it as one; name it e.g. {stem}.merged.json")
    try:
        traces = load_traces(paths)
    except ReportError as exc:
        raise MergeError(str(exc)) from None
    for t in traces:
        _check_events(t)
    ranks = _assign_ranks(traces)
    anchors = {r: _anchor_ns(t, r, align) for t, r in zip(traces, ranks)}
    if align == "epoch":
        shifts = {r: 0 for r in ranks}
    else:
        ref = min(anchors.values())
        shifts = {r: ref - a for r, a in anchors.items()}
    base_ns = min(t.base_ns for t in traces)

    events: list[dict] = []
    device_props: list[dict] = []
    with bar("merging", len(traces), unit="ranks") as shown:
        for t, rank in sorted(zip(traces, ranks), key=lambda x: x[1]):
            events.extend(_rank_events(t, rank, shifts[rank], base_ns))
            for props in t.data.get("deviceProperties") or []:
                device_props.append({**props, "rank": rank} if isinstance(props, dict) else props)
            shown.advance()
    end_us = max((e["ts"] + e.get("dur", 0) for e in events if "ts" in e), default=0.0)
    events.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": round(end_us, 3)})

    world = {t.data.get("distributedInfo", {}).get("world_size") for t in traces
             if isinstance(t.data.get("distributedInfo"), dict)} - {None}
    # No top-level "rank" key: HTA would read the merged file as rank 0 of a job.
    header = {"schemaVersion": 1, "deviceProperties": device_props,
              "mergedRanks": {"ranks": ranks, "world_size": max(world) if world else len(ranks), "align": align,
                              "shift_ns": {str(r): s for r, s in shifts.items()},
                              "sources": [str(t.path) for t in traces]},
              "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns}
    _write(Path(out), header, events)
    info = MergeInfo(Path(out), sorted(ranks), shifts, len(events), placement_note(Path(out)))
    if info.note:
        warnings.warn(info.note, MergeWarning, stacklevel=2)
    return info


def _rank_events(trace: TraceFile, rank: int, shift_ns: int, base_ns: int) -> list[dict]:
    pid_map: dict = {}
    named: set = set()
    labels: dict = {}  # original pid -> its own process_labels, folded into the rank label below
    delta_us = (trace.base_ns - base_ns + shift_ns) / 1000.0

    def pid_of(pid):
        new = pid_map.get(pid)
        if new is None:
            new = pid_map[pid] = (rank + 1) * RANK_PID_STRIDE + len(pid_map)
        return new

    out = []
    for ev in trace.data["traceEvents"]:
        if ev.get("name") == "Record Window End" and ev.get("ph") == "i":
            continue
        ev = dict(ev)
        if "pid" in ev and ev["pid"] != "":
            original = ev["pid"]
            ev["pid"] = pid_of(original)
            if ev.get("ph") == "M" and ev.get("name") == "process_name":
                named.add(original)
                ev["args"] = {**(ev.get("args") or {}), "name": f"[rank {rank}] {(ev.get('args') or {}).get('name', original)}"}
            elif ev.get("ph") == "M" and ev.get("name") == "process_labels":
                labels[original] = str((ev.get("args") or {}).get("labels", ""))
                continue  # one labels row per process: a second one would replace "rank N" in viewers
            elif ev.get("ph") == "M" and ev.get("name") == "process_sort_index":
                idx = (ev.get("args") or {}).get("sort_index", 0)
                ev["args"] = {"sort_index": rank * RANK_PID_STRIDE + (idx if isinstance(idx, int) else 0) % RANK_PID_STRIDE}
        if isinstance(ev.get("ts"), (int, float)) and ev.get("ph") != "M":
            ev["ts"] = round(max(ev["ts"] + delta_us, 0.0), 3)
        if ev.get("ph") in ("s", "f", "t") and isinstance(ev.get("id"), int):
            ev["id"] = rank * FLOW_ID_STRIDE + ev["id"]
        out.append(ev)
    # Rows without a process_name of their own (e.g. the host pid, "Spans") still say which rank.
    for original, new in pid_map.items():
        if original not in named:
            label = f"[rank {rank}] {'process ' + str(original) if isinstance(original, int) else original}"
            out.insert(0, {"ph": "M", "name": "process_name", "ts": 0, "pid": new, "tid": 0, "args": {"name": label}})
        out.insert(0, {"ph": "M", "name": "process_labels", "ts": 0, "pid": new, "tid": 0,
                       "args": {"labels": ",".join(filter(None, (f"rank {rank}", labels.get(original))))}})
    return out


def _encode_event(e: dict) -> bytes:
    try:
        return orjson.dumps(e)
    except TypeError:  # ints past 64 bits or keys orjson refuses: the forgiving encoder writes them
        return encode_json(e)


def _write(path: Path, header: dict, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    head = encode_json({k: v for k, v in header.items() if k not in ("displayTimeUnit", "baseTimeNanoseconds")})[:-1]
    tail = (b', "displayTimeUnit": "ms", "baseTimeNanoseconds": ' + str(header["baseTimeNanoseconds"]).encode()
            + b', "traceName": ' + encode_json(str(path)) + b"}\n")
    body = b",\n".join(map(_encode_event, events))
    data = head + b', "traceEvents": [\n' + body + b"\n]" + tail
    if path.name.endswith(".gz"):
        import gzip

        data = gzip.compress(data, compresslevel=1)
    write_output_bytes(path, data)  # atomic for regular files; never replaces a device, FIFO or link
