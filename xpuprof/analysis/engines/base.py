"""What every engine shares (``Engine``, ``EngineError``, what a task reads, the defaults); the engines
import these, never the package that opens them."""
from __future__ import annotations

import os
import re
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
    """Slices per DuckDB task (the duckdb engine's unit of memory): ``XPUPROF_GROUP_EVENTS``, else 2 M."""
    raw = os.environ.get("XPUPROF_GROUP_EVENTS", "").strip()
    return 2_000_000 if not raw else check_count(raw, "XPUPROF_GROUP_EVENTS", MAX_GROUP_EVENTS)


def default_memory_limit() -> str:
    """DuckDB's memory limit: ``XPUPROF_DUCKDB_MEMORY`` (e.g. ``2GB``), else 1 GB (it spills beyond)."""
    raw = os.environ.get("XPUPROF_DUCKDB_MEMORY", "").strip()
    return "1GB" if not raw else check_memory_limit(raw, "XPUPROF_DUCKDB_MEMORY")


# ---------------------------------------------------------------- engine options, checked before any work
# DuckDB's own units (KB = 1000 bytes, KiB = 1024); a value is checked here so that a bad one is one line
# naming the option and what is valid, never a DuckDB parser traceback deep in the first query.
MEMORY_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
MIN_MEMORY_BYTES = 16 << 20  # below this DuckDB fails its first allocation ("Out of Memory Error")
MAX_MEMORY_BYTES = 1 << 50  # 1 PiB: more is a typo, and DuckDB refuses values past ~8 EiB
MAX_THREADS = 1024  # DuckDB starts them all at connect: --threads 99999999 hung the machine
MAX_GROUP_EVENTS = 1 << 40
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")


def check_memory_limit(value, name: str = "memory_limit") -> str:
    """``value`` as DuckDB's memory limit (``"2GB"``, ``"1.5 GiB"``), normalized; ``EngineError`` in one line
    naming ``name`` and what is valid."""
    m = _SIZE.match(str(value)) if isinstance(value, str) else None
    unit = MEMORY_UNITS.get(m.group(2).upper()) if m else None
    if unit is None:
        raise EngineError(f"{name} {value!r} is not a memory size: a number and one of DuckDB's units "
                          "(KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024), e.g. 2GB")
    size = float(m.group(1)) * unit
    if not MIN_MEMORY_BYTES <= size <= MAX_MEMORY_BYTES:
        raise EngineError(f"{name} {value!r} is {'less' if size < MIN_MEMORY_BYTES else 'more'} than DuckDB can "
                          f"work in: give between 16MiB and 1PiB")
    return f"{m.group(1)}{m.group(2)}"


def check_count(value, name: str, most: int) -> int:
    """A whole number between 1 and ``most`` (``EngineError`` in one line naming ``name``)."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())):
        raise EngineError(f"{name} must be a whole number from 1 to {most}, not {value!r}")
    n = int(value)
    if not 1 <= n <= most:
        raise EngineError(f"{name} must be a whole number from 1 to {most}, not {value!r}")
    return n


ENGINE_OPTIONS = {"duckdb": ("memory_limit", "threads", "group_events"),
                  "ray": ("memory_limit", "threads", "address", "groups")}


def check_engine_options(kind: str, options: dict, names: dict[str, str] | None = None) -> dict:
    """The options ``open_engine`` takes for engine ``kind``, each checked (None: the default), in one line
    naming the option as the caller spelled it (``names``: e.g. ``{"threads": "--threads"}``) - before any file
    is read or any cluster joined. An option the engine does not take is refused, not ignored."""
    names = names or {}
    out = dict(options)
    for key, value in options.items():
        name = names.get(key, key)
        if key not in ENGINE_OPTIONS[kind]:
            takers = [k for k, opts in ENGINE_OPTIONS.items() if key in opts]
            raise EngineError(f"{name} is an option of the {' and '.join(takers) or 'no'} engine, not of {kind}"
                              if takers else f"unknown engine option {name}; {kind} takes "
                              f"{', '.join(ENGINE_OPTIONS[kind])}")
        if value is None:
            continue
        if key == "memory_limit":
            out[key] = check_memory_limit(value, name)
        elif key == "threads":
            out[key] = check_count(value, name, MAX_THREADS)
        elif key in ("group_events", "groups"):
            out[key] = check_count(value, name, MAX_GROUP_EVENTS)
        elif key == "address" and (not isinstance(value, str) or not value.strip() or "\0" in value):
            raise EngineError(f"{name} {value!r} is not a Ray address (host:port, or ray://host:port)")
    return out


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
    import numpy as np  # here: `xpuprof analyze --help` reads ENGINES from this module and loads no numpy

    for trace, info in enumerate(table.traces):
        s = table.columns("slices", trace, keep=False)
        if not info.merged_ranks:
            yield info.rank, info, s
            continue
        rank = np.asarray(s.rank)
        for r in np.unique(rank[rank >= 0]).tolist():
            yield r, info, s.take(rank == r)
