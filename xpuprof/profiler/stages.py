"""The modules a trace's stop, build and write import on first use, loaded ahead of time.

They are imported inside functions so that ``import xpuprof`` stays light. A profile loads them before
anything records (``profile._prepare_trace``): stop and export may run from atexit or a signal handler,
and never import there. The on-demand client loads them while the program idles (``ondemand.client.
prewarm``), so that a capture's first start and stop do not spend the program's time importing
(measured: a first start 8.4 ms and stop 10 ms against 1.0 and 1.9 ms with these loaded).
"""
from __future__ import annotations

import importlib

TRACE_STAGE_MODULES = (
    "xpuprof.profiler.assemble",  # build_trace, and the torch ops' assembly it imports
    "xpuprof.trace.write.chrome",
    "xpuprof.trace.read.scan",  # torch's ops and memory events are read through the trace scanner
    "xpuprof.trace.read.load",
    "xpuprof.host.torch_memory",
    "xpuprof.config.kernel_filter",
    "xpuprof.rank",
    "xpuprof.inputs",
    "isal.isal_zlib",  # the .json.gz writer's codec
)


def load_trace_stages() -> None:
    """Import every module in ``TRACE_STAGE_MODULES`` that can be (python-isal is optional, a C part may
    be unbuilt: the stage that needs one says so when it runs)."""
    for name in TRACE_STAGE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from .. import _native

    _native.optional("tracescan")  # the C scanner torch's ops and memory events are read with
