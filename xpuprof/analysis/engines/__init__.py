"""One query API over a trace store, two engines.

An analysis is a *task* (a module-level function ``task(con, ranks, params)`` that queries a DuckDB
connection whose views ``slices``, ``counters``, ``flows``, ``instants`` and ``ranks`` hold the given
ranks only, and returns a small, mergeable partial result) plus a *combine* step on the driver.
Engines decide where tasks run:

* ``duckdb`` (the default): an embedded DuckDB in this process, the ranks in groups of a few million
  events run one after the other (memory is one group's however many ranks there are); DuckDB
  parallelizes each group's queries and spills to disk under its memory limit;
* ``ray``: the store's rank partitions split into groups, one Ray task per group running the same
  DuckDB queries on the node it is scheduled on (spread over the cluster's nodes), the partials
  combined here. It joins ``RAY_ADDRESS`` when set, else starts a local cluster on 127.0.0.1
  without a dashboard.

Both run the same task code and combine exact partials (integer sums, histogram counts, per-rank
rows), so they give the same answers.
"""
from __future__ import annotations

import importlib

from ...trace.read.store import Store, open_store
from .base import (ENGINES, Engine, EngineError, Task, check_engine_options, default_group_events,
                   default_memory_limit)


def open_engine(store, kind: str = "duckdb", **options) -> Engine:
    """An engine over ``store`` (a path or an opened ``Store``). Options: ``memory_limit`` and
    ``threads`` (duckdb, and each Ray task's DuckDB); ``group_events`` (duckdb); ``address``,
    ``groups`` (ray)."""
    if kind not in ENGINES:
        raise EngineError(f"unknown engine {kind!r}; valid: {', '.join(ENGINES)}")
    options = check_engine_options(kind, options)
    for package in ("duckdb", "pyarrow") + (("ray",) if kind == "ray" else ()):  # before reading anything
        try:
            importlib.import_module(package)
        except ImportError:
            raise EngineError(f"the {kind} engine needs the {package} package: pip install 'xpuprof[scale]'") from None
    if not isinstance(store, Store):
        store = open_store(store)
    if kind == "duckdb":
        from .duckdb_engine import DuckDBEngine

        return DuckDBEngine(store, **options)
    from .ray_engine import RayEngine

    return RayEngine(store, **options)


__all__ = ["ENGINES", "Engine", "EngineError", "Task", "check_engine_options", "default_group_events",
           "default_memory_limit", "open_engine"]
