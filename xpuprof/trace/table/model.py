"""TraceTable: the one in-memory model of a trace (docs/architecture.md, "The trace table").

A table is a list of *segments* in file order plus a rank table. A segment holds one kind of rows
(slices, counters, flows, instants) of one rank, either

* a TraceBuilder batch as the producer left it (``BatchSegment``: zero-copy at ``TraceBuilder.freeze()``;
  the Chrome writer renders it as it always did, byte for byte, and fast), or
* flat columns (``FlatSegment``: ``columns.SliceColumns`` ...), as the readers of Kineto JSON and of the
  trace store make them.

Every segment gives its flat columns on demand (``BatchSegment.flat``), and the table concatenates them
per kind (``table.slices`` ...), strings merged into one dictionary: what the analyses, the store writer
and the comparer read. Many ranks are one table: each segment knows its rank, and the flat columns carry
it as the ``rank`` column. The rank table (``ranks``: ``RankInfo`` per rank) holds what is not a row: the
trace's top-level keys (``header``), its metadata ("M") rows, its base time, where its rank came from.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ...clock import BASE_TIME_NS
from .columns import COLUMN_SETS, KINDS, Columns

NAMED_RANK_SOURCES = ("distributedInfo", "file name", "given", "environment", "merged view")
CHUNK_ROWS = 1 << 17  # rows of a builder batch flattened at a time (the store writer's chunks)


class RankInfo:
    """One row of the rank table. ``header``: the trace's top-level keys other than traceEvents;
    ``metadata_events``: its "M" rows (dicts, file order); ``base_time_ns``: its ``baseTimeNanoseconds``;
    ``first_ts_ns``: the earliest ts of any of its events (epoch ns, None for no event); ``source``: where
    the rank number came from (``store_schema.RANK_SOURCES``); ``sources``: the files it was read from."""

    def __init__(self, rank: int, source: str, *, header: Mapping | Callable[[], dict] | None = None,
                 metadata_events: list | Callable[[], list] | None = None, base_time_ns: int = 0,
                 first_ts_ns: int | None | Callable[[], int | None] = None, sources: Iterable[str] = (),
                 warnings: Iterable[str] = (), not_stored: Mapping[str, int] | None = None, ts_kind: str = "int",
                 writer: str = "") -> None:
        self.rank, self.source = int(rank), source
        self.bad_times: list[tuple] = []  # (event name, "ts"/"dur", value): events whose times no trace can hold
        self.bad_base = None  # the trace's baseTimeNanoseconds when it is not a time (then 0 is used)
        self.merged_ranks: list[int] = []  # the ranks of a merged view (xpuprof merge); rows carry their own
        self.events = 0  # events the trace holds (read)
        self.metadata_order: list[int] | None = None  # each metadata row's index in the file, when known
        self._header, self._meta, self._first = header, metadata_events, first_ts_ns
        self.base_time_ns = int(base_time_ns)
        self.sources, self.warnings = list(sources), list(warnings)
        self.not_stored = dict(not_stored or {})
        self.ts_kind, self.writer = ts_kind, writer
        self.origin = self.sources[0] if self.sources else ""  # where its rows were read from (a file, a partition)

    @property
    def named(self) -> bool:
        """Whether the trace said its rank (not taken from its position among the inputs or a default)."""
        return self.source in NAMED_RANK_SOURCES

    @property
    def header(self) -> dict:
        if callable(self._header):
            self._header = self._header()
        return dict(self._header or {})

    @property
    def metadata_events(self) -> list:
        if callable(self._meta):
            self._meta = self._meta()
        return list(self._meta or [])

    @property
    def first_ts_ns(self) -> int | None:
        if callable(self._first):
            self._first = self._first()
        return self._first

    def __repr__(self) -> str:
        return f"RankInfo(rank={self.rank}, source={self.source!r}, sources={self.sources})"


class Segment(ABC):
    """Rows of one kind of one trace (``trace``: its index in the table's rank table)."""

    kind: str
    rank: int
    trace: int = 0

    @abstractmethod
    def __len__(self) -> int:
        """The segment's row count."""

    @abstractmethod
    def flat(self) -> Columns:
        """The segment's rows as one set of flat columns."""

    def flat_chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Columns]:
        """The flat columns a piece at a time (bounded memory for big batches)."""
        yield self.flat()


