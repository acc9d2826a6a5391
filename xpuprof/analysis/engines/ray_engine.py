"""Many machines: the source's units (a store's rank partitions, trace files) in groups, one Ray task per
group, spread over the nodes.

Each task reads its group on the node it runs on (``duckdb_engine.map_group``: a TraceTable; or, for a
query, ``duckdb_engine.connect``: DuckDB over its group's files), so the inputs must be visible there, as
on a shared file system, and returns its partial result; the driver combines them. No shuffle: a
partial is a few rows per rank or per kernel.

Cluster: ``address`` or ``RAY_ADDRESS`` joins a running cluster; else a local one is started on
127.0.0.1 without a dashboard and shut down when the engine closes. A Ray already initialized in
this process (``ray.init`` by the caller) is used as it is and left running.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, Iterable, Sequence

from .base import Engine, EngineError, Query, Reads, Task
from .duckdb_engine import map_group, run_task

log = logging.getLogger("xpuprof")


# Ray swaps 127.0.0.1 for this host's network address when it starts or joins a cluster, unless its
# "cluster" mode is off: then every node, driver and worker stays on the loopback address.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _ray(loopback: bool = False):
    imported = "ray" in sys.modules
    if loopback:  # the node and worker processes a local cluster starts read it from the environment
        os.environ.setdefault(LOOPBACK_ENV, "0")
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs the ray package: pip install 'xpuprof[scale]'") from None
    if loopback and imported and os.environ.get(LOOPBACK_ENV) == "0" and not ray.is_initialized():
        # ray read the variable when it was imported, before this: its driver side must see it as well
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


def _group_task(run, *args) -> tuple[str, Any]:
    import ray

    return ray.get_runtime_context().get_node_id(), run(*args)


def split_groups(ranks: Sequence[int], groups: int) -> list[list[int]]:
    """Contiguous, nearly equal groups of ranks (never an empty one)."""
    ranks = list(ranks)
    groups = max(1, min(groups, len(ranks)))
    size, extra = divmod(len(ranks), groups)
    out, at = [], 0
    for g in range(groups):
        n = size + (1 if g < extra else 0)
        out.append(ranks[at:at + n])
        at += n
    return out


class RayEngine(Engine):
    name = "ray"

    def __init__(self, source, *, address: str | None = None, groups: int | None = None,
                 memory_limit: str | None = None, threads: int | None = 1) -> None:
        super().__init__(source)
        address = address or os.environ.get("RAY_ADDRESS")
        ray = _ray(loopback=not address or address.rsplit(":", 1)[0] in ("127.0.0.1", "localhost"))
        self._ray = ray
        self._started = False
        self.groups = groups
        self.memory_limit = memory_limit
        self.threads = threads
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
                else:
                    ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", logging_level=logging.WARNING,
                             log_to_driver=False, configure_logging=True)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster on 127.0.0.1"
                raise EngineError(f"cannot start or join {where}: {str(exc).splitlines()[0]}") from None
            self._started = True
        self._remote = ray.remote(num_cpus=1)(_group_task)

    def _nodes(self) -> list[tuple[str, float]]:
        nodes = [(n["NodeID"], float(n.get("Resources", {}).get("CPU", 0))) for n in self._ray.nodes()
                 if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise EngineError("the Ray cluster has no alive node with a CPU")
        return sorted(nodes)

    def _spread(self, units, call) -> list[Any]:
        """``call(group)`` -> (function, args) per group of ``units``, one Ray task each, round-robin over the
        nodes (every node gets groups); the results in group order."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        units = self.source.units if units is None else sorted(units)
        nodes = self._nodes()
        n_groups = self.groups or max(len(nodes), int(sum(cpu for _, cpu in nodes)))
        refs = []
        groups = split_groups(units, n_groups)
        for i, group in enumerate(groups):
            node = nodes[i % len(nodes)][0]  # round-robin: every node gets groups
            refs.append(self._remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True))
                        .remote(*call(group)))
        try:
            results = self._gather(refs, [len(g) for g in groups])
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
        self.nodes = [node for node, _ in results]
        return [partial for _, partial in results]

    def map(self, task: Task, params: dict | None = None, reads: Reads = Reads(), units=None) -> list[Any]:
        return self._spread(units, lambda group: (map_group, self.source.part(group), group, task, params or {},
                                                  reads))

    def run(self, query: Query, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        self.store  # a query needs a store
        return self._spread(ranks, lambda group: (run_task, self.source.part(group).store, group, query, params or {},
                                                  self.memory_limit, self.threads))

    def _gather(self, refs: list, sizes: list[int]) -> list:
        """The tasks' results in order, a progress bar advancing by each group's ranks as it finishes."""
        from ...progress import bar

        size_of = dict(zip(refs, sizes))
        with bar("analyzing", sum(sizes), unit="ranks") as shown:
            waiting = list(refs)
            while waiting and shown.drawn:
                ready, waiting = self._ray.wait(waiting, num_returns=1)
                shown.advance(sum(size_of[r] for r in ready))
            return self._ray.get(refs)

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
