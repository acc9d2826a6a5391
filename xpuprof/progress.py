"""Progress of long work: a bar on the terminal while it runs, nothing anywhere else.

A command opts in with ``shown()`` (the CLI does it around every command; library calls never draw). The
loops that do the work over many ranks or large files -- reading traces, converting them, merging, an
engine's rank groups -- open ``bar(what, total)`` and ``advance`` it. The bar is drawn (rich, on stderr)
only inside ``shown()``, when stderr is a terminal (not ``TERM=dumb``) and the work is worth watching
(``MIN_ITEMS`` items or ``MIN_BYTES`` of input); otherwise ``bar`` gives a no-op and rich is not imported.
It is transient: gone when the work ends, so the command's one summary line is what stays. A bar opened
inside another is a second line of the same display. Lines printed to stderr while a bar shows appear
above it (rich redirects the stream while it draws)."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import IO, Iterator

MIN_ITEMS = 4  # fewer items (ranks, files, groups) than this are over before a bar helps
MIN_BYTES = 64 << 20  # ...unless the input is this big (one large trace reads for seconds)


class _State:
    stream: IO[str] | None = None  # where bars go, inside shown() on a terminal
    display = None  # the rich Progress drawing now (one per outermost bar)


_state = _State()


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):  # a closed or a fake stream
        return False


@contextmanager
def shown(stream: IO[str] | None = None, *, enabled: bool = True) -> Iterator[bool]:
    """Bars opened inside are drawn on ``stream`` (stderr) if it is a terminal and ``enabled`` (a command's
    ``--no-progress`` turns it off); yields whether they are."""
    stream = sys.stderr if stream is None else stream
    before = _state.stream
    _state.stream = stream if enabled and is_terminal(stream) else None
    try:
        yield _state.stream is not None
    finally:
        _state.stream = before


class Bar:
    """One line of the display: ``advance`` after each item."""

    def __init__(self, display=None, task=None) -> None:
        self._display, self._task = display, task

    @property
    def drawn(self) -> bool:
        return self._display is not None

    def advance(self, n: int = 1) -> None:
        if self._display is not None:
            self._display.update(self._task, advance=n)


_QUIET = Bar()


@contextmanager
def bar(what: str, total: int, *, unit: str = "", size_bytes: int = 0) -> Iterator[Bar]:
    """A bar of ``total`` ``unit`` (``"ranks"``), described by ``what`` (``"converting"``); drawn as the
    module says, else a no-op. ``size_bytes``: the input's size, for large-file work of few items."""
    if _state.stream is None or (total < MIN_ITEMS and size_bytes < MIN_BYTES):
        yield _QUIET
        return
    outermost = _state.display is None
    if outermost:
        _state.display = _display(_state.stream)
        _state.display.start()
    display = _state.display
    task = display.add_task(what, total=total, unit=unit)
    try:
        yield Bar(display, task)
    finally:
        display.remove_task(task)
        if outermost:
            _state.display = None
            display.stop()


def _display(stream):
    from rich.console import Console
    from rich.progress import (BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """``312/1,000 ranks``: items done of all, in the bar's unit."""

        def render(self, task) -> Text:
            total = f"{int(task.total):,}" if task.total is not None else "?"
            unit = task.fields.get("unit") or ""
            return Text(f"{int(task.completed):,}/{total}{' ' + unit if unit else ''}", style="progress.download")

    console = Console(file=stream, stderr=stream is sys.stderr)
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), CountColumn(),
                    TextColumn("[progress.percentage]{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=True)
