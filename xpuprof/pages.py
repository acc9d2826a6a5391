"""Large arrays on ordinary 4 KiB pages while xpuprof stops, processes and writes a trace.

numpy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every allocation of
4 MiB and up. With THP's ``defrag`` setting at ``madvise`` (the kernel default), the first touch of
such a region may compact memory synchronously until a free 2 MiB page exists, and how long that takes
grows with how fragmented the machine's memory is (uptime, page cache), not with the work. Measured
on the development VM (benchmarks/RESULTS.md): filling a fresh 283 MB array took 0.69 s on huge pages
against 0.17 s on small ones, and decoding 5 M CUDA records cost 1.5x per record what 1 M did. Our
stop/process/write stages fill each large column once, front to back, where huge pages save nothing.

``small_pages()`` turns numpy's request off for its duration (nested and concurrent uses count; the
first setting comes back when the last one ends). A program's own arrays allocated meanwhile on other
threads get small pages too, which only changes their speed. Where the user set
``NUMPY_MADVISE_HUGEPAGE`` themselves, their choice stands.
"""
from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

USER_SETTING_ENV = "NUMPY_MADVISE_HUGEPAGE"

_lock = threading.Lock()
_depth = 0
_saved: bool | None = None


def _numpy_setter() -> Callable[[bool], bool] | None:
    """numpy's switch (``_set_madvise_hugepage(enabled) -> previous``), None where this numpy has none."""
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:
        try:
            from numpy.core import multiarray  # type: ignore[no-redef]  # numpy 1.x
        except ImportError:
            return None
    return getattr(multiarray, "_set_madvise_hugepage", None)


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy allocates without asking for huge pages until the outermost use ends."""
    global _depth, _saved
    setter = None if os.environ.get(USER_SETTING_ENV) else _numpy_setter()
    if setter is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = bool(setter(False))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                setter(bool(_saved))


def on_small_pages(func):
    """``func`` runs inside ``small_pages()``."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with small_pages():
            return func(*args, **kwargs)
    return wrapper
