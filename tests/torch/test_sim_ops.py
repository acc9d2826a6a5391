"""The sim's launch rule with torch ops: every innermost computing aten op launches one kernel named after it
and linked to it, sized by its shapes; collectives launch communication kernels."""
from __future__ import annotations

import collections
import socket

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from slice_tables import slice_table
import xpuprof

pytestmark = pytest.mark.slow


def _launches():
    from xpuprof.backends.sim import launches
    return launches


def _mlp(n=32):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(), torch.nn.Linear(n, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, n), torch.randn(8, 4)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    return step


def _profile(work, **kw):
    with xpuprof.profile(backends=["sim"], activities=["cpu", "xpu"], **kw) as prof:
        work()
    return prof


def _events(prof, tmp_path):
    import json
    return json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())["traceEvents"]


def _expected_launches(events):
    """The rule, computed independently from the trace's ops: innermost computing aten ops (no computing
    aten op nested in them on their thread) and the bias-adding BLAS ops."""
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    comp = [e for e in ops if e["name"].startswith("aten::") and e["name"][6:] not in _launches().NON_COMPUTING]
    out = []
    for o in comp:
        inner = any(c is not o and c["tid"] == o["tid"] and o["ts"] <= c["ts"] and c["ts"] + c["dur"] <= o["ts"] + o["dur"]
                    and (c["ts"], -c["dur"]) != (o["ts"], -o["dur"]) for c in comp)
        if not inner or o["name"][6:] in _launches().OWN_KERNEL_WITH_BIAS:
            out.append(o)
    return out


def test_torch_record_function_programs_get_a_kernel_per_computing_op(tmp_path):
    step = _mlp()
    step()

    def work():
        with torch.profiler.record_function("train_step"):  # torch's range, no xpuprof range at all
            step()
    ev = _events(_profile(work), tmp_path)
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    ops = {e["args"]["External id"]: e for e in ev if e.get("cat") == "cpu_op"}
    matmuls = [e for e in ops.values() if e["name"] in ("aten::mm", "aten::addmm")]
    assert len(kernels) > len(matmuls) > 0
    for k in kernels:  # linked to the op it is named after (HTA and TensorBoard join on External id)
        assert ops[k["args"]["External id"]]["name"] == "aten::" + k["name"][4:], k["name"]
    expected = _expected_launches(ev)
    assert collections.Counter(k["name"] for k in kernels) == collections.Counter(
        "sim_" + o["name"][6:] for o in expected)
    calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "xpu_runtime"}
    for k in kernels:  # its launch call lies inside that op
        op, call = ops[k["args"]["External id"]], calls[k["args"]["correlation"]]
        assert op["ts"] <= call["ts"] and call["ts"] + call["dur"] <= op["ts"] + op["dur"] + 0.001


def test_kernel_time_follows_the_shapes(tmp_path):
    def mm(n):
        a = torch.randn(n, n)
        return lambda: a @ a

    durs = {}
    for n in (128, 256):
        ev = _events(_profile(mm(n)), tmp_path)
        (k,) = [e for e in ev if e.get("cat") == "kernel"]
        assert k["name"] == "sim_mm"
        durs[n] = k["dur"]
        expect = _launches().work_ns(2.0 * n ** 3, 3 * n * n * 4) / 1000
        assert abs(k["dur"] - expect) <= 0.05 * expect + 0.01
    assert durs[256] > 3 * durs[128]


def test_shapes_read_for_the_sim_stay_out_of_a_trace_that_did_not_ask_for_them(tmp_path):
    a = torch.randn(64, 64)
    ev = _events(_profile(lambda: a @ a), tmp_path)
    mm = next(e for e in ev if e.get("name") == "aten::mm")
    assert "Input Dims" not in mm["args"]
    ev = _events(_profile(lambda: a @ a, record_shapes=True), tmp_path)
    assert next(e for e in ev if e.get("name") == "aten::mm")["args"]["Input Dims"] == [[64, 64], [64, 64]]


def test_gpu_user_annotations_of_our_ranges_still_drawn(tmp_path):
    a = torch.randn(32, 32)

    def work():
        for i in range(3):
            with xpuprof.record_function(f"step{i}"):
                a @ a
    prof = _profile(work)
    assert sorted(slice_table(prof.builder, "gpu_user_annotation")["name"].tolist()) == ["step0", "step1", "step2"]


def test_c10d_collectives_launch_communication_kernels(tmp_path, monkeypatch):
    import torch.distributed as dist

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        t = torch.ones(4096)

        def work():
            for _ in range(2):
                y = t * 2
                dist.all_reduce(y)
                dist.broadcast(y, 0)
        ev = _events(_profile(work, experimental_config=None), tmp_path)
    finally:
        dist.destroy_process_group()
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    comm = [k for k in kernels if k["name"].startswith("nccl")]
    names = collections.Counter(k["name"] for k in comm)
    assert names == {"ncclKernel_AllReduce_RING_LL_Sum_float": 2, "ncclKernel_Broadcast_RING_LL_Sum_float": 2}
    compute_streams = {k["tid"] for k in kernels if not k["name"].startswith("nccl")}
    assert {k["tid"] for k in comm}.isdisjoint(compute_streams)
    ops = {e["args"]["External id"]: e["name"] for e in ev if e.get("cat") == "cpu_op"}
    assert {ops[k["args"]["External id"]] for k in comm} == {"c10d::allreduce_", "c10d::broadcast_"}
    # each lasts what its bytes take on the simulated link, or what gloo's own range took here if longer
    model = _launches().comm_work_ns(4096 * 4) / 1000
    gloo = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("gloo:")),
                  key=lambda e: e["ts"])
    issued = sorted(comm, key=lambda k: next(e["ts"] for e in ev if e.get("cat") == "cpu_op"
                                            and e["args"]["External id"] == k["args"]["External id"]))
    assert len(gloo) == len(issued) == 4
    for k, g in zip(issued, gloo):
        expect = max(model, g["dur"])
        assert abs(k["dur"] - expect) <= 0.05 * expect + 0.01
