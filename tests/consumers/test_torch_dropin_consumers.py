"""The consumer tier for torch.profiler scripts run with xpuprof.profile: TensorBoard's Memory view reads our
[memory] events, HTA's memory timeline reads export_memory_timeline, and on a CPU-only sim trace of two gloo
ranks HTA's comm/compute overlap and straggler analyses give numbers."""
from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

import xpuprof  # noqa: E402

pytestmark = pytest.mark.slow

P = torch.profiler


def _train(steps, prof, n=64):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(), torch.nn.Linear(n, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(16, n), torch.randn(16, 8)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
        prof.step()


@pytest.mark.slow
def test_tensorboard_memory_view_has_a_curve_from_our_memory_events(tmp_path):
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")
    from torch_tb_profiler import consts
    from torch_tb_profiler import io as tb_io
    from torch_tb_profiler.profiler.loader import RunLoader

    logdir = tmp_path / "run"
    prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                           schedule=P.schedule(wait=0, warmup=1, active=3),
                           on_trace_ready=P.tensorboard_trace_handler(str(logdir)))
    with prof:
        _train(4, prof)
    import json

    (trace,) = logdir.iterdir()
    n_memory = sum(e.get("name") == "[memory]" for e in json.loads(trace.read_text())["traceEvents"])
    assert n_memory > 50
    cache = tb_io.Cache()
    try:
        run = RunLoader("run", str(logdir), cache).load()
    finally:
        cache._manager.shutdown()
    profiles = [p for (worker, _), p in run.profiles.items() if p is not None and worker != "All"]
    (profile,) = profiles
    assert consts.MEMORY_VIEW in profile.views
    curve = profile.get_memory_curve(time_metric="ms", memory_metric="KB", patch_for_step_plot=False)
    rows = curve["rows"]["CPU"]
    assert len(rows) > 10 and max(r[1] for r in rows) > 0  # allocated KB over time
    events = profile.get_memory_events(time_metric="ms", memory_metric="KB")["rows"]["CPU"]
    assert n_memory / 3 < len(events) <= n_memory  # TensorBoard pairs each allocation with its free: one row


def test_hta_memory_timeline_reads_export_memory_timeline(tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (.ci/run installs it)")
    from hta.memory_analysis import MemoryAnalysis

    prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                           with_stack=True, schedule=P.schedule(wait=0, warmup=1, active=2, repeat=1))
    with prof:
        _train(3, prof)
    path = prof.export_memory_timeline(tmp_path / "memory.raw.json.gz")
    times, sizes = MemoryAnalysis(str(path))._process_raw_events()
    assert len(times) == len(sizes) > 10
    totals = [sum(s) for s in sizes]
    assert max(totals) > 0 and all(t >= 0 for t in totals)
    assert sorted(times) == times


GLOO_RANK = textwrap.dedent("""
    import os, sys
    import torch, torch.distributed as dist, torch.profiler as P
    import xpuprof
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    a = torch.randn(96, 96)
    g = torch.randn(1 << 16)
    # CUDA-flavoured: HTA's communication analyses know NCCL's kernel names only (the XPU flavour's are
    # oneCCL's, as on a real XPU, which HTA does not classify; our cluster analyses classify both)
    prof = xpuprof.profile(backends=["sim"], activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA],
                           config=xpuprof.ProfilerConfig(custom={"sim_vendor": "cuda"}),
                           schedule=P.schedule(wait=0, warmup=1, active=4),
                           on_trace_ready=P.tensorboard_trace_handler(sys.argv[1]))
    with prof:
        for step in range(5):
            for _ in range(3 + rank):  # rank 1 computes more: it reaches its collectives later
                b = a @ a
            work = dist.all_reduce(g, async_op=True)
            c = a @ a  # its kernel runs while the collective's does
            work.wait()
            prof.step()
    dist.destroy_process_group()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("gloo")
    script = out / "rank.py"
    script.write_text(GLOO_RANK)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2")
    procs = [subprocess.Popen([sys.executable, str(script), str(out / "traces")], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (o, e) in zip(procs, results):
        assert p.returncode == 0, e[-3000:]
    return out / "traces"


@pytest.mark.slow
def test_two_gloo_ranks_give_hta_comm_compute_overlap_and_stragglers(gloo_traces):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (.ci/run installs it)")
    from hta.trace_analysis import TraceAnalysis

    files = sorted(os.listdir(gloo_traces))
    assert len(files) == 2 and all(f.startswith(f"{socket.gethostname()}_") for f in files)
    ta = TraceAnalysis(trace_dir=str(gloo_traces), include_last_profiler_step=True)
    assert sorted(ta.t.get_all_traces()) == [0, 1]  # each file's rank from its distributedInfo
    overlap = ta.get_comm_comp_overlap(visualize=False)
    assert sorted(overlap["rank"]) == [0, 1]
    # numbers, not NaN (HTA divides by the communication kernels' time: NaN without any)
    assert all(math.isfinite(v) and 0 <= v <= 100 for v in overlap["comp_comm_overlap_pctg"])
    assert ta.get_profiler_steps() == [1, 2, 3, 4]
    try:
        stragglers = ta.get_potential_stragglers(num_candidates=1)
    except TypeError as exc:
        # HTA 0.5's own limit (tests/store/test_stragglers.py): when its duration filter leaves no iteration
        # with the significant kernel on both ranks, its idxmax is NaN and it fails to unpack it. Which way a
        # 4-step gloo run falls depends on its timing; the traces are read either way (above).
        assert "non-iterable float" in str(exc), exc
    else:
        assert len(stragglers) == 1 and stragglers[0] in (0, 1)


@pytest.mark.slow
def test_two_gloo_ranks_are_one_node_two_processes_in_tensorboard(gloo_traces):
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")
    from torch_tb_profiler import consts

    workers = {consts.WORKER_PATTERN.match(f).group(1) for f in os.listdir(gloo_traces)}
    nodes = {consts.NODE_PROCESS_PATTERN.match(w).group(1) for w in workers}
    assert len(workers) == 2 and nodes == {socket.gethostname()}
