"""Optional ``python_function`` tracing: every Python call/return while profiling, as slices.

Off by default (``ProfilerConfig(python_functions=True)`` turns it on, with PYTHON_FUNCTION
selected). Uses ``sys.setprofile`` for the starting thread and ``threading.setprofile`` for
threads started while it runs; threads already running elsewhere are not traced. The hook only
appends (code object, call/return, time, tid) to a flat list; pairing calls with returns and
naming happens afterwards, in ``process``. Calls inside xpuprof itself are left out.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from ..activity import ActivityType
from .distinct import distinct

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_FIELDS = 4  # code, is_call, monotonic ns, native tid


def function_name(code) -> str:
    """Kineto/PyTorch's python_function naming: ``<file>(<line>): <function>``."""
    return f"{code.co_filename}({code.co_firstlineno}): {getattr(code, 'co_qualname', code.co_name)}"


class PythonFunctionTracer:
    def __init__(self) -> None:
        self._rows: list = []
        self._stop_mono = 0
        self._previous = None

    def _hook(self, frame, event, arg) -> None:
        if event == "call":
            self._rows += (frame.f_code, True, time.monotonic_ns(), threading.get_native_id())
        elif event == "return":
            self._rows += (frame.f_code, False, time.monotonic_ns(), threading.get_native_id())

    def start(self) -> None:
        self._previous = sys.getprofile()
        if self._previous is not None:
            raise RuntimeError("python_function tracing needs sys.setprofile, but another profiler "
                               f"({self._previous!r}) already uses it on this thread")
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)
        self._stop_mono = time.monotonic_ns()

    def process(self, builder, monotonic_to_epoch_ns: int) -> set[int]:
        """Pair calls with returns per thread and write ``python_function`` slices; returns the tids."""
        rows, k = self._rows, _FIELDS
        codes, is_call, ts, tids = rows[0::k], rows[1::k], rows[2::k], rows[3::k]
        stacks: dict[int, list] = {}
        out_code, out_start, out_end, out_tid = [], [], [], []
        unmatched = 0
        for code, call, t, tid in zip(codes, is_call, ts, tids):
            stack = stacks.setdefault(tid, [])
            if call:
                stack.append((code, t))
            elif stack and stack[-1][0] is code:
                c, t0 = stack.pop()
                out_code.append(c), out_start.append(t0), out_end.append(t), out_tid.append(tid)
            else:
                unmatched += 1  # returns from frames entered before tracing started
        for tid, stack in stacks.items():  # frames still open at stop (the profiled block itself)
            for c, t0 in stack:
                out_code.append(c), out_start.append(t0), out_end.append(self._stop_mono), out_tid.append(tid)
        self._rows = []
        if unmatched:
            builder.count_dropped("python_function: return without a traced call", unmatched)
        names_by_code: dict = {}
        keep = []
        for i, c in enumerate(out_code):
            name = names_by_code.get(c)
            if name is None:
                name = names_by_code[c] = "" if c.co_filename.startswith(_PACKAGE_DIR) else function_name(c)
            if name:
                keep.append(i)
        if not keep:
            return set()
        idx = np.array(keep, dtype=np.intp)
        start = np.array(out_start, np.int64)[idx] + monotonic_to_epoch_ns
        end = np.array(out_end, np.int64)[idx] + monotonic_to_epoch_ns
        tid_arr = np.array(out_tid, np.int64)[idx]
        builder.add_slices(names=[names_by_code[out_code[i]] for i in keep], ts=start, dur=end - start,
                           pid=builder.pid, tid=tid_arr, cat=ActivityType.PYTHON_FUNCTION)
        return set(distinct(tid_arr).tolist())
