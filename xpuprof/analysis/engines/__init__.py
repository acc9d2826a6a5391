"""One task API over trace stores and trace files, two engines.

An analysis is a *task* (a module-level function ``task(table, params)`` of a rank group's TraceTable,
read by the one reader of its format with the push-down the analysis names, ``Reads``) that returns a
small, mergeable partial result, plus a *combine* step on the driver (``Engine.map``). A query of your
own in SQL is ``query(con, ranks, params)`` over a DuckDB connection whose views ``slices``, ``counters``,
``flows``, ``instants`` and ``ranks`` hold a group of a store's ranks (``Engine.run``). Engines decide
where tasks run:

* ``duckdb`` (the default): this process, the ranks in groups of a few million events one after the
  other (memory is one group's however many ranks there are); queries run in an embedded DuckDB that
  spills to disk under its memory limit;
* ``ray``: the ranks (or trace files) split into groups, one Ray task per group on the node it is
  scheduled on (spread over the cluster's nodes), the partials combined here. It joins ``RAY_ADDRESS``
  when set, else starts a local cluster on 127.0.0.1 without a dashboard.

Both run the same task code and combine exact partials (integer sums, histogram counts, per-rank
rows), so they give the same answers.
"""
from __future__ import annotations

import importlib
import os

from .base import (ENGINES, Engine, EngineError, Query, Reads, Task, check_engine_options, default_group_events,
                   default_memory_limit)


def open_engine(inputs, kind: str = "duckdb", **options) -> Engine:
    """An engine over ``inputs``: a trace store (a path or an opened ``Store``) or Kineto JSON trace files
    and directories of them (``sources.open_source``). Options: ``memory_limit`` and ``threads`` (each
    DuckDB); ``group_events`` (duckdb); ``address``, ``groups`` (ray); ``say`` (where the lines on skipped
    files go)."""
    from ...trace.read.store import is_store
    from .sources import open_source

    if kind not in ENGINES:
        raise EngineError(f"unknown engine {kind!r}; valid: {', '.join(ENGINES)}")
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs if isinstance(inputs, (list, tuple)) else None
    store = paths is None or any(is_store(p) for p in paths)  # None: an opened Store or a source
    say = options.pop("say", None)
    options = check_engine_options(kind, options)
    needs = (("pyarrow",) if store else ()) + (("ray",) if kind == "ray" else ())
    for package in needs:  # before reading anything
        try:
            importlib.import_module(package)
        except ImportError:
            what = "a trace store" if package == "pyarrow" else f"the {kind} engine"
            raise EngineError(f"{what} needs the {package} package: pip install 'xpuprof[scale]'") from None
    source = open_source(inputs, say=say)
    if kind == "duckdb":
        from .duckdb_engine import DuckDBEngine

        return DuckDBEngine(source, **options)
    from .ray_engine import RayEngine

    return RayEngine(source, **options)


__all__ = ["ENGINES", "Engine", "EngineError", "Query", "Reads", "Task", "check_engine_options",
           "default_group_events", "default_memory_limit", "open_engine"]
