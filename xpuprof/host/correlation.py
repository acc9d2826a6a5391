"""Range correlation without the C extension: the same rules as ``xpuprof/_native/shared/correlation.c``.

The logical range follows ``contextvars`` (asyncio tasks and ``copy_context().run`` see their own;
plain threads their own); each thread's open ranges are mirrored, in enter order, for sessions
that keep one external-id stack per thread (a range closed out of order is removed from its place,
one closed on another thread at its own thread's next range); mark logs get (id, tid, ns, parent)
on enter and (-id, tid, ns, 0) on exit. What cannot be told right is counted for the trace.
"""
from __future__ import annotations

import contextvars
import threading
import time

_current: contextvars.ContextVar = contextvars.ContextVar("xpuprof.current_range.py", default=None)
MARK_WIDTH = 4


class PyCorrelation:
    """One recording's correlation state (pure-Python path). Ranges are objects with ``_cid``, ``_tid``,
    ``_parent``, ``_closed`` and ``_owner`` (this object while open)."""

    def __init__(self, sessions) -> None:
        self.sessions = sessions
        self._local = threading.local()
        self.closed_elsewhere = 0
        self.counts = {"exited_out_of_order": 0, "exited_on_another_thread": 0, "entered_over_another_context": 0,
                       "max_depth": 0}

    def _open(self, r) -> bool:
        return r is not None and not r._closed and r._owner is self

    def _open_ancestor(self, r):
        while r is not None and not self._open(r):
            r = r._parent
        return r

    def _stack(self) -> list:
        local = self._local
        stack = getattr(local, "stack", None)
        if stack is None:
            stack = local.stack = []
            local.pruned_at = self.closed_elsewhere
        return stack

    def _vendor(self, cid: int) -> None:
        for s in self.sessions:
            if not _takes_marks(s):
                s.push_correlation_id(cid) if cid else s.pop_correlation_id()

    def _mark(self, *row) -> None:
        for s in self.sessions:
            if _takes_marks(s):
                s.correlation_log.append(*row)

    def _remove(self, stack: list, k: int) -> None:
        for _ in range(len(stack) - k):
            self._vendor(0)
        del stack[k]
        for r in stack[k:]:
            self._vendor(r._cid)

    def _prune(self, stack: list) -> None:
        if self._local.pruned_at != self.closed_elsewhere:
            self._local.pruned_at = self.closed_elsewhere
            for k in range(len(stack) - 1, -1, -1):
                if stack[k]._closed:
                    self._remove(stack, k)

    def enter(self, r) -> None:
        parent = self._open_ancestor(_current.get())
        r._parent = parent
        _current.set(r)
        stack = self._stack()
        self._prune(stack)
        if (stack[-1] if stack else None) is not parent:
            self.counts["entered_over_another_context"] += 1
        stack.append(r)
        self.counts["max_depth"] = max(self.counts["max_depth"], len(stack))
        self._mark(r._cid, r._tid, time.monotonic_ns(), parent._cid if parent is not None else 0)
        self._vendor(r._cid)

    def exit(self, r, tid: int) -> None:
        r._closed = True
        if _current.get() is r:
            _current.set(self._open_ancestor(r._parent))
        stack = self._stack()
        self._prune(stack)
        if tid != r._tid:
            self.closed_elsewhere += 1
        else:
            for k in range(len(stack) - 1, -1, -1):
                if stack[k] is r:
                    if k != len(stack) - 1:
                        self.counts["exited_out_of_order"] += 1
                    self._remove(stack, k)
                    break
        self._mark(-r._cid, tid, time.monotonic_ns(), 0)

    def current(self) -> int:
        r = self._open_ancestor(_current.get())
        return r._cid if r is not None else 0


def _takes_marks(session) -> bool:
    log = getattr(session, "correlation_log", None)
    return log is not None and getattr(log, "width", None) == MARK_WIDTH
