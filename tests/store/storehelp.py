"""Helpers of the store tier (imported by its tests and conftest)."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import xpuprof
from xpuprof.trace.write.kineto_store import convert_trace

HTA_DATA = Path(__file__).resolve().parents[1] / "data" / "hta"
# HTA's trace sets: one TraceAnalysis directory each (the two trace_filter ranks are one job).
HTA_SETS = {"trace_filter": 2, "ns_resolution_trace": 1, "amd_trace": 1, "simple_add": 1,
            "cuda_event_sync_multi_stream": 1}


def core_builders():
    """tests/trace's builder of every batch and arg kind (loaded by path: conftests are not importable)."""
    spec = importlib.util.spec_from_file_location("core_builders", Path(__file__).parents[1] / "trace" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def convert_dir(src: Path, store: Path) -> Path:
    taken: dict[int, str] = {}
    for i, f in enumerate(sorted(src.iterdir())):
        if f.name.endswith((".json", ".json.gz")):
            convert_trace(f, store, position=i, taken=taken)
    return store


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def profile_sim(*, vendor: str = "cuda", seed: int = 0, metrics=(), steps: int = 4):
    """A profile of the sim backend over ``steps`` ProfilerSteps (the last cycle's trace kept)."""
    activities = ["cpu", "cuda" if vendor != "xpu" else "xpu"] + (["xpu_scope_profiler"] if metrics else [])
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, "sim_vendor": vendor})
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(activities=activities, backends=["sim"], config=cfg, experimental_config=exp,
                         schedule=xpuprof.schedule(wait=0, warmup=0, active=steps, repeat=1)) as prof:
        for _ in range(steps):
            for i, ns in enumerate((30_000, 2_000, 5_000, 40_000)):
                with xpuprof.record_function(f"layer{i}", {"i": i}):
                    _spin(ns)
            prof.step()
    return prof



def synthetic_rank(rank: int, *, steps: int = 6, step_ns: int = 10_000_000, kernels_per_step: int = 20,
                   start_ns: int | None = None, comm: bool = True):
    """A builder with exact timestamps: ``steps`` ProfilerStep ranges of ``step_ns`` each, kernels on
    two streams launched by runtime calls (correlation ids), NCCL kernels overlapping compute (without
    ``comm``: a compute kernel in their place)."""
    import numpy as np

    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder

    b = TraceBuilder(pid=100 + rank)
    t0 = (BASE_TIME_NS + 1_000_000_000) if start_ns is None else start_ns
    starts = t0 + np.arange(steps, dtype=np.int64) * step_ns
    b.add_slices(names=[f"ProfilerStep#{i}" for i in range(steps)], ts=starts, dur=np.full(steps, step_ns - 1000),
                 pid=100 + rank, tid=1, cat="user_annotation")
    n = steps * kernels_per_step
    launch = np.repeat(starts, kernels_per_step) + np.tile(np.arange(kernels_per_step) * (step_ns // (kernels_per_step + 2)),
                                                         steps)
    corr = np.arange(1, n + 1) + rank * 1_000_000
    b.add_slices(names=["cudaLaunchKernel"] * n, ts=launch, dur=np.full(n, 3_000), pid=100 + rank, tid=1,
                 cat="cuda_runtime", args={"correlation": corr})
    names = np.array(["gemm_kernel", "elementwise_kernel", "ncclKernel_AllReduce" if comm else "softmax_kernel",
                      "Memcpy DtoD (Device -> Device)"])
    kind = np.arange(n) % 4
    dur = np.array([200_000, 20_000, 300_000, 5_000])[kind] + (kind == 0) * rank * 1_000
    b.add_slices(names=list(names[kind]), ts=launch + 10_000, dur=dur, pid=rank, tid=7 + (kind == 2) * 10,
                 cat="kernel", args={"correlation": corr, "stream": 7 + (kind == 2) * 10, "device": np.full(n, rank),
                                     "memory bandwidth (GB/s)": np.where(kind == 3, 12.5, 0.0)})
    b.set_distributed_info({"rank": rank, "world_size": 8})
    b.set_window(int(starts[0]) - 1000, int(starts[-1]) + step_ns)
    return b
