"""What every engine shares (``Engine``, ``EngineError``, the task signature, the DuckDB defaults); the
engines import these, never the package that opens them."""
from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Sequence

from ...trace.read.store import Store

ENGINES = ("duckdb", "ray")
Task = Callable[[Any, Sequence[int], dict], Any]


class EngineError(ValueError):
    """An engine that cannot run here or as configured; the message says what to do."""


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