@dataclass
class FlatSegment(Segment):
    """Flat columns; ``ts_base``: what their ``ts`` lacks to be epoch ns (a reader's columns hold ns after
    the trace's base time, which the file may say only after its events)."""

    columns: Columns
    rank: int = 0
    trace: int = 0
    ts_base: int = 0

    def __post_init__(self) -> None:
        self.kind = self.columns.KIND
        self._epoch: Columns | None = None

    def __len__(self) -> int:
        return len(self.columns)

    def flat(self) -> Columns:
        if not self.ts_base:
            return self.columns
        if self._epoch is None:
            from dataclasses import replace

            self._epoch = replace(self.columns, ts=np.asarray(self.columns.ts, np.int64) + np.int64(self.ts_base))
        return self._epoch


@dataclass
class BatchSegment(Segment):
    """A builder batch; ``order``: the file index of its first event."""

    kind: str
    batch: Any
    flattener: Any
    order: int
    rank: int = 0
    trace: int = 0

    def __len__(self) -> int:
        return len(self.batch)

    def _part(self, sel: slice) -> Columns:
        order = np.arange(self.order + sel.start, self.order + sel.stop, dtype=np.int64)
        return getattr(self.flattener, self.kind)(self.batch, sel, order)

    def flat(self) -> Columns:
        return self._part(slice(0, len(self.batch)))

    def flat_chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Columns]:
        n = len(self.batch)
        for lo in range(0, n, rows):
            yield self._part(slice(lo, min(lo + rows, n)))


class TraceTable:
    """Segments of rows in file order and the rank table (see the module docstring): ``traces`` holds one
    ``RankInfo`` per trace the table was made of (a file, a builder, a store's rank partition), in order;
    each segment's ``trace`` is its index there. Two traces may name the same rank (two runs of rank 0)."""

    def __init__(self, segments: Iterable[Segment], traces: Iterable[RankInfo], *, builder=None,
                 vendor_categories: bool = True) -> None:
        self.segments = list(segments)
        self.traces = list(traces)
        self.builder = builder  # the TraceBuilder a frozen table views (the Chrome writer renders it)
        self.vendor_categories = vendor_categories
        self.layout = None  # what the layout pass did, once it ran (trace.layout.lay_out: writers run it)
        self._flat: dict[tuple, Columns] = {}

    @property
    def ranks(self) -> dict[int, RankInfo]:
        """rank -> its RankInfo (the first trace of that rank)."""
        out: dict[int, RankInfo] = {}
        for info in self.traces:
            out.setdefault(info.rank, info)
        return out

    # ------------------------------------------------------------------ building
    @classmethod
    def concat(cls, tables: Iterable["TraceTable"]) -> "TraceTable":
        """One table of several (ranks together); segments keep their order, table after table."""
        from dataclasses import replace

        segments, traces = [], []
        for t in tables:
            base = len(traces)
            traces += t.traces
            segments += [s if not base else replace(s, trace=s.trace + base) for s in t.segments]
        return cls(segments, traces)

    # ------------------------------------------------------------------ reading
    def segments_of(self, kind: str) -> list[Segment]:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
        return [s for s in self.segments if s.kind == kind]

    def columns(self, kind: str, trace: int | None = None, *, keep: bool = True) -> Columns:
        """Every row of one kind (of one trace: ``trace``) as one flat column set, made once and kept
        (``keep=False``: made for a caller that reads it once, not kept beside the segments)."""
        key = (kind, trace)
        got = self._flat.get(key)
        if got is None:
            parts = [s.flat() for s in self.segments_of(kind) if trace is None or s.trace == trace]
            got = COLUMN_SETS[kind].concat(parts)
            if keep:
                self._flat[key] = got
        return got

    @property
    def slices(self):
        return self.columns("slices")

    @property
    def counters(self):
        return self.columns("counters")

    @property
    def flows(self):
        return self.columns("flows")

    @property
    def instants(self):
        return self.columns("instants")

    def __len__(self) -> int:
        return sum(len(s) for s in self.segments)

    def rank_list(self) -> list[int]:
        return sorted({info.rank for info in self.traces})

    def header(self, trace: int | None = None) -> dict:
        """The top-level keys of one trace (the only one's when ``trace`` is None)."""
        if trace is None:
            if len(self.traces) != 1:
                raise ValueError(f"the table holds {len(self.traces)} traces: name one")
            trace = 0
        return self.traces[trace].header

    def to_arrow(self, kind: str):
        """One kind's flat columns as a pyarrow Table (numeric columns not copied); see ``arrow``."""
        from .arrow import to_arrow

        return to_arrow(self.columns(kind))

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={sum(len(s) for s in self.segments_of(k))}" for k in KINDS)
        return f"TraceTable(ranks={self.rank_list()}, {counts})"


def base_time_ns() -> int:
    """The base time this process writes traces against (``clock.BASE_TIME_NS``)."""
    return BASE_TIME_NS


__all__ = ["BatchSegment", "FlatSegment", "RankInfo", "Segment", "TraceTable"]
