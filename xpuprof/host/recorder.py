"""Host activities: ``record_function`` ranges, instant events, thread names, correlation ids.

While a profiler records, it installs a ``HostRecorder`` here; ``record_function`` then writes
one fixed-size record per range (t0, t1, tid, correlation id, name index, args index) into the
recorder's ``Int64Log`` - no Python object per range; each distinct name is stored once, as UTF-8
text in the recorder's ``NameTable`` (no Python object per name either: a million distinct names
cost what their text costs, not a dict of strings). When
nothing records, entering and leaving a range is a global read. The profiler reads the log as
numpy columns at stop. Enter/exit run in C (``xpuprof._native.hostrec``) when that extension is
built, in Python otherwise; both write the same records.

External correlation: every recorded range gets a process-wide correlation id. Device sessions
that link device work to host ranges (``Session.wants_correlation``) get it on enter and exit
(Kineto's push/popCorrelationId): written as a mark into the session's ``correlation_log`` (an
Int64Log(4): id, thread, ns, parent id on enter; -id, thread, ns, 0 on exit) when it has one (in
C, no call), else through its push/pop methods. ``current_correlation_id()`` is the innermost
open range of the calling *context* (contextvars: an asyncio task's own range, a thread's own).
Ranges closed out of order or on another thread, and ranges of interleaved contexts on one
thread, are handled as ``_native/shared/correlation.c`` describes and counted (``lifetimes()``); ranges
still open when recording stops are closed at its end (``close_open_ranges``), never dropped.
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Mapping

from . import budget
from . import spill as _spill
from .record_layout import INSTANT_FIELDS, NO_ARGS, RANGE_FIELDS

_mono = time.monotonic_ns
_native_tid = threading.get_native_id

from .. import _native

_c = _native.optional("hostrec")  # the C fast path (hostrec.c; the pure-Python path without it)
if _c is not None and not (hasattr(_c, "close_open_ranges") and hasattr(_c, "ArgsArea")):  # an older build: records differ
    import warnings

    warnings.warn("xpuprof._native.hostrec is out of date (rebuild: python setup.py build_ext --inplace); "
                  "record_function uses the pure-Python path until then", RuntimeWarning, stacklevel=2)
    _c = None

if _c is not None:
    Int64Log = _c.Int64Log
    NameTable = _c.NameTable
    ArgsArea = _c.ArgsArea
else:
    from .pystore import ArgsArea, Int64Log, NameTable  # type: ignore[assignment]

# Process-wide correlation ids: unique across profiling cycles, never 0 (0 means "no link").
# One counter for both paths, so ids never repeat whichever path recorded a range.
_next_correlation_id = _c.next_correlation_id if _c is not None else itertools.count(1).__next__

# The active recorder, or None. Read on every record_function enter: keep it a plain global.
_recorder: "HostRecorder | None" = None




def object_key(j: int) -> int:
    """The args field of a range whose args are ``HostRecorder.args[j]`` (and back: the same function)."""
    return -2 - j


def log_array(log) -> "np.ndarray":
    """An Int64Log's rows as one int64 numpy array of shape (rows, width), without a copy."""
    import numpy as np

    if isinstance(getattr(log, "array", None), np.ndarray):  # read back from a crash-safe copy (spill.py)
        return log.array.reshape(-1, log.width)
    buf = log if _c is not None else log.values
    return np.frombuffer(buf, dtype=np.int64).reshape(-1, log.width)


def area_arrays(area) -> "tuple[np.ndarray, np.ndarray]":
    """An ArgsArea as (its bytes as uint8, each entry's end offset as int64), without a copy."""
    import numpy as np

    if isinstance(getattr(area, "array", None), np.ndarray):  # read back from a crash-safe copy (spill.py)
        return area.array, log_array(area.ends)[:, 0]
    return np.frombuffer(area if _c is not None else area.data, dtype=np.uint8), log_array(area.ends)[:, 0]


