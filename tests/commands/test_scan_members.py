"""tracescan.members (the one C reader of Kineto JSON): the C split of objects into integer columns and the other members' text
(as torch's Kineto file is read at stop), against a Python reference on seeded random objects."""
from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest

from xpuprof.trace.read import kineto_stream, scan

tracescan = kineto_stream.native()
pytestmark = pytest.mark.skipif(tracescan is None, reason="xpuprof._native.tracescan is not built: "
                                                        "python setup.py build_ext --inplace")
INT_KEYS = ("External id", "Sequence number", "n")
DROP = ("Ev Idx",)


def _value(rng: random.Random, depth: int = 0):
    pick = rng.randrange(9 if depth < 2 else 6)
    if pick == 0:
        return rng.randrange(-2**63, 2**63)
    if pick == 1:
        return rng.random() * 10 ** rng.randrange(-5, 5)
    if pick == 2:
        return rng.choice(["", "a\"b", "\\", "é€😀", "\n\t", "\u2028"])
    if pick == 3:
        return rng.choice([True, False, None])
    if pick == 4:
        return rng.randrange(2**63, 2**64)  # beyond int64
    if pick == 5:
        return rng.randrange(-5, 5)
    if pick == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["x", "y", "Input Dims"]): _value(rng, depth + 1) for _ in range(rng.randrange(3))}


def _reference(obj: dict):
    """(ints, present, others as a dict or None, complex) as the general path reads the object."""
    ints, present, others, complex_row = [0] * len(INT_KEYS), [0] * len(INT_KEYS), {}, 0
    for k, v in obj.items():
        if k in INT_KEYS:
            if v is None:
                continue
            if type(v) is int and -2**63 <= v < 2**63:
                ints[INT_KEYS.index(k)], present[INT_KEYS.index(k)] = v, 1
            else:
                complex_row = 1
        elif k not in DROP:
            others[k] = v
    return ints, present, others or None, complex_row


def test_members_match_a_python_reference_on_random_objects():
    rng = random.Random(20261124)
    objects = []
    for _ in range(3000):
        keys = rng.sample(INT_KEYS + DROP + ("Input Dims", "Input type", "Concrete Inputs", "z"), rng.randrange(7))
        objects.append({k: (rng.randrange(-2**40, 2**40) if k in INT_KEYS and rng.random() < 0.8 else _value(rng))
                        for k in keys})
    # one document, spacing as json.dumps writes it (torch's exporter also puts spaces after ':' and ',')
    parts, spans, pos = [], [], 0
    for i, obj in enumerate(objects):
        text = (json.dumps(obj, ensure_ascii=bool(i % 2)) if i % 3 else orjson.dumps(obj).decode()).encode()
        if i % 7 == 0:
            spans.append((-1, -1))  # no args
        else:
            spans.append((pos, pos + len(text)))
        parts.append(text + b" ")
        pos += len(text) + 1
    raw = b"".join(parts)
    ints, present, others, cx = tracescan.members(raw, np.array(spans, np.int64),
                                                  tuple(k.encode() for k in INT_KEYS), tuple(k.encode() for k in DROP))
    ints = np.frombuffer(ints, np.int64).reshape(len(objects), len(INT_KEYS))
    present = np.frombuffer(present, np.uint8).reshape(len(objects), len(INT_KEYS))
    seen_complex = 0
    for i, obj in enumerate(objects):
        if spans[i][0] < 0:
            assert others[i] is None and not present[i].any() and cx[i] == 0
            continue
        want_ints, want_present, want_others, want_cx = _reference(obj)
        assert cx[i] == want_cx, obj
        seen_complex += want_cx
        if want_cx:
            continue
        assert present[i].tolist() == want_present, obj
        assert [v if p else 0 for v, p in zip(ints[i].tolist(), want_present)] == want_ints, obj
        got = None if others[i] is None else orjson.loads(others[i])
        assert got == want_others, obj
    assert 0 < seen_complex < len(objects) // 2


def test_members_refuses_what_is_not_an_object_span():
    with pytest.raises(ValueError, match="not a JSON object"):
        tracescan.members(b"[1, 2]", np.array([[0, 6]], np.int64), (), ())
    with pytest.raises(ValueError, match="outside the buffer"):
        tracescan.members(b"{}", np.array([[0, 60]], np.int64), (), ())
    with pytest.raises(TypeError, match="tuple of bytes"):
        tracescan.members(b"{}", np.array([[0, 2]], np.int64), ("str",), ())
