"""``xpuprof analyze``: percentiles from mergeable histograms within 1 % of exact, partials that
combine exactly whatever the grouping of ranks, stragglers found, and every output format."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from xpuprof.analysis.cluster import ANALYSES, kernels, run_analysis
from xpuprof.analysis.engines import open_engine
from xpuprof.cli import main
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.parquet import write_store

from storehelp import synthetic_rank

pytestmark = pytest.mark.slow  # real DuckDB analyses over generated and converted stores


@pytest.fixture(scope="module")
def random_store(tmp_path_factory):
    """6 ranks of kernels with log-normal durations (seeded), each launched by a runtime call."""
    store = tmp_path_factory.mktemp("random") / "store"
    rng = np.random.default_rng(7)
    for rank in range(6):
        n = 3000
        b = TraceBuilder(pid=rank)
        ts = BASE_TIME_NS + 10**9 + np.cumsum(rng.integers(1_000, 50_000, n))
        dur = np.maximum(1, rng.lognormal(10, 1.2, n).astype(np.int64))  # ~ 20 µs median, long tail
        corr = np.arange(n) + 1
        names = np.array(["gemm", "conv", "ncclKernel_AllGather", "softmax"])[rng.integers(0, 4, n)]
        b.add_slices(names=["cudaLaunchKernel"] * n, ts=ts - 500, dur=400, pid=rank, tid=1, cat="cuda_runtime",
                     args={"correlation": corr})
        b.add_slices(names=list(names), ts=ts, dur=dur, pid=rank, tid=7, cat="kernel",
                     args={"correlation": corr, "stream": np.full(n, 7)})
        b.set_distributed_info({"rank": rank})
        write_store(b, store)
    return store


def exact_durations(store) -> dict[str, np.ndarray]:
    """HTA's µs durations per kernel name, from the rows (whole µs inwards), all ranks."""
    out: dict[str, list] = {}
    for rank in range(6):
        t = pq.read_table(store / f"rank={rank}" / "slices.parquet").to_pydict()
        for name, cat, ts, dur in zip(t["name"], t["cat"], t["ts"], t["dur"]):
            if cat == "kernel":
                out.setdefault(name, []).append((ts + dur) // 1000 - (-(-ts // 1000)))
    return {k: np.array(v, float) for k, v in out.items()}


def test_percentiles_within_one_percent_of_exact(random_store):
    exact = exact_durations(random_store)
    with open_engine(random_store) as engine:
        rows = {r["name"]: r for r in run_analysis("kernels", engine).rows}
    assert set(rows) == set(exact)
    for name, values in exact.items():
        r = rows[name]
        assert r["calls"] == len(values) and r["sum_us"] == values.sum()
        assert (r["min_us"], r["max_us"]) == (values.min(), values.max())
        assert r["std_us"] == pytest.approx(values.std(ddof=1), rel=1e-12)
        for p in (50, 90, 99):
            want = np.percentile(values, p, method="inverted_cdf")
            assert abs(r[f"p{p}_us"] - want) <= 0.01 * want, (name, p, r[f"p{p}_us"], want)


def test_partials_of_any_rank_grouping_combine_to_the_same_answer(random_store):
    """Each rank's partial (exact sums, mergeable histograms) is the same whichever group of ranks a task
    read it in, and they combine to one answer."""
    from xpuprof.analysis.cluster.frame import READS, _hta_ranks

    params = {"analysis": kernels.rank_groups, "options": {"include_memory": True}}

    def combined(parts):
        groups: dict = {}
        for rank, (_, ways) in sorted(r for part in parts for r in part.items()):
            for key, g in ways[False].items():
                groups.setdefault(key, kernels._Group()).merge(g)
        return groups

    with open_engine(random_store) as engine:
        whole = combined(engine.map(_hta_ranks, params, READS))
        split = combined([p for group in ([0, 1], [2], [3, 4, 5]) for p in engine.map(_hta_ranks, params, READS,
                                                                                        units=group)])
    assert whole.keys() == split.keys()
    for key in whole:
        assert whole[key].row() == split[key].row(), key


@pytest.mark.parametrize("which", ["random", "trace_filter"])
def test_the_duckdb_engine_in_rank_groups_gives_the_one_group_answer(which, random_store, hta_stores):
    """The duckdb engine runs groups of ranks one after the other (memory of one group): a group per
    rank gives the answers one group of all ranks gives, for every analysis."""
    store = random_store if which == "random" else hta_stores["trace_filter"]
    variants = [{}, {"by_rank": True}] if which == "random" else [{}]
    with open_engine(store, group_events=10**9) as whole, open_engine(store, group_events=1) as split:
        for name in ANALYSES:
            for options in variants if name == "kernels" else [{}]:
                one = run_analysis(name, whole, **options)
                many = run_analysis(name, split, **options)
                assert one.rows == many.rows, (name, options)
                assert one.notes == many.notes
        assert len(whole.nodes) == 1 and len(split.nodes) == len(split.store.ranks) > 1


@pytest.mark.parametrize("name", ["trace_filter", "ns_resolution_trace", "amd_trace"])
def test_every_analysis_over_the_traces_equals_the_one_over_their_store(name, hta_stores):
    """The analyses are written once over a rank group's table: the JSON traces (read by the one Kineto
    reader) and the store made of them (the store reader) give the same rows and notes."""
    from storehelp import HTA_DATA

    with open_engine(HTA_DATA / name) as traces, open_engine(hta_stores[name]) as store:
        for analysis in ANALYSES:
            if analysis == "stragglers" and name == "amd_trace":
                continue  # its trace names no rank: stragglers leaves such a file out, said in a note
            for options in ({}, {"include_last_step": True}):
                a, b = run_analysis(analysis, traces, **options), run_analysis(analysis, store, **options)
                assert (a.rows, a.notes) == (b.rows, b.notes), (name, analysis, options)


def test_without_collectives_stragglers_are_the_slow_rank_and_the_late_one(tmp_path):
    """No collective in the job: step time and start lag decide."""
    store = tmp_path / "s"
    for rank in range(8):
        step = 11_500_000 if rank == 5 else 10_000_000 + rank * 1_000  # rank 5: 15 % slower steps
        start = BASE_TIME_NS + 10**9 + (4_000_000 if rank == 2 else rank * 2_000)  # rank 2: starts 4 ms late
        write_store(synthetic_rank(rank, steps=5, step_ns=step, start_ns=start, kernels_per_step=4, comm=False), store)
    with open_engine(store) as engine:
        result = run_analysis("stragglers", engine, include_last_step=True)
    flagged = [r["rank"] for r in result.rows if r["straggler"]]
    assert flagged == [2, 5]
    rows = {r["rank"]: r for r in result.rows}
    assert rows[5]["vs_median_pct"] > 10 and rows[2]["start_lag_us"] > 3000
    assert all(r["steps"] == 5 for r in result.rows) and all(r["wait_us"] is None for r in result.rows)
    assert rows[5]["behind_steps"] == [0, 1, 2, 3, 4] and "steps take longer" in rows[5]["explanation"]
    assert "starts later" in rows[2]["explanation"]
    assert any("no collectives" in n for n in result.notes)


def test_with_collectives_of_equal_length_no_rank_is_a_straggler(tmp_path):
    """Every rank waits as long as the others in its collectives: nobody waits for anybody, whatever the
    step times and starts say (in a synchronous job those only show when each rank's step began)."""
    store = tmp_path / "s"
    for rank in range(4):
        step = 11_500_000 if rank == 1 else 10_000_000
        start = BASE_TIME_NS + 10**9 + (4_000_000 if rank == 2 else 0)
        write_store(synthetic_rank(rank, steps=5, step_ns=step, start_ns=start, kernels_per_step=4), store)
    with open_engine(store) as engine:
        result = run_analysis("stragglers", engine)
    assert [r["straggler"] for r in result.rows] == [False] * 4
    assert {r["wait_us"] for r in result.rows} == {r["others_wait_us"] for r in result.rows} == {300.0}
    assert all(r["steps"] == 4 for r in result.rows)  # the last step left out, as HTA does
    assert any("ProfilerStep#4" in n and "left out" in n for n in result.notes)


def test_stragglers_without_steps_say_so(tmp_path):
    b = TraceBuilder(pid=1)
    b.add_slice("k", BASE_TIME_NS + 10, 10, 1, 1, cat="kernel")
    write_store(b, tmp_path / "s")
    with open_engine(tmp_path / "s") as engine:
        result = run_analysis("stragglers", engine)
    assert result.rows == [] and "no ProfilerStep#N" in result.notes[0]


@pytest.mark.parametrize("fmt", ["json", "csv", "table", "html"])
def test_every_analysis_in_every_format(random_store, capsys, fmt, tmp_path):
    for analysis in ("temporal", "kernels", "kernel-types", "idle", "overlap", "queue", "launch", "memory-bw",
                     "stragglers"):
        out = tmp_path / f"{analysis}.{fmt}"
        assert main(["analyze", str(random_store), analysis, "--format", fmt, "-o", str(out)]) == 0, analysis
        text = out.read_text()
        if fmt == "json":
            rows = json.loads(text)
            assert isinstance(rows, list)
            if analysis == "temporal":
                assert [r["rank"] for r in rows] == list(range(6))
                assert {"rank", "idle_us", "compute_us", "non_compute_us", "kernel_us"} <= set(rows[0])
        elif fmt == "csv":
            rows = list(csv.DictReader(io.StringIO(text)))
            if analysis == "queue":
                assert len(rows) == 6 and rows[0]["stream"] == "7"
        elif fmt == "html":
            assert text.startswith("<!DOCTYPE html>") and f'id="{analysis}"' in text
    capsys.readouterr()


def test_group_events_on_the_command_line(random_store, capsys):
    assert main(["analyze", str(random_store), "temporal", "--format", "json"]) == 0
    whole = capsys.readouterr().out
    assert main(["analyze", str(random_store), "temporal", "--format", "json", "--group-events", "1"]) == 0
    assert capsys.readouterr().out == whole
    assert main(["analyze", str(random_store), "temporal", "--engine", "ray", "--group-events", "1"]) == 2
    err = capsys.readouterr().err.strip()  # the engine options' one check (engines.check_engine_options)
    assert err.startswith("xpuprof analyze: --group-events ") and "duckdb" in err and "ray" in err, err
    assert main(["analyze", str(random_store), "temporal", "--group-events", "0"]) == 2
    err = capsys.readouterr().err
    assert "--group-events" in err and "0" in err, err


STEP_VARIANTS = {  # the step events of a rank: (name, cat, has a duration)
    "two timed steps": [("ProfilerStep#1", "user_annotation", True), ("ProfilerStep#2", "user_annotation", True)],
    "two untimed steps": [("ProfilerStep#1", "user_annotation", False), ("ProfilerStep#2", "user_annotation", False)],
    "one timed, one untimed": [("ProfilerStep#1", "user_annotation", True), ("ProfilerStep#2", "cpu_op", False)],
    "steps in Trace": [("ProfilerStep#1", "Trace", True), ("ProfilerStep#2", "Trace", True)],
    "uncategorized steps": [("ProfilerStep#1", None, True), ("ProfilerStep#2", None, True)],
    "one step": [("ProfilerStep#1", "user_annotation", True)],
    "a step category": [("step", "ProfilerStep", True), ("ProfilerStep#2", "user_annotation", True)],
}


def frame_shape(frame, options) -> tuple[int, int]:
    """An analysis that tells the step filter's choice: (rows, the largest part: 1 when CPU rows were kept
    apart from the GPU rows they launched, -1 for no row)."""
    return len(frame), int(frame.part.max()) if len(frame) else -1


def _step_trace(path, steps, rank: int = 0) -> None:
    events = [{"ph": "X", "name": "gemm", "cat": "kernel", "ts": 100, "dur": 5, "pid": 0, "tid": 7,
               "args": {"stream": 7, "correlation": 1}},
              {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 90, "dur": 5, "pid": 1, "tid": 1,
               "args": {"correlation": 1}}]
    for i, (name, cat, timed) in enumerate(steps):
        e = {"ph": "X", "name": name, "ts": 50 + 100 * i, "pid": 1, "tid": 1}
        if cat is not None:
            e["cat"] = cat
        if timed:
            e["dur"] = 90
        events.append(e)
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": rank}}))


@pytest.mark.parametrize("variant", list(STEP_VARIANTS))
@pytest.mark.parametrize("source", ["store", "json"])
def test_the_step_filter_decision_is_the_events_one(variant, source, tmp_path):
    """HTA's step filter applies when the events hold two step symbols or more (untimed, uncategorized and
    "Trace" steps are not HTA's), on a store and on the JSON it came from alike."""
    from xpuprof.analysis.cluster.frame import hta_map

    _step_trace(tmp_path / "t.json", STEP_VARIANTS[variant])
    assert main(["convert", str(tmp_path / "t.json"), "-o", str(tmp_path / "s")]) == 0
    symbols = {t for name, cat, timed in STEP_VARIANTS[variant] if timed and cat not in (None, "Trace")
               for t in (name, cat) if "ProfilerStep" in t}
    with open_engine(tmp_path / ("s" if source == "store" else "t.json")) as engine:
        rows, part = hta_map(engine, frame_shape, {})[0]
    assert part == (1 if len(symbols) >= 2 else 0), (variant, rows, part)


def test_the_step_filter_is_decided_over_all_ranks(tmp_path):
    """Two ranks with one step symbol each (two ranges of one name) hold two together: the filter applies on
    both, and a rank with no step keeps no event (HTA's join), though each rank read alone says otherwise."""
    from xpuprof.analysis.cluster.frame import hta_map

    for rank, steps in enumerate(([("ProfilerStep#1", "user_annotation", True)] * 2,
                                  [("ProfilerStep#2", "user_annotation", True)] * 2, [])):
        _step_trace(tmp_path / f"r{rank}.json", steps, rank)
    with open_engine(tmp_path, group_events=1) as engine:
        got = hta_map(engine, frame_shape, {})
    assert got[0][1] == got[1][1] == 1 and got[2] == (0, -1), got
    for rank, rows in ((0, 4), (2, 2)):  # alone: no filter, every event kept
        with open_engine(tmp_path / f"r{rank}.json") as engine:
            assert hta_map(engine, frame_shape, {})[rank] == (rows, 0)