class HostRecorder:
    """What host code records during one profiling cycle (monotonic ns, native thread ids)."""

    __slots__ = ("ranges", "truncated", "names", "args", "args_area", "instants", "thread_names", "sessions",
                 "track_correlation", "next_id", "record_annotations", "max_bytes", "spill", "open_slots", "_py",
                 "_py_open",
                 "_py_cross_thread", "_py_stopped", "_instants_not_recorded")

    # The fields of one instant record in ``instants`` (int64 each; scope is ord('t'/'p'/'g')).
    INSTANT_FIELDS = INSTANT_FIELDS

    def __init__(self, *, correlation_sessions=(), record_annotations: bool = True, max_bytes: int | None = None,
                 spill=None) -> None:
        # One record per range (RANGE_FIELDS, 48 bytes); names by id in `names` (each distinct name's
        # text once); dict args as JSON in `args_area`, other args in `args` (see NO_ARGS). Nothing per
        # range for the cyclic GC to visit.
        self.ranges = Int64Log(len(RANGE_FIELDS))
        # Ranges still open when recording stopped, closed at the window's end (same fields).
        self.truncated = Int64Log(len(RANGE_FIELDS))
        self.names = NameTable()
        self.args: list = []
        self.args_area = ArgsArea()
        # One record per instant (INSTANT_FIELDS, 40 bytes), names and args in the same tables as ranges.
        self.instants = Int64Log(len(self.INSTANT_FIELDS))
        self.thread_names: dict[int, str] = {}  # native tid -> name, taken when the thread first records
        self.sessions = tuple(correlation_sessions)
        self.track_correlation = bool(self.sessions)
        self.next_id = _next_correlation_id
        self.record_annotations = record_annotations
        # The pure-Python ranges' state: correlation without the C part, the ranges open now (for
        # close_open_ranges), exits on another thread (the C part counts its own).
        self._py = None
        if self.track_correlation and _c is None:
            from .correlation import PyCorrelation

            self._py = PyCorrelation(self.sessions)
        self._py_open: "weakref.WeakSet" = weakref.WeakSet()
        self._py_cross_thread = 0
        # The recording cap (host/budget.py): bytes this recorder's storage may take, 0 for none. The C
        # part charges every block to it and stops recording when it is reached; the pure-Python path
        # checks its own estimate (_py_stopped: (monotonic ns, why), not-recorded count).
        self.max_bytes = budget.max_record_bytes() if max_bytes is None else int(max_bytes)
        self._py_stopped: list | None = None
        self._instants_not_recorded = 0
        # A crash-safe copy (host/spill.py): under `xpuprof exec` the logs live in mapped files of a private
        # directory, so what was recorded survives a crash of the process.
        home = _spill.home() if spill is None and _c is not None else None
        if home is not None:
            spill = home.new_cycle()
        self.spill = spill
        # With a copy, the ranges open now are on file too (a row each while open: t0, tid, id, name, state):
        # a process that dies inside a range leaves it, drawn up to its end.
        self.open_slots = Int64Log(5) if spill is not None else None
        if spill is not None:
            try:
                spill.attach(self)
            except OSError as exc:  # a full or vanished directory: recording goes on in memory, said once
                from .. import diagnostics

                diagnostics.warn_once(logging.getLogger("xpuprof"), ("spill-attach", str(exc)),
                                      "xpuprof: no crash-safe copy of this recording: %s", exc)
                spill.discard()
                self.spill = self.open_slots = None

    def discard_spill(self) -> None:
        """The trace of this recording is built: its crash-safe copy goes."""
        if self.spill is not None:
            self.spill.discard()
            self.spill = None

    def close_open_ranges(self, end_ns: int) -> int:
        """Record every range still open as ending at ``end_ns`` (into ``truncated``) and close it; a
        later exit of it records nothing more. Call while this recorder is still installed."""
        n = _c.close_open_ranges(int(end_ns)) if _c is not None and _recorder is self else 0
        for r in list(self._py_open):
            self._py_open.discard(r)
            if r._rec is self:
                r._rec = None
                r._closed = True
                idx = self.names.intern(r._name)
                args = NO_ARGS
                if r.args is not None:  # kept as the object: written at stop like any other kept args
                    self.args.append(r.args)
                    args = object_key(len(self.args) - 1)
                self.truncated.append(r._t0, max(int(end_ns), r._t0), r._tid, r._cid, idx, args)
                n += 1
        return n

    def lifetimes(self) -> dict[str, int]:
        """Counts the trace states about this recording's ranges (see the module docstring)."""
        counts = dict(_c.lifetimes()) if _c is not None and _recorder is self else {
            "exited_out_of_order": 0, "exited_on_another_thread": 0, "entered_over_another_context": 0,
            "max_depth": 0}
        if self._py is not None:
            for k, v in self._py.counts.items():
                counts[k] = max(counts[k], v) if k == "max_depth" else counts[k] + v
        counts["exited_on_another_thread"] += self._py_cross_thread
        return counts

    def name_thread(self, tid: int) -> None:
        name = self.thread_names[tid] = _thread_name_overrides.get(tid) or threading.current_thread().name
        if self.spill is not None:
            self.spill.note_thread(tid, name)

    def range_count(self) -> int:
        return len(self.ranges)

    def recording_state(self) -> dict | None:
        """The trace's ``recording_stopped`` note when recording stopped at the cap (or out of memory), else
        None. Read while this recorder is still installed."""
        py_not_recorded = self._py_stopped[1] if self._py_stopped is not None else 0
        if _c is not None and _recorder is self:
            stopped, why, not_recorded, used, cap = _c.recording_state()
            not_recorded += py_not_recorded  # ranges of the pure-Python record_function
        elif self._py_stopped is not None:
            (stopped, why), not_recorded = self._py_stopped[0], py_not_recorded
            used, cap = self._py_bytes(), self.max_bytes
        else:
            return None
        if not stopped:
            return None
        return budget.describe(stopped, why, not_recorded, used, cap, self._instants_not_recorded)

    def _py_bytes(self) -> int:
        """The pure-Python path's estimate of what it stores (the C part counts its blocks exactly)."""
        if _c is not None:
            return 0
        return len(self.ranges) * 48 + len(self.instants) * 40 + len(self.args_area.data) + len(self.names) * 64

    def _py_stop(self, why: str) -> None:
        if self._py_stopped is None:
            self._py_stopped = [(time.monotonic_ns(), why), 0]
        if _c is not None and _recorder is self:
            _c.stop_recording(why)

    def _stopped(self) -> bool:
        """Whether recording stopped (the cap, or no memory): records from now on are only counted."""
        if self._py_stopped is None:
            if _c is None:
                if self.max_bytes and self._py_bytes() > self.max_bytes:
                    self._py_stop("the recording cap was reached")
            elif _recorder is self:
                stopped, why = _c.recording_state()[:2]
                if stopped:
                    self._py_stopped = [(stopped, why), 0]
        return self._py_stopped is not None

    def add_range(self, name, t0: int, t1: int, tid: int, cid: int, args) -> None:
        """The pure-Python path's record (the C path writes the same fields)."""
        if self._stopped():
            self._not_recorded()
            return
        try:
            self._add_range(name, t0, t1, tid, cid, args)
        except MemoryError:  # never raised into the user's loop: recording stops here, said in the trace
            self._py_stop("the system refused more memory")
            self._not_recorded()

    def _not_recorded(self) -> None:
        if self._py_stopped is not None:
            self._py_stopped[1] += 1

    def _add_range(self, name, t0: int, t1: int, tid: int, cid: int, args) -> None:
        idx = self.names.intern(name)  # a str or bytes: checked when the range was made
        key = NO_ARGS
        if args is not None:
            k = None
            if type(args) is dict:
                k = self.args_area.encode(args)
                if k is None and _args_encoder is not None:
                    try:
                        k = self.args_area.add(_args_encoder(args))
                    except Exception:  # kept as the object: stop() reports why it cannot be written
                        k = None
            if k is None:
                self.args.append(args)
                key = object_key(len(self.args) - 1)
            elif k >= 0:  # else refused (the area was exported): counted in args_area.refused
                key = k
        self.ranges.append(t0, t1, tid, cid, idx, key)

    def add_instant(self, name: str, t: int, tid: int, args, scope_code: int) -> None:
        """One instant: its args snapshotted now (exact-size JSON bytes, as a range's dict args are), so
        a dict changed after the call cannot change what was recorded, and no dict is kept per event."""
        if self._stopped():
            self._instants_not_recorded += 1
            return
        try:
            self._add_instant(name, t, tid, args, scope_code)
        except MemoryError:  # never raised into the user's code: recording stops here, said in the trace
            self._instants_not_recorded += 1
            self._py_stop("the system refused more memory")

    def _add_instant(self, name: str, t: int, tid: int, args, scope_code: int) -> None:
        idx = self.names.intern(name)
        if args is None:
            self.instants.append(t, tid, idx, NO_ARGS, scope_code)
            return
        self.args.append(snapshot_args(args))
        self.instants.append(t, tid, idx, len(self.args) - 1, scope_code)

    def name_ids_in(self, strings) -> "np.ndarray":
        """The trace string table's id (int32) of each of this cycle's names, by name id: the C table's
        text is handed over as one segment, without a Python object per name."""
        import numpy as np

        names = self.names
        if _c is not None and isinstance(names, _c.NameTable):
            ends = log_array(names.offsets)[:, 0]
            first = strings.add_segment(np.frombuffer(names, np.uint8), ends, invalid_utf8=names.invalid_utf8)
            return np.arange(first, first + len(names), dtype=np.int32)
        return np.fromiter((strings.intern(x) for x in names.names), np.int32, len(names))

    def name_texts(self, ids) -> list[str]:
        """The names of name ids ``ids`` as text (a few, for lookups: the simulator's range names)."""
        names = self.names
        if _c is not None and isinstance(names, _c.NameTable):
            ends = log_array(names.offsets)[:, 0]
            view = memoryview(names)
            return [bytes(view[int(ends[i]):int(ends[i + 1])]).decode("utf-8", "replace") for i in ids]
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
                for x in (names.names[i] for i in ids)]

    def current(self) -> int:
        if _c is not None:
            return _c.current_correlation_id()
        return self._py.current() if self._py is not None else 0


