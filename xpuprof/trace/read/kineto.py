"""The one Kineto JSON reader: a trace file (``.json``/``.json.gz``) as a TraceTable.

``read_trace(path)`` reads a whole file into a table; ``TraceReader(path).segments()`` gives the same
rows a chunk at a time (``xpuprof convert`` writes each as it comes: memory bounded by a chunk), with the
rank table's row after the last; ``read_header(path)`` gives the top-level keys alone. Which of the two
implementations reads the document - the C scanner, streaming, or orjson over the whole document - is
decided in ``kineto_stream``, never by a caller; how a file is opened and bounded, in ``source``.

The rank of a trace, one rule for every command: ``rank`` when the caller gives one, else
``distributedInfo.rank``, else ``rank<N>``/``rank-N``/``rank_N`` in the file name, else its ``position``
among the inputs, else 0 (``RankInfo.source`` says which; only the first three count as the trace naming
its rank). A merged view (``xpuprof merge``: a ``mergedRanks`` key) holds several ranks: each row's rank
comes from its pid (``trace.ids.merged_row_ranks``: the view's pid table, its stride, or the stride of views
written before pids stayed within 32 bits).
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import numpy as np

from ..ids import LEGACY_MERGED_PID_STRIDE, merged_row_ranks
from ..table.columns import constant
from ..table.model import FlatSegment, RankInfo, TraceTable
from .kineto_rows import TIME_LIMIT_NS, KinetoRows
from .kineto_stream import KinetoStream
from .source import TraceLoadError

MERGED_RANK_PID_STRIDE = LEGACY_MERGED_PID_STRIDE  # merged views written before pids stayed within 32 bits
_RANK_IN_NAME = re.compile(r"(?:^|[^A-Za-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)

__all__ = ["MERGED_RANK_PID_STRIDE", "TraceLoadError", "TraceReader", "read_document", "read_header", "read_trace",
           "resolve_rank", "time_error"]


def rank_from_name(path) -> int | None:
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def distributed_rank(header: dict) -> int | None:
    info = header.get("distributedInfo")
    r = info.get("rank") if isinstance(info, dict) else None
    return r if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 1 << 31 else None


def resolve_rank(path, header: dict, rank: int | None = None, position: int | None = None) -> tuple[int, str]:
    """(rank, where it came from): the module's rule."""
    if rank is not None:
        return int(rank), "given"
    got = distributed_rank(header)
    if got is not None:
        return got, "distributedInfo"
    got = rank_from_name(path)
    if got is not None and got < 1 << 31:
        return got, "file name"
    if position is not None:
        return int(position), "position"
    return 0, "default"


def merged_ranks(header: dict) -> list[int]:
    """The ranks a merged view (``xpuprof merge``) holds; [] for one rank's trace."""
    merged = header.get("mergedRanks")
    ranks = merged.get("ranks") if isinstance(merged, dict) else None
    return [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)] if isinstance(ranks, list) else []


def base_time(header: dict) -> tuple[int, object]:
    """(``baseTimeNanoseconds`` as int ns, or 0; the value when the trace has one that is not a time)."""
    v = header.get("baseTimeNanoseconds")
    if v is None:
        return 0, None
    if type(v) in (int, float) and math.isfinite(v) and abs(v) < TIME_LIMIT_NS:
        return int(v), None
    return 0, v


