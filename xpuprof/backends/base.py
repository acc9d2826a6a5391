"""The backend interface: the Python form of Kineto's IActivityProfiler / IActivityProfilerSession.

A ``Backend`` is a factory: it probes whether it can run here, says which activity types it
supports, and ``configure()``s a ``Session`` for the selected types (or returns None to decline).
A ``Session`` starts and stops collection and finally ``process()``es what it collected into the
shared ``TraceBuilder``. Backends never import each other, the profiler or a writer.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from ..activity import ActivityType

if TYPE_CHECKING:  # pragma: no cover
    from ..config.options import ProfilerConfig
    from ..trace.builder.builder import TraceBuilder


@dataclass(frozen=True)
class ProbeResult:
    """Whether a backend can run here; when not, ``reason`` says precisely why."""

    available: bool
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def ok(cls, reason: str = "available", **details) -> "ProbeResult":
        return cls(True, reason, details)

    @classmethod
    def unavailable(cls, reason: str, **details) -> "ProbeResult":
        return cls(False, reason, details)

    def __bool__(self) -> bool:
        return self.available


class RangeThreads:
    """The native thread each host range ran on, by the range's correlation id (the ``External id``
    device-side records carry). For sources whose records lack the calling thread: intel-pti 1.2.0
    writes thread id 0 in its SYCL runtime records, and the thread that pushed a record's External id
    is the thread that made the call (PTI's external-correlation stacks are per thread).

    Built lazily from ``source`` (returning correlation ids and thread ids as arrays), so a cycle
    whose records all carry their thread pays nothing."""

    __slots__ = ("_source", "_ids", "_tids")

    def __init__(self, source: Callable[[], tuple[Any, Any]]) -> None:
        self._source = source
        self._ids = self._tids = None

    @classmethod
    def from_pairs(cls, ids, tids) -> "RangeThreads":
        return cls(lambda: (ids, tids))

    def _table(self):
        if self._ids is None:
            import numpy as np

            ids, tids = self._source()
            ids, tids = np.asarray(ids, np.int64).ravel(), np.asarray(tids, np.int64).ravel()
            if len(ids) != len(tids):
                raise ValueError(f"RangeThreads: {len(ids)} correlation ids but {len(tids)} thread ids")
            order = np.argsort(ids, kind="stable")
            self._ids, self._tids = ids[order], tids[order]
        return self._ids, self._tids

    def lookup(self, correlation_ids):
        """The thread of each id's range; 0 where no recorded range has that id."""
        import numpy as np

        want = np.asarray(correlation_ids, np.int64)
        out = np.zeros(len(want), np.int64)
        ids, tids = self._table()
        if not len(ids) or not len(want):
            return out
        pos = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
        hit = (ids[pos] == want) & (want != 0)
        out[hit] = tids[pos[hit]]
        return out


@dataclass(frozen=True)
class HostOps:
    """torch's ops and ranges of a cycle (epoch ns, External ids as the trace writes them), for backends
    that derive device work from the host's (the simulator). ``args(rows)``: the args torch wrote for
    those rows (shapes, types, flops), read only for the rows asked for."""

    name_table: list
    name_codes: Any  # int64 index into name_table per row
    cats: Any  # "cpu_op", "user_annotation", "python_function" per row
    tid: Any
    start_ns: Any
    end_ns: Any
    external_id: Any
    args: Callable[[Any], list] = field(compare=False, repr=False, default=lambda rows: [{} for _ in rows])

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True)
class ProcessWindow:
    """The capture window handed to ``Session.process``: records outside it are dropped (and counted).
    ``range_threads`` maps the cycle's range correlation ids to their threads (see ``RangeThreads``).
    ``paused``: (start, end) epoch-ns intervals in which this session's collection was paused
    (``Session.pause``): ``contains`` is False inside them, so their records are dropped like those
    outside the window. ``host_ops`` (a callable returning ``HostOps`` or None) and ``ranges`` (our
    ranges' names and args by correlation id: ``(names, args)`` for an array of ids) are read only by
    sources that derive device work from the host's."""

    start_ns: int
    end_ns: int
    range_threads: RangeThreads | None = field(default=None, compare=False, repr=False)
    paused: tuple = ()
    host_ops: Callable[[], HostOps | None] | None = field(default=None, compare=False, repr=False)
    ranges: Callable[[Any], tuple[list, list]] | None = field(default=None, compare=False, repr=False)
    # the host side (torch's allocators) reports this cycle's memory: a backend that also sees allocations
    # (Level Zero's tracing layer) leaves them out rather than writing them twice
    host_reports_memory: bool = False

    def contains(self, ts_ns, end_ns=None):
        """Scalar or numpy mask: the record starts inside the window, outside every paused interval."""
        inside = (ts_ns >= self.start_ns) & (ts_ns <= self.end_ns)
        for start, end in self.paused:
            inside = inside & ~((ts_ns >= start) & (ts_ns < end))
        return inside


