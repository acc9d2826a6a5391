"""Metric collectors: sources of counter tracks that are not backends (host and device telemetry,
XPU time-based metrics, user collectors). See ``base`` for the interface and ``registry`` for
how collectors are found; ``resolve`` maps requested metric names to them."""
from .base import Collector, CollectorAvailability, CollectorError, CollectorUnavailable, MetricInfo, Track
from .registry import register_collector, unregister_collector

__all__ = ["Collector", "CollectorAvailability", "CollectorError", "CollectorUnavailable", "MetricInfo", "Track",
           "register_collector", "unregister_collector"]
