"""The trace of a finished recording cycle: one TraceBuilder from every source.

Each session's ``process``, device properties, metadata and dropped-record counts; the metric
collectors' tracks; the host ranges and instants; torch's ops linked to the runtime calls they made;
Python functions; thread/process rows, a span row; and every error and "not collected" note the
run gathered, in the trace's metadata.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import orjson

from .. import diagnostics
from ..activity import ActivityType
from ..backends import registry
from ..backends.base import ProcessWindow
from ..clock import MONOTONIC_TO_EPOCH_NS
from ..host import recorder
from ..host.distinct import distinct
from ..trace.builder.builder import TraceBuilder
from ..trace.builder.columns import RowArgs, encode_json
from ..trace.builder.gpu_annotations import add_gpu_user_annotations
from . import selection
from .assemble_torch import add_torch_keys, add_torch_ops, host_view, outside, read_torch_ops
from .cycle import HOST_SOURCE, RecordingCycle
from .torch_compat import torch_distributed_info

log = logging.getLogger("xpuprof")

SPAN_NAME = "xpuprof"


def launcher_distributed_info() -> dict | None:
    """``distributedInfo`` from launcher variables (torchrun, MPI, Slurm, ...), None when not launched."""
    from .. import rank as rank_env

    info = rank_env.detect_or_none()  # unusable variables: said once, never a lost trace
    return None if info is None else info.distributed_info()


def build_trace(cycle: RecordingCycle, window: ProcessWindow, errors: dict[str, list[str]], *, iteration: int,
                block_error: str | None, no_device_reasons: dict[str, str],
                metadata: Mapping[str, Any], trace_id: str = "", pid: int | None = None,
                process_name: str | None = None) -> TraceBuilder:
    """The trace of ``cycle``, stopped over ``window``; ``errors``: each backend's stop errors so far.
    ``pid``/``process_name``: another process's recording (a crash-safe copy read back by ``xpuprof exec``)."""
    config = cycle.config
    builder = TraceBuilder(pid=pid)
    builder.set_window(window.start_ns, window.end_ns)
    torch_ops, torch_note = read_torch_ops(cycle)
    host_paused = cycle.paused_intervals(HOST_SOURCE, window.end_ns)
    # the simulator launches from torch's ops only when they are in the trace (and linked to its calls)
    host_ops = host_view(torch_ops, host_paused) if torch_ops is not None and \
        ActivityType.CPU_OP in config.activities else None
    window = replace(window, host_ops=(lambda: host_ops), ranges=range_lookup(cycle.recorder),
                     host_reports_memory=bool(config.profile_memory and cycle.torch_ops is not None))
    for name, session in cycle.sessions:
        before = dict(builder.dropped)
        try:
            session.process(builder, replace(window, paused=cycle.paused_intervals(name, window.end_ns)))
        except Exception as exc:
            errors.setdefault(name, []).append(f"process failed: {type(exc).__name__}: {exc}")
            log.exception("xpuprof: backend %s failed to process its records", name)
        for getter, merge in ((session.device_properties, lambda v: [builder.add_device_properties(p) for p in v or ()]),
                              (session.metadata, lambda v: [builder.set_metadata(k, x) for k, x in dict(v or {}).items()])):
            try:
                merge(getter())
            except Exception as exc:
                errors.setdefault(name, []).append(f"{getter.__name__} failed: {type(exc).__name__}: {exc}")
        try:
            for reason, n in (session.dropped_records() or {}).items():
                if builder.dropped.get(reason, 0) - before.get(reason, 0) >= n:
                    continue  # its process() wrote this loss into the trace itself: counted once
                builder.drop(name, reason, n)
            errors.setdefault(name, []).extend(session.errors() or ())
        except Exception as exc:
            errors.setdefault(name, []).append(f"error report failed: {type(exc).__name__}: {exc}")
    if cycle.collectors is not None:
        cycle.collectors.emit(builder)
    tids = _add_host_events(cycle, builder, host_paused)
    if ActivityType.GPU_USER_ANNOTATION in config.activities:
        # Before the op linking: device work still carries the innermost record_function's id, the
        # user correlation Kineto keeps apart from the op one.
        add_gpu_user_annotations(builder)
    tids |= add_torch_ops(cycle, builder, torch_ops, torch_note, host_paused)
    if cycle.pytracer is not None:
        tids |= cycle.pytracer.process(builder, MONOTONIC_TO_EPOCH_NS)
    _add_rows(cycle, builder, tids, process_name)
    builder.add_span(SPAN_NAME, window.start_ns, window.end_ns, op_count=cycle.recorder.range_count(),
                     iteration=iteration)
    builder.set_metadata("backends", [name for name, _ in cycle.sessions])
    add_torch_keys(builder, config, trace_id)
    add_paused_spans(builder, cycle, window.end_ns)
    plugin_errors = selection.plugin_errors(config, {name for name, _ in cycle.sessions})
    for source in (cycle.setup_errors, plugin_errors):
        for name, msgs in source.items():
            errors.setdefault(name, []).extend(msgs)
    load_failures = registry.plugin_load_failures()
    if load_failures:  # logged once each when they happened (plugins.faults)
        builder.set_metadata("plugin_load_errors", {origin: reason for origin, reason in load_failures})
    if cycle.not_collected:
        builder.set_metadata("activities_not_collected", dict(cycle.not_collected))
    if cycle.recording_stopped is not None:  # the recording cap (host/budget.py): said in the trace and once here
        builder.set_metadata("recording_stopped", cycle.recording_stopped)
        diagnostics.warn_once(log, ("recording-stopped", cycle.recording_stopped["reason"]),
                              "xpuprof: host recording stopped before the end of the window: %s; %d range(s) not "
                              "recorded after that (the trace's recording_stopped says when; %s sets the cap)",
                              cycle.recording_stopped["reason"], cycle.recording_stopped["ranges_not_recorded"],
                              cycle.recording_stopped["setting"])
    if config.group_trace_id:
        builder.set_metadata("group_trace_id", config.group_trace_id)
    errors = {k: list(dict.fromkeys(v)) for k, v in errors.items() if v}
    if errors:
        builder.set_metadata("backend_errors", errors)
        for name, msgs in errors.items():
            for msg in msgs:
                # Said once per process, in every trace it touches; a plugin fault was logged when it
                # happened (plugins.faults), so it is not logged a second time here.
                if not diagnostics.said(diagnostics.FAULT_SAID, msg) and diagnostics.first("backend-error", name, msg):
                    log.warning("xpuprof: backend %s: %s", name, msg)
    if builder.dropped:
        # Records outside the window are the expected warmup/between-cycle ones: counted in the trace,
        # logged at DEBUG; any other loss is a warning.
        unexpected = builder.dropped.unexpected()
        text = ", ".join(f"{k}={v}" for k, v in builder.dropped.items())
        (log.warning if unexpected else log.debug)("xpuprof: dropped records: %s", text)
    if no_device_reasons:
        builder.set_metadata("device_backends_unavailable", dict(no_device_reasons))
    if block_error:
        builder.set_metadata("profiled_block_exception", block_error)
    for key, value in metadata.items():
        if key == "distributedInfo" and isinstance(value, Mapping):
            builder.set_distributed_info(value)
        else:
            builder.set_metadata(key, value)
    if "distributedInfo" not in metadata:
        # torch.distributed's process groups as torch.profiler writes them, else the launcher's variables:
        # under torchrun/MPI/Slurm every trace says its rank (HTA and TensorBoard read it)
        launched = torch_distributed_info() or launcher_distributed_info()
        if launched is not None:
            builder.set_distributed_info(launched)
    builder.flush()
    return builder


