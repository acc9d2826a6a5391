"""The torch part of a finished cycle's trace: torch's ops, ranges and ``[memory]`` events read back from
torch's own recorder, linked to the runtime calls our backends recorded; the keys torch.profiler writes
(``trace_id``, ``record_shapes``, ``profile_memory``, ...); and the host view the simulator launches from.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from .. import diagnostics
from ..activity import ActivityType
from ..backends.base import HostOps
from ..config.options import ProfilerConfig
from ..host import recorder
from ..trace.builder.builder import TraceBuilder

log = logging.getLogger("xpuprof")

# torch.profiler's add_metadata_json keys: "1" when the option is on, absent otherwise
TORCH_OPTION_KEYS = ("profile_memory", "with_stack", "record_shapes", "with_modules", "with_flops")


def read_torch_ops(cycle) -> tuple[Any, str | None]:
    """(TorchOps of the cycle or None, why torch's ops are missing or None)."""
    from ..host import torch_ops

    if cycle.torch_ops is None:
        config = cycle.config
        if (ActivityType.CPU_OP in config.activities or config.profile_memory) and \
                torch_ops.torch_if_imported() is not None:
            # torch came in after the cycle started: its ops could not be recorded (said, never silent)
            return None, "torch was imported after this recording cycle started; start the profile after importing torch"
        return None, None
    try:
        cycle.torch_id_base = recorder.reserve_correlation_id()
        return torch_ops.TorchOps.from_trace_bytes(cycle.torch_ops.read_trace(), id_base=cycle.torch_id_base,
                                                   drop_shapes=cycle.torch_ops.shapes_for_sim), None
    except Exception as exc:  # torch's result unreadable: the rest of the trace stays, and says so
        return None, f"torch's profiler result could not be read: {type(exc).__name__}: {exc}"


def outside(ts: np.ndarray, intervals: tuple) -> np.ndarray:
    """Mask of the timestamps in none of the (start, end) ``intervals``."""
    keep = np.ones(len(ts), bool)
    for start, end in intervals:
        keep &= ~((ts >= start) & (ts < end))
    return keep


def host_view(ops, paused: tuple) -> HostOps:
    """torch's ops and ranges as the simulator reads them (those started while host collection was paused
    left out)."""
    keep = np.flatnonzero(outside(ops.ts, paused))
    return HostOps(name_table=list(ops.name_table), name_codes=ops.name_codes[keep], cats=ops.cats[keep],
                   tid=ops.tid[keep], start_ns=ops.ts[keep], end_ns=ops.ts[keep] + ops.dur[keep],
                   external_id=ops.external_id[keep], args=lambda rows: ops.op_args(keep[list(rows)].tolist()))


def add_torch_ops(cycle, builder: TraceBuilder, ops, note: str | None, host_paused: tuple) -> set[int]:
    """torch's ops, ranges and [memory] events of this cycle, and every runtime call linked to the innermost
    torch op running on its thread when it was made (none when it was made in no op)."""
    from ..host import torch_ops
    from ..host.torch_memory import count_by_device

    config = cycle.config
    if ops is None:
        if note is not None:
            builder.set_metadata("torch_ops_not_recorded", note)
            diagnostics.warn_once(log, ("torch-ops-missing", note), "xpuprof: PyTorch ops (cpu_op) not recorded: %s",
                                  note)
        if config.profile_memory:
            _memory_not_recorded(builder, note or "torch is not in use in this program and no backend reported "
                                                  "device allocations")
        return set()
    tids: set[int] = set()
    if config.with_flops and cycle.torch_ops.result is not None:
        _add_flops(ops, cycle.torch_ops.result, cycle.torch_id_base)
    if ActivityType.CPU_OP in config.activities:
        tids = ops.add_to(builder, builder.pid)
    n_ops = int((ops.cats == "cpu_op").sum()) if ActivityType.CPU_OP in config.activities else 0
    summary = {"ops": n_ops, "record_shapes": config.record_shapes, "with_stack": config.with_stack}
    if n_ops:
        # As Kineto: a call's External id is the innermost torch op's on its thread, none outside ops (our
        # ranges, like torch's, are user ranges; their gpu_user_annotation was drawn before this). A
        # cycle that ran no torch op (torch merely imported) keeps our ranges' ids, as without torch.
        linked, outside_ops = torch_ops.link_runtime_calls(builder, *ops.linkable(),
                                                           explicit_zero=config.generic_categories)
        summary.update(runtime_calls_linked=linked, runtime_calls_outside_ops=outside_ops)
    builder.set_metadata("torch_ops", summary)
    if config.profile_memory:
        mem = ops.memory
        keep = outside(mem.ts, host_paused)
        paused_out = int((~keep).sum())
        if paused_out:
            mem = _select(mem, np.flatnonzero(keep))
        tids |= mem.add_to(builder, builder.pid)
        counts: dict[str, Any] = {"events": len(mem), "by_device": count_by_device(mem)}
        if mem.unreadable:  # written by torch, not carried: counted, never silently lost
            counts["not_carried"] = mem.unreadable
            log.warning("xpuprof: %d of torch's [memory] events could not be read and are not in the trace",
                        mem.unreadable)
        if paused_out:
            counts["paused"] = paused_out
        builder.set_metadata("memory_events", counts)
    return tids


def _add_flops(ops, result, id_base: int) -> None:
    """torch's FLOP estimate (``with_flops``) as the ``flops`` arg of the ops it counts: torch 2.13 computes it
    but its Kineto file does not carry it, so it is read off torch's result (once per op, opt-in)."""
    counted = [(e.correlation_id(), e.flops()) for e in result.events() if e.flops()]
    if not counted:
        return
    ids, flops = (np.array(c, np.int64) for c in zip(*counted))
    order = np.argsort(ids)
    ids, flops = ids[order], flops[order]
    ext = ops.external_id - id_base
    pos = np.minimum(np.searchsorted(ids, ext), len(ids) - 1)
    present = (ids[pos] == ext) & (ops.external_id > 0)
    ops.num_args["flops"] = (np.where(present, flops[pos], 0), present)


def _select(mem, rows: np.ndarray):
    from ..host.torch_memory import MemoryEvents

    return MemoryEvents(mem.names, mem.name_codes[rows], mem.ts[rows], mem.tid[rows], mem.values[rows],
                        mem.present[rows], None if mem.others is None else [mem.others[i] for i in rows.tolist()],
                        mem.unreadable)


def _memory_not_recorded(builder: TraceBuilder, why: str) -> None:
    device_side = builder.metadata.get("levelzero_memory_events") or {}
    if "memory_events" not in builder.metadata and not device_side.get("events"):
        builder.set_metadata("memory_events_not_recorded", why)
        diagnostics.warn_once(log, ("memory-not-recorded", why), "xpuprof: profile_memory=True: no [memory] events "
                              "recorded: %s", why)


def add_torch_keys(builder: TraceBuilder, config: ProfilerConfig, trace_id: str) -> None:
    """The keys torch.profiler writes at the top of its trace: the cycle's trace id and its options."""
    if trace_id:
        builder.set_metadata("trace_id", trace_id)
    for key in TORCH_OPTION_KEYS:
        if getattr(config, key):
            builder.set_metadata(key, 1)
