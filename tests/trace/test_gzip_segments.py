"""The ``.json.gz`` writer's segments (``trace.write.sinks._SegmentedGzip``): each worker deflates its chunk
with python-isal's ``_ParallelCompress`` (deflate and CRC in one call without the GIL; ``compressobj`` holds
the GIL between 16 KiB output steps and ``crc32`` throughout, so workers deflating that way took turns), and
the file is one valid gzip member whichever way a segment was deflated."""
from __future__ import annotations

import gzip
import os
import threading
import zlib

import numpy as np
import pytest

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder, write_chrome_trace
from xpuprof.trace.write import rows as rows_mod
from xpuprof.trace.write import sinks as sinks_mod

isal_zlib = pytest.importorskip("isal.isal_zlib")
needs_parallel = pytest.mark.skipif(not hasattr(isal_zlib, "_ParallelCompress"),
                                    reason="python-isal without _ParallelCompress (before 1.4)")


def _trace(n: int = 30_000) -> TraceBuilder:
    b = TraceBuilder()
    b.add_slices(names=[f"op{i % 50}" for i in range(n)], ts=BASE_TIME_NS + np.arange(n) * 170, dur=40, pid=7,
                 tid=np.arange(n) % 3, cat="user_annotation")
    return b


def _many_chunks(monkeypatch, rows: int = 900) -> None:
    monkeypatch.setattr(rows_mod, "MAX_CHUNK_ROWS", rows)
    monkeypatch.setattr(rows_mod, "MIN_CHUNK_ROWS", rows)


@needs_parallel
def test_workers_deflate_with_the_gil_free_compressor(tmp_path, monkeypatch):
    _many_chunks(monkeypatch)
    made, used_on = [], []
    real = isal_zlib._ParallelCompress

    class Spy:
        def __init__(self, bound, level):
            made.append((bound, level))
            self._c = real(bound, level)

        def compress_and_crc(self, data, zdict):
            used_on.append(threading.current_thread().name)
            return self._c.compress_and_crc(data, zdict)

    monkeypatch.setattr(isal_zlib, "_ParallelCompress", Spy)
    b = _trace()
    one = write_chrome_trace(b, tmp_path / "one.json").read_bytes()
    path = write_chrome_trace(b, tmp_path / "t.json.gz", threads=2)
    assert len(used_on) > 20 and all(t.startswith("xpuprof-render-") for t in used_on)
    assert len(made) <= 2 * 2  # one per worker (again only for a larger chunk), not one per chunk
    assert all(level == 1 for _, level in made)
    assert gzip.decompress(path.read_bytes()).replace(b"t.json.gz", b"one.json") == one


@pytest.mark.parametrize("level", [0, 1, 3])
def test_segments_concatenate_into_one_member_at_every_level(level):
    codec = sinks_mod.gzip_codec(level)
    parts = [os.urandom(70_000), b"", b'{"ph":"X"},\n' * 50_000, bytes(range(256)) * 300]
    body = b"".join(codec.in_order(codec.deflate(p)) for p in parts) if codec.parallel else \
        b"".join(codec.in_order(p) for p in parts)
    member = codec.header() + body + codec.trailer()
    assert zlib.decompress(member, 31) == b"".join(parts)  # one member: CRC and size right


def test_without_the_gil_free_compressor_segments_deflate_the_stream_way(monkeypatch):
    """python-isal before 1.4 has no ``_ParallelCompress``; an output past the compressor's bound raises
    OverflowError there: either way the segment is deflated with ``compressobj``."""
    codec = sinks_mod.gzip_codec(1)
    if not codec.parallel:
        pytest.skip("python-isal without crc32_combine: one stream, no segments")
    data = b'{"ph":"X","name":"a"},\n' * 20_000
    monkeypatch.delattr(isal_zlib, "_ParallelCompress", raising=False)
    plain = codec.deflate(data)

    class Overflowing:
        def __init__(self, bound, level):
            pass

        def compress_and_crc(self, data, zdict):
            raise OverflowError("Compressed output exceeds buffer size")

    monkeypatch.setattr(isal_zlib, "_ParallelCompress", Overflowing, raising=False)
    codec2 = sinks_mod.gzip_codec(1)
    over = codec2.deflate(data)
    for seg in (plain, over):
        assert seg.size == len(data) and seg.crc == zlib.crc32(data)
        assert zlib.decompressobj(-15).decompress(seg.data) == data


@needs_parallel
def test_a_chunk_that_does_not_shrink_is_deflated_again_with_the_worst_case_buffer(monkeypatch):
    """The compressor's output buffer is a quarter of the input (trace text shrinks far more); a chunk that
    does not fit is deflated again with python-isal's worst-case bound, never lost or truncated."""
    bounds = []
    real = isal_zlib._ParallelCompress
    monkeypatch.setattr(isal_zlib, "_ParallelCompress", lambda bound, level: (bounds.append(bound), real(bound, level))[1])
    codec = sinks_mod.gzip_codec(1)
    data = os.urandom(1 << 20)
    seg = codec.deflate(data)
    assert len(bounds) == 2 and bounds[0] < len(data) < bounds[1]
    assert seg.crc == zlib.crc32(data) and zlib.decompressobj(-15).decompress(seg.data) == data
    text = b'{"ph":"X","name":"a"},\n' * 40_000
    assert zlib.decompressobj(-15).decompress(codec.deflate(text).data) == text and len(bounds) == 2  # kept
