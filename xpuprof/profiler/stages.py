"""The modules a trace's stop, build and write import on first use, loaded ahead of time.

They are imported inside functions so that ``import xpuprof`` stays light. A profile loads them before
anything records (``profile._prepare_trace``): stop and export may run from atexit or a signal handler,
and never import there. The on-demand client loads them while the program idles (``ondemand.client.
prewarm``), so that a capture's first start and stop do not spend the program's time importing
(measured: a first start 8.4 ms and stop 10 ms against 1.0 and 1.9 ms with these loaded).

``profile.start()`` begins loading them on a thread of their own (``start_loading``): a schedule whose first
cycle is prepared after a step of work then loads them (40-80 ms) beside that step instead of inside it.
(numpy.ma is not among them: the cycle's code never calls np.unique in the form that imports it, see
``host.distinct``.) Preparing a cycle waits
for that thread; so does a fork (``os.register_at_fork``), so that no child starts with an import
half-done by a thread it does not have.
"""
from __future__ import annotations

import importlib
import os
import threading

TRACE_STAGE_MODULES = (
    "xpuprof.profiler.assemble",  # build_trace, and the torch ops' assembly it imports
    "xpuprof.trace.write.chrome",
    "xpuprof.trace.write.files",  # which writer a path gets (the Perfetto writer loads on its first use)
    "xpuprof.trace.read.scan",  # torch's ops and memory events are read through the trace scanner
    "xpuprof.trace.read.load",
    "xpuprof.host.torch_ops",  # the cycle's start records torch's ops through it
    "xpuprof.host.torch_memory",
    "xpuprof.host.torch_args",
    "xpuprof.config.kernel_filter",
    "xpuprof.rank",
    "xpuprof.inputs",
    "isal.isal_zlib",  # the .json.gz writer's codec
)

_loaded = threading.Event()
_loader: threading.Thread | None = None
_loader_lock = threading.Lock()
_failure: list[BaseException] = []  # what a stage raised on the loader thread, raised again to the profile


def _import_all() -> None:
    try:
        for name in TRACE_STAGE_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:  # python-isal is optional, a C part may be unbuilt: its stage says so when it runs
                pass
        from .. import _native

        _native.optional("tracescan")  # the C scanner torch's ops and memory events are read with
        from ..trace.layout import lanes

        lanes.native()  # the layout pass's C walks (every writer runs the pass)
    except Exception as exc:  # a broken stage: the profile that needs it says so (load_trace_stages)
        _failure.append(exc)
    finally:
        _loaded.set()


def start_loading() -> None:
    """Begin importing the stages on a background thread (once per process; nothing when they are loaded)."""
    global _loader
    with _loader_lock:
        if _loaded.is_set() or _loader is not None:
            return
        _loader = threading.Thread(target=_import_all, name="xpuprof-load-trace-stages", daemon=True)
        _loader.start()


def load_trace_stages() -> None:
    """Every module in ``TRACE_STAGE_MODULES`` that can be imported, imported: waits for the background
    load when one runs, else imports them here."""
    if not _loaded.is_set():
        with _loader_lock:
            loader = _loader
        if loader is not None and loader is not threading.current_thread():
            loader.join()
        if not _loaded.is_set():
            _import_all()
    if _failure:  # raised here, in the profile's thread; the next call imports again (and says it again)
        _loaded.clear()
        raise _failure.pop()


def _finish_before_fork() -> None:
    loader = _loader
    if loader is not None and loader.is_alive() and loader is not threading.current_thread():
        loader.join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_before_fork)
