"""PyTorch operators in the trace: torch's own CPU-only profiler runs beside our backends.

Why this mechanism (measured by benchmarks/bench_torch_ops.py, README "PyTorch ops"): torch's
profiler records each op in C++ (RecordFunction callbacks, one fixed-size record per op); anything
we could hook from Python (dispatch modes, Python observers) costs a Python call per op. So a
recording cycle enables torch's profiler with ``ProfilerActivity.CPU`` only (the device stays ours:
PTI/CUPTI/roctracer belong to our backends), and at stop its Kineto trace is read back, its events
turned into columns on our clock, its External ids moved above ours, and every runtime call our
backends recorded is linked to the innermost op (or range) running on its thread when it was made.

Clock: torch stamps ops with epoch ns (its TSC clock converted to the Unix epoch); its trace writes
microseconds since ``baseTimeNanoseconds``. We convert back to epoch ns: the same domain as
``xpuprof.clock.now_ns`` (monotonic + offset measured once). tests/torch/test_torch_ops.py checks
the two agree within the bound the README states.

torch is imported here only, and only when it is already imported by the program (a program that
does not use torch never pays for importing it).
"""
from __future__ import annotations

import sys
import threading

import numpy as np
import orjson

from ..activity import ActivityType
from ..trace.builder.builder import TraceBuilder
from ..trace.builder.columns import ArgColumn
from ..trace.builder.intervals import innermost_containing
from . import torch_args
from .distinct import distinct
from .torch_file import TorchOpsError, saved_trace

# Kineto categories this source writes, and the events of torch's trace it keeps.
OP_CATEGORIES = ("cpu_op", "user_annotation", "python_function")
FLOW_CATEGORY = "fwdbwd"
_NO_ARGS: dict = {}
# Args Kineto writes for its own bookkeeping (the trace's event index), meaningless after merging.
_DROPPED_ARGS = ("Ev Idx",)


def torch_if_imported():
    """The torch module when the program has imported it, else None (never imports torch itself). A torch
    still being imported (by another thread) counts as not imported yet: half of it is missing."""
    mod = sys.modules.get("torch")
    if mod is None or not hasattr(mod, "_C") or getattr(getattr(mod, "__spec__", None), "_initializing", False):
        return None
    return mod


def torch_profiler_running(torch) -> bool:
    return bool(torch.autograd.profiler._is_profiler_enabled) or bool(torch._C._autograd._profiler_enabled())


def _activity_names(activities) -> list[str]:
    return sorted(str(getattr(a, "name", a)) for a in activities)


def _device_activities(activities) -> list[str]:
    """torch ProfilerActivity names other than CPU (CUDA, XPU, MTIA, HPU, PrivateUse1): device tracing."""
    return [n for n in _activity_names(activities) if n != "CPU"]


