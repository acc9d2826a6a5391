"""Trace files loaded whole as dicts, for the analyses that still walk events one by one (``merge``; the
trace table is where the others read: ``trace.read``). The files are the ones the one directory rule names
(``trace.read.inputs``), read by the one bounded opener (``trace.read.load``), each trace's rank by the one
rule (``trace.read.kineto.resolve_rank``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..trace.read.inputs import InputsError, expand_inputs, say_skipped
from ..trace.read.kineto import merged_ranks, resolve_rank
from ..trace.read.load import TraceLoadError, load
from .event_table import TIME_LIMIT_NS, ReportError


@dataclass
class TraceFile:
    path: Path
    data: dict
    rank: int | None

    @property
    def base_ns(self) -> int:
        base = self.data.get("baseTimeNanoseconds") or 0
        if type(base) not in (int, float) or not abs(base) < TIME_LIMIT_NS:
            raise ReportError(f"{self.path}: baseTimeNanoseconds {base!r} is not a time (an integer of "
                              f"nanoseconds below {TIME_LIMIT_NS:.3g} in magnitude)")
        return int(base)

    @property
    def merged_ranks(self) -> list[int]:
        """The ranks a merged view (``xpuprof merge``) holds; [] for a one-rank trace."""
        return merged_ranks(self.data)


def rank_of(data: dict, path: Path | str = "") -> int | None:
    """The rank the trace names (``distributedInfo.rank``, else ``rank<N>`` in its file name), else None."""
    rank, source = resolve_rank(path, data)
    return rank if source in ("distributedInfo", "file name") else None


def load_traces(paths: Iterable[str | Path], say=None) -> list[TraceFile]:
    """Every trace file the paths stand for, loaded (``ReportError`` for one that cannot be); ``say``: where
    the lines on skipped files go."""
    try:
        files = expand_inputs(paths)
    except InputsError as exc:
        raise ReportError(str(exc)) from None
    say_skipped(files.notes, say)
    if files.stores:
        raise ReportError(f"{files.stores[0]} is a trace store; this reads trace files")
    if not files.traces:
        raise ReportError("no trace files given")
    from ..progress import bar
    from ..trace.read.inputs import input_bytes

    traces = []
    with bar("reading", len(files.traces), unit="traces", size_bytes=input_bytes(files.traces)) as shown:
        for p in files.traces:
            try:
                data = load(p)
            except TraceLoadError as exc:
                raise ReportError(str(exc)) from None
            traces.append(TraceFile(p, data, rank_of(data, p)))
            shown.advance()
    return traces
