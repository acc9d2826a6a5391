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
import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Sequence

from ...trace.read.store import Store, open_store

ENGINES = ("duckdb", "ray")
Task = Callable[[Any, Sequence[int], dict], Any]


class EngineError(ValueError):
    """An engine that cannot run here or as configured; the message says what to do."""


def default_group_events() -> int:
    """Slices per DuckDB task (the duckdb engine's unit of memory): ``XPUPROF_GROUP_EVENTS``, else 2 M."""
    try:
        return int(os.environ.get("XPUPROF_GROUP_EVENTS", "") or 2_000_000)
    except ValueError:
        raise EngineError(f"XPUPROF_GROUP_EVENTS must be a whole number, not {os.environ['XPUPROF_GROUP_EVENTS']!r}") from None


def default_memory_limit() -> str:
    """DuckDB's memory limit: ``XPUPROF_DUCKDB_MEMORY`` (e.g. ``2GB``), else 1 GB (it spills beyond)."""
    return os.environ.get("XPUPROF_DUCKDB_MEMORY", "1GB")


class Engine(ABC):
    """Runs tasks over a store's ranks."""

    name = ""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.nodes: list[str] = []  # where the last run's tasks ran (one entry per task)

    @abstractmethod
    def run(self, task: Task, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        """The task's result per rank group, in rank order."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *_) -> None:
        self.close()


def open_engine(store, kind: str = "duckdb", **options) -> Engine:
    """An engine over ``store`` (a path or an opened ``Store``). Options: ``memory_limit`` and
    ``threads`` (duckdb, and each Ray task's DuckDB); ``group_events`` (duckdb); ``address``,
    ``groups`` (ray)."""
    if kind not in ENGINES:
        raise EngineError(f"unknown engine {kind!r}; valid: {', '.join(ENGINES)}")
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


__all__ = ["ENGINES", "Engine", "EngineError", "Task", "default_group_events", "default_memory_limit", "open_engine"]
