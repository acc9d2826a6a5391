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

from ...trace.read.store import Store, StoreError, verify_checksums
from ...trace.store_schema import RANKS_TABLE, TABLES
from .base import Engine, EngineError, Query, Reads, Task, default_group_events, default_memory_limit


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise EngineError("the duckdb engine needs the duckdb package: pip install 'xpuprof[scale]'") from None
    return duckdb


def literal_path(path: str) -> str:
    """``path`` as a DuckDB file pattern that matches that one file: DuckDB globs every path it reads
    (``run[1].store`` would read ``run1.store``), so ``*``, ``?`` and ``[`` become one-character classes;
    absolute, so no ``s3://``/``http://``-like prefix or ``~`` is taken for anything but a file name."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in os.path.abspath(path))


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join(_sql_text(literal_path(p)) for p in paths) + "]"


def _view(con, name: str, files: Sequence[str], ranks: Sequence[int] | None) -> None:
    """The view ``name`` over ``files``, with each file's ``rank`` (the partition it is in) as its last column
    when ``ranks`` are given. Not DuckDB's hive partitioning: it takes every ``key=value`` directory of the
    path as a column, so a store under ``/data/rank=7/`` would be rank 7 throughout and one under
    ``/data/name=x/`` would name every kernel ``x``."""
    if ranks is None:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_sql_list(files)}, hive_partitioning = false)")
        return
    pairs = ", ".join(f"({_sql_text(os.path.abspath(f))}, {int(r)})" for f, r in zip(files, ranks))
    con.execute(f"CREATE TEMP TABLE _{name}_files (filename VARCHAR, rank INTEGER)")
    if pairs:
        con.execute(f"INSERT INTO _{name}_files VALUES {pairs}")
    con.execute(f"CREATE VIEW {name} AS SELECT s.* EXCLUDE (filename), f.rank FROM read_parquet({_sql_list(files)}, "
                f"hive_partitioning = false, filename = true) s JOIN _{name}_files f USING (filename)")


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
            _view(con, table, store.files(table, ranks), ranks)
        _view(con, "ranks", store.files(RANKS_TABLE, ranks), None)
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def run_task(store: Store, ranks: Sequence[int], task: Query, params: dict, memory_limit: str | None,
             threads: int | None) -> Any:
    """One query task over ``ranks``; a DuckDB error reading a file becomes one StoreError line."""
    duckdb = _duckdb()
    verify_checksums(store, ranks)  # DuckDB verifies no checksum itself: a flipped bit would be other numbers
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
        from ...progress import bar

        groups = self._groups(units)
        out = []
        with bar("analyzing", sum(map(len, groups)), unit="ranks") as shown:
            for group in groups:
                out.append(map_group(self.source, group, task, params or {}, reads))
                shown.advance(len(group))
        return out

    def run(self, query: Query, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        store = self.store
        _duckdb()
        return [run_task(store, group, query, params or {}, self.memory_limit, self.threads)
                for group in self._groups(ranks)]
