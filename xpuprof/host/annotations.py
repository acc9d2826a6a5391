"""Host activities: ``record_function`` ranges, instant events, thread names, correlation ids.

While a profiler records, it installs a ``HostRecorder`` here; ``record_function`` then appends
one tuple per range to the recorder's list (no per-event objects beyond that tuple, no locks:
``list.append`` is atomic under the GIL). When nothing records, entering and leaving a range
is two attribute stores and a global read. The profiler turns the rows into columns later.

External correlation: every recorded range gets a process-wide correlation id. Device sessions
that link device work to host ranges (``Session.wants_correlation``) get it pushed on enter and
popped on exit (Kineto's push/popCorrelationId); ``current_correlation_id()`` reads it too.
"""
from __future__ import annotations

import functools
import itertools
import threading
import time
from typing import Any, Callable, Mapping

_mono = time.monotonic_ns
_native_tid = threading.get_native_id

# Process-wide correlation ids: unique across profiling cycles, never 0 (0 means "no link").
_correlation_ids = itertools.count(1)

# The active recorder, or None. Read on every record_function enter: keep it a plain global.
_recorder: "HostRecorder | None" = None


ROW_FIELDS = 6


class HostRecorder:
    """What host code records during one profiling cycle (monotonic ns, native thread ids)."""

    __slots__ = ("rows", "instants", "thread_names", "sessions", "track_correlation", "next_id", "_stacks",
                 "record_annotations")

    def __init__(self, *, correlation_sessions=(), record_annotations: bool = True) -> None:
        # Flat, ROW_FIELDS values per range: name, start_mono_ns, end_mono_ns, native_tid,
        # correlation_id, args or None. Flat (not a list of tuples) so the cyclic GC has one
        # container to visit instead of one per range: per-range cost stays flat as rows grow.
        self.rows: list = []
        # instants: (name, mono_ns, native_tid, args or None, scope)
        self.instants: list[tuple] = []
        self.thread_names: dict[int, str] = {}  # native tid -> name, taken when the thread first records
        self.sessions = tuple(correlation_sessions)
        self.track_correlation = bool(self.sessions)
        self.next_id = _correlation_ids.__next__
        self._stacks = threading.local()
        self.record_annotations = record_annotations

    # Called only when track_correlation is set (some session links device work to ranges).
    def push(self, cid: int) -> None:
        stack = getattr(self._stacks, "ids", None)
        if stack is None:
            stack = self._stacks.ids = []
        stack.append(cid)
        for s in self.sessions:
            s.push_correlation_id(cid)

    def pop(self) -> None:
        stack = getattr(self._stacks, "ids", None)
        if stack:
            stack.pop()
        for s in self.sessions:
            s.pop_correlation_id()

    def name_thread(self, tid: int) -> None:
        self.thread_names[tid] = _thread_name_overrides.get(tid) or threading.current_thread().name

    def range_count(self) -> int:
        return len(self.rows) // ROW_FIELDS

    def current(self) -> int:
        stack = getattr(self._stacks, "ids", None)
        return stack[-1] if stack else 0


def install(recorder: HostRecorder | None) -> HostRecorder | None:
    """Make ``recorder`` the active one (None: stop recording). Returns the previous one."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def active_recorder() -> HostRecorder | None:
    return _recorder


def is_recording() -> bool:
    return _recorder is not None


class record_function:
    """A named host range: ``with record_function("step"):`` or ``@record_function("step")``.

    Becomes a ``user_annotation`` slice on the calling thread when a profiler records; costs
    next to nothing otherwise. ``args`` (a dict of JSON-able values) is written to the slice.
    """

    __slots__ = ("name", "args", "_rec", "_t0", "_cid")

    def __init__(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.args = args

    def __enter__(self) -> "record_function":
        rec = _recorder
        self._rec = rec
        if rec is not None:
            self._cid = cid = rec.next_id()
            self._t0 = _mono()
            if rec.track_correlation:  # after the start time: linked work lies inside the range
                rec.push(cid)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        rec = self._rec
        if rec is not None:
            if rec.track_correlation:
                rec.pop()
            t1 = _mono()
            tid = _native_tid()
            if tid not in rec.thread_names:  # name it now: the thread may be gone when the trace is built
                rec.name_thread(tid)
            rec.rows += (self.name, self._t0, t1, tid, self._cid, self.args)
            self._rec = None
        return False

    def __call__(self, fn: Callable) -> Callable:
        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with record_function(name, args):
                return fn(*a, **kw)

        return wrapper

    @property
    def correlation_id(self) -> int:
        """The id device work launched inside this range links to (0 when not recording)."""
        return getattr(self, "_cid", 0)


def instant(name: str, args: Mapping[str, Any] | None = None, *, scope: str = "t") -> None:
    """A CPU instant event (``cpu_instant_event``) on the calling thread; scope "t", "p" or "g"."""
    if scope not in ("t", "p", "g"):
        raise ValueError(f"instant scope must be 't' (thread), 'p' (process) or 'g' (global), not {scope!r}")
    rec = _recorder
    if rec is not None:
        tid = _native_tid()
        if tid not in rec.thread_names:
            rec.name_thread(tid)
        rec.instants.append((name, _mono(), tid, args, scope))


def set_thread_name(name: str) -> None:
    """Name the calling thread's row ("thread <tid> (<name>)") in traces recorded from now on."""
    _thread_name_overrides[_native_tid()] = str(name)


def current_correlation_id() -> int:
    """The innermost open range's correlation id on this thread (0 when none is linked)."""
    rec = _recorder
    return rec.current() if rec is not None and rec.track_correlation else 0


_thread_name_overrides: dict[int, str] = {}


def thread_names_for(tids, recorded: dict[int, str] | None = None) -> dict[int, str]:
    """Native tid -> name: explicit names, then names taken while recording, then live threads."""
    live = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    recorded = recorded or {}
    return {tid: _thread_name_overrides.get(tid) or recorded.get(tid) or live.get(tid) or "thread" for tid in tids}
