"""Where the Chrome writer's bytes go: worker threads render (and gzip-deflate) chunks, and whichever
worker holds the next chunk in file order writes it; there is no writer thread.

The producer (the thread calling ``write_chrome_trace``) describes chunks and hands them over in file
order (``ChunkSink.put``): rows rendered already (generic rows, header), or a deferred render
(``DeferredChunk``) that a worker runs in C without the GIL. A worker that finishes a chunk files it
under its sequence number; if no other worker is writing, it writes every chunk that is next in file
order, then goes back to rendering. So render threads never wait for one another, the bytes written are
the ones just rendered (still in cache), and one write runs at a time: the kernel serializes buffered
writes to one file anyway (ext4, XFS, btrfs and tmpfs hold the inode lock across the copy), and a
second writer would only spin on that lock, burning the CPU the others render on. Writes are plain
``write()``s in file order, so the same path serves regular files, pipes, FIFOs and character devices,
and a descriptor's shared offset (``>> log``, ``/dev/stdout``) advances as it would for any writer.

``.gz``: with python-isal each chunk is deflated on its worker right after it renders, as one segment
of a single gzip member (a raw deflate stream ended by a sync flush, so segments concatenate; the
member's CRC is combined in file order); the 32 KiB window lost at each multi-MB chunk boundary costs
well under 1 % of the size. Without isal (zlib has no ``crc32_combine``) one zlib stream compresses
the chunks in file order as they are written.

Workers are plain daemon threads, not a ``ThreadPoolExecutor``: that one refuses new work once the
interpreter starts shutting down, and traces are often written from ``atexit`` handlers.
"""
from __future__ import annotations

import gc
import os
import queue
import struct
import threading
from contextlib import contextmanager
from typing import Any, Callable, NamedTuple

import numpy as np

from ...outputs import Destination, open_output
from .rows_native import DeferredChunk, PooledChunk

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, unknown OS
_STOP = object()


class Segment(NamedTuple):
    """A deflated chunk: its compressed bytes, and the CRC and size of what it holds."""
    data: bytes
    crc: int
    size: int


# ----------------------------------------------------------------------------- gzip codecs
class _SegmentedGzip:
    """One gzip member made of independently deflated segments (python-isal: thread safe, GIL free).

    Each worker deflates with a ``_ParallelCompress`` of its own: python-isal's building block for its own
    threaded gzip writer (``isal.igzip_threaded``), which deflates and sums the CRC in one call without the
    GIL. ``compressobj().compress`` holds the GIL between 16 KiB output steps and ``crc32`` holds it
    throughout, so two workers deflating that way took turns (measured: two threads ran 2.2x one thread's
    time). Where the class is missing (python-isal before 1.4), the segment is deflated that way still."""

    parallel = True

    def __init__(self, isal_zlib, level: int) -> None:
        self._z, self._level = isal_zlib, max(0, min(int(level), 3))
        self._crc = 0
        self._size = 0
        self._local = threading.local()  # each worker's compressor and the input size it was made for

    def header(self) -> bytes:
        return GZIP_HEADER

    def deflate(self, data) -> Segment:
        """On any worker, right after the chunk renders."""
        z = self._z
        size = len(memoryview(data).cast("B"))
        for worst_case in (False, True):
            compressor = self._compressor(size, worst_case)
            if compressor is None:
                break
            try:
                out, crc = compressor.compress_and_crc(data, b"")
                return Segment(out, crc, size)
            except OverflowError:  # past the output buffer: again with the worst case's
                continue
        comp = z.compressobj(self._level, z.DEFLATED, -15)
        return Segment(comp.compress(data) + comp.flush(z.Z_SYNC_FLUSH), z.crc32(data), size)

    def _compressor(self, size: int, worst_case: bool):
        """This worker's compressor for an input of ``size`` bytes. Its output buffer is held while the worker
        lives: a quarter of the input (trace text deflates 5-30x) unless ``worst_case``, then igzip_threaded's
        bound (level 0, Huffman only, can expand the input; the others by under 10 %)."""
        parallel = getattr(self._z, "_ParallelCompress", None)
        if parallel is None:
            return None
        held = getattr(self._local, "held", None)
        if held is None or held[1] < size or (worst_case and not held[2]):
            size += size >> 3  # headroom: chunks differ in size a little, and the compressor is kept
            if worst_case:
                bound = 2 * size + 500 if self._level == 0 else size + max(size // 10, 500)
            else:
                bound = (size >> 2) + 65536
            held = self._local.held = (parallel(bound, self._level), size, worst_case)
        return held[0]

    def in_order(self, seg: Segment) -> bytes:
        """In file order, as the segment is written: the member's CRC and size."""
        self._crc = self._z.crc32_combine(self._crc, seg.crc, seg.size)
        self._size += seg.size
        return seg.data

    def trailer(self) -> bytes:
        z = self._z
        final = z.compressobj(self._level, z.DEFLATED, -15).flush()  # an empty final block
        return final + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF)


class _StreamGzip:
    """One zlib stream fed in file order, as chunks are written (the fallback without python-isal)."""

    parallel = False

    def __init__(self, zlib_module, level: int) -> None:
        self._comp = zlib_module.compressobj(level, zlib_module.DEFLATED, 31)

    def header(self) -> bytes:
        return b""

    def in_order(self, data) -> bytes:
        return self._comp.compress(data)

    def trailer(self) -> bytes:
        return self._comp.flush()