class TorchProfilerGuard:
    """What torch.profiler may do while one xpuprof cycle records, and the refusals when it may not.

    ``records_ops``: xpuprof records torch's ops through torch's one Kineto session, so no
    torch.profiler may start (started inside, torch takes that session over and the process crashes
    at stop: SIGSEGV measured in torch 2.13). ``device_owner``: our backends (named) own the vendor
    tracing API (CUPTI/PTI/roctracer), so torch.profiler may not trace the device; its CPU-only
    profiler touches no vendor API and may run inside a cycle that does not record ops.
    A torch.profiler already running when the cycle starts is refused in both cases (which
    activities it holds cannot be read back from torch).
    """

    def __init__(self, torch, *, records_ops: bool, device_owner: str) -> None:
        self.torch = torch
        self.records_ops = records_ops
        self.device_owner = device_owner
        # A cycle nobody in the program asked for (an on-demand capture) gives way instead of refusing:
        # ``yield_to(why)`` stops it, then the program's torch.profiler starts (see record_other_threads).
        self.yield_to = getattr(_op_thread, "yield_to", None)

    def _ours(self) -> str:
        owns = f"backend(s) {self.device_owner} own the device tracing API (PTI/CUPTI/roctracer)"
        if not self.records_ops:
            return f"xpuprof.profile's {owns}"
        ops = "xpuprof.profile records PyTorch ops (cpu_op) through torch's profiler"
        return f"{ops} and its {owns}" if self.device_owner else ops

    def check_not_running(self) -> None:
        """torch.profiler already recording: one clear error naming both, before anything starts."""
        if torch_profiler_running(self.torch):
            way_out = ("or leave 'cpu_op' out of xpuprof's activities" if self.records_ops and not self.device_owner
                       else "or profile with torch.profiler alone")
            raise TorchOpsError(
                f"torch.profiler is already running in this process, and {self._ours()}: only one "
                "can record. Stop torch.profiler first (xpuprof's trace has torch's ops and the device view), "
                f"{way_out}")

    def refusal(self, activities) -> str | None:
        """Why torch.profiler may not start with ``activities`` (None: it may)."""
        device = _device_activities(activities or ())
        if not self.records_ops and not (self.device_owner and device):
            return None
        what = f" (activities {_activity_names(activities)})" if activities else ""
        if self.records_ops:
            way_out = ("Use xpuprof's trace (it has torch's ops and the device view), or start torch.profiler after "
                       "xpuprof.profile stops (or profile with xpuprof without 'cpu_op')")
        else:
            way_out = (f"Ask torch.profiler for CPU only (xpuprof's trace has the device view), or start it with "
                       f"{', '.join(device)} after xpuprof.profile stops")
        return (f"torch.profiler cannot start{what} while xpuprof.profile is recording: {self._ours()}, "
                f"and only one can record. {way_out}")

    def install(self) -> None:
        _install_guard(self.torch, self)

    def remove(self) -> None:
        _remove_guard(self)


# torch.profiler / torch.autograd.profiler start through these module globals (activities as given to
# torch's C++ side), and torch.profiler.profile prepares through _KinetoProfile.prepare_trace (the
# activities the user asked for: a CPU-only torch drops CUDA before its C++ side sees it, and the
# CUPTI-monitor backend starts CUPTI there). While guards are active they refuse as the guards say.
_GUARDED_FUNCTIONS = ("_prepare_profiler", "_enable_profiler")
_active_guards: list[TorchProfilerGuard] = []
_saved: dict = {}


def _refuse_if_guarded(activities) -> None:
    for guard in list(_active_guards):
        why = guard.refusal(activities)
        if why is None:
            continue
        if guard.yield_to is not None:
            guard.yield_to(why)  # the on-demand cycle stops (its guard goes with it); the program's profiler starts
            continue
        raise TorchOpsError(why)


def _install_guard(torch, guard: TorchProfilerGuard) -> None:
    _active_guards.append(guard)
    if len(_active_guards) > 1:
        return  # the functions are already wrapped; they consult every active guard
    module = torch.autograd.profiler
    for name in _GUARDED_FUNCTIONS:
        original = getattr(module, name, None)
        if original is None:
            continue

        def guarded(*args, _original=original, **kwargs):
            asked = kwargs.get("activities")
            if asked is None:
                asked = next((a for a in args if isinstance(a, (set, frozenset, list, tuple))), None)
            _refuse_if_guarded(asked or ())
            return _original(*args, **kwargs)

        _saved[(module, name)] = original
        setattr(module, name, guarded)
    kineto_profile = getattr(getattr(torch.profiler, "profiler", None), "_KinetoProfile", None)
    original = getattr(kineto_profile, "prepare_trace", None) if kineto_profile is not None else None
    if original is not None:
        def prepare_trace(self, *args, _original=original, **kwargs):
            _refuse_if_guarded(getattr(self, "activities", None) or ())
            return _original(self, *args, **kwargs)

        _saved[(kineto_profile, "prepare_trace")] = kineto_profile.__dict__.get("prepare_trace")  # None: inherited
        kineto_profile.prepare_trace = prepare_trace


def _remove_guard(guard: TorchProfilerGuard) -> None:
    if guard not in _active_guards:
        return
    _active_guards.remove(guard)
    if _active_guards:
        return
    for (owner, name), original in _saved.items():
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _saved.clear()


# Args torch writes with record_shapes (dropped from the trace when only the simulator asked for shapes).
SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


