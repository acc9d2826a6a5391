"""SIGINT/SIGTERM during ``xpuprof run``: stop cleanly instead of dying with a traceback.

The first signal cuts the workload where it stands (the current iteration's range ends there), the
recording cycle is stopped and its trace written, marked ``"interrupted": "<SIGNAME>"``; no further
point or repeat starts. A signal that lands while a trace or ``summary.jsonl`` is being written does
not cut the write: it finishes (outputs stay atomic) and the run stops right after. A second signal
abandons the recording or trace write in progress (its temporary file is removed); the summary is
still written. The run then exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
A signal ignored when the run starts (``nohup``, a background job) stays ignored.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Iterator

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterrupted(BaseException):
    """Raised in the main thread where a signal cuts the run (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, signum: int, *, forced: bool = False) -> None:
        self.signum = int(signum)
        self.forced = forced
        super().__init__(f"{self.signal_name} received")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class InterruptGuard:
    """Installs the handlers for one run; ``cuttable()`` marks where the first signal may cut."""

    def __init__(self, announce=None) -> None:
        self.signum: int | None = None  # the first signal received
        self.during: str | None = None  # the phase it landed in
        self.phase = "starting"
        self.forced = False
        self._cuttable = 0
        self._protected = 0
        self._previous: dict[int, object] = {}
        self._announce = announce or (lambda text: print(text, file=sys.stderr, flush=True))

    # ------------------------------------------------------------------ installing
    def install(self) -> "InterruptGuard":
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may set handlers (main() called from a thread): leave them
        for signum in HANDLED_SIGNALS:
            current = signal.getsignal(signum)
            if current is signal.SIG_IGN:
                continue  # ignored by whoever started us: respect it
            self._previous[signum] = current
            signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __enter__(self) -> "InterruptGuard":
        return self.install()

    def __exit__(self, *exc) -> bool:
        self.restore()
        return False

    # ------------------------------------------------------------------ state
    @property
    def interrupted(self) -> RunInterrupted | None:
        return None if self.signum is None else RunInterrupted(self.signum, forced=self.forced)

    @property
    def signal_name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def check(self) -> None:
        """Raise at a safe point when a signal arrived earlier."""
        if self.signum is not None:
            raise RunInterrupted(self.signum, forced=self.forced)

    @contextlib.contextmanager
    def cuttable(self) -> Iterator[None]:
        """Workload code: the first signal raises ``RunInterrupted`` right here."""
        self.check()
        self._cuttable += 1
        try:
            yield
        finally:
            self._cuttable -= 1

    @contextlib.contextmanager
    def protected(self) -> Iterator[None]:
        """Code that must finish even on a second signal (the small summary.jsonl write)."""
        self._protected += 1
        try:
            yield
        finally:
            self._protected -= 1

    def _handle(self, signum: int, _frame) -> None:
        name = signal.Signals(signum).name
        if self.signum is None:
            self.signum, self.during = signum, self.phase
            if self._cuttable:
                self._announce(f"xpuprof run: {name} received: stopping; writing what was recorded "
                               f"(send it again to abandon the trace being written)")
                raise RunInterrupted(signum)
            doing = ("stopping after this iteration and writing what was recorded" if self.phase == "recording"
                     else "finishing that, then stopping")
            self._announce(f"xpuprof run: {name} received while {self.phase}: {doing} (send it again to abandon it)")
            return
        if self._protected or self.forced:
            return
        self.forced = True
        self._announce(f"xpuprof run: second {name} received: abandoning the {self.phase} in progress")
        raise RunInterrupted(self.signum, forced=True)
