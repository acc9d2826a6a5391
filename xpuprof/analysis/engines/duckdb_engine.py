"""The embedded engine: rank groups one after the other in this process.

``map`` reads each group as a TraceTable (the analyses); ``run`` gives a DuckDB query a connection whose
views hold the group's ranks of a store, with a memory limit (DuckDB spills to a private temporary
directory beyond it). ``connect`` and ``map_group`` are also what each Ray task runs on its node.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any, Iterable, Sequence

from ...trace.read.store import Store, StoreError
from ...trace.store_schema import RANKS_TABLE, TABLES
from .base import Engine, EngineError, Query, Reads, Task, default_group_events, default_memory_limit


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise EngineError("the duckdb engine needs the duckdb package: pip install 'xpuprof[scale]'") from None
    return duckdb


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


@contextlib.contextmanager
def connect(store: Store, ranks: Sequence[int], *, memory_limit: str | None = None, threads: int | None = None):
    """A DuckDB connection with the views ``slices``, ``counters``, ``flows``, ``instants`` (each with the
    partition's ``rank`` column) and ``ranks`` (one metadata row per rank) over ``ranks``."""
    duckdb = _duckdb()
    spill = tempfile.mkdtemp(prefix="xpuprof-duckdb-")
    con = duckdb.connect(config={"memory_limit": memory_limit or default_memory_limit(),
                                 "temp_directory": spill, "preserve_insertion_order": False,
                                 **({"threads": int(threads)} if threads else {})})
    try:
        for table in TABLES:
            files = store.files(table, ranks)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_sql_list(files)}, "
                        "hive_partitioning = true, hive_types = {'rank': INTEGER})")
        con.execute(f"CREATE VIEW ranks AS SELECT * FROM read_parquet({_sql_list(store.files(RANKS_TABLE, ranks))})")
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def run_task(store: Store, ranks: Sequence[int], task: Query, params: dict, memory_limit: str | None,
             threads: int | None) -> Any:
    """One query task over ``ranks``; a DuckDB error reading a file becomes one StoreError line."""
    duckdb = _duckdb()
    try:
        with connect(store, ranks, memory_limit=memory_limit, threads=threads) as con:
            return task(con, list(ranks), dict(params))
    except duckdb.OutOfMemoryException as exc:
        raise EngineError(f"DuckDB ran out of memory under its {memory_limit or default_memory_limit()} limit "
                          f"({str(exc).splitlines()[0]}); raise it with XPUPROF_DUCKDB_MEMORY or "
                          "--memory-limit") from None
    except duckdb.Error as exc:
        text = str(exc).strip()
        if not isinstance(exc, (duckdb.IOException, duckdb.InvalidInputException)) and not any(
                w in text for w in ("arquet", "TProtocol", "Thrift", "magic")):
            raise  # not the data's fault: a bug to see whole
        first = text.splitlines()[0] if text else type(exc).__name__
        raise StoreError(f"{store.path}: a Parquet file is unreadable (truncated or corrupt?): {first}") from None


def map_group(source, units: Sequence, task: Task, params: dict, reads: Reads) -> Any:
    """One task over a group of the source's units, read as one TraceTable."""
    return task(source.read(list(units), reads), dict(params))


def rank_groups(source, units: Sequence, group_events: int) -> list[list]:
    """Consecutive units in groups of at most ``group_events`` slices each (by the source's weights; a bigger
    unit is a group of its own)."""
    groups: list[list] = []
    size = 0
    for unit in units:
        n = source.weight(unit)
        if not groups or size + n > group_events:
            groups.append([])
            size = 0
        groups[-1].append(unit)
        size += n
    return groups


class DuckDBEngine(Engine):
    """Units in groups of about ``group_events`` slices, one group after the other: memory stays that of one
    group however many ranks the source holds (the analyses combine the groups' partials as they combine
    Ray's)."""

    name = "duckdb"

    def __init__(self, source, *, memory_limit: str | None = None, threads: int | None = None,
                 group_events: int | None = None) -> None:
        super().__init__(source)
        self.memory_limit = memory_limit
        self.threads = threads
        self.group_events = default_group_events() if group_events is None else int(group_events)
        if self.group_events < 1:
            raise EngineError(f"group_events must be positive, not {group_events}")

    def _groups(self, units) -> list[list]:
        units = self.source.units if units is None else sorted(units)
        groups = rank_groups(self.source, units, self.group_events) or [[]]
        self.nodes = [f"local:{os.getpid()}"] * len(groups)
        return groups

    def map(self, task: Task, params: dict | None = None, reads: Reads = Reads(), units=None) -> list[Any]:
        return [map_group(self.source, group, task, params or {}, reads) for group in self._groups(units)]

    def run(self, query: Query, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        store = self.store
        _duckdb()
        return [run_task(store, group, query, params or {}, self.memory_limit, self.threads)
                for group in self._groups(ranks)]
