"""What every engine shares (``Engine``, ``EngineError``, what a task reads, the defaults); the engines
import these, never the package that opens them."""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

ENGINES = ("duckdb", "ray")
Task = Callable[[Any, dict], Any]  # (a rank group's TraceTable, params) -> a partial result
Query = Callable[[Any, Sequence[int], dict], Any]  # (a DuckDB connection, the group's ranks, params) -> rows


class EngineError(ValueError):
    """An engine that cannot run here or as configured; the message says what to do."""


@dataclass(frozen=True)
class Reads:
    """What a task reads of its rank group (push-down): the kinds of rows, and per kind the store columns it
    needs beyond where and when a row is (None: every column)."""

    kinds: tuple[str, ...] = ("slices",)
    columns: dict | None = None


def default_group_events() -> int:
    """Slices per rank group (the embedded engine's unit of memory): ``XPUPROF_GROUP_EVENTS``, else 2 M."""
    try:
        return int(os.environ.get("XPUPROF_GROUP_EVENTS", "") or 2_000_000)
    except ValueError:
        raise EngineError(f"XPUPROF_GROUP_EVENTS must be a whole number, not {os.environ['XPUPROF_GROUP_EVENTS']!r}") from None


def default_memory_limit() -> str:
    """DuckDB's memory limit: ``XPUPROF_DUCKDB_MEMORY`` (e.g. ``2GB``), else 1 GB (it spills beyond)."""
    return os.environ.get("XPUPROF_DUCKDB_MEMORY", "1GB")


class Engine(ABC):
    """Runs tasks over the rank groups of a source (``sources``: a trace store, or trace files)."""

    name = ""

    def __init__(self, source) -> None:
        self.source = source
        self.nodes: list[str] = []  # where the last run's tasks ran (one entry per task)

    @property
    def store(self):
        """The trace store the engine reads (``EngineError`` when it reads trace files)."""
        return self.source.need_store("a trace store")

    @property
    def ranks(self) -> list[int]:
        return self.source.ranks

    @abstractmethod
    def map(self, task: Task, params: dict | None = None, reads: Reads = Reads(),
            units: Iterable | None = None) -> list[Any]:
        """``task(table, params)`` per group of the source's units (a store's ranks, the trace files), each
        group read as one TraceTable as ``reads`` says; the results in group order."""

    @abstractmethod
    def run(self, query: Query, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        """A DuckDB query per group of a store's ranks: ``query(con, ranks, params)`` on a connection whose
        views ``slices``, ``counters``, ``flows``, ``instants`` and ``ranks`` hold the group's ranks."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *_) -> None:
        self.close()


def per_rank_slices(table) -> Iterator[tuple[int, Any, Any]]:
    """(rank, its rank table row, its slice columns) per rank of a table (a merged view's rows by their own
    rank column; rows of no rank are left out)."""
    for trace, info in enumerate(table.traces):
        s = table.columns("slices", trace, keep=False)
        if not info.merged_ranks:
            yield info.rank, info, s
            continue
        rank = np.asarray(s.rank)
        for r in np.unique(rank[rank >= 0]).tolist():
            yield r, info, s.take(rank == r)
