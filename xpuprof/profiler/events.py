"""torch's results API on xpuprof's traces: ``events()``, ``key_averages(group_by_...)``, ``export_stacks``
and ``export_memory_timeline``.

``events()`` is torch's own ``EventList``: torch's parser turns the cycle's torch result into
``FunctionEvent`` objects (ops, torch's ranges, [memory] records), then our ``record_function`` ranges join
them as user annotations and the device work of our backends (kernels, copies, fills) is appended to the
op (or range) that launched it, through the trace's ``External id``, and listed as device events as torch
lists CUDA's. torch's own table, ``key_averages`` and ``export_stacks`` code then runs unchanged on it.
torch is imported here only when one of these is called (they return torch's objects).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..activity import ActivityType
from ..config.options import ProfilerConfig

if TYPE_CHECKING:
    from ..trace.builder.builder import TraceBuilder

DEVICE_CATEGORIES = (ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET)
# torch's use_device for each vendor a backend writes as (its device time columns are named after it)
USE_DEVICE = {"xpu": "xpu", "cuda": "cuda", "rocm": "cuda", "sim": "xpu"}


@dataclass
class FinishedCycle:
    """What a finished recording cycle leaves for torch's results API."""

    builder: TraceBuilder
    config: ProfilerConfig
    torch_result: Any = None  # torch's _ProfilerResult of the cycle (None without torch ops)
    torch_id_base: int = 0  # torch's External ids were moved above this in the trace
    use_device: str | None = None
    events: Any = field(default=None, repr=False)  # the EventList, built on first use


def _torch(what: str):
    try:
        import torch  # noqa: F401
        from torch.autograd import profiler as autograd_profiler
        from torch.autograd import profiler_util
    except ImportError as exc:
        raise RuntimeError(f"{what} returns torch's profiler objects and needs torch, which cannot be imported "
                           f"here ({exc}); pip install torch==2.13.0") from None
    return autograd_profiler, profiler_util


def use_device_of(builder: TraceBuilder, sessions: list[str], sim_vendor: str) -> str | None:
    """torch's ``use_device`` for the trace: the vendor of the device backend in use (None: host only)."""
    for name in sessions:
        if name == "sim":
            return "cuda" if sim_vendor in ("cuda", "hip") else "xpu"
        if name in USE_DEVICE:
            return USE_DEVICE[name]
    return None


def build_event_list(done: FinishedCycle, *, timeout_s: float | None = None):
    """The cycle's torch ``EventList`` (see the module docstring); built once per cycle."""
    if done.events is not None:
        return done.events
    autograd_profiler, util = _torch("events()")
    import torch

    config = done.config
    if config.torch_experimental.get("trace_only"):
        raise RuntimeError("events() is not available when trace_only=True in ExperimentalConfig. "
                           "Use export_chrome_trace() instead.")
    fes: list = []
    start_ns = done.builder.window_start_ns
    if done.torch_result is not None:
        parser = autograd_profiler.profile(use_kineto=True, record_shapes=config.record_shapes,
                                           with_flops=config.with_flops, profile_memory=config.profile_memory,
                                           with_stack=config.with_stack, with_modules=config.with_modules)
        parser.use_device = done.use_device  # our backends' device (torch's own would be refused on a CPU build)
        fes = parser._parse_kineto_results(done.torch_result, timeout_s=timeout_s)
        start_ns = done.torch_result.trace_start_ns()
    by_id = {fe.id: fe for fe in fes if fe.device_type == torch.autograd.DeviceType.CPU}
    ours = _our_ranges(done, util.FunctionEvent, start_ns, _torch_threads(done, by_id))
    for fe in ours:
        by_id.setdefault(-fe.id, fe)  # our ids are below torch's moved ones: kept apart by sign
    fes.extend(ours)
    fes.extend(_device_events(done, util.FunctionEvent, torch.autograd.DeviceType, start_ns, by_id))
    fes.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    events = util.EventList(fes, use_device=done.use_device, profile_memory=config.profile_memory,
                            with_flops=config.with_flops)
    events._build_tree()
    done.events = events
    return events


