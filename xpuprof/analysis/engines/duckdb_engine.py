"""The embedded engine: DuckDB in this process over the store's Parquet files.

``connect`` is also what each Ray task runs on its node: a connection whose views hold the given
ranks only, with a memory limit (DuckDB spills to a private temporary directory beyond it).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any, Iterable, Sequence

from ...trace.read.store import Store, StoreError
from ...trace.store_schema import RANKS_TABLE, TABLES
from .base import Engine, EngineError, Task, default_group_events, default_memory_limit


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


def run_task(store: Store, ranks: Sequence[int], task: Task, params: dict, memory_limit: str | None,
             threads: int | None) -> Any:
    """One task over ``ranks``; a DuckDB error reading a file becomes one StoreError line."""
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


def rank_groups(store: Store, ranks: Sequence[int], group_events: int) -> list[list[int]]:
    """Consecutive ranks in groups of at most ``group_events`` slices each (by the ranks' metadata;
    a bigger rank is a group of its own)."""
    groups: list[list[int]] = []
    size = 0
    for rank in ranks:
        n = int(store.meta(rank).get("slices") or 0)
        if not groups or size + n > group_events:
            groups.append([])
            size = 0
        groups[-1].append(rank)
        size += n
    return groups


class DuckDBEngine(Engine):
    """Ranks in groups of about ``group_events`` slices, one group after the other, each in a fresh
    connection: memory stays that of one group's queries however many ranks the store holds (every
    task is per rank; the analyses combine the groups' partials as they combine Ray's)."""

    name = "duckdb"

    def __init__(self, store: Store, *, memory_limit: str | None = None, threads: int | None = None,
                 group_events: int | None = None) -> None:
        super().__init__(store)
        _duckdb()
        self.memory_limit = memory_limit
        self.threads = threads
        self.group_events = default_group_events() if group_events is None else int(group_events)
        if self.group_events < 1:
            raise EngineError(f"group_events must be positive, not {group_events}")

    def run(self, task: Task, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        ranks = self.store.ranks if ranks is None else sorted(ranks)
        groups = rank_groups(self.store, ranks, self.group_events) or [[]]
        self.nodes = [f"local:{os.getpid()}"] * len(groups)
        return [run_task(self.store, group, task, params or {}, self.memory_limit, self.threads) for group in groups]
