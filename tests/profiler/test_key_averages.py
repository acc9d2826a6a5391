"""``profile.key_averages()``: torch's averages (its attribute names, rules, order, sort keys, columns and
table) computed on the trace's columns, from a hand-built trace with known numbers (no torch needed).
The side-by-side comparison with torch.profiler itself is tests/torch/test_key_averages_vs_torch.py."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.analysis.summary import KeyAverages
from xpuprof.trace.read.kineto import read_trace
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

T = BASE_TIME_NS + 10**9


def _ops() -> TraceBuilder:
    b = TraceBuilder(pid=5)
    # thread 1: linear [0,100) > addmm [10,90) ; linear [200,300) > addmm [210,260) ; thread 2: mm [0,50)
    b.add_slices(names=["aten::linear", "aten::addmm", "aten::linear", "aten::addmm", "aten::mm"],
                 ts=T + np.array([0, 10, 200, 210, 0]) * 1000, dur=np.array([100, 80, 100, 50, 50]) * 1000,
                 pid=5, tid=np.array([1, 1, 1, 1, 2]), cat="cpu_op", external_id=np.array([11, 12, 13, 14, 15]))
    b.add_slices(names=["cudaLaunchKernel"] * 3, ts=T + np.array([20, 220, 5]) * 1000, dur=1000, pid=5,
                 tid=np.array([1, 1, 2]), cat="cuda_runtime", external_id=np.array([12, 14, 15]),
                 args={"correlation": np.array([1, 2, 3])})
    # kernels: 7 us and 3 us for the addmms, 4 us for mm, one unlinked (External id 0) kernel of 100 us
    b.add_slices(names=["gemm", "gemm", "mm_k", "other"], ts=T + np.array([30, 230, 10, 400]) * 1000,
                 dur=np.array([7, 3, 4, 100]) * 1000, pid=0, tid=7, cat="kernel",
                 external_id=np.array([12, 14, 15, 0]), args={"correlation": np.array([1, 2, 3, 9])})
    b.add_per_kernel_metrics(kernel_names=["gemm", "gemm"], start_ns=T + np.array([30, 230]) * 1000,
                             end_ns=T + np.array([37, 233]) * 1000, pid=0, tid=7,
                             metrics={"busy": [50.0, 70.0]}, units={"busy": "percent"})
    return b


def _by_key(avgs) -> dict:
    return {(e.key, "CPU" if str(e.device_type).endswith("CPU") else "device"): e for e in avgs}


def _check(avgs) -> None:
    rows = _by_key(avgs)
    lin, addmm, mm = rows["aten::linear", "CPU"], rows["aten::addmm", "CPU"], rows["aten::mm", "CPU"]
    assert (lin.count, addmm.count, mm.count) == (2, 2, 1)
    assert lin.cpu_time_total == pytest.approx(200) and lin.self_cpu_time_total == pytest.approx(200 - 130)
    assert addmm.cpu_time_total == pytest.approx(130)
    assert addmm.self_cpu_time_total == pytest.approx(130 - 2)  # its launch calls are its children, as in torch
    assert addmm.self_device_time_total == addmm.device_time_total == pytest.approx(10)
    assert lin.self_device_time_total == 0 and lin.device_time_total == pytest.approx(10)  # its addmm's kernels
    assert mm.self_device_time_total == pytest.approx(4)
    gemm = rows["gemm", "device"]
    assert gemm.count == 2 and gemm.self_cpu_time_total == 0 and gemm.self_device_time_total == pytest.approx(10)
    assert gemm.metrics["busy::percent"] == pytest.approx((60.0, 50.0, 70.0))
    assert rows["cudaLaunchKernel", "CPU"].count == 3
    assert not any(e.key.startswith("metrics: ") for e in avgs)


def test_torchs_numbers_from_the_builder_and_from_the_written_trace(tmp_path):
    b = _ops()
    _check(KeyAverages.from_builder(b, use_device="cuda"))
    path = write_chrome_trace(b, tmp_path / "w.pt.trace.json")
    _check(KeyAverages.from_table(read_trace(path)))  # use_device read off cuda_runtime


def test_rows_come_in_torchs_order_and_iterate_with_torchs_attribute_names():
    avgs = KeyAverages.from_builder(_ops(), use_device="cuda")
    # torch: the order the first event of each key starts in (the enclosing one first)
    assert [e.key for e in avgs][:4] == ["aten::linear", "aten::mm", "cudaLaunchKernel", "aten::addmm"]
    for e in avgs:  # the loop every torch.profiler script has
        assert isinstance(e.key, str) and isinstance(e.self_cpu_time_total, float)
        assert e.cpu_time == pytest.approx(e.cpu_time_total / e.count)
        e.cpu_memory_usage, e.input_shapes, e.stack, e.device_time_total, e.is_user_annotation  # noqa: B018
    assert avgs.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in avgs))
    total = avgs.total_average()
    assert total.key == "Total" and total.count == sum(e.count for e in avgs)


def test_sort_keys_mean_what_they_mean_in_torch():
    avgs = KeyAverages.from_builder(_ops(), use_device="cuda")
    host = lambda key: [e.key for e in avgs.sorted(key) if str(e.device_type).endswith("CPU")]  # noqa: E731
    assert host("cpu_time_total")[0] == "aten::linear"  # inclusive: linear holds addmm
    assert host("self_cpu_time_total")[0] == "aten::addmm"  # self: addmm's own time is the largest
    assert avgs.sorted("self_cuda_time_total")[0].key == "other"  # the 100 us kernel (self device time)
    # linear (10 us through its addmm), addmm and gemm (10 us each) tie: torch's order, the first to start first
    assert [e.key for e in avgs.sorted("cuda_time_total")][:4] == ["other", "aten::linear", "aten::addmm", "gemm"]
    assert avgs.sorted("count")[0].key == "cudaLaunchKernel"
    assert avgs.sorted("busy max")[0].key == "gemm"  # a per-kernel metric
    with pytest.raises(ValueError, match="cannot sort by 'self_cpu_time_totl'; did you mean 'self_cpu_time_total'"):
        avgs.table(sort_by="self_cpu_time_totl")


def test_the_readme_row_limit_keeps_the_op_with_the_most_self_time():
    """The README's `table(sort_by="self_cpu_time_total", row_limit=...)` sorted by inclusive time, so the op with
    the most self time fell off a short table."""
    text = KeyAverages.from_builder(_ops(), use_device="cuda").table(sort_by="self_cpu_time_total", row_limit=1,
                                                                      width=200)
    assert "aten::addmm" in text and "aten::linear" not in text


def test_one_table_with_torchs_labels_and_footer():
    text = KeyAverages.from_builder(_ops(), use_device="cuda").table(sort_by="cuda_time_total", width=250)
    for label in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA",
                  "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls"):
        assert label in text, label
    assert text.count("┏") == 1  # one table, not one per category
    assert "Self CPU time total:" in text and "Self CUDA time total:" in text
    assert "busy" in text  # the per-kernel metric column


def test_memory_columns_and_memory_rows_as_torch_counts_them():
    b = TraceBuilder(pid=5)
    b.add_slices(names=["outer", "aten::empty", "aten::add"], ts=T + np.array([0, 10, 50]) * 1000,
                 dur=np.array([100, 10, 20]) * 1000, pid=5, tid=1, cat="cpu_op")
    mem = [(T + 12_000, 4096, 0), (T + 55_000, 1024, 0), (T + 60_000, -1024, 0), (T + 500_000, 512, 0),
           (T + 56_000, 2048, 12)]
    rows = [json.dumps({"Device Type": k, "Device Id": 0, "Addr": 1, "Bytes": n, "Total Allocated": 0,
                        "Total Reserved": 0}).encode() for _, n, k in mem]
    name = b.strings.intern("[memory]")
    b.add_instants(name_ids=np.full(len(mem), name, np.int32), ts=[t for t, _, _ in mem], pid=5, tid=1,
                   scope=np.full(len(mem), ord("t"), np.uint8), row_args=rows)
    avgs = KeyAverages.from_builder(b, use_device="xpu", profile_memory=True)
    got = {e.key: e for e in avgs}
    assert got["outer"].cpu_memory_usage == 4096 and got["outer"].self_cpu_memory_usage == 0
    assert got["aten::empty"].self_cpu_memory_usage == 4096
    assert got["aten::add"].cpu_memory_usage == 0  # +1024 then -1024
    assert got["aten::add"].device_memory_usage == 2048  # an XPU allocation
    assert got["[memory]"].count == 1 and got["[memory]"].cpu_memory_usage == 512  # outside every event
    text = avgs.table(width=250)
    assert "CPU Mem" in text and "Self CPU Mem" in text and "4.00 KB" in text


def test_profiler_steps_fold_into_one_row_also_grouped_by_input_shape():
    b = TraceBuilder(pid=1)
    b.add_slices(names=["ProfilerStep#1", "ProfilerStep#2"], ts=T + np.array([0, 10]), dur=np.array([10, 10]),
                 pid=1, tid=1, cat="user_annotation")
    b.add_slices(names=["aten::mm", "aten::mm"], ts=T + np.array([1, 11]), dur=np.array([5, 5]), pid=1, tid=1,
                 cat="cpu_op", row_args=[json.dumps({"Input Dims": [[2, 2], [2, 2]]}).encode()] * 2)
    for group in ({}, {"group_by_input_shape": True}):
        keys = [e.key for e in KeyAverages.from_builder(b, **group)]
        assert keys == ["ProfilerStep*", "aten::mm"], group


def test_group_by_input_shape_reads_input_dims_as_torch():
    b = TraceBuilder(pid=1)
    dims = [[[8, 16], [16, 32]], [[8, 16], [16, 32]], [[4, 4], [4, 4]], [[[1, 2], [3]], []]]
    b.add_slices(names=["aten::mm", "aten::mm", "aten::mm", "aten::cat"], ts=T + np.array([0, 10, 20, 30]),
                 dur=np.array([5, 5, 5, 5]), pid=1, tid=1, cat="cpu_op",
                 row_args=[json.dumps({"Input Dims": d}).encode() for d in dims])
    avgs = KeyAverages.from_builder(b, group_by_input_shape=True)
    assert sorted((e.key, str(e.input_shapes), e.count) for e in avgs) == [
        ("aten::cat", "[[], []]", 1), ("aten::mm", "[[4, 4], [4, 4]]", 1), ("aten::mm", "[[8, 16], [16, 32]]", 2)]
    assert all(e.input_shapes == "" for e in KeyAverages.from_builder(b))  # torch blanks them when not grouping
    assert "Input Shapes" in avgs.table(width=200)


def test_an_only_child_of_the_same_name_merges_into_its_parent_as_in_torch():
    # div_ > div_ > div_ > mul (a chain of only children) and a div_ with two children (kept apart)
    b = TraceBuilder(pid=1)
    names = ["aten::div_", "aten::div_", "aten::div_", "aten::mul", "aten::div_", "aten::div_", "aten::add"]
    b.add_slices(names=names, ts=T + np.array([0, 1, 2, 3, 100, 101, 150]) * 1000,
                 dur=np.array([50, 40, 30, 10, 100, 20, 10]) * 1000, pid=1, tid=1, cat="cpu_op",
                 external_id=np.arange(1, 8))
    b.add_slices(names=["k1", "k2"], ts=T + np.array([5, 6]) * 1000, dur=np.array([5, 2]) * 1000, pid=0, tid=7,
                 cat="kernel", external_id=np.array([3, 4]))
    rows = {e.key: e for e in KeyAverages.from_builder(b, use_device="xpu") if e.self_cpu_time_total or e.count}
    div = rows["aten::div_"]
    assert div.count == 3  # the chain is one div_, then the two-child div_ and its child
    assert div.self_device_time_total == pytest.approx(5)  # the innermost div_'s kernel lifted to the top
    assert rows["aten::mul"].self_device_time_total == rows["aten::mul"].device_time_total == pytest.approx(2)
    assert div.cpu_time_total == pytest.approx(50 + 100 + 20)
    assert div.self_cpu_time_total == pytest.approx(40 + 70 + 20)  # chain top 50 - mul 10; 100 - (20 + 10); 20


def test_nested_ranges_share_their_time_once():
    b = TraceBuilder(pid=1)
    for step in range(2):  # step 1000 ns holding forward 600 ns holding mm 200 ns; another thread alone
        t0 = T + step * 2000
        b.add_slice("step", t0, 1000, 1, 1, "user_annotation")
        b.add_slice("forward", t0 + 100, 600, 1, 1, "user_annotation")
        b.add_slice("mm", t0 + 200, 200, 1, 1, "user_annotation")
    b.add_slice("loader", T, 400, 1, 2, "user_annotation")
    rows = {e.key: e for e in KeyAverages.from_builder(b)}
    assert rows["step"].cpu_time_total == pytest.approx(2.0) and rows["step"].self_cpu_time_total == pytest.approx(0.8)
    assert rows["forward"].self_cpu_time_total == pytest.approx(0.8)
    assert rows["loader"].self_cpu_time_total == pytest.approx(0.4)
    assert all(e.is_user_annotation for e in rows.values())


def test_table_takes_either_spelling_of_a_category_and_says_when_it_has_none():
    evs = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0.0, "dur": 4.0, "pid": 1, "tid": 1},
           {"ph": "X", "cat": "kernel", "name": "k", "ts": 5.0, "dur": 9.0, "pid": 0, "tid": 7}]
    avgs = KeyAverages.from_events(evs)
    for asked in (["runtime"], ["cuda_runtime"], ["XPU_RUNTIME"]):
        text = avgs.table(categories=asked, width=200)
        assert "cudaLaunchKernel" in text and "│ k " not in text, asked
    assert "no cpu_op events in this trace" in avgs.table(categories=["cpu_op"])


def test_narrow_tables_keep_names_whole_and_say_which_columns_they_left_out():
    avgs = KeyAverages.from_builder(_ops(), use_device="cuda")
    name = "aten::a_rather_long_operator_name_that_does_not_fit_in_a_narrow_column_at_all"
    avgs[0].key = name
    text = avgs.table(sort_by="self_cpu_time_total", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert name in "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert "left out to fit 80 characters" in text and "table(wide=True) shows them" in text
    assert "Self CPU" in text  # the sort column stays
    wide = avgs.table(sort_by="self_cpu_time_total", wide=True)
    assert "left out" not in wide and "CUDA time avg" in wide


def test_profile_key_averages_is_torchs_and_needs_a_cycle():
    import xpuprof

    prof = xpuprof.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="completed recording cycle"):
        prof.key_averages()
    with xpuprof.profile(activities=["user_annotation"]) as prof:
        with xpuprof.record_function("r"):
            pass
    (row,) = [e for e in prof.key_averages() if e.key == "r"]
    assert row.count == 1 and row.is_user_annotation
    assert "r" in prof.key_averages().table(sort_by="cpu_time_total")


def test_acc_events_averages_every_cycle_and_otherwise_torchs_warning_says_events_are_cleared():
    import xpuprof

    def run(acc: bool):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with xpuprof.profile(activities=["user_annotation"], acc_events=acc,
                                 schedule=xpuprof.schedule(wait=0, warmup=1, active=1, repeat=2)) as prof:
                for _ in range(4):
                    with xpuprof.record_function("r"):
                        pass
                    prof.step()
        return prof, [str(w.message) for w in caught]

    import importlib

    schedule_module = importlib.import_module("xpuprof.profiler.schedule")

    schedule_module._shown.discard(schedule_module.CLEARS_EVENTS)
    prof, said = run(False)
    assert [e.count for e in prof.key_averages() if e.key == "r"] == [1]
    assert schedule_module.CLEARS_EVENTS in said  # torch's words, on the second cycle
    prof, said = run(True)
    assert [e.count for e in prof.key_averages() if e.key == "r"] == [2]


def test_torchs_schedule_warnings():
    import xpuprof

    with pytest.warns(UserWarning, match="Profiler won't be using warmup"):
        xpuprof.schedule(wait=1, warmup=0, active=1)
    with pytest.warns(UserWarning, match="Incorrect schedule: RECORD followed by NONE"):
        with xpuprof.profile(activities=["user_annotation"], schedule=lambda s: [
                xpuprof.ProfilerAction.RECORD, xpuprof.ProfilerAction.NONE][min(s, 1)]) as prof:
            prof.step()


def test_sim_device_sort_keys_order_by_their_own_column():
    """Device sort keys on the sim: each table's rows are ordered by the column its key names."""
    import xpuprof

    a = np.ones((64, 64))
    with xpuprof.profile(activities=["cpu", "xpu"], backends=["sim"]) as prof:
        for _ in range(3):
            with xpuprof.record_function("big"):
                a = a @ a / 64
            with xpuprof.record_function("small"):
                a = a + 1
    avgs = prof.key_averages()
    attrs = {"self_xpu_time_total": "self_device_time_total", "xpu_time_total": "device_time_total",
             "xpu_time": "device_time", "self_device_time_total": "self_device_time_total",
             "device_time_total": "device_time_total", "cuda_time_total": "device_time_total"}
    for key, attr in attrs.items():
        values = [getattr(e, attr) for e in avgs.sorted(key)]
        assert values == sorted(values, reverse=True) and values[0] > 0, key
        text = avgs.table(sort_by=key, width=200)
        column = {"self_device_time_total": "Self XPU", "device_time_total": "XPU total",
                  "device_time": "XPU time avg"}[attr]
        header = [c.strip() for c in text.splitlines()[1].split("┃")]
        i = header.index(column)
        cells = [line.split("│")[i].strip() for line in text.splitlines() if line.startswith("│")
                 and line.split("│")[i].strip()]
        us = [float(c[:-2]) * {"us": 1, "ms": 1e3}[c[-2:]] if not c.endswith("s") or c[-2:] in ("us", "ms")
              else float(c[:-1]) * 1e6 for c in cells]
        assert us == sorted(us, reverse=True), (key, cells)
