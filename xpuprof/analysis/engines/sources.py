"""What an engine reads: a trace store (its rank partitions) or Kineto JSON trace files (one trace each),
in groups, each group as one TraceTable by the one reader of its format (``trace.read``).

A source has ``units`` (a store's ranks; the files' positions among the inputs), a ``weight`` per unit
(slices; a file's size) that the embedded engine groups them by, and ``read(units, reads)``. It is
pickled to Ray's workers as it is: paths, not open files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .base import EngineError, Reads


class StoreSource:
    """A trace store's rank partitions (``trace.read.store_table``: push-down of kinds and columns)."""

    def __init__(self, store) -> None:
        self.store = store
        self.path = store.path

    @property
    def units(self) -> list[int]:
        return self.store.ranks

    ranks = units

    def weight(self, rank: int) -> int:
        return int(self.store.meta(rank).get("slices") or 0)

    def read(self, ranks: Sequence[int], reads: Reads):
        from ...trace.read.store_table import read_store

        return read_store(self.store, ranks=ranks, kinds=reads.kinds, columns=reads.columns)

    def part(self, ranks: Sequence[int]) -> "StoreSource":
        """The source of these ranks only (what one Ray task is given)."""
        from ...trace.read.store import Store

        return StoreSource(Store(self.store.path, {r: self.store.partitions[r] for r in ranks}))

    def need_store(self, what: str):
        return self.store


class TraceFiles:
    """Kineto JSON trace files, each one trace (``trace.read.kineto``: its rank by the one rank rule, its
    position counted among all the files)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self.path = self.paths[0].parent if self.paths else Path(".")

    @property
    def units(self) -> list[int]:
        return list(range(len(self.paths)))

    @property
    def ranks(self) -> list[int]:
        raise EngineError("the ranks of trace files are known once they are read")

    def weight(self, unit: int) -> int:
        return self.paths[unit].stat().st_size // 100  # about one event per 100 bytes of JSON

    def read(self, units: Sequence[int], reads: Reads):
        from ...trace.read.kineto import read_trace
        from ...trace.table.model import TraceTable

        return TraceTable.concat(read_trace(self.paths[u], position=u, kinds=reads.kinds)
                                 for u in units)

    def part(self, units: Sequence[int]) -> "TraceFiles":
        return self  # paths only: cheap to ship whole

    def need_store(self, what: str):
        raise EngineError(f"{what} is needed here, and the inputs are trace files; make one with "
                          f"`xpuprof convert {' '.join(map(str, self.paths[:2]))}{' ...' if len(self.paths) > 2 else ''}"
                          " -o job.store`")


def open_source(inputs, *, say=None):
    """The source ``inputs`` name: an opened ``Store``, a store directory, or trace files and directories of
    them (the one directory rule, ``trace.read.inputs``); ``say``: where its lines on skipped files go."""
    from ...trace.read.inputs import InputsError, expand_inputs, say_skipped
    from ...trace.read.store import Store, StoreError, open_store

    if isinstance(inputs, (StoreSource, TraceFiles)):
        return inputs
    if isinstance(inputs, Store):
        return StoreSource(inputs)
    paths = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    try:
        got = expand_inputs(paths)
    except InputsError as exc:
        if exc.empty_dir is not None:
            raise StoreError(f"{exc.empty_dir}: not a trace store, and no *.json or *.json.gz trace files under it") \
                from None
        raise StoreError(str(exc)) from None
    if got.stores and (got.traces or len(got.stores) > 1):
        raise StoreError(f"{got.stores[0]} is a trace store: give it alone (a store holds every rank; convert more "
                         "traces into it with `xpuprof convert`)")
    if got.stores:
        return StoreSource(open_store(got.stores[0]))
    say_skipped(got.notes, say)
    return TraceFiles(got.traces)
