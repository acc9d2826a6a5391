import numpy as np
import pytest

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import ArgColumn, TraceBuilder, hex_column


def mixed_builder(n: int = 300, seed: int = 0) -> TraceBuilder:
    """Every batch kind and arg kind the writer handles, including the generic-only ones."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder(pid=7)
    ts = BASE_TIME_NS + rng.integers(-10_000, 10**13, n)
    b.add_slices(names=[f'kern"{i % 7}\\\n\x01' for i in range(n)], ts=ts, dur=rng.integers(-5, 10**6, n), pid=0,
                 tid=rng.integers(-3, 5, n), cat="kernel", external_id=rng.integers(0, 3, n), vendor="cuda",
                 args={"correlation": rng.integers(0, 10**9, n), "f": rng.random(n) * 10.0 ** rng.integers(-8, 8, n),
                       "ctx": hex_column(rng.integers(0, 2**63, n).astype(np.uint64) * 2),
                       "s": (["a", "b\u00e9", "c\"q"] * n)[:n], "grid": rng.integers(-9, 100, (n, 3)),
                       "opt": ArgColumn("num", rng.integers(-5, 5, n), rng.random(n) > 0.5),
                       "b": rng.random(n) > 0.5, "u": rng.integers(0, 2**63, n).astype(np.uint64) * 2,
                       "nf": np.r_[np.nan, np.inf, -np.inf, rng.random(n - 3)]})
    b.add_slices(names=["x"] * n, ts=ts, dur=5, pid="GPU 0 Counters", tid=(["a", 3] * n)[:n], cat="cuda_runtime",
                 vendor="cuda")
    b.add_slices(names=["obj"] * 4, ts=ts[:4], dur=1, pid=1, tid=1, cat="cpu_op",
                 args={"shapes": [[1, 2], [3], [], None]})
    b.add_counters(name="ctr", ts=ts, pid=1, tid=0, cat="gpu_pm_counter",
                   values={"a": rng.random(n), "b": np.r_[np.nan, np.inf, rng.integers(0, 9, n - 2)]})
    b.add_counters(name="empty", ts=ts[:3], pid=1, tid=0, cat="gpu_pm_counter", values={})
    b.add_flows(flow_ids=np.arange(n), ts=ts, pid=1, tid=2, start=rng.random(n) > 0.5)
    b.add_flows(flow_ids=np.arange(n), ts=ts, pid=1, tid=2, start=True, cat="fwdbwd")
    b.add_slice("host", BASE_TIME_NS + 5_000, 10, 1, 1, args={"x": [1, 2]}, external_id=3)
    b.add_instant("inst", BASE_TIME_NS + 5, 1, 1)
    b.add_counter("mem", BASE_TIME_NS + 7, {"bytes": 3.0}, pid=1)
    b.add_flow(99, BASE_TIME_NS + 9, 1, 1, start=False)
    b.set_process_name(1, "proc", label="CPU")
    b.set_thread_name(1, -5, "thread")
    b.add_span("PyTorch Profiler", BASE_TIME_NS + 1_000, BASE_TIME_NS + 10**9, op_count=3)
    b.set_window(BASE_TIME_NS + 1_000, BASE_TIME_NS + 2 * 10**9)
    return b


@pytest.fixture
def mixed():
    return mixed_builder()


@pytest.fixture
def make_mixed():
    return mixed_builder
