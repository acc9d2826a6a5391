"""Slices whose rows carry their own encoded args in one blob beside named args (torch's ops: shapes, types
and stacks beside their ids, in orjson's form from host.torch_args) render in C in the compact layout: the bytes the
generic path writes, without a parse and an encode per row; so do instants. torch's [memory] instants get
their args from one format string."""
from __future__ import annotations

import numpy as np
import orjson
import pytest

from xpuprof.clock import BASE_TIME_NS
from xpuprof.host.torch_args import rows_blob
from xpuprof.host.torch_memory import MEMORY_ARGS, MemoryEvents
from xpuprof.trace import ArgColumn, TraceBuilder, write_chrome_trace
from xpuprof.trace.write import chrome as chrome_mod
from xpuprof.trace.write import rows_native

pytestmark = pytest.mark.skipif(rows_native._rowfmt is None, reason="the C row renderer is not built")


def _torch_like(n: int, seed: int, row_form: str) -> TraceBuilder:
    rng = np.random.default_rng(seed)
    raw = []
    for i in range(n):
        if i % 5 == 0:
            raw.append(None)
            continue
        dims = [[int(x) for x in rng.integers(1, 512, rng.integers(0, 4))] for _ in range(rng.integers(1, 4))]
        obj = {"Input Dims": dims, "Input type": ["float"] * len(dims), "Concrete Inputs": ["", "[2, 4]"][:len(dims)],
               "Call stack": "x" * int(rng.integers(0, 600))}  # longer than the fixed layout's 256 B
        raw.append(orjson.dumps(obj, option=orjson.OPT_INDENT_2).replace(b"\n", b""))
    b = TraceBuilder(pid=1)
    rows = [orjson.dumps(orjson.loads(r)) if r else None for r in raw]  # orjson's form, as torch_args hands it
    rows = rows_blob(rows) if row_form == "blob" else rows
    b.add_slices(names=[f"aten::op{i % 7}" for i in range(n)], ts=BASE_TIME_NS + np.arange(n) * 10, dur=5, pid=1,
                 tid=1, cat="cpu_op", external_id=np.arange(n) + 1,
                 args={"Sequence number": ArgColumn("num", np.arange(n), np.arange(n) % 3 > 0),
                       "Fwd thread id": np.zeros(n, np.int64)},
                 row_args=rows)
    return b


@pytest.mark.parametrize("row_form", ["blob", "list"])
def test_ops_with_ids_and_long_args_render_in_c_as_the_generic_path_writes_them(tmp_path, monkeypatch, row_form):
    b = _torch_like(3000, seed=7, row_form=row_form)
    generic_rows = []
    real = chrome_mod.generic_slice_events
    monkeypatch.setattr(chrome_mod, "generic_slice_events", lambda batch, *a, **k: generic_rows.append(len(batch))
                        or real(batch, *a, **k))
    write_chrome_trace(b, tmp_path / "c.json", vendor_categories=True)
    if row_form == "blob":  # in orjson's form from host.torch_args: every row through C (before: all through the generic path)
        assert generic_rows == []
    else:  # a list of texts is encoded again by the generic path (its text may not be orjson's)
        assert sum(generic_rows) == len(b.slices[0])
    monkeypatch.setattr(chrome_mod, "generic_slice_events", real)
    write_chrome_trace(b, tmp_path / "g.json", columnar=False)
    c, g = (tmp_path / "c.json").read_bytes(), (tmp_path / "g.json").read_bytes()
    assert c.replace(b"c.json", b"g.json") == g


def test_a_row_that_repeats_a_named_key_takes_the_generic_path(tmp_path):
    b = TraceBuilder(pid=1)
    b.add_slices(names=["op"] * 2, ts=BASE_TIME_NS + np.arange(2), dur=1, pid=1, tid=1, cat="cpu_op",
                 args={"Sequence number": np.array([1, 2])},
                 row_args=[b'{"Sequence number":9,"x":1}', b'{"x":2}'])
    assert not rows_native.CompactWriter.can_write(b.slices[0])
    b2 = TraceBuilder(pid=1)
    b2.add_slices(names=["op"], ts=[BASE_TIME_NS], dur=1, pid=1, tid=1, cat="cpu_op", external_id=[5],
                  row_args=[b'{"External id":7}'])
    assert not rows_native.CompactWriter.can_write(b2.slices[0])
    path = write_chrome_trace(b, tmp_path / "t.json")
    events = [e for e in orjson.loads(path.read_bytes())["traceEvents"] if e.get("name") == "op"]
    assert [e["args"] for e in events] == [{"Sequence number": 9, "x": 1}, {"Sequence number": 2, "x": 2}]


def test_memory_args_from_one_format_equal_the_row_by_row_encoding():
    rng = np.random.default_rng(3)
    n = 500
    values = rng.integers(-(2**62), 2**62, (n, len(MEMORY_ARGS)))
    values[:, 0] = rng.integers(0, 20, n)
    ev = MemoryEvents(["[memory]"], np.zeros(n, np.int64), np.arange(n), np.ones(n, np.int64), values,
                      np.ones((n, len(MEMORY_ARGS)), bool), None)
    fast = ev.encoded_args()
    keys = [orjson.dumps(k) for k in MEMORY_ARGS]
    expected = [b"{" + b",".join(k + b":" + str(v).encode() for k, v in zip(keys, row)) + b"}"
                for row in values.tolist()]
    assert fast == expected
    assert [orjson.loads(r)["Addr"] for r in fast] == values[:, 2].tolist()


@pytest.mark.parametrize("row_form", ["list", "blob"])
def test_instants_render_in_c_as_the_generic_path_writes_them(tmp_path, monkeypatch, row_form):
    rng = np.random.default_rng(11)
    n = 2000
    raw = [None if i % 7 == 0 else b"{}" if i % 11 == 0 else
           b'{"Device Type":0,"Device Id":-1,"Addr":%d,"Bytes":%d}' % (int(rng.integers(1 << 40)), i - 1000)
           for i in range(n)]
    b = TraceBuilder(pid=1)
    names = b.strings.intern_many(["[memory]", "[OutOfMemory]", "na\u00efve \"quoted\""])
    b.add_instants(name_ids=names[rng.integers(0, 3, n)], ts=BASE_TIME_NS + np.arange(n) * 3 - 50, pid=1,
                   tid=rng.integers(-3, 3, n), cat="cpu_instant_event",
                   scope=np.array([ord(c) for c in "tgp"])[rng.integers(0, 3, n)],
                   row_args=rows_blob(raw) if row_form == "blob" else raw)
    b.add_instants(name_ids=names[:1], ts=[BASE_TIME_NS], pid="Traces", tid="Trace x", cat="", scope=[ord("g")])
    generic = []
    real = chrome_mod.generic_instant_events
    monkeypatch.setattr(chrome_mod, "generic_instant_events",
                        lambda batch, *a, **k: generic.append(len(batch)) or real(batch, *a, **k))
    write_chrome_trace(b, tmp_path / "c.json")
    assert generic == []  # before: one dict and one orjson call per instant
    monkeypatch.setattr(chrome_mod, "generic_instant_events", real)
    write_chrome_trace(b, tmp_path / "g.json", columnar=False)
    c, g = (tmp_path / "c.json").read_bytes(), (tmp_path / "g.json").read_bytes()
    assert c.replace(b"c.json", b"g.json") == g
    events = [e for e in orjson.loads(c)["traceEvents"] if e["ph"] == "i"]
    assert sum("args" in e for e in events) == sum(1 for r in raw if r and r != b"{}")
