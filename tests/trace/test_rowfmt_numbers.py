"""The C row formatter's numbers and tokens (``xpuprof._native.rowfmt``) against Python's own text, for every
width and in runs: INT, UINT, MICROS and FIXED3 keep the leading digits of a segment's last value and reformat only the
tail while they repeat (timestamps, ids), so values are checked alone, in rising runs across every power of
ten, with the sign flipping, and at the int64 / uint64 limits."""
from __future__ import annotations

import random

import numpy as np
import pytest

from xpuprof.trace.table.rowtext import rowfmt

pytestmark = pytest.mark.skipif(rowfmt is None, reason="xpuprof._native.rowfmt is not built")
BASE = 1790857026000000000  # a Kineto baseTimeNanoseconds


def _values() -> list[int]:
    rng = random.Random(41)
    vals = [0, 1, -1, 2**63 - 1, -2**63, 2**31, 2**32 - 1, 2**32]
    for k in range(19):
        vals += [10**k - 1, 10**k, 10**k + 1, -(10**k - 1), -(10**k)]
    for start in (9_990, 99_990, 9_999_990, 99_999_990, 10**12 - 5, 5_107_078_605_020_066 - 3, 2**63 - 30, -10_010):
        vals += range(start, start + 25)  # runs that carry into a new leading part
    vals += [x for k in range(100) for x in (12_345_678 + k, -12_345_678 - k)]  # the sign flips, same digits
    vals += [rng.randrange(-2**63, 2**63) for _ in range(3000)] + [rng.randrange(-10**9, 10**9) for _ in range(3000)]
    return [v for v in vals if -2**63 <= v < 2**63]


def _rows(kind: int, col: np.ndarray, base: int = 0) -> list[bytes]:
    out = rowfmt.render(len(col), [(kind, 0, b"<", col, None, None, None, base),
                                   (rowfmt.LIT, 0, b">\n", None, None, None, None, 0)])
    return out.split(b"\n")[:-1]


def test_integers_at_every_width_and_in_runs():
    vals = _values()
    assert _rows(rowfmt.INT, np.array(vals, np.int64)) == [b"<%d>" % v for v in vals]
    unsigned = [v % 2**64 for v in vals] + [2**64 - 1, 2**64 - 10_000]
    assert _rows(rowfmt.UINT, np.array(unsigned, np.uint64)) == [b"<%d>" % v for v in unsigned]


@pytest.mark.parametrize("base", [0, BASE, -5, 2**62])
def test_micros_at_every_width_and_in_runs(base):
    vals = _values()
    expected = []
    for v in vals:
        rel = min(max(v - base, 0), 2**63 - 1)  # clamped at 0; an overflowing difference saturates
        expected.append(b"<%d.%03d>" % divmod(rel, 1000))
    assert _rows(rowfmt.MICROS, np.array(vals, np.int64), base) == expected


def test_fixed3_at_every_width_and_in_runs():
    vals = _values()

    def text(k: int) -> bytes:
        whole, r = divmod(abs(k), 1000)
        return b"<%s%d.%s>" % (b"-" if k < 0 else b"", whole, (b"%03d" % r).rstrip(b"0") or b"0")

    assert _rows(rowfmt.FIXED3, np.array(vals, np.int64)) == [text(v) for v in vals]


def test_numbers_into_a_reused_buffer_leave_nothing_of_the_last_chunk():
    """Digits are stored in whole words past a value's end; the count returned covers only the rows."""
    buf = bytearray(4096)
    wide = np.array([10**17 + 12_345] * 8, np.int64)
    assert rowfmt.render(8, [(rowfmt.INT, 0, b",", wide, None, None, None, 0)], buf) > 0
    narrow = np.array([7, 10_001, 10_002], np.int64)
    used = rowfmt.render(3, [(rowfmt.INT, 0, b",", narrow, None, None, None, 0)], buf)
    assert bytes(buf[:used]) == b",7,10001,10002"


def test_hex_handles_at_every_digit():
    rng = random.Random(7)
    vals = [0, 1, 9, 10, 15, 16, 0xC0, 2**64 - 1, 0xA5A5A5A5A5A5A5A5, 0x0123456789ABCDEF]
    vals += [1 << k for k in range(64)] + [rng.randrange(2**64) for _ in range(5000)]
    got = _rows(rowfmt.HEX, np.array(vals, np.uint64))
    assert got == [b'<"0x%016x">' % v for v in vals]


@pytest.mark.parametrize("blob_pad", [0, 1 << 20])  # a small blob is copied padded; past 1 MiB it is not
def test_tokens_of_every_length_in_random_order(blob_pad):
    """Tokens of up to 64 bytes from a small blob are copied as one fixed 64-byte block; longer ones, and
    those of a large blob, by their length: every length either side of the block, in random order."""
    rng = random.Random(3)
    toks = [b"x" * k for k in range(0, 140)] + [b"z" * blob_pad]
    blob = b"".join(toks)
    offsets = np.zeros(len(toks) + 1, np.int64)
    offsets[1:] = np.cumsum([len(t) for t in toks])
    ids = [rng.randrange(len(toks) - 1) for _ in range(3000)]
    out = rowfmt.render(len(ids), [(rowfmt.TOKENS, 0, b"<", blob, offsets, np.array(ids, np.int64), None, 0),
                                   (rowfmt.LIT, 0, b">\n", None, None, None, None, 0)])
    assert out.split(b"\n")[:-1] == [b"<" + toks[i] + b">" for i in ids]
