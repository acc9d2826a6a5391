"""Builder-made traces for the run/report/diff/merge tests: several ranks, kernels with metrics."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder, write_chrome_trace



# name -> (calls per rank, duration ns)
KERNELS = {"gemm_kernel": (6, 50_000), "axpy_kernel": (10, 4_000), "reduce_kernel": (3, 12_000)}
DEVICE_PID = 1_000_000


def make_rank_trace(path, rank: int, *, world: int = 2, scale: dict | None = None, offset_ns: int = 0,
                    stall: float = 10.0, kernels: dict | None = None):
    """A trace for one rank: host annotations, kernels on a device row, per-kernel metrics."""
    scale = scale or {}
    kernels = KERNELS if kernels is None else kernels
    rng = np.random.default_rng(100 + rank)
    b = TraceBuilder(pid=4000 + rank)
    t0 = BASE_TIME_NS + 1_000_000_000 + offset_ns
    names, ts, dur = [], [], []
    t = t0 + 10_000
    for name, (calls, d) in kernels.items():
        for _ in range(calls):
            names.append(name)
            ts.append(t)
            dur.append(int(d * scale.get(name, 1.0)))
            t += dur[-1] + 1_000
    ts, dur = np.array(ts, np.int64), np.array(dur, np.int64)
    b.add_slice("ProfilerStep#0", t0, int(t - t0), b.pid, 7, cat="user_annotation")
    b.set_thread_name(b.pid, 7, "thread 7 (MainThread)")
    b.add_slices(names=names, ts=ts, dur=dur, pid=DEVICE_PID, tid=1, cat=ActivityType.CONCURRENT_KERNEL,
                 args={"device": np.zeros(len(ts), np.int64)})
    b.set_process_name(DEVICE_PID, "XPU 0")
    b.add_per_kernel_metrics(kernel_names=names, start_ns=ts, end_ns=ts + dur, pid=DEVICE_PID, tid=1,
                             metrics={"XVE_STALL": rng.normal(stall, 1.0, len(ts)),
                                      "GPU_BUSY": rng.uniform(50, 90, len(ts))},
                             units={"XVE_STALL": "percent", "GPU_BUSY": "percent"})
    b.set_distributed_info({"rank": rank, "world_size": world, "backend": "sim"})
    b.set_metadata("backend", "sim")
    b.set_window(t0, int(t))
    return write_chrome_trace(b, path)


@pytest.fixture
def rank_traces(tmp_path):
    """Two ranks' traces in tmp_path/traces (rank 1's clock 5 ms later than rank 0's)."""
    d = tmp_path / "traces"
    return [make_rank_trace(d / f"w.{100 + r}.rank{r}.1.pt.trace.json", r, offset_ns=r * 5_000_000) for r in range(2)]


@pytest.fixture
def make_trace():
    """``make_trace(path, rank, **kw)``: write a builder-made rank trace (see make_rank_trace)."""
    return make_rank_trace


@pytest.fixture
def kernel_spec():
    return dict(KERNELS)
