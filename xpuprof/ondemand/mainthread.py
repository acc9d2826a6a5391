"""Run a short function on the main thread, from another thread, without waiting for the program.

torch's profiler keeps its callbacks per thread: the thread that enables it is the thread whose ops
it records, and only that thread may disable it. A capture runs on its own thread (never the
training thread), so it hands torch's enable and disable to the main thread, where training runs.
CPython's ``Py_AddPendingCall`` (the mechanism behind Python signal handlers) runs a callback on
the main thread at its next bytecode boundary; the main thread pays only for the function itself.

While the main thread itself waits for a capture (at exit), it runs queued calls as it waits
(``wait_serving``), so the two never wait on each other.
"""
from __future__ import annotations

import collections
import ctypes
import threading
from typing import Any, Callable

_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class MainThreadTimeout(TimeoutError):
    """The main thread did not run the call in time (blocked outside Python, or gone)."""


class _Call:
    __slots__ = ("fn", "lock", "started", "cancelled", "done", "result", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        self.started = self.cancelled = False
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        with self.lock:
            if self.cancelled or self.started:
                return
            self.started = True
        try:
            self.result = self.fn()
        except BaseException as exc:  # handed back to the waiting thread
            self.error = exc
        finally:
            self.done.set()


_queue: collections.deque[_Call] = collections.deque()
_wakeup = threading.Condition()


def _drain(_arg=None) -> int:
    while True:
        try:
            call = _queue.popleft()
        except IndexError:
            return 0
        call.run()


_callback = _PENDING_CALL(_drain)  # kept alive for the life of the process
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = [_PENDING_CALL, ctypes.c_void_p]
_add_pending_call.restype = ctypes.c_int


def run(fn: Callable[[], Any], timeout_s: float) -> Any:
    """``fn()`` on the main thread (directly when called there); its result, or its exception.

    ``MainThreadTimeout`` when the main thread has not started it within ``timeout_s``: it is then
    cancelled and never runs. Once started, it is waited for to the end.
    """
    if threading.current_thread() is threading.main_thread():
        return fn()
    call = _Call(fn)
    _queue.append(call)
    with _wakeup:
        _wakeup.notify_all()
    if _add_pending_call(_callback, None) != 0:  # the interpreter's queue is full: a later drain takes it
        pass
    if not call.done.wait(timeout_s):
        with call.lock:
            if not call.started:
                call.cancelled = True
                raise MainThreadTimeout(f"the main thread did not run it within {timeout_s:g} s")
        call.done.wait()
    if call.error is not None:
        raise call.error
    return call.result


def wait_serving(done: threading.Event, timeout_s: float) -> bool:
    """On the main thread: wait for ``done`` (up to ``timeout_s``) while running queued calls."""
    import time

    deadline = time.monotonic() + timeout_s
    while not done.is_set():
        _drain()
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with _wakeup:
            if not _queue:
                _wakeup.wait(min(left, 0.05))
    _drain()
    return True
