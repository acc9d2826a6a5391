"""Host activities: ``record_function`` ranges, instant events, thread names, correlation ids.

While a profiler records, it installs a ``HostRecorder`` here; ``record_function`` then writes
one fixed-size record per range (t0, t1, tid, correlation id, name index, args index) into the
recorder's ``Int64Log`` - no Python object per range; each distinct name is stored once. When
nothing records, entering and leaving a range is a global read. The profiler reads the log as
numpy columns at stop. Enter/exit run in C (``xpuprof._native.hostrec``) when that extension is
built, in Python otherwise; both write the same records.

External correlation: every recorded range gets a process-wide correlation id. Device sessions
that link device work to host ranges (``Session.wants_correlation``) get it on enter and exit
(Kineto's push/popCorrelationId): written as a mark into the session's ``correlation_log``
when it has one (in C, no call), else through its push/pop methods;
``current_correlation_id()`` reads the innermost open id.
"""
from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from typing import Any, Callable, Mapping

_mono = time.monotonic_ns
_native_tid = threading.get_native_id

try:  # the C fast path (built from xpuprof/_native/hostrec.c by setup.py)
    from .._native import hostrec as _c
except ImportError:
    _c = None
if _c is not None and not hasattr(_c, "ArgsArea"):  # built from an older hostrec.c: its records differ
    import warnings

    warnings.warn("xpuprof._native.hostrec is out of date (rebuild: python setup.py build_ext --inplace); "
                  "record_function uses the pure-Python path until then", RuntimeWarning, stacklevel=2)
    _c = None

if _c is not None:
    Int64Log = _c.Int64Log
    ArgsArea = _c.ArgsArea
else:
    class Int64Log:  # type: ignore[no-redef]
        """The pure-Python stand-in of hostrec.Int64Log: rows of ``width`` ints, read as numpy."""

        __slots__ = ("width", "_values", "refused")

        def __init__(self, width: int) -> None:
            import array

            self.width, self._values, self.refused = width, array.array("q"), 0

        def append(self, *values) -> bool:
            if len(values) != self.width:
                raise TypeError(f"Int64Log.append takes {self.width} ints, got {len(values)}")
            self._values.extend(values)
            return True

        def clear(self) -> None:
            del self._values[:]

        def __len__(self) -> int:
            return len(self._values) // self.width

        def __buffer__(self, flags):  # Python >= 3.12; older ones read .values
            return memoryview(self._values)

        @property
        def values(self):
            return self._values

    class ArgsArea:  # type: ignore[no-redef]
        """The pure-Python stand-in of hostrec.ArgsArea: JSON objects one after another in a bytearray
        (``encode`` leaves every dict to the Python encoder)."""

        __slots__ = ("data", "ends", "refused")

        def __init__(self) -> None:
            self.data, self.ends, self.refused = bytearray(), Int64Log(1), 0

        def encode(self, args) -> None:
            return None

        def add(self, text) -> int:
            self.data += text
            self.ends.append(len(self.data))
            return len(self.ends) - 1

        def __len__(self) -> int:
            return len(self.ends)

# Process-wide correlation ids: unique across profiling cycles, never 0 (0 means "no link").
# One counter for both paths, so ids never repeat whichever path recorded a range.
_next_correlation_id = _c.next_correlation_id if _c is not None else itertools.count(1).__next__

# The active recorder, or None. Read on every record_function enter: keep it a plain global.
_recorder: "HostRecorder | None" = None


# The fields of one range record in HostRecorder.ranges (int64 each).
RANGE_FIELDS = ("t0", "t1", "tid", "correlation_id", "name", "args")
# A range's args field: k >= 0, entry k of the recorder's args_area (JSON encoded at the call); NO_ARGS;
# or object_key(j) for args kept as given in `args` (not a dict, or one no encoder could write).
NO_ARGS = -1


def object_key(j: int) -> int:
    """The args field of a range whose args are ``HostRecorder.args[j]`` (and back: the same function)."""
    return -2 - j


def log_array(log) -> "np.ndarray":
    """An Int64Log's rows as one int64 numpy array of shape (rows, width), without a copy."""
    import numpy as np

    buf = log if _c is not None else log.values
    return np.frombuffer(buf, dtype=np.int64).reshape(-1, log.width)


def area_arrays(area) -> "tuple[np.ndarray, np.ndarray]":
    """An ArgsArea as (its bytes as uint8, each entry's end offset as int64), without a copy."""
    import numpy as np

    return np.frombuffer(area if _c is not None else area.data, dtype=np.uint8), log_array(area.ends)[:, 0]