def range_lookup(rec: recorder.HostRecorder | None):
    """``ProcessWindow.ranges``: our ranges' (names, args dicts) for an array of correlation ids (a name ""
    and no args for an id no range has); ranges still open at stop (closed there) count."""
    def lookup(ids):
        ids = np.asarray(ids, np.int64)
        names, args = [""] * len(ids), [{} for _ in range(len(ids))]
        logs = [recorder.log_array(log) for log in ((rec.ranges, rec.truncated) if rec is not None else ())
                if len(log)]
        if not logs or not len(ids):
            return names, args
        rows = np.concatenate(logs) if len(logs) > 1 else logs[0]
        order = np.argsort(rows[:, 3], kind="stable")
        pos = np.minimum(np.searchsorted(rows[order, 3], ids), len(order) - 1)
        found = rows[order[pos], 3] == ids
        hits = np.flatnonzero(found)
        matched = rows[order[pos[hits]]]
        for i, text in zip(hits.tolist(), rec.name_texts(matched[:, 4].tolist())):
            names[i] = text
        for i, key in zip(hits.tolist(), matched[:, 5].tolist()):
            if key == recorder.NO_ARGS:
                continue
            try:
                if key >= 0:  # JSON in the args area
                    blob, ends = recorder.area_arrays(rec.args_area)
                    start = int(ends[key - 1]) if key else 0
                    args[i] = orjson.loads(blob[start:int(ends[key])].tobytes())
                else:  # kept as the object given
                    args[i] = dict(rec.args[recorder.object_key(key)])
            except Exception:  # args JSON cannot hold: the range keeps its note in the trace
                pass
        return names, args
    return lookup


