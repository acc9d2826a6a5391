"""The trace table (``xpuprof.trace.table``): a frozen builder's segments are its batches (no column copied),
flat columns come on demand with one string dictionary, convert to Arrow without copying numeric columns,
and the comparer tells equal tables from different ones."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.table.columns import SliceColumns
from xpuprof.trace.table.compare import assert_equal, differences
from xpuprof.trace.table.model import TraceTable

T0 = BASE_TIME_NS + 10**9


def _builder(rank=None, names=("gemm", "relu")):
    b = TraceBuilder(pid=7)
    n = 6
    b.add_slices(names=[names[i % len(names)] for i in range(n)], ts=T0 + np.arange(n) * 1000, dur=np.full(n, 500),
                 pid=0, tid=3, cat=ActivityType.CONCURRENT_KERNEL, vendor="cuda",
                 args={"stream": np.full(n, 7), "grid": np.tile([4, 1, 1], (n, 1)), "name note": ["a", "b"] * 3},
                 external_id=np.arange(n) + 10)
    b.add_slice("host range", T0, 9000, pid=7, tid=7, args={"step": 1, "text": "é\"x"})
    b.add_counters(name="util", ts=T0 + np.arange(3), pid=0, tid=0, cat="gpu_pm_counter",
                   values={"busy": np.array([1.0, 2.0, 3.5]), "temp": np.array([40.0, 41.0, 42.0])})
    b.add_flows(flow_ids=[1, 1], ts=[T0, T0 + 10], pid=[7, 0], tid=[7, 3], start=np.array([True, False]))
    b.add_instant("mark", T0 + 5, 7, 7, args={"k": 1})
    b.set_window(T0 - 100, T0 + 20_000)
    if rank is not None:
        b.set_distributed_info({"rank": rank, "world_size": 2})
    return b


def test_freeze_views_the_batches_without_copying_a_column():
    b = _builder()
    t = b.freeze()
    batches = [s.batch for s in t.segments if hasattr(s, "batch")]
    assert batches == [*b.slices, *b.instants, *b.counters, *b.flows]
    assert all(x is y for x, y in zip(batches, [*b.slices, *b.instants, *b.counters, *b.flows]))
    flat = t.segments[0].flat()
    assert np.shares_memory(flat.name, b.slices[0].name)  # string ids are the builder's own
    assert flat.strings is b.strings.strings or list(flat.strings) == list(b.strings.strings)


def test_rows_added_after_freeze_are_not_in_the_table():
    b = _builder()
    t = b.freeze()
    b.add_slice("later", T0, 1, pid=7, tid=7)
    assert "later" not in t.slices.text("name")
    assert "later" in b.freeze().slices.text("name")


def test_flat_slices_hold_typed_args_and_the_rest_as_the_writer_writes_them():
    t = _builder().freeze()
    s = t.slices
    kernels = np.flatnonzero(np.array(s.text("cat")) == "kernel")
    assert len(kernels) == 6
    ext, present = s.ints["external_id"]
    assert ext[kernels].tolist() == list(range(10, 16)) and present[kernels].all()
    stream, present = s.ints["stream"]
    assert stream[kernels].tolist() == [7] * 6
    assert s.args[int(kernels[0])] == b'{"grid":[4,1,1],"name note":"a"}'
    host = s.text("name").index("host range")
    assert s.args[host] == '{"step":1,"text":"é\\"x"}'.encode()
    assert (s.ts >= BASE_TIME_NS).all() and s.ts.dtype == np.int64


def test_counters_are_one_row_per_event_and_metric():
    c = _builder().freeze().counters
    assert c.text("metric") == ["busy", "temp"] * 3
    assert c.value.tolist() == [1.0, 40.0, 2.0, 41.0, 3.5, 42.0]
    assert c.order[0] == c.order[1] != c.order[2]


def test_many_ranks_are_one_table_with_one_dictionary():
    t = TraceTable.concat([_builder(0, ("gemm", "a")).freeze(), _builder(1, ("b", "gemm")).freeze()])
    s = t.slices
    assert sorted(set(s.rank.tolist())) == [0, 1] and [i.rank for i in t.traces] == [0, 1]
    names = s.text("name")
    assert names.count("gemm") == 6 and len(s.strings) == len(set(s.strings))  # one entry per distinct string
    assert s.name.dtype == np.int32


def test_arrow_does_not_copy_numeric_columns():
    pytest.importorskip("pyarrow")
    t = _builder().freeze()
    s = t.slices
    got = t.to_arrow("slices")
    assert got.num_rows == len(s)
    dur = got.column("dur").chunk(0)
    assert dur.buffers()[1].address == np.ascontiguousarray(s.dur).ctypes.data  # shared, not copied
    assert got.column("name").to_pylist() == s.text("name")
    assert got.column("rank").to_pylist() == s.rank.tolist()


def test_the_comparer_finds_a_changed_value_and_accepts_reordered_rows():
    a = _builder().freeze()
    b = _builder().freeze()
    assert differences(a, b) == []
    c = _builder()
    c.slices[0].dur = c.slices[0].dur.copy()
    c.slices[0].dur[2] += 1
    diff = differences(a, c.freeze())
    assert len(diff) == 1 and diff[0].startswith("slices: row")
    with pytest.raises(AssertionError, match="slices"):
        assert_equal(a, c.freeze())
    # the same rows in another order are the same table
    cols = a.slices
    rev = np.arange(len(cols))[::-1]
    from xpuprof.trace.table.model import FlatSegment

    shuffled = TraceTable([FlatSegment(cols.take(rev)), *(s for s in a.segments if s.kind != "slices")], a.traces)
    assert differences(a, shuffled, compare_ranks=False) == []


def test_a_table_is_usable_without_pyarrow(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    t = _builder().freeze()
    assert len(t.slices) == 7 and isinstance(t.slices, SliceColumns)
    assert differences(t, _builder().freeze()) == []


def test_a_builders_args_reach_the_flat_columns_without_being_parsed_back(monkeypatch):
    """No JSON round trip: typed arg columns are taken as they are, the other args rendered once into the
    args column; the C splitter runs only on text that may hold a typed key."""
    import xpuprof
    from xpuprof.trace.table import args as args_mod

    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(50):
            with xpuprof.record_function(f"r{i % 3}", args={"i": i, "s": "x"}):
                pass
    calls = []
    real = args_mod.TypedArgs.from_text
    monkeypatch.setattr(args_mod.TypedArgs, "from_text", classmethod(
        lambda cls, buf, spans: calls.append(len(spans)) or real.__func__(cls, buf, spans)))
    host = prof.builder.freeze().slices
    device = _builder().freeze().slices
    assert calls == []
    assert host.args[host.text("name").index("r1")] == b'{"i":1,"s":"x"}'
    assert device.ints["stream"][0][:6].tolist() == [7] * 6
    b = TraceBuilder()  # a "stream" given as strings: the typed rule (integral strings are ints) applies in C
    b.add_slices(names=["k", "k"], ts=[T0, T0 + 1], dur=[1, 1], pid=0, tid=0, cat="kernel",
                 args={"stream": ["3", "x"], "other": np.array([1, 2])})
    s = b.freeze().slices
    assert calls and s.ints["stream"][0][0] == 3 and s.ints["stream"][1].tolist() == [True, False]
    assert s.args[1] == b'{"stream":"x","other":2}'


def _flow_part(strings, labels, names, pid_labels, id_labels):
    from xpuprof.trace.table.columns import FlowColumns, RowText  # noqa: F401 - RowText: the module's own

    n = len(names)
    z = np.zeros(n, np.int64)
    return FlowColumns(strings=list(strings), labels=list(labels), rank=np.zeros(n, np.int32), order=np.arange(n),
                       ts=z, pid=z, pid_label=np.array(pid_labels, np.int32), tid=z,
                       tid_label=np.full(n, -1, np.int32), name=np.array(names, np.int32),
                       cat=np.broadcast_to(np.int32(-1), (n,)), flow_id=z, id_label=np.array(id_labels, np.int32),
                       phase=np.full(n, ord("s"), np.uint8), bp=np.zeros(n, np.uint8))


def test_concat_merges_dictionaries_keeping_used_strings_in_first_use_order():
    """Columns.concat over many parts (merge's 1,000 ranks) gives what a part-by-part merge gave: one dictionary
    of the strings and labels the rows use, in the order the parts and their ids first use them; an unused
    string left out, negative ids (no name, no label: -1, a null: -2) kept as they are."""
    from xpuprof.trace.table.columns import FlowColumns

    a = _flow_part(["x", "unused", "y"], ["Spans", "gone"], [2, 0, -1], [-1, 0, -2], [-1, -1, 0])
    b = _flow_part(["y", "z"], ["other", "Spans"], [1, 0], [1, 0], [-2, 0])
    c = FlowColumns.concat([a, FlowColumns.empty(), b])
    assert c.strings == ["x", "y", "z"]
    assert [c.strings[i] if i >= 0 else None for i in c.name.tolist()] == ["y", "x", None, "z", "y"]
    assert c.name.dtype == np.int32 and c.cat.tolist() == [-1] * 5
    assert c.labels == ["Spans", "other"]  # "gone" is used by no row
    assert c.pid_label.tolist() == [-1, 0, -2, 0, 1] and c.id_label.tolist() == [-1, -1, 0, -2, 1]
    assert [c.labels[i] for i in c.pid_label.tolist() if i >= 0] == ["Spans", "Spans", "other"]
