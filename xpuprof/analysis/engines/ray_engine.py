"""Many machines: the store's rank partitions in groups, one Ray task per group, spread over the nodes.

Each task opens its own DuckDB on the node it runs on (``duckdb_engine.connect`` over its group's
files; the store must be visible there, as on a shared file system) and returns its partial
result; the driver combines them. No shuffle: a partial is a few rows per rank or per kernel.

Cluster: ``address`` or ``RAY_ADDRESS`` joins a running cluster; else a local one is started on
127.0.0.1 without a dashboard and shut down when the engine closes. A Ray already initialized in
this process (``ray.init`` by the caller) is used as it is and left running.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, Iterable, Sequence

from ...trace.read.store import Store
from .base import Engine, EngineError, Task
from .duckdb_engine import run_task

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


def _group_task(store: Store, ranks: Sequence[int], task: Task, params: dict, memory_limit: str | None,
                threads: int | None) -> tuple[str, Any]:
    import ray

    return ray.get_runtime_context().get_node_id(), run_task(store, ranks, task, params, memory_limit, threads)


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

    def __init__(self, store: Store, *, address: str | None = None, groups: int | None = None,
                 memory_limit: str | None = None, threads: int | None = 1) -> None:
        super().__init__(store)
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

    def run(self, task: Task, params: dict | None = None, ranks: Iterable[int] | None = None) -> list[Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ranks = self.store.ranks if ranks is None else sorted(ranks)
        nodes = self._nodes()
        n_groups = self.groups or max(len(nodes), int(sum(cpu for _, cpu in nodes)))
        refs = []
        groups = split_groups(ranks, n_groups)
        for i, group in enumerate(groups):
            part = Store(self.store.path, {r: self.store.partitions[r] for r in group})
            node = nodes[i % len(nodes)][0]  # round-robin: every node gets groups
            refs.append(self._remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True))
                        .remote(part, group, task, params or {}, self.memory_limit, self.threads))
        try:
            results = self._gather(refs, [len(g) for g in groups])
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
        self.nodes = [node for node, _ in results]
        return [partial for _, partial in results]

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
