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


def _computes(op_name: str) -> bool:
    """docs/backends.md's rule: an aten op computes unless it is a view, metadata or allocation op (or the
    in-place form of one, ``as_strided_``)."""
    return op_name.startswith("aten::") and op_name[6:].removesuffix("_") not in _launches().NON_COMPUTING


def _expected_launches(events):
    """The rule, computed independently from the trace's ops: innermost computing aten ops (no computing
    aten op nested in them on their thread) and the bias-adding BLAS ops."""
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    comp = [e for e in ops if _computes(e["name"])]
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
    for k in kernels:  # its launch call lies strictly inside that op (whole ns: the trace's 3 decimals)
        op, call = ops[k["args"]["External id"]], calls[k["args"]["correlation"]]
        assert _ns(op["ts"]) < _ns(call["ts"]) and _ns(call["ts"] + call["dur"]) < _ns(op["ts"] + op["dur"])


def _ns(us: float) -> int:
    return round(us * 1000)


def _resnet_trace(tmp_path, vendor="xpu"):
    from resnet_like import ResNet18

    torch.manual_seed(0)
    model, x = ResNet18().eval(), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        model(x)  # warm: first calls allocate
        prof = _profile(lambda: model(x), config=xpuprof.ProfilerConfig(custom={"sim_vendor": vendor}))
    return _events(prof, tmp_path)


def _under(op, events, cat):
    """The events of ``cat`` on ``op``'s thread whose start lies in ``op``."""
    return [e for e in events if e.get("cat") == cat and e["tid"] == op["tid"]
            and op["ts"] <= e["ts"] <= op["ts"] + op["dur"]]


def test_a_resnet_launches_a_kernel_for_every_op_that_computes_and_none_for_views(tmp_path):
    """docs/backends.md's rule on a ResNet-18-style network: each convolution, batch norm, ReLU, residual
    add, pooling and the classifier's matrix product launch their kernel; views, metadata and allocation
    ops (as_strided_, resize_, empty, t, flatten, ...) launch none."""
    ev = _resnet_trace(tmp_path)
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    launched_by = collections.Counter(k["name"][4:] for k in kernels)
    assert not [n for n in launched_by if not _computes("aten::" + n)], launched_by
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "xpu_runtime"}
    by_call = {k["args"]["correlation"]: k for k in kernels}
    for family in ("aten::conv2d", "aten::batch_norm", "aten::relu_", "aten::add", "aten::max_pool2d",
                   "aten::adaptive_avg_pool2d", "aten::linear"):
        family_ops = [o for o in ops if o["name"] == family]
        assert family_ops, family
        for op in family_ops:  # at least one kernel launched from inside each (conv2d, batch_norm: exactly one)
            inside = [c for c in _under(op, ev, "xpu_runtime") if c["args"]["correlation"] in by_call]
            assert len(inside) == 1 if family in ("aten::conv2d", "aten::batch_norm") else inside, family
    assert sum(n for name, n in launched_by.items() if "convolution" in name) == 20  # every convolution
    for k in kernels:  # each launch call strictly inside the op that launched it
        call = calls[k["args"]["correlation"]]
        op = min((o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"]
                  and call["ts"] + call["dur"] <= o["ts"] + o["dur"]), key=lambda o: o["dur"])
        assert op["args"]["External id"] == k["args"]["External id"], (op["name"], k["name"])
        assert _ns(op["ts"]) < _ns(call["ts"]) and _ns(call["ts"] + call["dur"]) < _ns(op["ts"] + op["dur"])


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


# Each flavour's collective library names the kernels (oneCCL on XPU, NCCL on CUDA, RCCL on HIP).
COLLECTIVE_KERNELS = {
    "xpu": {"oneccl_reduce_base<float, 2, 16, 1, 1, 2>": 2, "oneccl_kernel_memcpy_typed<float>": 2},
    "cuda": {"ncclKernel_AllReduce_RING_LL_Sum_float": 2, "ncclKernel_Broadcast_RING_LL_Sum_float": 2},
    "hip": {"ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)": 4},
}


@pytest.mark.parametrize("vendor", sorted(COLLECTIVE_KERNELS))
def test_c10d_collectives_launch_communication_kernels(tmp_path, monkeypatch, vendor):
    import torch.distributed as dist

    from xpuprof.analysis.cluster.frame import COMMUNICATION, kernel_type

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
        ev = _events(_profile(work, experimental_config=None,
                              config=xpuprof.ProfilerConfig(custom={"sim_vendor": vendor})), tmp_path)
    finally:
        dist.destroy_process_group()
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    comm = [k for k in kernels if kernel_type(k["name"]) == COMMUNICATION]  # the cluster analyses' one rule
    names = collections.Counter(k["name"] for k in comm)
    assert names == COLLECTIVE_KERNELS[vendor]
    if vendor != "xpu":  # HTA's own rule knows NCCL's and RCCL's names (not oneCCL's)
        hta_utils = pytest.importorskip("hta.utils.utils", reason="HTA is not installed (.ci/run installs it)")
        assert {hta_utils.get_kernel_type(n) for n in names} == {"COMMUNICATION"}
    compute_streams = {k["tid"] for k in kernels if kernel_type(k["name"]) != COMMUNICATION}
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
