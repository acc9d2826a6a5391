import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.analysis.summary import Summary
from xpuprof.clock import now_ns
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import events
from xpuprof.trace.write.chrome import write_chrome_trace


def _builder():
    b = TraceBuilder(pid=1)
    b.add_slices(names=["k1", "k1", "k2", "k1"], ts=[0, 100, 200, 300], dur=[10, 30, 60, 20], pid=0, tid=1,
                 cat=ActivityType.CONCURRENT_KERNEL)
    b.add_slice("op", 0, 500, 1, 1, "user_annotation")
    b.add_slice("op", 600, 300, 1, 1, "user_annotation", args={"x": 1})
    b.add_per_kernel_metrics(kernel_names=["k1", "k1", "k2", "k1"], start_ns=np.array([0, 100, 200, 300]),
                             end_ns=np.array([10, 130, 260, 320]), pid=0, tid=1,
                             metrics={"busy": [50.0, 70.0, 90.0, 60.0]}, units={"busy": "percent"})
    return b


def test_groups_and_statistics():
    s = Summary.from_builder(_builder())
    assert s.categories() == ["kernel", "user_annotation"]
    rows = {r.name: r for r in s.rows("kernel")}
    r1 = rows["k1"]
    assert (r1.calls, r1.total_ns, r1.min_ns, r1.max_ns, r1.avg_ns) == (3, 60, 10, 30, 20)
    assert r1.percent == pytest.approx(50.0)
    assert r1.metrics["busy::percent"] == pytest.approx((60.0, 50.0, 70.0))
    assert rows["k2"].metrics["busy::percent"] == (90.0, 90.0, 90.0)
    (op,) = s.rows("user_annotation")
    assert (op.calls, op.total_ns, op.percent) == (2, 800, 100.0)
    assert not any(r.name.startswith("metrics: ") for r in s.rows())


def test_same_numbers_from_a_trace_file(tmp_path):
    b = _builder()
    path = write_chrome_trace(b, tmp_path / "t.json")
    from_file = Summary.from_events(events(path)).to_dicts()
    from_builder = Summary.from_builder(b).to_dicts()
    assert [(d["name"], d["calls"]) for d in from_file] == [(d["name"], d["calls"]) for d in from_builder]
    for a, c in zip(from_file, from_builder):
        assert a["total_ns"] == pytest.approx(c["total_ns"], abs=1)
        assert a["metrics"].keys() == c["metrics"].keys()
        for label, stats in a["metrics"].items():
            assert stats == pytest.approx(c["metrics"][label])
    assert any(d["metrics"] for d in from_file)


def test_sorting_by_any_column():
    s = Summary.from_builder(_builder())
    assert [r.name for r in s.rows("kernel", "calls")] == ["k1", "k2"]
    assert [r.name for r in s.rows("kernel", "max")] == ["k2", "k1"]
    assert [r.name for r in s.rows("kernel", "busy min")] == ["k2", "k1"]
    assert [r.name for r in s.rows("kernel", "busy::percent max")] == ["k2", "k1"]
    assert [r.name for r in s.rows("kernel", "name")] == ["k1", "k2"]
    # torch's names work too; k1 and k2 tie on total (60 ns each), ties sort by name
    assert [r.name for r in s.rows("kernel", "cuda_time_total")] == ["k1", "k2"]
    assert [r.name for r in s.rows("kernel", "count")] == ["k1", "k2"]
    with pytest.raises(ValueError, match="cannot sort by 'nope'.*busy::percent mean"):
        s.table(sort_by="nope")


def test_table_text_and_row_limit():
    s = Summary.from_builder(_builder())
    text = s.table(sort_by="avg", row_limit=1)
    assert "kernel: 2 names, 4 calls (top 1 by avg)" in text
    assert "k2" in text and "k1" not in text.split("user_annotation")[0]
    assert "busy (percent)" in text
    assert "(no slices recorded)" in Summary.from_builder(TraceBuilder()).table()


def test_profiler_steps_share_one_row():
    b = TraceBuilder(pid=1)
    b.add_slices(names=["ProfilerStep#1", "ProfilerStep#2", "work"], ts=[0, 10, 0], dur=[10, 20, 5], pid=1, tid=1,
                 cat="user_annotation")
    rows = {r.name: r for r in Summary.from_builder(b).rows()}
    assert set(rows) == {"ProfilerStep#*", "work"} and rows["ProfilerStep#*"].calls == 2


def test_table_takes_either_spelling_of_a_category():
    """key_averages().table(categories=[...]) printed nothing for "runtime" on a trace whose calls
    are cuda_runtime (the default names), or the reverse: one filter for every spelling."""
    evs = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0.0, "dur": 4.0},
           {"ph": "X", "cat": "kernel", "name": "k", "ts": 5.0, "dur": 9.0}]
    s = Summary.from_events(evs)
    for asked in (["runtime"], ["cuda_runtime"], ["XPU_RUNTIME"]):
        text = s.table(categories=asked)
        assert "cuda_runtime: 1 names" in text and "cudaLaunchKernel" in text and "kernel: " not in text, asked
    both = s.table(categories=["kernel", "runtime"])
    assert "kernel: 1 names" in both and "cuda_runtime: 1 names" in both


def test_nested_ranges_share_their_time_once(tmp_path):
    """A range inside another on the same thread: the % column is each name's share of the category's
    self time, so the shares add to 100 and the outer range is not counted twice."""
    b = TraceBuilder(pid=1)
    base = now_ns()  # trace files hold times after their base time
    for step in range(2):  # step 1000 ns holding forward 600 ns holding mm 200 ns; another thread alone
        t0 = base + step * 2000
        b.add_slice("step", t0, 1000, 1, 1, "user_annotation")
        b.add_slice("forward", t0 + 100, 600, 1, 1, "user_annotation")
        b.add_slice("mm", t0 + 200, 200, 1, 1, "user_annotation")
    b.add_slice("loader", base, 400, 1, 2, "user_annotation")
    for source in (Summary.from_builder(b), Summary.from_events(events(write_chrome_trace(b, tmp_path / "t.json")))):
        rows = {r.name: r for r in source.rows("user_annotation")}
        assert sum(r.percent for r in rows.values()) == pytest.approx(100.0)
        assert rows["step"].total_ns == pytest.approx(2000) and rows["step"].self_ns == pytest.approx(800)
        assert rows["forward"].self_ns == pytest.approx(800) and rows["mm"].self_ns == pytest.approx(400)
        assert rows["loader"].self_ns == pytest.approx(400)
        assert rows["step"].percent == pytest.approx(100 * 800 / 2400)
        assert "Self" in source.table()

