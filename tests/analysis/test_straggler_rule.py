"""The straggler rule (``analysis.cluster.stragglers.judge``) on per-(rank, step) rows built by hand, the
per-step collective time (``step_waits.step_rows``) and the JSON reader, without a store or an engine."""
from __future__ import annotations

import json

import numpy as np
import pytest

from xpuprof.analysis.cluster import AnalysisError
from xpuprof.analysis.cluster import step_waits, stragglers
from xpuprof.analysis.cluster.step_waits import COLUMNS, RankInputs, step_rows, union_per_group
from xpuprof.analysis.cluster.stragglers import judge, median_of_others, result

T0 = 1_800_000_000_000_000_000  # an epoch time in ns


def rows_of(waits_us, *, step_us=100_000.0, starts_us=None, source="device") -> np.ndarray:
    """Rows for a (ranks, steps) matrix of waits in µs: steps of ``step_us`` (one value, or one per rank
    and step), the n-th starting at n x 200 ms plus ``starts_us``."""
    waits = np.asarray(waits_us, float)
    n_ranks, n_steps = waits.shape
    durs = np.broadcast_to(np.asarray(step_us, float), waits.shape)
    out = []
    for r in range(n_ranks):
        for s in range(n_steps):
            start = T0 + s * 200_000_000 + (0 if starts_us is None else int(starts_us[r][s] * 1000))
            dur = int(durs[r, s] * 1000)
            w = int(waits[r, s] * 1000)
            dev, host = ((w, 1), (0, 0)) if source == "device" else ((0, 0), (w, 1)) if source == "host" else ((0, 0), (0, 0))
            out.append([r, s + 1, start, dur, *dev, *host])
    return np.array(out, np.int64)


def flagged(v) -> list[int]:
    return v.stragglers


def test_two_ranks_the_one_that_waits_less_is_the_straggler():
    """A z-score over 2 ranks is always +-0.67: the old rule could flag neither. Against the other rank's
    wait the slow rank stands out by what the other waits for it."""
    v = judge(rows_of([[40_000] * 6, [1_000] * 6]), include_last_step=True)
    assert flagged(v) == [1]
    got = result(v).rows
    assert got[1]["behind_steps"] == [1, 2, 3, 4, 5, 6] and got[0]["behind_steps"] == []
    assert got[1]["wait_us"] == 1000 and got[1]["others_wait_us"] == 40_000 and got[1]["cost_us"] == 6 * 39_000
    assert got[1]["cost_share_pct"] == 39.0
    assert ("waits 1,000 µs per step in collectives against the other rank's 40,000 µs; the other rank waits for "
            "it (it waits less) 39,000 µs per step in steps 1-6: 39.0% of the run's step time") == got[1]["explanation"]


def test_four_ranks_with_one_slow():
    """The issue's numbers (µs in all-reduce over 5 steps): 370k / 288k / 83k / 285k; HTA named [1, 2]."""
    per_step = np.array([370_000, 288_000, 83_000, 285_000]) / 5
    v = judge(rows_of(np.repeat(per_step[:, None], 5, 1), step_us=120_000.0), include_last_step=True)
    assert flagged(v) == [2]


def test_balanced_ranks_with_noise_are_no_stragglers():
    rng = np.random.default_rng(43)
    waits = 20_000 + rng.normal(0, 1_500, (8, 20))  # scheduling noise of a few % of a 100 ms step
    v = judge(rows_of(waits))
    assert flagged(v) == []


def test_a_rank_slow_in_some_steps_is_named_with_those_steps():
    rng = np.random.default_rng(7)
    waits = 60_000 + rng.normal(0, 800, (4, 10))
    waits[1, [2, 5, 8]] -= 55_000  # rank 1 arrives 55 ms late in steps 3, 6, 9: the others wait for it
    waits[1, 0] -= 20_000  # and 20 ms late once: under half its typical delay, not named with them
    v = judge(rows_of(waits, step_us=150_000.0), include_last_step=True)
    assert flagged(v) == [1]
    assert result(v).rows[1]["behind_steps"] == [3, 6, 9]


def test_one_late_step_is_an_event_not_a_straggler():
    waits = np.full((2, 5), 10_000.0)
    waits[0, 2] = 0.0  # the other rank waited 10 ms for rank 0 once: 2 % of the run, named but not flagged
    v = judge(rows_of(waits, step_us=100_000.0), include_last_step=True, threshold_pct=1.0)
    assert flagged(v) == [] and result(v).rows[0]["behind_steps"] == [3]
    one = judge(rows_of(waits[:, 2:3], step_us=100_000.0), threshold_pct=1.0)  # a run of one step: it is the run
    assert flagged(one) == [0]


