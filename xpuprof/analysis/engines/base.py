"""What every engine shares (``Engine``, ``EngineError``, the task signature, the DuckDB defaults); the
engines import these, never the package that opens them."""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Sequence

from ...trace.read.store import Store

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