_args_encoder: Callable | None = None


def _clean_name(name) -> tuple[str, bool]:
    """A name that is not plain valid text (bytes, lone surrogates, over the string bound) as the trace
    writes it, and whether invalid UTF-8 was replaced (counted in the trace's invalid_utf8_names)."""
    from ..trace.builder.strings import has_invalid_utf8, json_safe

    return json_safe(name), has_invalid_utf8(name)


def _encode_dict_args(args: dict) -> bytes:
    """A range's dict args as exact-size JSON bytes (raises when orjson cannot encode them as given)."""
    import orjson

    # bytes(memoryview(...)): an exact-size copy; orjson's result keeps a 4 KiB buffer.
    return bytes(memoryview(orjson.dumps(args, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)))


class InvalidArgs(bytes):
    """The JSON note stored for args that cannot be written (stop counts them in ``invalid_args``)."""

    __slots__ = ()


def invalid_args_note(args, exc: BaseException) -> dict[str, str]:
    """What an event carries instead of args JSON cannot hold (a huge int, a cycle, a failing __str__,
    a list or string instead of a mapping)."""
    try:
        why = f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose message itself fails
        why = type(exc).__name__
    return {"xpuprof_invalid_args": f"args of type {type(args).__name__} could not be written ({why[:200]})"}


