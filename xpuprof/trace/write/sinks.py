"""Where the Chrome writer's bytes go: the output file, one gzip stream or gzip members deflated in
parallel, on a background thread that writes (and compresses) chunks while the next one renders.

Render threads (``_RenderThreads``) take chunks to render off the writer's thread; with parallel
gzip each rendered chunk is deflated on its render thread (``_DeflatingRenderer``) and the
members are joined in file order.
"""
from __future__ import annotations

import gc
import queue
import struct
import threading
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import NamedTuple

from ...outputs import Destination, open_output
from .rows_native import PooledChunk

# ----------------------------------------------------------------------------- sinks
class _GzipSink:
    """One gzip stream (wbits=31) fed whole chunks: a compressobj call per multi-MB chunk.

    Cheaper than a GzipFile's per-write bookkeeping; isal and zlib both release the GIL while
    compressing, so the writer thread compresses while the next chunk renders.
    """

    def __init__(self, tmp: Destination, compressobj) -> None:
        self._file = open_output(tmp, buffering=0)
        self._comp = compressobj

    def write(self, data) -> None:
        out = self._comp.compress(data)
        if out:
            self._file.write(out)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        try:
            if exc_type is None:
                self._file.write(self._comp.flush())
        finally:
            self._file.close()


class _ParallelGzipSink:
    """One gzip member written as independently deflated segments, so chunks compress on the
    render threads, each right after it renders (pigz's layout, without its shared dictionary).

    Each segment is a raw deflate stream ended by a sync flush (byte aligned, not final), so the
    segments concatenate into one valid deflate stream; the member's CRC is combined from each
    segment's. Losing the 32 KiB of context at each multi-MB chunk boundary costs well under 1 %
    of the size. python-isal's own threaded writer (``igzip_threaded``) hands 1 MiB blocks
    between four Python threads and copies each; fused with rendering, this one reached 0.6-0.8
    of isal alone where that one reached 0.5-0.65 here (2026-11-24, 2-core VM).
    """

    HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, unknown OS

    def __init__(self, tmp: Destination, zlib_module, level: int) -> None:
        self._zlib, self._level = zlib_module, level
        self._file = open_output(tmp, buffering=0)
        self._file.write(self.HEADER)
        self._crc = 0
        self._size = 0

    def deflate(self, data) -> "Deflated":
        """A segment: safe on any thread (isal releases the GIL while it compresses)."""
        z = self._zlib
        comp = z.compressobj(self._level, z.DEFLATED, -15)
        return Deflated(comp.compress(data) + comp.flush(z.Z_SYNC_FLUSH), z.crc32(data), len(data))

    def write(self, data) -> None:  # text rendered on the writer's own path: deflated here
        self.write_deflated(self.deflate(data))

    def write_deflated(self, seg: "Deflated") -> None:
        self._crc = self._zlib.crc32_combine(self._crc, seg.crc, seg.size)
        self._size += seg.size
        self._file.write(seg.data)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        try:
            if exc_type is None:
                z = self._zlib
                self._file.write(z.compressobj(self._level, z.DEFLATED, -15).flush())  # the final block
                self._file.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
        finally:
            self._file.close()


class Deflated(NamedTuple):
    data: bytes
    crc: int
    size: int


class _DeflatingRenderer(Executor):
    """Submits each chunk's render, then its deflate, as one task: the chunk is compressed while
    still in cache, and its pooled buffer goes back as soon as it is compressed."""

    def __init__(self, executor: Executor, sink: _ParallelGzipSink) -> None:
        self._executor, self._sink = executor, sink

    def submit(self, fn, /, *args, **kwargs) -> Future:
        def render_and_deflate():
            chunk = fn(*args, **kwargs)
            try:
                return self._sink.deflate(chunk.view())
            finally:
                chunk.release()

        return self._executor.submit(render_and_deflate)


class _RenderThreads(Executor):
    """A few daemon threads running submitted calls, for chunk rendering and deflating (the C
    formatter and isal hold no GIL while they work).

    Not a ``ThreadPoolExecutor``: that one refuses new work once the interpreter starts shutting
    down, and traces are often written from ``atexit`` handlers.
    """

    def __init__(self, threads: int) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"xpuprof-render-{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join()


def _open_sink(tmp: Destination, gz: bool, level: int, threads: int = 1):
    if not gz:
        return open_output(tmp, buffering=0)
    try:
        from isal import isal_zlib  # python-isal: several times faster than zlib at the same ratio
        level = max(0, min(int(level), 3))
        if threads > 1 and hasattr(isal_zlib, "crc32_combine"):
            return _ParallelGzipSink(tmp, isal_zlib, level)
        comp = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31)
    except ImportError:
        import zlib
        comp = zlib.compressobj(max(1, min(int(level), 9)), zlib.DEFLATED, 31)
    return _GzipSink(tmp, comp)


class _BackgroundWriter:
    """Writes (and compresses) chunks on a second thread while the next chunk renders.

    File writes and isal/zlib compression release the GIL, so on a 2-core box rendering and
    I/O overlap. At most ``depth`` chunks wait, which bounds memory.
    """

    def __init__(self, sink, depth: int = 3) -> None:
        self._sink = sink
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="xpuprof-trace-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, Future):  # a chunk rendering on another thread: taken in file order
                try:
                    item = item.result()
                except BaseException as exc:
                    if self._error is None:
                        self._error = exc
                    continue
                if isinstance(item, Deflated):
                    if self._error is None:
                        try:
                            self._sink.write_deflated(item)
                        except BaseException as exc:
                            self._error = exc
                    continue
            pooled = isinstance(item, PooledChunk)
            if self._error is None:
                try:
                    self._sink.write(item.view() if pooled else item)
                except BaseException as exc:  # re-raised on the producing thread
                    self._error = exc
            if pooled:
                item.release()

    def write(self, data) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


@contextmanager
def _gc_paused():
    # The generic path builds many short-lived dicts; GC passes over them are pure overhead.
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


