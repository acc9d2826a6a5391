"""One clock for every producer: int64 nanoseconds since the Unix epoch.

Host code reads ``now_ns()`` (monotonic, so durations never go backwards, shifted once to the
epoch so device timestamps from vendor clocks can be converted into the same domain).
"""
from __future__ import annotations

import time


def _measure_offset() -> int:
    # Bracket the epoch read between two monotonic reads and take the midpoint.
    best = None
    for _ in range(5):
        a = time.monotonic_ns()
        e = time.time_ns()
        b = time.monotonic_ns()
        if best is None or (b - a) < best[0]:
            best = (b - a, e - (a + b) // 2)
    return best[1]


MONOTONIC_TO_EPOCH_NS: int = _measure_offset()


def now_ns() -> int:
    """Current time, epoch ns, from the monotonic clock."""
    return time.monotonic_ns() + MONOTONIC_TO_EPOCH_NS


# Kineto floors the trace's base time to a ~3 month bucket (7,889,238 s), once per process.
BASE_TIME_BUCKET_NS = 7_889_238 * 1_000_000_000
BASE_TIME_NS: int = (time.time_ns() // BASE_TIME_BUCKET_NS) * BASE_TIME_BUCKET_NS