def add_paused_spans(builder: TraceBuilder, cycle: RecordingCycle, end_ns: int) -> None:
    """Each interval in which a source was paused (toggle_collection_dynamic): a slice on the "Spans" row
    and the trace's ``collection_paused`` metadata (sources, start and duration in the trace's µs)."""
    from ..clock import BASE_TIME_NS

    notes = []
    for name in cycle.paused:
        for start, end in cycle.paused_intervals(name, end_ns):
            builder.add_slice(f"xpuprof collection paused: {name}", start, end - start, "Spans", "paused",
                              cat="Trace")
            notes.append({"source": name, "ts": round((start - BASE_TIME_NS) / 1000, 3),
                          "dur": round((end - start) / 1000, 3)})
    if notes:
        builder.set_metadata("collection_paused", notes)


def _add_host_events(cycle: RecordingCycle, builder: TraceBuilder, paused: tuple = ()) -> set[int]:
    rec = cycle.recorder
    pid = builder.pid
    tids: set[int] = set()
    n = rec.range_count()
    bad = 0  # args JSON cannot hold, kept as a note (never a lost trace)
    # Each distinct name (ranges and instants share the table) handed over once, as text (no str per name).
    name_table = rec.name_ids_in(builder.strings)
    if n and ActivityType.USER_ANNOTATION in cycle.config.activities:
        # Columns straight from the C records (ranges started while host collection was paused left out).
        rec_arr = recorder.log_array(rec.ranges)
        if paused:
            rec_arr = rec_arr[outside(rec_arr[:, 0] + MONOTONIC_TO_EPOCH_NS, paused)]
        args_idx = rec_arr[:, 5]
        plain = args_idx == recorder.NO_ARGS
        idx = slice(None) if plain.all() else np.flatnonzero(plain)
        t0_plain = rec_arr[idx, 0]
        # Copies (fancy indexing, arithmetic): nothing keeps a view on the recorder's log.
        builder.add_slices(names=None, name_ids=name_table[rec_arr[idx, 4]], ts=t0_plain + MONOTONIC_TO_EPOCH_NS,
                           dur=rec_arr[idx, 1] - t0_plain, pid=pid, tid=rec_arr[idx, 2].copy(),
                           cat=ActivityType.USER_ANNOTATION, external_id=rec_arr[idx, 3].copy())
        if not plain.all():  # ranges with args: encoded at exit into the args area, a few kept as objects
            sel = np.flatnonzero(~plain)
            row_args, noted = _range_args(rec, args_idx[sel])
            bad += noted
            t0_args = rec_arr[sel, 0]
            builder.add_slices(names=None, name_ids=name_table[rec_arr[sel, 4]], ts=t0_args + MONOTONIC_TO_EPOCH_NS,
                               dur=rec_arr[sel, 1] - t0_args, pid=pid, tid=rec_arr[sel, 2],
                               cat=ActivityType.USER_ANNOTATION, external_id=rec_arr[sel, 3], row_args=row_args)
        tid_arr = rec_arr[:, 2]
        tids.update(distinct(tid_arr).tolist())
    tids |= _add_range_lifetimes(cycle, builder, name_table)
    if len(rec.instants) and ActivityType.CPU_INSTANT_EVENT in cycle.config.activities:
        inst = recorder.log_array(rec.instants)  # t, tid, name, args, scope (HostRecorder.INSTANT_FIELDS)
        row_args = None
        if (inst[:, 3] != recorder.NO_ARGS).any():  # args were snapshotted as JSON bytes at the call
            stored, row_args = rec.args, []
            for arg_i in inst[:, 3].tolist():
                value = None if arg_i == recorder.NO_ARGS else stored[arg_i]
                if isinstance(value, recorder.InvalidArgs):
                    bad += 1
                    value = bytes(value)
                row_args.append(None if value == b"{}" else value)
        builder.add_instants(name_ids=name_table[inst[:, 2]], ts=inst[:, 0] + MONOTONIC_TO_EPOCH_NS, pid=pid,
                             tid=inst[:, 1].copy(), cat=ActivityType.CPU_INSTANT_EVENT, scope=inst[:, 4],
                             row_args=row_args)
        tids.update(distinct(inst[:, 1]).tolist())
    if bad:
        builder.set_metadata("invalid_args", bad)
        log.warning("xpuprof: %d record_function/instant args could not be written as JSON; each range is kept "
                    "with an xpuprof_invalid_args note saying why (first seen in this trace)", bad)
    return tids