# torch's profiler keeps its callbacks per thread by default: the thread that enables it is the one
# whose ops it records, and only that thread may disable it (another thread crashes the process: SIGSEGV,
# torch 2.13). A thread that drives a recording cycle for other threads (an on-demand capture running
# beside the training loop) says so for itself with ``record_other_threads``: torch's profiler then runs
# in its all-threads mode (``_ExperimentalConfig(profile_all_threads=True)``, in torch 2.13: global
# callbacks, started and stopped on the calling thread, every thread's ops recorded, as Kineto's own
# on-demand mode records them); a torch without that mode runs start and stop through ``runner`` (an
# object whose ``start(fn)``/``stop(fn)`` run ``fn`` on the thread to record). Unset: the calling thread.
_op_thread = threading.local()


def record_other_threads(enabled: bool, *, runner=None, yield_to=None) -> None:
    """For the calling thread, the profiles it starts from now on: ``enabled``: record torch's ops of every
    thread (``runner``: how to reach the main thread when this torch has no all-threads mode; without one,
    the calling thread's ops). ``yield_to(why)``: when the program starts torch.profiler meanwhile, called to
    stop that profile first, and the program's profiler then starts (it has priority, as Kineto's synchronous
    requests have over its on-demand ones); without it the program's start is refused."""
    _op_thread.all_threads = bool(enabled)
    _op_thread.runner = runner if enabled else None
    _op_thread.yield_to = yield_to if enabled else None


def _all_threads_config(given: dict, *, keep_events: bool, memory: bool):
    """torch's _ExperimentalConfig for a cycle that records every thread: ``profile_all_threads`` and, unless
    the cycle reads torch's events back (``keep_events``: FLOP estimates), ``trace_only`` (the result is only
    ``save()``d: torch then skips building Python event objects at stop). None: this torch has no all-threads
    mode, or the cycle wants [memory] events (``memory``), which torch 2.13 records only in its per-thread mode."""
    if memory:
        return None
    from torch._C._profiler import _ExperimentalConfig

    wanted = {**given, "profile_all_threads": True, **({} if keep_events else {"trace_only": True})}
    try:
        return _ExperimentalConfig(**wanted)
    except TypeError:
        return None


class TorchOpRecorder:
    """One recording cycle of torch's CPU-only profiler.

    ``record_shapes``/``with_stack``/``profile_memory``/``with_flops``/``with_modules`` and ``experimental``
    (the torch-side fields of torch's ``_ExperimentalConfig``) are what torch.profiler passes its own recorder.
    ``shapes_for_sim``: shapes are recorded for the simulator's kernel sizes although the user did not ask
    for them; they are kept out of the trace. ``result``: torch's result of the cycle (``events()``,
    ``export_memory_timeline`` read it) until the next cycle starts."""

    def __init__(self, torch, *, record_shapes: bool, with_stack: bool, guard: TorchProfilerGuard,
                 profile_memory: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental: dict | None = None, shapes_for_sim: bool = False) -> None:
        self.torch = torch
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental = dict(experimental or {})
        self.shapes_for_sim = shapes_for_sim and not (record_shapes or with_flops)
        self.guard = guard  # installed by the profiler around the cycle; its refusals name our backends
        self.result = None
        self._running = False
        requested = getattr(_op_thread, "all_threads", False)
        self._runner = getattr(_op_thread, "runner", None) if requested else None
        self._experimental = (_all_threads_config(self.experimental, keep_events=with_flops, memory=profile_memory)
                              if requested else None)
        self.all_threads = self._experimental is not None
        self._stop_error: str | None = None

    def start(self) -> None:
        # Through the runner (the main thread) even in all-threads mode: Kineto initializes at its first start
        # and runs torch's client init only on the thread that registered it (torch's import thread); from
        # another thread it skips it and prints an error on stderr. Stopping may happen on any thread then.
        if self._runner is not None:
            try:
                self._runner.start(self._enable)
            except TimeoutError:
                if not self.all_threads:
                    raise
                self._enable()  # the main thread is busy outside Python: start from here
        else:
            self._enable()
        self._running = True

    def _enable(self) -> None:
        from torch._C._profiler import ProfilerActivity, _ExperimentalConfig
        from torch.autograd.profiler import ProfilerConfig, ProfilerState
        import torch._C._autograd as autograd

        # (state, report_input_shapes, profile_memory, with_stack, with_flops, with_modules, experimental);
        # torch's FLOP estimate needs the shapes (torch.autograd.profiler.profile sets them too)
        shapes = self.record_shapes or self.with_flops or self.shapes_for_sim
        experimental = self._experimental
        if experimental is None:
            experimental = _ExperimentalConfig(**self.experimental)
        cfg = ProfilerConfig(ProfilerState.KINETO, shapes, self.profile_memory, self.with_stack, self.with_flops,
                             self.with_modules, experimental)
        activities = {ProfilerActivity.CPU}
        autograd._prepare_profiler(cfg, activities)
        autograd._enable_profiler(cfg, activities)

    def _disable(self):
        return self.torch._C._autograd._disable_profiler()

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._runner is None or self.all_threads:
            self.result = self._disable()
            return
        try:
            self.result = self._runner.stop(self._disable)
        except Exception as exc:  # the trace says why its ops are missing (read_trace raises it)
            self._stop_error = f"{type(exc).__name__}: {exc}"

    def abort(self) -> None:
        try:
            self.stop()
        finally:
            self.result = None

    def toggle(self, enable: bool) -> None:
        """torch's own toggle_collection_dynamic for its CPU ops (and their [memory] events)."""
        if self._running:
            from torch._C._profiler import ProfilerActivity
            import torch._C._autograd as autograd

            autograd._toggle_collection_dynamic(enable, {ProfilerActivity.CPU})

    def read_trace(self) -> bytes:
        """torch's Kineto trace of the cycle as JSON bytes (written by torch's C++ exporter, read back once);
        empty when there is none. The result itself stays for events() and the memory timeline."""
        if self._stop_error is not None:
            raise TorchOpsError(f"torch's profiler could not be stopped on the recorded thread: {self._stop_error}")
        if self.result is None:
            return b""
        return saved_trace(self.result)