class Session(ABC):
    """One collection run of one backend."""

    @abstractmethod
    def start(self) -> None:
        """Begin collecting (synchronous)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop collecting (synchronous); buffered records stay until ``process``."""

    @abstractmethod
    def process(self, builder: "TraceBuilder", window: ProcessWindow) -> None:
        """Write activities, device/thread rows, counters and flows into the builder."""

    def device_properties(self) -> list[dict[str, Any]]:
        """Kineto ``deviceProperties`` objects for the devices this session profiled."""
        return []

    def metadata(self) -> dict[str, Any]:
        """Top-level trace keys (e.g. ``xpupti_version``)."""
        return {}

    def errors(self) -> list[str]:
        """Problems met while collecting or processing (reported in the log and trace metadata)."""
        return []

    def dropped_records(self) -> dict[str, int]:
        """Records lost (buffer exhaustion) or discarded (out of window, unknown kind), by reason."""
        return {}

    # Pause/resume (torch's toggle_collection_dynamic, prof.pause()/resume(), PTI_ENABLE_COLLECTION). The
    # recording cycle calls them and records the paused interval; the default stops accepting records in it
    # (``ProcessWindow.contains`` is False there). A backend overrides them to stop its vendor's collection
    # too (e.g. disable its views), so nothing is even buffered while paused.
    def pause(self) -> None:
        """Stop accepting records until ``resume`` (the default keeps collecting and drops them at process)."""
        return None

    def resume(self) -> None:
        """Accept records again after ``pause``."""
        return None

    # External correlation (Kineto's push/popCorrelationId). Sessions that link device work to
    # host annotations override these; the profiler only calls them on sessions that do.
    def push_correlation_id(self, correlation_id: int, user: bool = False) -> None:
        return None

    def pop_correlation_id(self, user: bool = False) -> None:
        return None

    @property
    def wants_correlation(self) -> bool:
        cls = type(self)
        return cls.push_correlation_id is not Session.push_correlation_id


class Backend(ABC):
    """A profiler backend. Subclasses set ``name`` (and ``vendor`` for the vendor category names)."""

    name: ClassVar[str] = ""
    vendor: ClassVar[str] = ""
    description: ClassVar[str] = ""

    @classmethod
    @abstractmethod
    def probe(cls) -> ProbeResult:
        """Can this backend run here? Never crashes the process: risky checks go to a subprocess."""

    @classmethod
    @abstractmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        """The activity types this backend can produce."""

    @abstractmethod
    def configure(self, activity_types: frozenset[ActivityType], config: "ProfilerConfig") -> Session | None:
        """A session for the selected types, or None when none of them is this backend's."""

    @classmethod
    def check_metrics(cls, names: Sequence[str]) -> None:
        """Raise ``BackendError`` naming the metrics this backend can never collect (with close matches),
        before anything starts: ``profile.start()`` and ``xpuprof run --dry-run`` ask it. The default checks
        nothing: a backend whose metric names depend on the device checks them in ``configure``."""


class BackendError(RuntimeError):
    """A backend that cannot do what was asked; the message says what and why."""
