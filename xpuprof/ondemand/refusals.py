"""Refused datagrams said once per sender, with a rate limit (any local user can send to a job's socket).

Each sender (a key such as ``("uid", 1001)``) is said once; new senders at most ``burst`` lines per
``window_s`` seconds, the rest counted and summed up in the next line said. The set of senders kept is
bounded (``max_senders``): a flood from many pids costs neither memory nor log lines.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Hashable

BURST = 3
WINDOW_S = 60.0
MAX_SENDERS = 1024


class RefusalLog:
    def __init__(self, logger: logging.Logger, *, burst: int = BURST, window_s: float = WINDOW_S,
                 max_senders: int = MAX_SENDERS, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._burst = burst
        self._window_s = window_s
        self._max = max_senders
        self._clock = clock
        self._seen: set[Hashable] = set()
        self._window_start = float("-inf")
        self._said_in_window = 0
        self.suppressed = 0  # refusals not said (a sender said before, or over the rate); summed up later
        self.refused = 0

    def say(self, sender: Hashable, message: Callable[[], str]) -> bool:
        """Count one refusal from ``sender``; log ``message()`` when this sender is new and the rate allows.
        Returns whether a line was written."""
        self.refused += 1
        if sender in self._seen:
            self.suppressed += 1
            return False
        now = self._clock()
        if now - self._window_start >= self._window_s:
            self._window_start, self._said_in_window = now, 0
        if self._said_in_window >= self._burst or len(self._seen) >= self._max:
            self.suppressed += 1
            return False
        self._seen.add(sender)
        self._said_in_window += 1
        text = message()
        if self.suppressed:
            text += f" ({self.suppressed} more refused datagram(s) were not logged)"
            self.suppressed = 0
        self._log.warning("%s", text)
        return True