def _range_args(rec: recorder.HostRecorder, keys: np.ndarray) -> tuple[RowArgs, int]:
    """The args of the ranges whose args fields are ``keys``, as one ``RowArgs``: entries of the args area
    in place (no copy, nothing per range), and after them the few kept as objects (not a dict, or values
    no encoder could write at the call), written here with the forgiving encoder or as a note saying why
    (counted in the second value)."""
    blob, ends = recorder.area_arrays(rec.args_area)
    in_area = keys >= 0
    k = np.where(in_area, keys, 0)
    starts = np.where(k > 0, ends[np.maximum(k - 1, 0)], 0) if len(ends) else np.zeros(len(keys), np.int64)
    lens = np.where(in_area, (ends[k] - starts) if len(ends) else 0, 0)
    if in_area.all():
        return RowArgs(blob, starts, lens), 0
    bad, extra, at = 0, [], len(blob)
    for row, key in zip(np.flatnonzero(~in_area).tolist(), keys[~in_area].tolist()):
        value = rec.args[recorder.object_key(key)]
        try:  # objects the recorder could not encode as given (cleaned here, or noted)
            as_dict = dict(value)
            text = encode_json(as_dict) if as_dict else b""
        except Exception as exc:  # one bad args value must never lose the trace: keep the range
            text = encode_json(recorder.invalid_args_note(value, exc))
            bad += 1
        starts[row], lens[row] = at, len(text)
        extra.append(text)
        at += len(text)
    return RowArgs(np.concatenate([blob, np.frombuffer(b"".join(extra), np.uint8)]), starts, lens), bad


LIFETIME_NOTES = {
    "exited_out_of_order": "ranges exited before a range entered inside them: removed from their place, the "
                           "enclosing ranges stay current",
    "exited_on_another_thread": "ranges exited on a thread other than the one that entered them: drawn on the "
                                "entering thread's row",
    "entered_over_another_context": "ranges entered while another context's range was innermost on the same "
                                    "thread (asyncio tasks interleaving across awaits): current_correlation_id() "
                                    "follows each task, but a vendor library keeps one external-id stack per "
                                    "thread, so device work launched there may be linked to the range entered "
                                    "last on the thread",
}


def _add_range_lifetimes(cycle: RecordingCycle, builder: TraceBuilder, name_table: np.ndarray) -> set[int]:
    """Ranges still open at stop (closed at the window's end, ``"truncated": true``) and the range
    lifetimes the trace must mention (out of order, another thread, interleaved contexts)."""
    rec = cycle.recorder
    tids: set[int] = set()
    trunc = recorder.log_array(rec.truncated)
    if len(trunc) and ActivityType.USER_ANNOTATION in cycle.config.activities:
        keys = trunc[:, 5]
        own: list = [None] * len(keys)
        has = np.flatnonzero(keys != recorder.NO_ARGS)
        if len(has):
            for row, args in zip(has.tolist(), _range_args(rec, keys[has].copy())[0]):
                own[row] = args
        marked = [_truncated_args(args) for args in own]
        builder.add_slices(names=None, name_ids=name_table[trunc[:, 4]], ts=trunc[:, 0] + MONOTONIC_TO_EPOCH_NS,
                           dur=trunc[:, 1] - trunc[:, 0], pid=builder.pid, tid=trunc[:, 2].copy(),
                           cat=ActivityType.USER_ANNOTATION, external_id=trunc[:, 3].copy(), row_args=marked)
        tids.update(distinct(trunc[:, 2]).tolist())
    if len(trunc):
        builder.set_metadata("truncated_ranges", {
            "count": int(len(trunc)), "note": "ranges still open when recording stopped: each ends at the window's "
                                              "end and carries \"truncated\": true"})
        diagnostics.warn_once(log, ("truncated-ranges",), "xpuprof: %d range(s) were still open when recording "
                              "stopped; they end at the window's end, marked \"truncated\": true (e.g. a range "
                              "spanning a schedule's step boundary)", len(trunc))
    said = {k: int(v) for k, v in cycle.lifetimes.items() if k in LIFETIME_NOTES and v}
    if said:
        builder.set_metadata("range_lifetimes", {**said, "notes": {k: LIFETIME_NOTES[k] for k in said}})
        for k in said:
            diagnostics.warn_once(log, ("range-lifetimes", k), "xpuprof: %s", LIFETIME_NOTES[k])
    return tids


def _truncated_args(own: bytes | None) -> bytes:
    """A truncated range's args JSON: ``"truncated": true`` first, then its own args (a JSON object)."""
    if not own or own == b"{}":
        return b'{"truncated":true}'
    return b'{"truncated":true,' + own[1:]


def _add_rows(cycle: RecordingCycle, builder: TraceBuilder, tids: set[int], process_name: str | None = None) -> None:
    pid = builder.pid
    argv0 = sys.argv[0] if sys.argv else ""
    if process_name is None:
        process_name = Path(argv0).name if argv0 not in ("", "-", "-c") else "python"
    # Kineto's main CPU process rows: name = basename of argv[0], label "CPU", sort index = pid.
    builder.set_process_name(pid, process_name, label="CPU", sort_index=pid)
    recorded = cycle.recorder.thread_names if cycle.recorder is not None else {}
    for tid, name in recorder.thread_names_for(sorted(tids), recorded).items():
        builder.set_thread_name(pid, tid, f"thread {tid} ({name})", sort_index=tid)