def _slices(builder: TraceBuilder, cat: ActivityType):
    """(names, ts, dur, pid, tid, external id) of every slice of category ``cat``."""
    import numpy as np

    builder.flush()
    cat_id = builder.strings.intern(cat.value)
    strings = builder.strings.strings
    for b in builder.slices:
        rows = np.flatnonzero(b.cat == cat_id)
        if len(rows):
            pid = b.pid[rows] if isinstance(b.pid, np.ndarray) and b.pid.shape else np.full(len(rows), b.pid)
            tid = b.tid[rows] if isinstance(b.tid, np.ndarray) and b.tid.shape else np.full(len(rows), b.tid)
            yield ([strings[i] for i in b.name[rows].tolist()], b.ts[rows].tolist(), b.dur[rows].tolist(),
                   pid.tolist(), tid.tolist(), b.external_id[rows].tolist())


def _torch_threads(done: FinishedCycle, by_id: dict) -> dict[int, int]:
    """Native thread id -> torch's own thread number (FunctionEvent.thread), read off torch's ops in the trace
    (their External id is the event's id there): our ranges join torch's events on the same thread."""
    base = done.torch_id_base
    threads: dict[int, int] = {}
    if not base or not by_id:
        return threads
    for _names, _ts, _dur, _pid, tid, ext in _slices(done.builder, ActivityType.CPU_OP):
        for t, e in zip(tid, ext):
            fe = by_id.get(e - base)
            if fe is not None and t not in threads:
                threads[t] = fe.thread
    return threads


def _our_ranges(done: FinishedCycle, FunctionEvent, start_ns: int, threads: dict[int, int]) -> list:
    """Our record_function ranges (not torch's: those came from its result) as user annotations."""
    out = []
    base = done.torch_id_base
    for names, ts, dur, _pid, tid, ext in _slices(done.builder, ActivityType.USER_ANNOTATION):
        for name, t, d, th, e in zip(names, ts, dur, tid, ext):
            if base and e > base:
                continue
            if not isinstance(th, int):
                continue
            th = threads.get(th, th)
            # torch's own parser names every ProfilerStep#N "ProfilerStep*" (its trace_name keeps the number), so
            # key_averages() folds the steps into one row
            shown = "ProfilerStep*" if name.startswith("ProfilerStep#") else name
            out.append(FunctionEvent(id=-e if e else -(len(out) + 1), name=shown, thread=th, trace_name=name,
                                     start_us=(t - start_ns) / 1000, end_us=(t + d - start_ns) / 1000,
                                     use_device=done.use_device, is_user_annotation=True, fwd_thread=th,
                                     input_shapes=[], stack=[], sequence_nr=-1, external_id=e))
    return out


def _device_events(done: FinishedCycle, FunctionEvent, DeviceType, start_ns: int, by_id: dict) -> list:
    """Kernels, copies and fills: appended to the op (or our range) that launched them, and listed."""
    if done.use_device is None:
        return []
    dev_type = DeviceType.CUDA if done.use_device == "cuda" else DeviceType.XPU
    base = done.torch_id_base
    out = []
    for cat in DEVICE_CATEGORIES:
        for names, ts, dur, pid, tid, ext in _slices(done.builder, cat):
            for name, t, d, p, th, e in zip(names, ts, dur, pid, tid, ext):
                owner = by_id.get(e - base) if base and e > base else by_id.get(-e)
                device = p if isinstance(p, int) and p >= 0 else 0
                if owner is not None:
                    owner.append_kernel(name, device, d / 1000)
                out.append(FunctionEvent(id=e, name=name, thread=th if isinstance(th, int) else 0, trace_name=name,
                                         start_us=(t - start_ns) / 1000, end_us=(t + d - start_ns) / 1000,
                                         use_device=done.use_device, device_type=dev_type, device_index=device,
                                         input_shapes=[], stack=[], sequence_nr=-1, external_id=e))
    return out