def snapshot_args(args) -> bytes:
    """Args as they are now, as exact-size JSON bytes: a dict through the fast encoder; another mapping,
    or values it refuses, through the forgiving one; what no encoder can write as an ``InvalidArgs`` note."""
    if type(args) is dict and _args_encoder is not None:
        try:
            return _args_encoder(args)
        except Exception:  # e.g. an int >= 2**64: the forgiving encoder below writes it
            pass
    from ..trace.builder.columns import encode_json

    try:
        return encode_json(dict(args))
    except Exception as exc:  # never a lost trace: the event keeps a note saying why
        return InvalidArgs(encode_json(invalid_args_note(args, exc)))


def install(recorder: HostRecorder | None) -> HostRecorder | None:
    """Make ``recorder`` the active one (None: stop recording). Returns the previous one."""
    global _recorder, _args_encoder
    previous, _recorder = _recorder, recorder
    if recorder is not None and _args_encoder is None:  # orjson loads with the first profile, not on import
        _args_encoder = _encode_dict_args
        if _c is not None:
            _c.set_args_encoder(_encode_dict_args)
            from ..trace.builder.strings import MAX_STRING_CHARS

            _c.set_name_cleaner(_clean_name, MAX_STRING_CHARS)
    if _c is not None:
        _c.set_recorder(recorder)
    return previous


def _forget_after_fork() -> None:
    """In a forked child nothing of the parent's recording goes on: the child records only if it
    starts its own profile (its copy of the parent's recorder belongs to no trace)."""
    global _recorder
    _recorder = None
    if _c is not None:
        _c.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def active_recorder() -> HostRecorder | None:
    return _recorder


def is_recording() -> bool:
    return _recorder is not None


class _Decorator:
    """``@record_function("name")``: each call of the function is one range."""

    __slots__ = ()

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(self, fn)