# Kineto's integer args of ops, ranges and Python frames, kept as numeric columns; the rest of an
# event's args (shapes, types, strides, concrete inputs, anything new) stay as their JSON text.
INT_ARGS = ("External id", "Sequence number", "Fwd thread id", "Record function id", "Python id",
            "Python parent id", "Python thread")


class TorchOps:
    """torch's events of one cycle as columns (epoch ns), External ids moved above ``id_base``.

    ``from_trace_bytes`` reads torch's file with the C scanner (``xpuprof._native.tracescan``): its
    columns, and each op's args split in C into integer columns and the other members' text, with
    no Python object per event but that text. A document the scanner does not model exactly (or no
    C part) takes the general path: ``orjson`` and one dict per event (``TorchOps(trace_dict)``).
    """

    @classmethod
    def from_trace_bytes(cls, raw: bytes, id_base: int, *, drop_shapes: bool = False) -> "TorchOps":
        """``drop_shapes``: torch's shape args stay out of the trace (``op_args`` still has them)."""
        if not raw:
            return cls({"traceEvents": []}, id_base)
        from ..trace.read import scan

        scanned = scan.scan_bytes(raw)
        ops = cls._from_scan(raw, scanned, id_base, drop_shapes) if scanned is not None else None
        return ops if ops is not None else cls(orjson.loads(raw), id_base, drop_shapes=drop_shapes)

    @classmethod
    def _from_scan(cls, raw: bytes, sc, id_base: int, drop_shapes: bool = False) -> "TorchOps | None":
        from .. import _native
        from ..trace.read.scan import DUR, ID, INT, PID, TID, TS
        from .torch_memory import MemoryEvents

        tracescan = _native.load("tracescan", "reading torch's ops from the scanned trace")  # scanned: it is built
        table = {text: i for i, text in enumerate(sc.strings)}
        op_cats = [table[c] for c in OP_CATEGORIES if c in table]
        rows = np.flatnonzero((sc.ph == ord("X")) & np.isin(sc.cat, op_cats))
        flow_ph = (sc.ph == ord("s")) | (sc.ph == ord("f"))
        frows = np.flatnonzero(flow_ph & (sc.cat == table.get(FLOW_CATEGORY, -2)))
        both = np.concatenate([rows, frows])
        kind = sc.kind[both]
        if (sc.complex[both].any() or (sc.name[rows] < 0).any() or (kind[:, TS] == 0).any()
                or (kind[:, PID] != INT).any() or (kind[:, TID] != INT).any()
                or (sc.kind[frows, ID] != INT).any()):
            return None  # shaped in a way the columns do not hold exactly: the general path decides
        spans, int_keys = np.ascontiguousarray(sc.args_span[rows]), tuple(k.encode() for k in INT_ARGS)
        dropped = _DROPPED_ARGS + (SHAPE_ARGS if drop_shapes else ())
        ints, present, others, complex_rows = torch_args.scanned_args(tracescan, raw, spans, int_keys, dropped)
        if complex_rows.any():
            return None
        all_args = torch_args.scanned_args(tracescan, raw, spans, int_keys, _DROPPED_ARGS)[2] if drop_shapes else others
        base_ns = int(sc.header.get("baseTimeNanoseconds", 0))
        ints = np.frombuffer(ints, np.int64).reshape(len(rows), len(INT_ARGS))
        present = np.frombuffer(present, np.uint8).reshape(len(rows), len(INT_ARGS)).astype(bool)
        ops = cls.__new__(cls)
        ops.id_base = id_base
        ops.name_table = sc.strings
        ops.name_codes = sc.name[rows].astype(np.int64)
        ops.cats = np.array(sc.strings, dtype=object)[sc.cat[rows]]
        ops.ts = _us_to_epoch_ns(sc.numbers(TS)[rows], base_ns)
        ops.dur = np.rint(sc.numbers(DUR)[rows] * 1000).astype(np.int64)
        ops.pid, ops.tid = sc.ints(PID)[rows], sc.ints(TID)[rows]
        ext_col = INT_ARGS.index("External id")
        ext = np.where(present[:, ext_col], ints[:, ext_col], 0)
        ops.external_id = np.where(ext > 0, ext + id_base, 0)
        ops.num_args = {key: (ints[:, j].copy(), present[:, j].copy()) for j, key in enumerate(INT_ARGS)
                        if j != ext_col and present[:, j].any()}
        ops.row_args = others if others.lens.any() else None  # orjson's form already
        ops.flow_id = sc.ints(ID)[frows]
        ops.flow_ts = _us_to_epoch_ns(sc.numbers(TS)[frows], base_ns)
        ops.flow_pid, ops.flow_tid = sc.ints(PID)[frows], sc.ints(TID)[frows]
        ops.flow_start = sc.ph[frows] == ord("s")
        ops.all_args = all_args
        ops.memory = MemoryEvents.from_scan(raw, sc, lambda us: _us_to_epoch_ns(us, base_ns))
        return ops

    def __init__(self, trace: dict, id_base: int, *, drop_shapes: bool = False) -> None:
        from .torch_memory import MemoryEvents

        base_ns = int(trace.get("baseTimeNanoseconds", 0))
        events = trace.get("traceEvents") or []
        keep = [e for e in events if e.get("ph") == "X" and e.get("cat") in OP_CATEGORIES]
        flows = [e for e in events if e.get("cat") == FLOW_CATEGORY and e.get("ph") in ("s", "f")]
        self.id_base = id_base
        codes: dict[str, int] = {}
        self.name_codes = np.fromiter((codes.setdefault(e["name"], len(codes)) for e in keep), np.int64, len(keep))
        self.name_table = list(codes)
        self.cats = np.array([e["cat"] for e in keep], dtype=object)
        self.ts = _us_to_epoch_ns(np.array([e["ts"] for e in keep], np.float64), base_ns)
        self.dur = np.rint(np.array([e.get("dur", 0) for e in keep], np.float64) * 1000).astype(np.int64)
        self.pid = np.array([e["pid"] for e in keep], np.int64)
        self.tid = np.array([e["tid"] for e in keep], np.int64)
        args = [e.get("args") or _NO_ARGS for e in keep]
        ext = np.array([a.get("External id", 0) for a in args], np.int64)
        self.external_id = np.where(ext > 0, ext + id_base, 0)
        self.all_args = _split_args(args)[1]
        self.num_args, self.row_args = _split_args(args, SHAPE_ARGS if drop_shapes else ())
        self.flow_id = np.array([e["id"] for e in flows], np.int64)
        self.flow_ts = _us_to_epoch_ns(np.array([e["ts"] for e in flows], np.float64), base_ns)
        self.flow_pid = np.array([e["pid"] for e in flows], np.int64)
        self.flow_tid = np.array([e["tid"] for e in flows], np.int64)
        self.flow_start = np.array([e["ph"] == "s" for e in flows], bool)
        self.memory = MemoryEvents.from_events(events, lambda us: _us_to_epoch_ns(us, base_ns))

    def __len__(self) -> int:
        return len(self.name_codes)

    def op_args(self, rows) -> list[dict]:
        """The args torch wrote for ops ``rows`` (shapes and types included, whether or not the trace keeps
        them), without the integer ones: read for the few ops a caller asks about (the simulator)."""
        if self.all_args is None:
            return [{} for _ in rows]
        return [orjson.loads(self.all_args[i]) if self.all_args[i] is not None else {} for i in rows]

    def add_to(self, builder: TraceBuilder, pid: int) -> set[int]:
        """Slices on the calling threads' rows (torch's pid is this process: ours), fwdbwd flows."""
        tids: set[int] = set()
        table_ids = builder.strings.intern_many(self.name_table) if self.name_table else np.zeros(0, np.int32)
        for cat in OP_CATEGORIES:
            sel = np.flatnonzero(self.cats == cat)
            if not len(sel):
                continue
            args = {}
            for key, (values, present) in self.num_args.items():
                if present[sel].any():
                    args[key] = ArgColumn("num", values[sel], None if present[sel].all() else present[sel])
            builder.add_slices(names=None, name_ids=table_ids[self.name_codes[sel]], ts=self.ts[sel], dur=self.dur[sel],
                               pid=pid,
                               tid=self.tid[sel], cat=cat, external_id=self.external_id[sel], args=args,
                               row_args=torch_args.select(self.row_args, sel))
            tids.update(distinct(self.tid[sel]).tolist())
        if len(self.flow_id):
            builder.add_flows(flow_ids=self.flow_id, ts=self.flow_ts, pid=pid, tid=self.flow_tid,
                              start=self.flow_start, cat=FLOW_CATEGORY)
        return tids

    def linkable(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(tid, start, end, External id) of the ops runtime calls are linked to: cpu_op only. Kineto links a
        call to the innermost op around it through the correlation torch pushes for non-user-scope
        RecordFunctions; user ranges (user_annotation: torch's record_function, Optimizer.step#...,
        ours) push a separate user correlation and are no operators to TensorBoard either."""
        sel = np.flatnonzero((self.cats == "cpu_op") & (self.external_id > 0))
        return self.tid[sel], self.ts[sel], self.ts[sel] + self.dur[sel], self.external_id[sel]


def _split_args(args: list, drop: tuple = ()) -> tuple[dict, list | None]:
    """Kineto's args as integer columns (ids, sequence numbers: one list pass per key, no per-event
    encoding) and, for the rest (shapes, types, concrete inputs), one encoded object per row."""
    keys = set().union(*args) - {"External id", *_DROPPED_ARGS, *drop} if args else set()
    numeric: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    rest = []
    for key in sorted(keys):
        values = [a.get(key) for a in args]
        if all(type(v) is int for v in values if v is not None):
            present = np.fromiter((v is not None for v in values), bool, len(values))
            numeric[key] = (np.array([0 if v is None else v for v in values], np.int64), present)
        else:
            rest.append(key)
    if not rest:
        return numeric, None
    row_args = []
    for a in args:
        other = {k: a[k] for k in rest if k in a}
        row_args.append(orjson.dumps(other) if other else None)
    return numeric, row_args


def _us_to_epoch_ns(us: np.ndarray, base_ns: int) -> np.ndarray:
    # Kineto writes ns precision as microseconds with 3 decimals; float64 holds that exactly below 2**53 ns.
    return np.rint(us * 1000).astype(np.int64) + np.int64(base_ns)


# ----------------------------------------------------------------------------- linking
# An explicit "External id": 0 (the writer omits id 0): see link_runtime_calls' ``explicit_zero``.
EXPLICIT_NO_OP = "External id"


def link_runtime_calls(builder: TraceBuilder, tid: np.ndarray, start: np.ndarray, end: np.ndarray,
                       ext: np.ndarray, *, explicit_zero: bool = False) -> tuple[int, int]:
    """Give every runtime/driver call the External id of the innermost op containing its start on its
    thread, and the device work it launched (same correlation and old External id) the same id. A call
    in no op gets none (it may carry our record_function's id until now), and so does its device work,
    as Kineto writes them (no "External id"). ``explicit_zero``: those rows say "External id": 0
    instead, as the Kineto of torch-tb-profiler 0.4's time did (its null op); TensorBoard attaches such
    a call to the root and warns "Runtime with external id None don't correlate" for one without the
    arg. Returns (calls linked to an op, calls in no op)."""
    builder.flush()
    strings = builder.strings
    call_cats = {strings.intern(ActivityType.RUNTIME.value), strings.intern(ActivityType.DRIVER.value)}
    moved_old, moved_corr, moved_new = [], [], []
    linked = unlinked = 0
    for b in builder.slices:
        is_call = np.isin(b.cat, list(call_cats))
        if not is_call.any():
            continue
        rows = np.flatnonzero(is_call)
        try:
            q_tid = b.tid[rows].astype(np.int64)
        except (TypeError, ValueError):  # string row names: not a host thread, so in no op
            q_tid = np.full(len(rows), -1, np.int64)
        hit = innermost_containing(tid, start, end, q_tid, b.ts[rows])
        found = hit >= 0
        new = np.where(found, ext[np.maximum(hit, 0)], 0) if len(ext) else np.zeros(len(rows), np.int64)
        corr = b.args.get("correlation")
        if corr is not None and corr.kind == "num":
            moved_old.append(b.external_id[rows].copy())
            moved_corr.append(np.asarray(corr.values)[rows].astype(np.int64))
            moved_new.append(new)
        b.external_id = b.external_id.copy()
        b.external_id[rows] = new
        if explicit_zero and not found.all():
            _say_no_op(b, rows[~found])
        linked += int(found.sum())
        unlinked += int((~found).sum())
    if moved_new:
        _relink_device_work(builder, call_cats, np.concatenate(moved_old), np.concatenate(moved_corr),
                            np.concatenate(moved_new), explicit_zero)
    return linked, unlinked


def _say_no_op(b, rows: np.ndarray) -> None:
    """Rows ``rows`` of batch ``b`` (External id 0) write "External id": 0, first in their args."""
    present = np.zeros(len(b), bool)
    col = b.args.get(EXPLICIT_NO_OP)
    if col is not None:
        present |= np.asarray(col.present if col.present is not None else np.ones(len(b), bool))
    present[rows] = True
    present &= b.external_id == 0  # never beside a real id (the writer puts that one first)
    rest = {k: v for k, v in b.args.items() if k != EXPLICIT_NO_OP}
    b.args = {EXPLICIT_NO_OP: ArgColumn("num", np.zeros(len(b), np.int64), present), **rest}


def _relink_device_work(builder: TraceBuilder, call_cats: set[int], old: np.ndarray, corr: np.ndarray,
                        new: np.ndarray, explicit_zero: bool) -> None:
    """Kernels, copies and syncs carry their call's External id: (correlation, old id) -> new id."""
    key = np.stack([corr, old], axis=1)
    key_view = np.ascontiguousarray(key).view([("c", np.int64), ("o", np.int64)]).ravel()
    order = np.argsort(key_view, kind="stable")
    sorted_keys = key_view[order]
    for b in builder.slices:
        if np.isin(b.cat, list(call_cats)).any():
            continue
        c = b.args.get("correlation")
        if c is None or c.kind != "num":
            continue
        probe = np.ascontiguousarray(np.stack([np.asarray(c.values).astype(np.int64), b.external_id], axis=1)
                                     ).view([("c", np.int64), ("o", np.int64)]).ravel()
        pos = np.searchsorted(sorted_keys, probe)
        pos_c = np.minimum(pos, len(sorted_keys) - 1)
        match = (pos < len(sorted_keys)) & (sorted_keys[pos_c] == probe)
        if match.any():
            b.external_id = b.external_id.copy()
            b.external_id[match] = new[order[pos_c[match]]]
            if explicit_zero:
                no_op = np.flatnonzero(match & (b.external_id == 0))
                if len(no_op):
                    _say_no_op(b, no_op)
