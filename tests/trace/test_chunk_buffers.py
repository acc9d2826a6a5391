"""The writer's chunk buffers (``table.rowtext.BufferPool``, one for the process in ``write.rows_native``):
kept from one export to the next, since a fresh buffer's first use faults its pages in (a render thread's
buffers went back to the kernel with its malloc arena, so each two-thread export faulted them in again), and
bounded: at most ``keep`` buffers of ``keep_bytes`` in all wait for the next export."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder, write_chrome_trace
from xpuprof.trace.table.rowtext import BufferPool
from xpuprof.trace.write import rows as rows_mod
from xpuprof.trace.write import rows_native

pytestmark = pytest.mark.skipif(rows_native._rowfmt is None, reason="the C row renderer is not built")


def test_a_second_export_renders_into_the_buffers_of_the_first(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_mod, "MAX_CHUNK_ROWS", 1000)
    monkeypatch.setattr(rows_mod, "MIN_CHUNK_ROWS", 1000)
    monkeypatch.setattr(rows_native, "SHARED_POOL", BufferPool())
    b = TraceBuilder()
    n = 40_000
    b.add_slices(names=[f"op{i % 40}" for i in range(n)], ts=BASE_TIME_NS + np.arange(n) * 100, dur=50, pid=3,
                 tid=np.arange(n) % 2, cat="user_annotation")
    taken = []
    real = BufferPool.take
    monkeypatch.setattr(BufferPool, "take", lambda self: (lambda buf: (taken.append(len(buf)), buf)[1])(real(self)))
    # one thread: one buffer in flight, so which buffers the second export takes does not depend on timing
    first = write_chrome_trace(b, tmp_path / "a.json", threads=1).read_bytes()
    assert rows_native.SHARED_POOL.kept_bytes() > 0
    taken.clear()
    second = write_chrome_trace(b, tmp_path / "b.json", threads=1).read_bytes()
    assert len(taken) >= 40 and min(taken) > 0  # not one fresh buffer
    assert second.replace(b"b.json", b"a.json") == first
    many = write_chrome_trace(b, tmp_path / "c.json", threads=3).read_bytes()  # the pool across threads
    assert many.replace(b"c.json", b"a.json") == first


def test_the_pool_keeps_a_bounded_number_of_bytes():
    pool = BufferPool(keep=2, keep_bytes=300)
    for size in (100, 100, 100):
        pool.give(bytearray(size))
    assert pool.kept_bytes() == 200  # the third is over the count
    pool = BufferPool(keep=8, keep_bytes=300)
    for size in (200, 200, 50):
        pool.give(bytearray(size))
    assert pool.kept_bytes() == 250  # the second is over the bytes
    assert len(pool.take()) == 50 and len(pool.take()) == 200 and len(pool.take()) == 0


def test_a_small_string_table_gives_every_column_its_tokens_without_a_pass_over_the_rows(monkeypatch):
    """Up to ``EVERY_TOKEN_MAX`` strings, a column's string ids index one blob of every string's token (made once
    per export): no count of the ids used and no local ids made before the first chunk can render. A larger
    table, or one holding a string that has no JSON token, takes the pass over the rows as before."""
    from xpuprof.trace.table.rowtext import Segments, StringTokens, TokenTable, rowfmt

    ids = np.array([3, 1, 3, 0, 2] * 50, np.int32)

    def rows(tokens):
        table = TokenTable(ids, tokens)
        segs = Segments()
        table.add(segs, slice(0, len(ids)), b"<")
        segs.lit(b">")
        return table, segs.render(len(ids))

    strings = ["a", 'b"', "\u2028c", "d\x07"]
    whole, text = rows(StringTokens(strings))
    assert whole.local is ids  # the rows' own ids, no remap
    monkeypatch.setattr(StringTokens, "EVERY_TOKEN_MAX", 2)
    passed, same = rows(StringTokens(strings))
    assert passed.local is not ids and same == text
    assert text.startswith('<"d\\u0007"><"b\\""><"d\\u0007"><"a"><"\u2028c">'.encode())  # orjson's escaping
    monkeypatch.setattr(StringTokens, "EVERY_TOKEN_MAX", 4096)
    bad = StringTokens(strings + ["\ud800"])  # unused, and orjson has no token for a lone surrogate
    assert bad.every_token() is None
    fallback, same = rows(bad)
    assert fallback.local is not ids and same == text
    assert rowfmt is not None