def checked_name(name, what: str, *, allow_bytes: bool = True):
    """A range or instant name as a plain str or bytes (bytes are written as UTF-8, bad bytes replaced
    and counted), a thread name as a plain str; anything else is one TypeError at the call naming the
    bad type.

    Checked where the name is passed: a name of another type (a list, an object whose ``__str__``
    raises) would otherwise reach only ``stop()`` and lose the whole trace. A subclass becomes its plain
    value, so its own ``__hash__``/``__eq__``/``__str__`` never run later."""
    if type(name) is str or (allow_bytes and type(name) is bytes):
        return name
    if isinstance(name, str):
        return str.__str__(name)
    if allow_bytes and isinstance(name, bytes):
        return bytes(name)
    valid = "a str (or UTF-8 bytes)" if allow_bytes else "a str"
    raise TypeError(f"{what} name must be {valid}, not {type(name).__name__} (convert it with str() first)")


class PyRange:
    """The pure-Python enter/exit (used when the C extension is not built)."""

    __slots__ = ("_name", "args", "_rec", "_t0", "_cid", "_tid", "_parent", "_closed", "_owner", "_h",
                 "__weakref__")

    def __init__(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        self._name = checked_name(name, "record_function")
        self.args = args
        self._cid = 0
        self._rec = self._parent = self._owner = self._h = None
        self._closed = False

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self):
        rec = _recorder
        self._rec = rec
        if rec is not None:
            self._cid = cid = rec.next_id()
            self._t0 = _mono()
            self._tid = _native_tid()
            self._closed = False
            rec._py_open.add(self)
            if rec.track_correlation:  # after the start time: linked work lies inside the range
                if _c is not None:
                    self._h = _c.correlation_enter(cid)
                else:
                    self._owner = rec._py
                    rec._py.enter(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        rec = self._rec
        if rec is not None:
            self._rec = None
            if rec is not _recorder:  # the recorder was replaced while the range was open: no trace owns it
                return False
            rec._py_open.discard(self)
            tid = _native_tid()
            if rec.track_correlation:
                if _c is not None:
                    _c.correlation_exit(self._h)
                    self._h = None
                else:
                    rec._py.exit(self, tid)
            elif tid != self._tid:
                rec._py_cross_thread += 1
            self._closed = True
            t1 = _mono()
            if tid not in rec.thread_names:  # name it now: the thread may be gone when the trace is built
                rec.name_thread(tid)
            rec.add_range(self._name, self._t0, t1, self._tid, self._cid, self.args)  # the entering thread's row
        return False

    @property
    def correlation_id(self) -> int:
        """The id device work launched inside this range links to (0 when not recorded)."""
        return self._cid


class PurePythonRecordFunction(_Decorator, PyRange):
    """``record_function`` without the C fast path (tests and benchmarks compare both)."""

    __slots__ = ()


def _decorate(rf, fn: Callable) -> Callable:
    name, args, cls = rf.name, rf.args, type(rf)

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        with cls(name, args):
            return fn(*a, **kw)

    return wrapper


if _c is not None and os.environ.get("XPUPROF_PURE_PYTHON", "") != "1":
    # The C type itself (a subclass would lose its fast constructor).
    record_function = _c.Range
    _c.set_decorator(_decorate)
else:
    class record_function(_Decorator, PyRange):  # type: ignore[no-redef]
        """A named host range: ``with record_function("step"):`` or ``@record_function("step")``.

        Becomes a ``user_annotation`` slice on the calling thread when a profiler records; costs
        next to nothing otherwise. ``args`` (a dict of JSON-able values) is written to the slice.
        """

        __slots__ = ()


FAST_PATH = _c is not None and record_function is _c.Range


def instant(name: str, args: Mapping[str, Any] | None = None, *, scope: str = "t") -> None:
    """A CPU instant event (``cpu_instant_event``) on the calling thread; scope "t", "p" or "g"."""
    if type(name) is not str:
        name = checked_name(name, "instant")
    if scope not in ("t", "p", "g"):
        raise ValueError(f"instant scope must be 't' (thread), 'p' (process) or 'g' (global), not {scope!r}")
    rec = _recorder
    if rec is not None:
        tid = _native_tid()
        if tid not in rec.thread_names:
            rec.name_thread(tid)
        rec.add_instant(name, _mono(), tid, args, ord(scope))


def set_thread_name(name: str) -> None:
    """Name the calling thread's row ("thread <tid> (<name>)") in traces recorded from now on."""
    _thread_name_overrides[_native_tid()] = checked_name(name, "thread", allow_bytes=False)


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


def reserve_correlation_id() -> int:
    """A fresh correlation id: every id handed out before it is smaller (another id space, such as
    torch's External ids, is moved above it to stay distinct within a trace)."""
    return int(_next_correlation_id())