def _through_private_dir(path, write, suffix: str = "") -> Path:
    """Let torch's writer ``write(tmp_path)`` fill a file in a private directory, then write its bytes to
    ``path`` by our output rules (atomic, never through a planted link). The private file has a short name of
    its own (``export`` + ``suffix``: torch picks its format by the suffix), so the user's file name never
    breaks torch's write; every failure is one ``OSError`` (``outputs.OutputError``) that names ``path`` and
    the reason - never the private directory, which the user did not ask for and which is gone."""
    from ..outputs import OutputError, write_error_line, write_output_bytes

    def failed(exc: OSError, how: str = "") -> OutputError:
        err = OutputError(f"cannot write {path}: {how}{exc.strerror or exc}")
        err.errno = exc.errno
        return err

    try:
        tmp = tempfile.mkdtemp(prefix="xpuprof-export-")
    except OSError as exc:
        raise failed(exc, f"no private temporary directory for torch's writer under {tempfile.gettempdir()}: ") from None
    try:
        inner = os.path.join(tmp, "export" + suffix)
        try:
            write(inner)
            with open(inner, "rb") as f:
                data = f.read()
        except OSError as exc:  # torch's writer, in the private directory (a full or read-only TMPDIR)
            raise failed(exc, f"torch's writer failed in a temporary directory under {tempfile.gettempdir()}: ") \
                from None
        try:
            return write_output_bytes(path, data)
        except OutputError:
            raise
        except OSError as exc:  # /dev/full, a full disk: the output named, whichever file the system names
            err = OutputError(write_error_line(path, _unnamed(exc)))
            err.errno = exc.errno
            raise err from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _unnamed(exc: OSError) -> OSError:
    """``exc`` without the file name the system gave (the output's temporary sibling, or none)."""
    return OSError(exc.errno, exc.strerror or str(exc))


def _memory_timeline_suffix(target: str) -> str:
    for suffix in (".html", ".raw.json.gz", ".json.gz", ".gz"):
        if target.endswith(suffix):
            return suffix
    return ".json"


def export_stacks(events, path, metric: str, with_stack: bool) -> Path:
    """torch's flamegraph-collapsed stacks (``path``: one ``frame;frame;... value`` line per stack)."""
    if not with_stack:
        raise ValueError("export_stacks() needs with_stack=True (the stacks are recorded only then)")
    supported = events.supported_export_stacks_metrics()
    if metric not in supported:
        raise ValueError(f"export_stacks metric {metric!r} is not valid; valid: {', '.join(supported)}")
    return _through_private_dir(path, lambda p: events.export_stacks(p, metric))


def _memory_device(done: FinishedCycle) -> str | None:
    """The device torch's allocators reported most [memory] events for in the cycle ("cpu", "cuda:0", ...)."""
    by_device = (done.builder.metadata.get("memory_events") or {}).get("by_device") or {}
    if not by_device:
        return None
    kind = max(by_device, key=by_device.get)
    return "cpu" if kind == "CPU" else f"{kind.lower()}:0"


def export_memory_timeline(done: FinishedCycle, path, device: str | None) -> Path:
    """torch's memory timeline of the cycle (``.html``, ``.json``/``.json.gz``, ``.raw.json.gz`` by suffix),
    written by torch's own MemoryProfileTimeline from the cycle's torch result."""
    _torch("export_memory_timeline()")
    import torch
    from torch.profiler._memory_profiler import MemoryProfile, MemoryProfileTimeline

    config = done.config
    missing = [f"{k}=True" for k in ("record_shapes", "profile_memory", "with_stack") if not getattr(config, k)]
    if missing:
        raise ValueError(f"{', '.join(missing)} required for memory profiling.")
    if done.torch_result is None:
        raise RuntimeError("export_memory_timeline() reads torch's memory records: this cycle recorded no torch "
                           "ops (torch was not imported when it started, or 'cpu_op' was not asked for)")
    if device is None:
        device = _memory_device(done) or (f"{done.use_device}:0" if done.use_device and done.use_device != "cuda"
                                          else ("cuda:0" if torch.cuda.is_available() else "cpu"))
    timeline = MemoryProfileTimeline(MemoryProfile(done.torch_result))
    target = str(path)

    if target.endswith(".html"):
        try:
            import matplotlib  # noqa: F401  (torch draws the plot with it, and only prints when it is missing)
        except ImportError:
            raise RuntimeError(f"export_memory_timeline({target!r}): the .html plot is drawn by matplotlib, which "
                               "cannot be imported here (pip install matplotlib); .json, .json.gz and .raw.json.gz "
                               "need nothing more") from None

    def write(inner: str) -> None:
        if target.endswith(".html"):
            timeline.export_memory_timeline_html(inner, device)
        elif target.endswith(".gz"):
            import gzip

            plain = inner[:-3]
            if target.endswith("raw.json.gz"):
                timeline.export_memory_timeline_raw(plain, device)
            else:
                timeline.export_memory_timeline(plain, device)
            with open(plain, "rb") as fin, gzip.open(inner, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            timeline.export_memory_timeline(inner, device)

    return _through_private_dir(path, write, _memory_timeline_suffix(target))