class TraceReader:
    """One Kineto JSON file as the trace table's segments (see the module docstring). ``segments()`` yields
    ``FlatSegment``s whose ``ts`` are ns after the trace's base time and whose rank column is provisional;
    once it is exhausted, ``info`` is the trace's rank table row and ``finish(segments)`` gives the
    segments with their epoch times and ranks."""

    def __init__(self, path, *, rank: int | None = None, position: int | None = None,
                 chunk_bytes: int | None = None, limit: int | None = None, kinds=None, slice_args=True,
                 counters=True, document=None, accept=("json",)) -> None:
        self.path = Path(path)
        self.rank, self.position = rank, position
        kw = {"limit": limit} if limit is not None else {}
        kw["accept"] = accept
        kw.update({"document": document} if document is not None else {})
        self.stream = KinetoStream(self.path, **kw) if chunk_bytes is None else KinetoStream(self.path, chunk_bytes, **kw)
        self.rows = KinetoRows(kinds=kinds, slice_args=slice_args, counters=counters)
        self.info: RankInfo | None = None

    @property
    def header(self) -> dict:
        """The top-level keys read so far (all of them once ``segments()`` is exhausted)."""
        return self.stream.header

    def segments(self) -> Iterator[FlatSegment]:
        for chunk in self.stream.chunks():
            made = self.rows.add(chunk)
            del chunk  # its bytes and columns go before the next chunk is read
            for cols in made:
                yield FlatSegment(cols, 0)
            del made
        self.info = self._info()

    def _info(self) -> RankInfo:
        header = self.stream.header
        rows = self.rows
        base, bad_base = base_time(header)
        merged = merged_ranks(header)
        if merged:
            rank, source = -1, "merged view"
        else:
            rank, source = resolve_rank(self.path, header, self.rank, self.position)
        warnings = []
        if rows.not_stored:
            warnings.append(f"{sum(rows.not_stored.values())} events not stored: "
                            + ", ".join(f"{k}: {v}" for k, v in rows.not_stored.items()))
        if source in ("position", "default"):
            warnings.append(f"rank taken from the input's {'position' if source == 'position' else 'default (0)'}: "
                            "the trace has no distributedInfo.rank and its name no rank<N>")
        info = RankInfo(rank, source, header=dict(header), metadata_events=list(rows.meta_events), base_time_ns=base,
                        first_ts_ns=None if rows.first_ts is None else base + rows.first_ts, sources=[str(self.path)],
                        warnings=warnings, not_stored=dict(rows.not_stored),
                        ts_kind="float" if rows.float_ts else "int")
        info.bad_times = list(rows.bad_times)
        info.bad_base = bad_base
        info.merged_ranks = merged
        info.events = self.stream.events_read
        info.metadata_order = list(rows.meta_order)
        return info

    def finish(self, segments: list[FlatSegment], trace: int = 0) -> list[FlatSegment]:
        """The segments read, with their epoch times (the base time the file said), rank column and trace
        index."""
        info = self.info
        out = []
        for seg in segments:
            cols = seg.columns
            if info.merged_ranks:
                rank = merged_row_ranks(cols.pid, np.asarray(cols.pid_label) == -1, info.header.get("mergedRanks"))
            else:
                rank = constant(info.rank, len(cols), np.int32)
            out.append(FlatSegment(replace(cols, rank=rank), info.rank, trace, info.base_time_ns))
        return out


def read_trace(path, *, rank: int | None = None, position: int | None = None, kinds=None,
               slice_args=True, counters=True, accept=("json",)) -> TraceTable:
    """The whole trace file as a TraceTable (one trace; see the module docstring for its rank). Push-down:
    ``kinds`` (the kinds of rows to make, None: all) and ``slice_args`` (``KinetoRows``: the args of every
    slice, of none, or of the slices whose name satisfies a function) and ``counters`` (every counter event,
    or those whose category satisfies a function). ``accept``: ``source.FORMATS`` when the caller reads a
    Perfetto protobuf file otherwise (``kineto_stream.NotKinetoJson`` says the file is one: opened once)."""
    reader = TraceReader(path, rank=rank, position=position, kinds=kinds, slice_args=slice_args, counters=counters,
                         accept=accept)
    segments = list(reader.segments())
    return TraceTable(reader.finish(segments), [reader.info])


def read_document(document, name: str = "<events>", *, rank: int | None = None, kinds=None) -> TraceTable:
    """A trace already parsed - a document dict, or a list of event dicts (times in µs) - as a TraceTable, by
    the rules a file's events follow (``name`` stands for the file in messages and rank rules)."""
    reader = TraceReader(name, rank=rank, kinds=kinds, document=document)
    segments = list(reader.segments())
    return TraceTable(reader.finish(segments), [reader.info])


def read_header(path) -> dict:
    """The trace's top-level keys (its events are scanned, not kept)."""
    stream = KinetoStream(Path(path))
    for _ in stream.chunks():
        pass
    return dict(stream.header)


def time_error(info: RankInfo) -> str | None:
    """What makes a trace's times unusable, said once for every command that reads it (``report`` refuses the
    trace, ``convert`` stores nothing of it): a ``baseTimeNanoseconds`` that is no time, or the first event
    whose ts or dur no trace can hold (the reader counted them and kept the first few: ``bad_times``). None
    when its times are all usable. Never a value replaced by 0 or null without a word."""
    from .kineto_rows import TIME_LIMIT_NS

    if info.bad_base is not None:
        return (f"baseTimeNanoseconds {info.bad_base!r} is not a time (an integer of nanoseconds below "
                f"{TIME_LIMIT_NS:.3g} in magnitude)")
    if info.bad_times:
        event, key, value = info.bad_times[0]
        limit_us = (TIME_LIMIT_NS - abs(info.base_time_ns)) / 1000
        return (f"event {event[:80]!r} has {key} {value!r}, which is not a time a trace can hold (a finite number of "
                f"microseconds below {limit_us:.3g} in magnitude)")
    return None
