"""The metric-collector interface: small, separate from backends.

A collector offers named metrics (with units), validates a request before anything starts, and
is sampled on its own thread (``xpuprof.collectors.sampler``) at the configured interval. It
knows nothing about traces: the sampler turns its readings into counter series on the one
TraceBuilder counter path (``add_counters``).

Life of one recording cycle: ``__init__(metrics, interval_s)`` (validate the names, no vendor
call), ``open()`` (load the vendor library, take handles; raise ``CollectorUnavailable`` with the
precise reason when it cannot run here), ``tracks()`` (what one ``read()`` returns), ``read()``
many times from the sampling thread, ``close()``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Sequence


class CollectorError(ValueError):
    """A metric request no collector can serve (unknown, ambiguous or invalid together)."""


class CollectorUnavailable(RuntimeError):
    """A collector that cannot run here (its vendor package or library or device is missing)."""


@dataclass(frozen=True)
class MetricInfo:
    name: str
    unit: str = ""
    description: str = ""
    # "gauge": the reading is the value. "cumulative": read() returns a running total (energy in
    # J) and the track carries its derivative per second (power in W); name/unit describe that.
    kind: str = "gauge"


@dataclass(frozen=True)
class Track:
    """One counter track: a row (``device`` index, or None for the host row) and its series."""

    name: str
    metrics: tuple[str, ...]
    device: int | None = None
    device_label: str = ""  # process row label when the collector creates the device row


@dataclass
class CollectorAvailability:
    available: bool
    reason: str = ""
    details: dict = field(default_factory=dict)


class Collector(ABC):
    """Base class of every metric collector (built-in or user)."""

    name: ClassVar[str] = ""  # registry key: lowercase letters, digits, '_', '-', '.'
    description: ClassVar[str] = ""
    # "host" counters go on the host process row; "device" counters on the device's row with
    # category gpu_pm_counter.
    scope: ClassVar[str] = "host"
    default_interval_s: ClassVar[float] = 0.010
    # True: the names resolve only when written "<collector>:<metric>" (they would shadow others).
    qualified_only: ClassVar[bool] = False
    # True: the source samples by itself (start_sampling/stop_sampling/series), no thread of ours.
    self_sampled: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def metrics(cls) -> Sequence[MetricInfo]:
        """The metrics this collector offers. Offline: no vendor package is imported here."""

    @classmethod
    def probe(cls) -> CollectorAvailability:
        """Whether it can run here, and why not (imports the vendor package, touches no device)."""
        return CollectorAvailability(True)

    def __init__(self, metrics: Sequence[str], interval_s: float | None = None) -> None:
        offered = {m.name: m for m in self.metrics()}
        unknown = [m for m in metrics if m not in offered]
        if unknown:
            raise CollectorError(f"collector {self.name!r} does not offer {', '.join(map(repr, unknown))}; "
                                 f"it offers {', '.join(sorted(offered))}")
        self.requested: list[str] = list(dict.fromkeys(metrics))
        self.infos: dict[str, MetricInfo] = {m: offered[m] for m in self.requested}
        self.interval_s = float(interval_s if interval_s is not None else self.default_interval_s)
        if not self.interval_s > 0:
            raise CollectorError(f"collector {self.name!r}: sampling interval must be > 0 s, got {interval_s!r}")
        self.validate()

    def validate(self) -> None:
        """Check the request as a whole before anything starts (raise ``CollectorError``)."""

    def open(self) -> None:
        """Acquire the library and device handles (raise ``CollectorUnavailable`` with the reason)."""

    def tracks(self) -> Sequence[Track]:
        """The tracks one ``read()`` fills, after ``open()``. Default: one host or device-0 track."""
        return [Track(self.name, tuple(self.requested), None if self.scope == "host" else 0)]

    @abstractmethod
    def read(self) -> Sequence[float]:
        """One sample: a value per (track, metric) in ``tracks()`` order (NaN when unreadable)."""

    def start_sampling(self) -> None:
        """self_sampled collectors: start the source's own sampling."""

    def stop_sampling(self) -> None:
        """self_sampled collectors: stop it."""

    def series(self, track_index: int):
        """self_sampled collectors: (epoch ns array, values [samples x track metrics], note) of a track."""
        raise CollectorError(f"collector {self.name!r} is sampled through read(), not series() (self_sampled is False)")

    def close(self) -> None:
        """Release what ``open()`` acquired (called even after a failed read)."""