def test_margins():
    waits = np.array([[10_000.0] * 4, [5_000.0] * 4])  # the other waits 5 ms for rank 1 in 10 ms steps
    assert flagged(judge(rows_of(waits, step_us=10_000.0), include_last_step=True)) == [1]
    assert flagged(judge(rows_of(waits, step_us=10_000.0), include_last_step=True, min_us=5_001)) == []
    assert flagged(judge(rows_of(waits, step_us=10_000.0), include_last_step=True, threshold_pct=51)) == []


def test_the_last_step_is_left_out_unless_asked():
    waits = np.array([[10_000.0, 10_000, 90_000], [10_000.0, 10_000, 0]])  # only the last step differs
    v = judge(rows_of(waits))
    assert flagged(v) == [] and list(v.steps) == [1, 2] and "ProfilerStep#3" in v.notes[0]
    assert result(judge(rows_of(waits), include_last_step=True)).rows[1]["behind_steps"] == [3]


def test_host_ranges_when_there_are_no_device_kernels():
    v = judge(rows_of([[40_000] * 4, [1_000] * 4], source="host"), include_last_step=True)
    assert v.source == "host" and flagged(v) == [1]
    assert any("collective ranges on the host" in n for n in v.notes)


def test_without_collectives_step_time_and_start_lag_decide():
    n = 6
    step = [[100_000.0] * n, [100_000.0] * n, [130_000.0] * n]  # rank 2: 30 % longer steps
    starts = [[0.0] * n, [20_000.0] * n, [0.0] * n]  # rank 1: starts 20 ms late
    v = judge(rows_of(np.zeros((3, n)), step_us=step, starts_us=starts, source=""), include_last_step=True)
    assert v.source == "" and flagged(v) == [1, 2]
    rows = result(v).rows
    assert "starts later" in rows[1]["explanation"] and "steps take longer" in rows[2]["explanation"]
    assert rows[0]["wait_us"] is None and rows[2]["vs_median_pct"] == 30.0


def test_steps_one_rank_has_are_not_compared():
    rows = rows_of([[10_000.0] * 3, [10_000.0] * 3])
    rows = np.concatenate([rows, [[0, 9, T0 + 10**9, 10**8, 0, 1, 0, 0]]])  # ProfilerStep#9 on rank 0 only
    v = judge(rows, include_last_step=True)
    assert "ProfilerStep#9" in " ".join(v.notes) and result(v).rows[0]["steps"] == 3


def test_no_steps_say_so():
    got = result(judge(np.zeros((0, len(COLUMNS)), np.int64)))
    assert got.rows == [] and "no ProfilerStep#N" in got.notes[0]


@pytest.mark.parametrize("options", [{"threshold_pct": 0}, {"threshold_pct": float("nan")}, {"min_us": -1}])
def test_bad_options_are_refused_before_any_work(options):
    with pytest.raises(AnalysisError, match="--threshold-pct|--min-us"):
        stragglers.from_traces([], **options)


def test_median_of_others_is_the_median_without_the_cell():
    rng = np.random.default_rng(1)
    for n_rows in (1, 2, 3, 4, 7):
        m = rng.integers(0, 5, (n_rows, 6)).astype(float)  # ties included
        m[rng.random(m.shape) < 0.25] = np.nan
        got = median_of_others(m)
        for i in range(n_rows):
            for j in range(6):
                others = [m[k, j] for k in range(n_rows) if k != i and not np.isnan(m[k, j])]
                want = np.median(others) if others else np.nan
                assert (np.isnan(want) and np.isnan(got[i, j])) or got[i, j] == want, (m, i, j)


def test_union_per_group_counts_overlaps_once():
    rng = np.random.default_rng(3)
    group = rng.integers(0, 5, 200)
    start = rng.integers(0, 10_000, 200)
    end = start + rng.integers(0, 700, 200)
    total, count = union_per_group(group, start, end, 6)
    for g in range(6):
        covered = np.zeros(11_000, bool)
        for s, e in zip(start[group == g], end[group == g]):
            covered[s:e] = True
        assert total[g] == covered.sum() and count[g] == (group == g).sum()
    # groups far apart in time (beyond what one shifted accumulate holds): the same answer
    far = start + group * (1 << 60)
    assert np.array_equal(union_per_group(group, far, far + (end - start), 6)[0], total)


def test_a_collective_belongs_to_the_step_it_was_issued_in():
    ms = 1_000_000
    steps = RankInputs(3, np.array([1, 2, 2, -1]), T0 + np.array([0, 100, 100, 0]) * ms,
                       np.array([100, 100, 50, 500]) * ms, np.zeros((0, 3), np.int64), np.zeros((0, 2), np.int64))
    # (issued, start, dur): issued in step 1 and running into step 2; two overlapping ones issued in step
    # 2; one issued before any step
    steps.device = np.array([[90, 95, 20], [110, 110, 10], [115, 115, 10], [-5, -5, 1]], np.int64) * ms
    steps.device[:, :2] += T0
    got = step_rows(steps)
    assert got[:, :4].tolist() == [[3, 1, T0, 100 * ms], [3, 2, T0 + 100 * ms, 100 * ms]]  # step 2: the longest
    assert got[:, 4].tolist() == [20 * ms, 15 * ms] and got[:, 5].tolist() == [1, 2]


