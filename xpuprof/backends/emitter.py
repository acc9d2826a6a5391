"""The emit stage's one shape: ``Emitter``, the base of every vendor's emitter.

``XpuEmitter`` (PTI), ``CudaEmitter`` (CUPTI) and ``RocmEmitter`` (rocprofiler-sdk), each in
``backends/<vendor>/emit.py``, derive from it, and so does everything that writes device records
the way a real backend does (the simulated device hands its vendor-shaped records to them).

An emitter is made once per session, with what resolving records needs across batches (name tables,
the dependency resolver, stream numbering), and writes one batch of its records stage's record
columns at a time::

    result = emitter.write(builder, window, records)

``write`` sets the batch up (``self.b``, ``self.window``, the counts) and calls ``write_batch``,
which the vendor writes: the order of its record kinds and the tables they share (External ids,
flow ends). Every vendor has the same verbs, one per kind of record all of them write:

- ``write_kernels(rows)``: kernels on their device's stream rows;
- ``write_copies(rows)``: memory copies;
- ``write_fills(rows)``: memory fills (memsets);
- ``write_syncs(rows)``: synchronizations;
- ``write_api(rows)``: runtime (and driver) calls on their host threads.

A vendor's other kinds (peer-to-peer copies, overhead, events, collectives) are verbs of its own
(``write_p2p``, ``write_overhead`` ...). The steps every vendor shares are here: the activity
selection (``wants``), the capture window (``in_window``: the records it drops counted once, under
the vendor's name), slices (``slices``: one ``add_slices`` per call, counted per category), stream
and device rows (``name_streams``, ``name_devices``) and ``ac2g`` flows drawn once per batch between the host calls and device
rows that share a correlation id (``flow_ends``; ``backends/common.add_flow_ends``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ..activity import ActivityType
from .base import ProcessWindow
from .common import add_flow_ends, keep_in_window, kept, name_stream_rows

__all__ = ["DEVICE_SORT_BASE", "EMITTER_VERBS", "VENDOR_PROCESS_PIDS", "EmitResult", "Emitter"]

# The public verbs every vendor's emitter has (tests/contracts name them too).
EMITTER_VERBS = ("write", "write_kernels", "write_copies", "write_fills", "write_syncs", "write_api")
DEVICE_SORT_BASE = 5_000_000  # Kineto's kExceedMaxPid: device processes sort after host ones
# The process of a vendor runtime's own rows (XPU syncs and collection overhead, CUPTI overhead).
# Kineto writes them under pid -1, which Perfetto maps to 0, merging them into device 0's process
# (and renaming it). Here each vendor's get a pid of their own that no real process and no device
# index can have: above every OS's process ids (Linux's pid_max is at most 2^22, macOS's below
# 100,000, Windows' are multiples of 4), within 31 bits (Perfetto keeps pids within 32 bits, its
# protobuf ProcessDescriptor holds an int32). docs/consumers.md says so.
VENDOR_PROCESS_PIDS = {"xpu": 0x7FFF_FFFE, "cuda": 0x7FFF_FFFD}


@dataclass
class EmitResult:
    """What one ``write`` did: slices written by category, and the errors its records showed."""

    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Emitter(ABC):
    """One vendor's emit stage: record columns of its records stage -> ``TraceBuilder`` rows."""

    vendor: ClassVar[str]  # the ``vendor`` of every row written (the categories it maps to)

    def __init__(self, activities) -> None:
        self.activities = frozenset(activities)
        self.b: Any = None  # the batch's builder and window, while ``write`` runs
        self.window: ProcessWindow | None = None
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self._device_parts: list[tuple] = []
        self._host_parts: list[tuple] = []

    # ------------------------------------------------------------------ the batch
    def write(self, builder, window: ProcessWindow | None, records, *, release: bool = False) -> EmitResult:
        """Write one batch of ``records`` into ``builder``, inside ``window`` (None: all of them).
        ``release``: ``records`` is the caller's to give up; each kind is dropped from it once
        written, so memory holds the records about once at any time."""
        self.b, self.window = builder, window
        self.counts, self.errors = {}, []
        self._device_parts, self._host_parts = [], []
        try:
            self.start_batch()
            self.write_batch(records, release=release)
            add_flow_ends(builder, self._device_parts, self._host_parts)
            return self.result()
        finally:
            self.b = self.window = None
            self._device_parts, self._host_parts = [], []

    def start_batch(self) -> None:
        """Hook: reset what one batch keeps (stream rows named, devices seen ...)."""

    @abstractmethod
    def write_batch(self, records, *, release: bool) -> None:
        """Every kind of ``records`` through its verb, in the vendor's order."""

    def result(self) -> EmitResult:
        return EmitResult(dict(self.counts), list(self.errors))

    # ------------------------------------------------------------------ the verbs
    @abstractmethod
    def write_kernels(self, rows):
        """Kernel records -> kernel slices on their device's stream rows."""

    @abstractmethod
    def write_copies(self, rows) -> None:
        """Memory-copy records -> ``gpu_memcpy`` slices."""

    @abstractmethod
    def write_fills(self, rows) -> None:
        """Memory-fill records -> ``gpu_memset`` slices."""

    @abstractmethod
    def write_syncs(self, rows) -> None:
        """Synchronization records -> sync slices (and their dependency args and arrows)."""

    @abstractmethod
    def write_api(self, rows, **how) -> None:
        """Runtime/driver call records -> slices on the calling threads."""

    # ------------------------------------------------------------------ shared steps
    def wants(self, *types: ActivityType) -> bool:
        """Whether any of ``types`` was selected."""
        return any(t in self.activities for t in types)

    def in_window(self, rows, start_ns: np.ndarray, kind: str = ""):
        """``rows`` whose start lies in the window; the others counted as out of window."""
        return kept(rows, keep_in_window(self.b, self.window, start_ns, self.vendor, kind))

    def slices(self, cat: ActivityType, ts, dur, pid, tid, *, name_ids=None, names=None, args=None,
               external_id=None) -> None:
        """One ``add_slices`` (columns holding one value are stored once), counted per category."""
        self.b.add_slices(names=names, name_ids=name_ids, ts=ts, dur=dur, pid=pid, tid=tid, cat=cat, args=args,
                          external_id=external_id, vendor=self.vendor)
        self.counts[cat.value] = self.counts.get(cat.value, 0) + len(ts)

    def name_streams(self, pid: np.ndarray, tid: np.ndarray, label: Callable[[int], str], *,
                     sort_index: Callable[[int], int] = int) -> list[tuple[int, int]]:
        """Name each distinct (device, stream) row not named yet; returns the distinct pairs."""
        return name_stream_rows(self.b, pid, tid, label, sort_index=sort_index)

    def name_devices(self, pid: np.ndarray, label: Callable[[int], str]) -> None:
        """Name each device's process not named yet, ``label(d)`` (name and label), sorted after the
        host processes at ``DEVICE_SORT_BASE + d``."""
        for d in np.unique(np.asarray(pid)).tolist():
            if d not in self.b.process_names:
                self.b.set_process_name(d, label(d), label=label(d), sort_index=DEVICE_SORT_BASE + d)

    def flow_ends(self, corr, ts, pid, tid, *, host: bool) -> None:
        """Rows that end (``host``: start) an ``ac2g`` arrow: drawn once the batch is written,
        between a host call and a device row sharing a correlation id, where both are in the trace."""
        (self._host_parts if host else self._device_parts).append((corr, ts, pid, tid))