class HostRecorder:
    """What host code records during one profiling cycle (monotonic ns, native thread ids)."""

    __slots__ = ("ranges", "name_index", "names", "args", "args_area", "instants", "thread_names", "sessions",
                 "track_correlation", "next_id", "_stacks", "record_annotations")

    # The fields of one instant record in ``instants`` (int64 each; scope is ord('t'/'p'/'g')).
    INSTANT_FIELDS = ("t", "tid", "name", "args", "scope")

    def __init__(self, *, correlation_sessions=(), record_annotations: bool = True) -> None:
        # One record per range (RANGE_FIELDS, 48 bytes); names by index into `names` (each
        # distinct name object once, found through `name_index`); dict args as JSON in `args_area`,
        # other args in `args` (see NO_ARGS). Nothing per range for the cyclic GC to visit.
        self.ranges = Int64Log(len(RANGE_FIELDS))
        self.name_index: dict = {}
        self.names: list = []
        self.args: list = []
        self.args_area = ArgsArea()
        # One record per instant (INSTANT_FIELDS, 40 bytes), names and args in the same tables as ranges.
        self.instants = Int64Log(len(self.INSTANT_FIELDS))
        self.thread_names: dict[int, str] = {}  # native tid -> name, taken when the thread first records
        self.sessions = tuple(correlation_sessions)
        self.track_correlation = bool(self.sessions)
        self.next_id = _next_correlation_id
        self._stacks = threading.local()
        self.record_annotations = record_annotations

    # Called only when track_correlation is set (some session links device work to ranges).
    def push(self, cid: int) -> None:
        if _c is not None:  # one per-thread stack for both paths (a C range may nest in a Python one)
            _c.stack_push(cid)
        else:
            stack = getattr(self._stacks, "ids", None)
            if stack is None:
                stack = self._stacks.ids = []
            stack.append(cid)
        for s in self.sessions:
            log = getattr(s, "correlation_log", None)
            if isinstance(log, Int64Log) and log.width == 3:
                log.append(cid, _native_tid(), _mono())
            else:
                s.push_correlation_id(cid)

    def pop(self) -> None:
        if _c is not None:
            _c.stack_pop()
        else:
            stack = getattr(self._stacks, "ids", None)
            if stack:
                stack.pop()
        for s in self.sessions:
            log = getattr(s, "correlation_log", None)
            if isinstance(log, Int64Log) and log.width == 3:
                log.append(-1, _native_tid(), _mono())
            else:
                s.pop_correlation_id()

    def name_thread(self, tid: int) -> None:
        self.thread_names[tid] = _thread_name_overrides.get(tid) or threading.current_thread().name

    def range_count(self) -> int:
        return len(self.ranges)

    def add_range(self, name, t0: int, t1: int, tid: int, cid: int, args) -> None:
        """The pure-Python path's record (the C path writes the same fields)."""
        idx = self.name_index.get(name)  # a str or bytes: checked when the range was made
        if idx is None:
            idx = self.name_index[name] = len(self.names)
            self.names.append(name)
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
        idx = self.name_index.get(name)
        if idx is None:
            idx = self.name_index[name] = len(self.names)
            self.names.append(name)
        if args is None:
            self.instants.append(t, tid, idx, NO_ARGS, scope_code)
            return
        self.args.append(snapshot_args(args))
        self.instants.append(t, tid, idx, len(self.args) - 1, scope_code)

    def current(self) -> int:
        if _c is not None:
            return _c.current_correlation_id()
        stack = getattr(self._stacks, "ids", None)
        return stack[-1] if stack else 0


_args_encoder: Callable | None = None


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
    from ..trace.build.columns import encode_json

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
    if _c is not None:
        _c.set_recorder(recorder)
    return previous


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
    raises) used to reach only ``stop()`` and lose the whole trace. A subclass becomes its plain
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

    __slots__ = ("_name", "args", "_rec", "_t0", "_cid")

    def __init__(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        self._name = checked_name(name, "record_function")
        self.args = args
        self._cid = 0

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self):
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
            self._rec = None
            if rec is not _recorder:  # the recorder was replaced while the range was open: no trace owns it
                return False
            if rec.track_correlation:
                rec.pop()
            t1 = _mono()
            tid = _native_tid()
            if tid not in rec.thread_names:  # name it now: the thread may be gone when the trace is built
                rec.name_thread(tid)
            rec.add_range(self._name, self._t0, t1, tid, self._cid, self.args)
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