def gzip_codec(level: int):
    try:
        from isal import isal_zlib  # python-isal: several times faster than zlib at the same ratio
    except ImportError:
        import zlib

        return _StreamGzip(zlib, max(1, min(int(level), 9)))
    if not hasattr(isal_zlib, "crc32_combine"):  # python-isal before 1.0
        return _StreamGzip(isal_zlib, max(0, min(int(level), 3)))
    return _SegmentedGzip(isal_zlib, level)


# ----------------------------------------------------------------------------- the sink
class ChunkSink:
    """Chunks handed over in file order, rendered/deflated by ``threads`` workers, written in order by
    whichever worker holds the next one. At most ``depth`` chunks are in flight (memory bound; by default one
    per worker and one more: one is written while the others render, and each chunk in flight holds a buffer).
    ``threads`` = 1: no worker; each chunk is rendered, deflated and written on the caller's thread as
    it is handed over (one free CPU: a second thread would only take turns with the first)."""

    def __init__(self, dest: Destination, threads: int, gz=None, depth: int | None = None) -> None:
        self._file = open_output(dest, buffering=0)
        self._fd = self._file.fileno()
        self._gz = gz
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._slots = threading.Semaphore(depth or threads + 1)
        self._lock = threading.Lock()
        self._all_written = threading.Condition(self._lock)
        self._ready: dict[int, tuple[Any, Callable | None]] = {}
        self._next_write = 0
        self._submitted = 0
        self._writing = False
        self._error: BaseException | None = None
        self._inline = threads <= 1
        self._workers = [] if self._inline else [
            threading.Thread(target=self._work, name=f"xpuprof-render-{i}", daemon=True) for i in range(int(threads))]
        if gz is not None:
            try:
                self._write(gz.header())
            except BaseException:
                self._file.close()
                raise
        for t in self._workers:
            t.start()

    # ------------------------------------------------------------------ producer side
    def put(self, item) -> None:
        """Hand over the next chunk: bytes-like, a numpy array, a ``PooledChunk`` or a ``DeferredChunk``."""
        self._slots.acquire()
        if self._error is not None:
            self._slots.release()
            raise self._error
        seq = self._submitted
        self._submitted += 1
        if self._inline:
            self._run(seq, item)
            if self._error is not None:
                raise self._error
        else:
            self._jobs.put((seq, item))

    def close(self) -> None:
        """Wait until every chunk is written, write the gzip trailer; raises the first failure."""
        try:
            with self._lock:
                while self._next_write < self._submitted:
                    self._all_written.wait()
        finally:
            self._stop_workers()
        try:
            if self._error is not None:
                raise self._error
            if self._gz is not None:
                self._write(self._gz.trailer())
        finally:
            self._file.close()

    def abort(self) -> None:
        """The producer failed: workers skip what is left, then stop; nothing more is written."""
        with self._lock:
            if self._error is None:
                self._error = _Aborted()
        try:
            with self._lock:
                # inline, nothing runs elsewhere: a chunk the caller's thread did not finish (an interrupt
                # landed in it) never will, and waiting for it would hang
                while not self._inline and self._next_write < self._submitted:
                    self._all_written.wait()
        finally:
            self._stop_workers()
            self._file.close()

    def _stop_workers(self) -> None:
        for _ in self._workers:
            self._jobs.put((-1, _STOP))
        for t in self._workers:
            t.join()
        self._workers = []

    # ------------------------------------------------------------------ worker side
    def _work(self) -> None:
        while True:
            seq, item = self._jobs.get()
            if item is _STOP:
                return
            self._run(seq, item)

    def _run(self, seq: int, item) -> None:
        payload, release = None, None
        if self._error is None:
            try:
                payload, release = self._produce(item)
            except BaseException as exc:  # re-raised on the producing thread
                self._fail(exc)
        elif isinstance(item, PooledChunk):
            item.release()
        self._deliver(seq, payload, release)

    def _produce(self, item):
        """The chunk's bytes to write (deflated when the codec runs in parallel), and what frees them."""
        if isinstance(item, DeferredChunk):
            item = item.render(*item.args)
        if isinstance(item, PooledChunk):
            data, release = item.view(), item.release
        elif isinstance(item, np.ndarray):
            data, release = memoryview(item).cast("B"), None
        else:
            data, release = item, None
        if self._gz is not None and self._gz.parallel:
            try:
                return self._gz.deflate(data), None
            finally:
                if release is not None:
                    release()
        return data, release

    def _deliver(self, seq: int, payload, release) -> None:
        """File the chunk; become the writer unless another worker is writing now."""
        with self._lock:
            self._ready[seq] = (payload, release)
            if self._writing:
                return
            self._writing = True
        while True:
            with self._lock:
                entry = self._ready.pop(self._next_write, None)
                if entry is None:
                    self._writing = False
                    return
            payload, release = entry
            try:
                if payload is not None and self._error is None:
                    self._write(self._gz.in_order(payload) if self._gz is not None else payload)
            except BaseException as exc:
                self._fail(exc)
            finally:
                if release is not None:
                    release()
                with self._lock:
                    self._next_write += 1
                    self._all_written.notify_all()
                self._slots.release()

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc

    def _write(self, data) -> None:
        view = memoryview(data)
        while len(view):  # a write may take part of it (a pipe, a signal)
            view = view[os.write(self._fd, view):]


class _Aborted(Exception):
    """The producer gave up; what it raised is what the caller sees."""


@contextmanager
def gc_paused():
    # The generic path builds many short-lived dicts; GC passes over them are pure overhead.
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
