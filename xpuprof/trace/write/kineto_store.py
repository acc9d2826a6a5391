"""A Kineto JSON trace into one rank of a store (``xpuprof convert``): read -> table -> store writer. A Perfetto
protobuf trace (``.pftrace``, told by its first bytes) is read whole (``trace.read.perfetto``) and written the
same way.

The one Kineto JSON reader (``trace.read.kineto.TraceReader``) hands over the trace's rows a chunk at a
time, and the one store row producer (``parquet.StoreRows``) writes each as it comes, so memory is bounded
by a chunk whatever the file's size. What the table keeps no rows for (``B``/``E`` pairs, async and sample
events) is counted by phase in the rank's ``not_stored_json`` and said once.

The rank: ``trace.read.kineto.resolve_rank`` (given, ``distributedInfo.rank``, ``rank<N>`` in the file
name, the input's position); the rank's ``rank_source`` says which.

The rows are laid out (``trace.layout``) as every writer's are: their slim copies are kept as they stream by
and laid out at the end (``layout.stream``); a trace whose slices do not all nest is read and written again
with the lanes applied (the usual trace nests: one pass).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..layout.stream import SlimRows
from ..read.kineto import (TraceReader, distributed_rank, merged_ranks, rank_from_name, resolve_rank,  # noqa: F401
                           time_error)
from ..read.source import TraceLoadError, trace_format
from .parquet import StoreRows, rank_metadata
from .rankwriter import RankWriter, StoreWriteError

log = logging.getLogger("xpuprof")


class ConvertError(ValueError):
    """One input that could not be converted; the message names it."""


@dataclass
class Converted:
    path: Path
    rank: int
    rank_source: str
    events: int
    rows: dict[str, int]
    not_stored: dict[str, int] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)  # the rank's metadata row as committed (``parquet.rank_metadata``)


def convert_trace(path, store, *, rank: int | None = None, position: int | None = None, replace: bool = False,
                  taken: dict[int, str] | None = None, chunk_bytes: int | None = None, keep=None) -> Converted:
    """Converts one trace file into a rank partition of ``store``. ``taken``: ranks already written by
    this run (rank -> file), never replaced. ``keep``: sees the rows as they are written (``add(columns,
    base_time_ns)``; ``clear()`` when a pass is dropped and the rows are written again laid out). Raises
    ConvertError naming the file."""
    path = Path(path)
    add = None if keep is None else keep.add
    try:
        if trace_format(path) == "perfetto":
            return _convert_perfetto(path, store, rank, position, replace, taken, add)
    except (TraceLoadError, StoreWriteError) as exc:
        raise ConvertError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    reader = TraceReader(path, rank=rank, position=position, chunk_bytes=chunk_bytes)
    try:
        with RankWriter(store, replace=replace) as writer:
            rows = StoreRows(writer, add)
            slim = SlimRows()
            checked = False
            for seg in reader.segments():
                if merged_ranks(reader.header):
                    break
                if not checked and (rank is not None or distributed_rank(reader.header) is not None):
                    _check_rank(path, writer, *resolve_rank(path, reader.header, rank, position), taken)
                checked = True
                rows.add(seg.columns, 0)  # the reader's ts: ns after the trace's base time, as the store keeps them
                slim.add(seg)
            merged = merged_ranks(reader.header)
            if merged or "mergedRanks" in reader.header:
                raise ConvertError(f"{path}: is a merged view of ranks {merged} (xpuprof merge); convert the per-rank "
                                   "traces instead")
            info = reader.info
            bad = time_error(info)  # as report refuses it: a value the store's int64 ns cannot hold is no row
            if bad:
                raise ConvertError(f"{path}: {bad}; nothing of it stored")
            _check_rank(path, writer, info.rank, info.source, taken)
            plan = slim.plan(info)
            del slim
            if plan is None:
                meta = rank_metadata(info, writer="convert")
                writer.commit(info.rank, meta)
            else:
                writer.abort()
        if plan is not None:  # the rows again, as the layout placed them
            log.info("xpuprof convert: %s: %s; writing the rank again with them", path, plan.summary)
            if keep is not None:
                keep.clear()
            reader = TraceReader(path, rank=rank, position=position, chunk_bytes=chunk_bytes)
            with RankWriter(store, replace=replace) as writer:
                rows = StoreRows(writer, add)
                for seg in reader.segments():
                    rows.add(plan.apply(seg.columns), 0)
                meta = rank_metadata(plan.info, writer="convert")
                writer.commit(info.rank, meta)
    except (TraceLoadError, StoreWriteError) as exc:
        raise ConvertError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    if info.not_stored:
        log.warning("xpuprof convert: %s: %d events not stored (%s); counted in rank %d's not_stored_json", path,
                    sum(info.not_stored.values()), ", ".join(f"{k}: {v}" for k, v in info.not_stored.items()), info.rank)
    if taken is not None:
        taken[info.rank] = str(path)
    return Converted(path, info.rank, info.source, info.events, dict(writer.rows), dict(info.not_stored), meta)


def _convert_perfetto(path: Path, store, rank, position, replace: bool, taken, add=None) -> Converted:
    from ..read.perfetto import read_perfetto

    table = read_perfetto(path, rank=rank, position=position)
    info = table.traces[0]
    if info.merged_ranks or "mergedRanks" in info.header:
        raise ConvertError(f"{path}: is a merged view of ranks {info.merged_ranks} (xpuprof merge); convert the "
                           "per-rank traces instead")
    with RankWriter(store, replace=replace) as writer:
        _check_rank(path, writer, info.rank, info.source, taken)
        StoreRows(writer, add).add_table(table)
        meta = rank_metadata(info, writer="convert")
        writer.commit(info.rank, meta)
    if taken is not None:
        taken[info.rank] = str(path)
    return Converted(path, info.rank, info.source, info.events, dict(writer.rows), dict(info.not_stored), meta)


def _check_rank(path: Path, writer: RankWriter, rank: int, source: str, taken: dict[int, str] | None) -> None:
    if taken is not None and rank in taken:
        raise ConvertError(f"{path}: rank {rank} (from {source}) is also {taken[rank]}'s rank in this run: "
                           "mixed ranks; give each rank's trace once")
    writer.check_rank(rank)
