"""torch's per-op args text compacted into one blob in orjson's form (host/torch_args.py): what the C row
renderer copies as it is, so a torch op row is rendered without a parse and an encode per op. Needs no torch:
the rows are the text torch's Kineto writer produces."""
from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest

from xpuprof import _native
from xpuprof.host.torch_args import rows_blob, scanned_args, select
from xpuprof.trace.builder.columns import RowArgs

TORCH_ROWS = [
    b'{"Concrete Inputs": ["[2, 4]", "", "", "", "False"],"Input type": ["ScalarList", "", "", "", "Scalar"],'
    b'"Input Strides": [[], [], [], [], []],"Input Dims": [[], [], [], [], []]}',
    None,
    b'{"Concrete Inputs": ["", "0.", "1.", ""],"Input type": ["float", "Scalar", "Scalar", ""],'
    b'"Input Strides": [[4, 1], [], [], []],"Input Dims": [[2, 4], [], [], []]}',
    b"{}",
]


def _orjson_form(row):
    return None if row is None or row == b"{}" else orjson.dumps(orjson.loads(row))


def _scanned(rows, int_keys=()):
    """``rows`` (JSON objects' text or None) as torch's file holds them, read by the scanner's args pass."""
    tracescan = _native.optional("tracescan")
    if tracescan is None:
        pytest.skip("xpuprof was built without its C parts")
    raw, spans = b"[", []
    for r in rows:
        spans.append((len(raw), len(raw) + len(r)) if r is not None else (-1, -1))
        raw += (r or b"null") + b", "
    return scanned_args(tracescan, raw + b"0]", np.array(spans, np.int64), int_keys, ())


def test_torch_text_becomes_orjson_text_in_one_blob():
    out = _scanned(TORCH_ROWS)[2]
    assert isinstance(out, RowArgs) and len(out) == len(TORCH_ROWS)
    assert [out[i] for i in range(len(out))] == [_orjson_form(r) for r in TORCH_ROWS]
    assert out[0].startswith(b'{"Concrete Inputs":["[2, 4]",')  # spaces inside strings stay
    assert out.lens[1] == 0 and out.lens[3] == 0


@pytest.mark.parametrize("row", [
    b'{"v": [1.50, 2]}',  # orjson writes 1.5
    b'{"v": 1E5}', b'{"v": 1e+5}', b'{"v": 3e5}',  # exponents
    b'{"v": -0}',  # orjson writes 0
    b'{"s": "a\\"b , c"}', b'{"s": "\\u00e9 x"}', b'{"s": "tab\\there"}',  # escapes
    '{"s": "caf\u00e9 , x"}'.encode(),  # non-ASCII
    b'{"t": true, "f": false, "n": null, "neg": -12}',
])
def test_rows_orjson_would_write_otherwise_are_encoded_by_orjson(row):
    out = _scanned([row, TORCH_ROWS[0]])[2]
    assert out[0] == _orjson_form(row) and out[1] == _orjson_form(TORCH_ROWS[0])


def _random_value(rng, depth=0):
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.randrange(-10**12, 10**12)
    if kind == 1:
        return "".join(rng.choice('ab ,:[]{}"\\\u00e9\t') for _ in range(rng.randrange(6)))
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.random() * 10 ** rng.randrange(-3, 6)
    if kind in (4, 5):
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randrange(3))}


def test_any_json_object_comes_out_as_orjson_writes_it():
    """The scanner drops the whitespace outside strings as it copies a row, and flags the rows orjson would
    write otherwise (escapes, fractions, exponents, -0, non-ASCII), which orjson redoes: the text is orjson's,
    with no numpy pass over the blob after the copy (7 ms of a ResNet-18 cycle)."""
    rng = random.Random(43)
    objs = []
    for i in range(500):
        obj = {f"Arg {j}": _random_value(rng) for j in range(rng.randrange(0, 4))}
        if rng.random() < 0.7:
            obj["External id"] = i
        objs.append(obj)
    # torch's spacing (a space after each separator outside strings: json.dumps' default), or none
    texts = [json.dumps(o, ensure_ascii=rng.random() < 0.5).encode() if rng.random() < 0.8 else orjson.dumps(o)
             for o in objs]
    ints, present, others, complex_rows = _scanned(texts, (b"External id",))
    assert not complex_rows.any()
    want = [_orjson_form(orjson.dumps({k: v for k, v in o.items() if k != "External id"})) for o in objs]
    assert [others[i] for i in range(len(others))] == want
    assert np.frombuffer(present, np.uint8).tolist() == [int("External id" in o) for o in objs]
    assert np.frombuffer(ints, np.int64).tolist() == [o.get("External id", 0) for o in objs]


def test_select_takes_rows_of_either_form():
    blob = _scanned(TORCH_ROWS)[2]
    picked = select(blob, np.array([2, 0]))
    assert [picked[0], picked[1]] == [_orjson_form(TORCH_ROWS[2]), _orjson_form(TORCH_ROWS[0])]
    assert select(blob, np.array([1, 3])) is None  # none of those rows has args
    assert select(list(TORCH_ROWS), np.array([0]))[0] == TORCH_ROWS[0]
    assert select(None, np.array([0])) is None
    assert rows_blob([None, b"{}"]).lens.tolist() == [0, 2]

