"""Each HTA-named analysis of ``xpuprof analyze`` gives HolisticTraceAnalysis 0.5's numbers on HTA's own
test traces (tests/data/hta), every rank of every set: the traces converted into stores, HTA reading
the JSON files themselves."""
from __future__ import annotations

import logging
import math
import warnings

import pytest

from xpuprof.analysis.cluster import run_analysis
from xpuprof.analysis.engines import open_engine

from storehelp import HTA_DATA, HTA_SETS

pytestmark = pytest.mark.slow  # HTA 0.5 and real DuckDB on HTA's traces

hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (the CI installs "
                                                       "HolisticTraceAnalysis with pandas<3)")


@pytest.fixture(scope="module")
def hta_runs():
    """HTA's TraceAnalysis of each set, loaded once."""
    logging.getLogger("hta").setLevel(logging.ERROR)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in HTA_SETS:
            out[name] = hta.TraceAnalysis(trace_dir=str(HTA_DATA / name))
    return out


SETS = list(HTA_SETS)


def ours(hta_stores, name: str, analysis: str, **options):
    with open_engine(hta_stores[name]) as engine:
        return run_analysis(analysis, engine, **options).rows


def close(a, b, rel: float = 1e-9) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if b is None:
        return False
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("name", SETS)
def test_temporal(hta_runs, hta_stores, name):
    ref = quiet(hta_runs[name].get_temporal_breakdown, visualize=False).to_dict("records")
    got = ours(hta_stores, name, "temporal")
    assert len(got) == len(ref) == HTA_SETS[name]
    for r, g in zip(ref, got):
        assert g["rank"] == r["rank"]
        for ours_key, hta_key in (("idle_us", "idle_time(us)"), ("compute_us", "compute_time(us)"),
                                  ("non_compute_us", "non_compute_time(us)"), ("kernel_us", "kernel_time(us)"),
                                  ("idle_pct", "idle_time_pctg"), ("compute_pct", "compute_time_pctg"),
                                  ("non_compute_pct", "non_compute_time_pctg")):
            assert g[ours_key] == r[hta_key], (name, g["rank"], ours_key)


@pytest.mark.parametrize("name", SETS)
def test_kernels_by_rank_and_kernel_types(hta_runs, hta_stores, name):
    types_ref, kernels_ref = quiet(hta_runs[name].get_gpu_kernel_breakdown, visualize=False)
    got_types = {r["kernel_type"]: r for r in ours(hta_stores, name, "kernel-types")}
    ref_types = {r["kernel_type"]: r for r in types_ref.to_dict("records")}
    # HTA can also list a state that lasts 0 µs (two kernel types touching at one instant)
    assert set(got_types) == {k for k, r in ref_types.items() if r["sum"] > 0}
    for k, r in got_types.items():
        assert (r["sum_us"], r["percentage"]) == (ref_types[k]["sum"], ref_types[k]["percentage"]), k
    got = ours(hta_stores, name, "kernels", by_rank=True)
    ref = kernels_ref.to_dict("records")
    assert [(g["rank"], g["kernel_type"], g["name"]) for g in got] == \
        [(r["rank"], r["kernel_type"], r["name"]) for r in ref]
    for g, r in zip(got, ref):
        for ours_key, hta_key in (("sum_us", "sum (us)"), ("max_us", "max (us)"), ("min_us", "min (us)"),
                                  ("mean_us", "mean (us)"), ("std_us", "stddev")):
            assert close(g[ours_key], r[hta_key]), (name, g["name"][:40], ours_key, g[ours_key], r[hta_key])


@pytest.mark.parametrize("name", SETS)
def test_idle(hta_runs, hta_stores, name):
    ranks = sorted(hta_runs[name].t.traces)
    ref, _ = quiet(hta_runs[name].get_idle_time_breakdown, ranks=ranks, visualize=False)
    ref = {(r["rank"], r["stream"], r["idle_category"]): r for r in ref.to_dict("records")}
    got = {(g["rank"], g["stream"], g["idle_category"]): g for g in ours(hta_stores, name, "idle")}
    assert set(got) == set(ref)
    for k, g in got.items():
        assert close(g["idle_time_us"], ref[k]["idle_time"]) and close(g["idle_time_ratio"], ref[k]["idle_time_ratio"]), k


