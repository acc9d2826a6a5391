"""``prof.pause()`` / ``prof.resume()`` and ``PTI_ENABLE_COLLECTION``: whole-profile pausing on the
recording cycle's pause/resume (the mechanism of torch's ``toggle_collection_dynamic``).

A profile is paused while the user paused it (``pause()``) or while ``PTI_ENABLE_COLLECTION`` is ``0``
(unitrace's in-application switch: ``setenv("PTI_ENABLE_COLLECTION", "0", 1)`` in C or
``os.environ[...] = "0"`` in Python; ``1`` or unset collects). The variable is read when a recording
cycle starts and at every ``prof.step()``, through libc's ``getenv`` so a C ``setenv`` counts too.
Every source pauses: device sessions (the XPU one disables its PTI views) and our host ranges; each
paused span is a slice on the trace's "Spans" row and an entry of its ``collection_paused`` metadata.
"""
from __future__ import annotations

import ctypes
import logging

from .. import diagnostics
from ..activity import ActivityType

log = logging.getLogger("xpuprof")

PTI_ENABLE_COLLECTION = "PTI_ENABLE_COLLECTION"
EVERY_SOURCE = frozenset(ActivityType)  # the cycle's sources_of() then names every session and the host

_libc_getenv = None


def read_env(name: str = PTI_ENABLE_COLLECTION) -> str | None:
    """The C environment's value (what a C ``setenv`` wrote, and what ``os.environ`` assignments put there)."""
    global _libc_getenv
    if _libc_getenv is None:
        fn = ctypes.CDLL(None).getenv
        fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_char_p]
        _libc_getenv = fn
    value = _libc_getenv(name.encode())
    return None if value is None else value.decode("utf-8", "replace")


def env_says_paused(value: str | None) -> bool:
    """``PTI_ENABLE_COLLECTION`` asks for a pause: ``0`` (or false/off/no); anything else collects."""
    return value is not None and value.strip().lower() in ("0", "false", "off", "no")


class Pausing:
    """Why a profile is paused, and its cycle brought in line with it. Sources paused by torch's
    ``toggle_collection_dynamic`` stay paused when this pause ends."""

    def __init__(self) -> None:
        self.by_user = False
        self.by_env = False
        self._holding = False  # this pause holds the current cycle's sources

    def new_cycle(self) -> None:
        self._holding = False

    @property
    def paused(self) -> bool:
        return self.by_user or self.by_env

    def read_env(self) -> None:
        was = self.by_env
        self.by_env = env_says_paused(read_env())
        if self.by_env and not was:
            diagnostics.warn_once(log, ("pti-enable-collection",), "xpuprof: %s=0: collection paused until it is 1 "
                                  "(read at each cycle start and prof.step()); the trace marks the paused spans",
                                  PTI_ENABLE_COLLECTION)

    def apply(self, cycle, toggled_off: frozenset = frozenset()) -> None:
        """Pause or resume every source of a recording ``cycle`` to match; on resume, the activities
        ``toggled_off`` (toggle_collection_dynamic) are paused again at once."""
        if not cycle.recording:
            return
        if self.paused:
            cycle.pause(EVERY_SOURCE)
            self._holding = True
        elif self._holding:
            cycle.resume(EVERY_SOURCE)
            self._holding = False
            if toggled_off:
                cycle.pause(toggled_off)


def paused_by_user(prof) -> bool:
    """Whether ``prof.pause()`` holds ``prof``'s collection (``PTI_ENABLE_COLLECTION=0`` may pause it too)."""
    return prof._pausing.by_user