TRACE_EVENTS = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.5, "dur": 1000.0, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 1000.5, "dur": 1000.0, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 900.0, "dur": 2.0, "pid": 1, "tid": 1,
     "args": {"correlation": 7}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 1010.0, "dur": 300.25,
     "pid": 0, "tid": 7, "args": {"correlation": 7, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllGather", "ts": 1500.0, "dur": 100.0, "pid": 0, "tid": 7,
     "args": {"correlation": 8, "stream": 7}},  # no launcher: its own start, step 2
    {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1600.0, "dur": 100.0, "pid": 0, "tid": 7,
     "args": {"correlation": 9, "stream": 7}},
    {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 1700.0, "dur": 50.0, "pid": 1, "tid": 9},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "ts": 0, "dur": 1, "pid": 1,
     "tid": 1},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 9e30, "dur": 1.0, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "user_annotation", "name": "Profiler\\u0053tep#4", "ts": 3000.0, "dur": 10.0, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "kernel", "name": "oneccl_reduce_base<float, 2, 16, 1, 1, 2>", "ts": 3002.0, "dur": 5.0,
     "pid": 0, "tid": 7, "args": {"correlation": 10, "stream": 7}},  # oneCCL's all-reduce on an XPU
]


def _trace(path, rank=5):
    text = json.dumps({"traceEvents": TRACE_EVENTS, "baseTimeNanoseconds": T0, "distributedInfo": {"rank": rank}})
    path.write_text(text.replace("\\\\u0053", "\\u0053"))  # an escaped name: read whole
    return path


@pytest.mark.parametrize("native", [True, False], ids=["columns", "without-the-C-part"])
def test_the_json_reader(tmp_path, monkeypatch, native):
    if not native:  # the reader's other implementation: orjson over the whole document
        from xpuprof.trace.read import kineto_stream

        monkeypatch.setattr(kineto_stream, "_native_module", None)
    header, inputs = step_waits.read_trace(_trace(tmp_path / "t.json"))
    assert inputs.rank == 5 and header["distributedInfo"]["rank"] == 5
    got = step_rows(inputs)
    # steps 1, 2 and 4 (the escaped name is ProfilerStep#4); no step with 20 digits or a ts beyond int64 ns
    assert got[:, 1].tolist() == [1, 2, 4]
    assert got[:, 2].tolist() == [T0 + 500, T0 + 1_000_500, T0 + 3_000_000]
    # step 1 issued the NCCL kernel (its launch at 900 µs); step 2 ran the other (no launcher) and gloo's range
    assert got[:, 4].tolist() == [300_250, 100_000, 5_000] and got[:, 5].tolist() == [1, 1, 1]
    assert got[:, 6].tolist() == [0, 50_000, 0] and got[:, 7].tolist() == [0, 1, 0]


def test_from_traces_leaves_out_what_it_cannot_place(tmp_path):
    a = _trace(tmp_path / "a.json", rank=0)
    b = _trace(tmp_path / "b.json", rank=1)
    twin = _trace(tmp_path / "c.json", rank=1)
    nameless = tmp_path / "d.json"
    nameless.write_text(json.dumps({"traceEvents": TRACE_EVENTS}))
    got = stragglers.from_traces([a, b, twin, nameless])
    assert [r["rank"] for r in got.rows] == [0, 1]
    notes = " ".join(got.notes)
    assert "rank 1 is also" in notes and "d.json: left out: no rank" in notes


def test_a_merged_view_alone_says_only_that_it_was_left_out(tmp_path):
    merged = tmp_path / "job.merged.json"
    merged.write_text(json.dumps({"traceEvents": TRACE_EVENTS, "mergedRanks": {"ranks": [0, 1]}}))
    got = stragglers.from_traces([merged])
    assert got.rows == [] and len(got.notes) == 1 and "merged view" in got.notes[0]


def test_one_rank_has_no_other_to_compare_with():
    got = result(judge(rows_of([[1_000.0] * 3]), include_last_step=True))
    assert [r["straggler"] for r in got.rows] == [False] and "no other rank" in got.notes[-1]


def test_start_lag_is_not_compared_across_traces_a_step_apart():
    """Two runs recorded at different times (or on clocks seconds apart) are not one job's ranks in lockstep:
    their starts are left out, said in a note; their step times still compare."""
    n = 5
    starts = [[0.0] * n, [3_000_000.0] * n]  # rank 1's trace: 3 s later
    v = judge(rows_of(np.zeros((2, n)), step_us=10_000.0, starts_us=starts, source=""), include_last_step=True)
    assert flagged(v) == [] and any("not aligned in time" in note for note in v.notes)
    assert result(v).rows[1]["cost_us"] == 0