@pytest.mark.parametrize("name", SETS)
def test_overlap(hta_runs, hta_stores, name):
    ref = quiet(hta_runs[name].get_comm_comp_overlap, visualize=False).to_dict("records")
    got = ours(hta_stores, name, "overlap")
    assert [g["rank"] for g in got] == [r["rank"] for r in ref]
    for g, r in zip(got, ref):
        assert close(g["comp_comm_overlap_pct"], r["comp_comm_overlap_pctg"]), (name, g["rank"])


def _describe_rows(df, key: str) -> dict:
    out = {}
    for idx, row in df.iterrows():
        vals = {stat: row[(key, stat)] for stat in ("count", "mean", "std", "min", "25%", "50%", "75%", "max")}
        out[tuple(idx)] = vals
    return out


@pytest.mark.parametrize("name", SETS)
def test_queue_length(hta_runs, hta_stores, name):
    ranks = sorted(hta_runs[name].t.traces)
    ref = _describe_rows(quiet(hta_runs[name].get_queue_length_summary, ranks=ranks), "queue_length")
    got = {(g["rank"], g["stream"]): g for g in ours(hta_stores, name, "queue")}
    assert set(got) == set(ref)
    for k, g in got.items():
        for ours_key, stat in (("count", "count"), ("mean", "mean"), ("std", "std"), ("min", "min"), ("p25", "25%"),
                               ("p50", "50%"), ("p75", "75%"), ("max", "max")):
            assert close(g[ours_key], ref[k][stat], 1e-12), (name, k, stat, g[ours_key], ref[k][stat])


@pytest.mark.parametrize("name", SETS)
def test_memory_bandwidth(hta_runs, hta_stores, name):
    ranks = sorted(hta_runs[name].t.traces)
    frame = quiet(hta_runs[name].get_memory_bw_summary, ranks=ranks)
    ref = _describe_rows(frame, "memory_bw_gbps") if frame is not None else {}
    got = {(g["rank"], g["name"]): g for g in ours(hta_stores, name, "memory-bw")}
    assert set(got) == set(ref)
    for k, g in got.items():
        for ours_key, stat in (("count", "count"), ("mean", "mean"), ("std", "std"), ("min", "min"), ("p25", "25%"),
                               ("p50", "50%"), ("p75", "75%"), ("max", "max")):
            assert close(g[ours_key], ref[k][stat], 1e-12), (name, k, stat)


@pytest.mark.parametrize("name", SETS)
def test_launch_stats(hta_runs, hta_stores, name):
    ranks = sorted(hta_runs[name].t.traces)
    ref = quiet(hta_runs[name].get_cuda_kernel_launch_stats, ranks=ranks, visualize=False)
    events = ours(hta_stores, name, "launch", events=True)
    for rank in ranks:
        mine = [(e["correlation"], e["cpu_duration_us"], e["gpu_duration_us"], e["launch_delay_us"])
                for e in events if e["rank"] == rank]
        theirs = [tuple(r) for r in ref[rank][["correlation", "cpu_duration", "gpu_duration", "launch_delay"]]
                  .itertuples(index=False)]
        assert mine == theirs, (name, rank)
    summary = {r["rank"]: r for r in ours(hta_stores, name, "launch")}
    for rank in ranks:
        df = ref[rank]
        if df.empty:
            assert rank not in summary
            continue
        s = summary[rank]
        assert s["launches"] == len(df)
        assert close(s["launch_delay_mean_us"], df["launch_delay"].mean())
        assert s["runtime_outliers"] == int((df["cpu_duration"] > 50).sum())
        assert s["delay_outliers"] == int((df["launch_delay"] > 100).sum())
        assert s["gpu_shorter_than_cpu"] == int((df["gpu_duration"] < df["cpu_duration"]).sum())
