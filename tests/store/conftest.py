"""Fixtures of the store tier: HTA's own test traces (tests/data/hta), converted once per session; a
sim job profiled through the public API (kernels, copies, syncs, per-kernel metrics, telemetry,
ProfilerSteps) exported both as JSON and as a store; gloo jobs with and without a slow rank
(``gloo_jobs``), run once per session."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make storehelp importable

pytest.importorskip("pyarrow", reason="the store tier needs pyarrow (pip install 'xpuprof[scale]')")
pytest.importorskip("duckdb", reason="the store tier needs duckdb (pip install 'xpuprof[scale]')")

from storehelp import HTA_DATA, HTA_SETS, convert_dir, profile_sim  # noqa: E402


@pytest.fixture(scope="session")
def hta_stores(tmp_path_factory) -> dict[str, Path]:
    """Each HTA trace set converted into its own store."""
    out = tmp_path_factory.mktemp("hta_stores")
    return {name: convert_dir(HTA_DATA / name, out / name) for name in HTA_SETS}


@pytest.fixture(scope="session")
def sim_metrics(tmp_path_factory):
    """(profile, its JSON trace, its store) of an XPU-flavoured sim run with per-kernel metrics and
    host telemetry."""
    out = tmp_path_factory.mktemp("sim_metrics")
    prof = profile_sim(vendor="xpu", metrics=["GpuTime", "XVE_ACTIVE", "process_rss"])
    trace = prof.export_chrome_trace(out / "w.0.pt.trace.json")
    store = out / "store"
    prof.export_parquet(store)
    return prof, trace, store


@pytest.fixture(scope="session")
def sim_ranks(tmp_path_factory):
    """(directory of 4 JSON ranks, the store of the same ranks) of a CUDA-flavoured sim job."""
    out = tmp_path_factory.mktemp("sim_ranks")
    traces = out / "traces"
    traces.mkdir()
    store = out / "store"
    for rank in range(4):
        prof = profile_sim(vendor="cuda", seed=rank, steps=4)
        prof.builder.set_distributed_info({"rank": rank, "world_size": 4})
        prof.export_chrome_trace(traces / f"w.rank{rank}.pt.trace.json")
        prof.export_parquet(store)
    return traces, store


@pytest.fixture
def copy_store(tmp_path):
    def copy(store: Path) -> Path:
        dst = tmp_path / store.name
        shutil.copytree(store, dst)
        return dst

    return copy




@pytest.fixture(scope="session")
def gloo_runs(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Per ``gloo_jobs.SCENARIOS`` name: (the directory of its per-rank JSON traces, its store)."""
    torch = pytest.importorskip("torch", reason="the gloo jobs need torch (pip install torch==2.13.0)")
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("this torch has no gloo backend")
    del torch
    from gloo_jobs import generate

    out = tmp_path_factory.mktemp("gloo_jobs")
    return {name: (d, convert_dir(d, out / "stores" / name)) for name, d in generate(out / "traces").items()}
