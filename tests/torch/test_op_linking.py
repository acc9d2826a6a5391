"""Device work linked to the torch op that launched it.

The sim backend launches only inside our own record_function ranges, so the ``launcher`` test
backend (conftest) is used: a custom torch op calls ``launch()`` while it runs, as a CUDA/XPU op
calls the runtime. As in Kineto, every runtime call carries the External id of the innermost torch
op (cpu_op) around it, and its kernel the same id through the ac2g flow and correlation; user ranges
(torch's record_function, ours, Optimizer.step#...) are not operators: a call inside one but in no op
carries no op's id (Kineto pushes its op correlation for non-user-scope RecordFunctions only).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs torch==2.13.0; "
                            "pip install torch==2.13.0 to run the PyTorch-op tests)")

from slice_tables import slice_table
import xpuprof  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def launching_ops(launcher):
    launch = launcher
    lib = torch.library.Library("xpuproftest", "DEF")
    lib.define("launching_mm(Tensor a, Tensor b) -> Tensor")
    lib.define("two_launches(Tensor a) -> Tensor")

    def launching_mm(a, b):
        launch("gemm_kernel")
        return a @ b  # aten::mm nested inside this op: its own launch below belongs to it

    def two_launches(a):
        launch("first_kernel")
        with xpuprof.record_function("inner_range"):  # our range inside the op: innermost wins
            launch("range_kernel")
        return a + 1

    lib.impl("launching_mm", launching_mm, "CPU")
    lib.impl("two_launches", two_launches, "CPU")
    yield torch.ops.xpuproftest, launch
    del lib


def test_every_runtime_call_carries_its_ops_external_id_and_its_kernel_follows(tmp_path, launching_ops):
    launching_ops, launch = launching_ops
    a = torch.randn(4, 4)
    with xpuprof.profile(backends=["launchtest"], activities=["cpu", "cuda"]) as prof:
        with torch.profiler.record_function("annotated"):
            launch("annotation_kernel")  # inside torch's range, in no op
            for _ in range(3):
                launching_ops.launching_mm(a, a)
            launching_ops.two_launches(a)
        launch("outside_kernel")
    ev = json.loads(open(prof.export_chrome_trace(tmp_path / "t.json"), "rb").read())["traceEvents"]
    host = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    calls = [e for e in ev if e.get("cat") == "cuda_runtime"]
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"}
    assert len(calls) == 7 and len(kernels) == 7

    def innermost_op(call):
        inside = [e for e in host if e["tid"] == call["tid"] and e["ts"] <= call["ts"] < e["ts"] + e["dur"]
                  and e["cat"] == "cpu_op"]
        return min(inside, key=lambda e: e["dur"], default=None)

    by_kernel = {}
    for call in calls:
        op = innermost_op(call)
        ext = call["args"].get("External id")
        kernel = kernels[call["args"]["correlation"]]
        if op is None:  # in no op (in torch's range or outside everything): no op's id, as Kineto writes it
            assert ext is None and "External id" not in kernel["args"], (call, kernel)
            continue
        assert ext == op["args"]["External id"], (call, op)
        assert kernel["args"]["External id"] == ext  # the kernel reaches the op through its call
        by_kernel[kernel["name"]] = op["name"]
    # our range inside an op is no operator either: its launch belongs to the op around the range
    assert by_kernel == {"gemm_kernel": "xpuproftest::launching_mm", "first_kernel": "xpuproftest::two_launches",
                         "range_kernel": "xpuproftest::two_launches"}
    flows = [e for e in ev if e.get("cat") == "ac2g"]
    for call in calls:  # the ac2g flow starts at the call and ends at its kernel
        cid = call["args"]["correlation"]
        assert {(f["ph"], f["ts"]) for f in flows if f["id"] == cid} == {("s", call["ts"]),
                                                                          ("f", kernels[cid]["ts"])}
    assert prof.builder.metadata["torch_ops"]["runtime_calls_linked"] == 5
    assert prof.builder.metadata["torch_ops"]["runtime_calls_outside_ops"] == 2


def _launches_in_user_ranges_outside_ops(launch, **profile_kw):
    """A launch inside each kind of user range but in no op, as a torch.cuda.synchronize() or a
    hand-written launch makes; and one inside an op for contrast."""
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    hook = opt.register_step_post_hook(lambda *_: launch("in_optimizer_step"))  # inside Optimizer.step#SGD.step
    try:
        with xpuprof.profile(backends=["launchtest"], activities=["cpu", "cuda"], **profile_kw) as prof:
            with torch.profiler.record_function("torch_range"):
                launch("in_torch_range")
            with xpuprof.record_function("our_range"):
                launch("in_our_range")
            opt.step()
            with torch.profiler.record_function("with_op"):
                torch.ops.xpuproftest.launching_mm(torch.ones(2, 2), torch.ones(2, 2))
    finally:
        hook.remove()
    return prof


def test_launches_in_user_ranges_outside_ops_carry_no_ops_id(tmp_path, launching_ops):
    _, launch = launching_ops
    prof = _launches_in_user_ranges_outside_ops(launch)
    ev = json.loads(open(prof.export_chrome_trace(tmp_path / "t.json"), "rb").read())["traceEvents"]
    ranges = {e["name"]: e for e in ev if e.get("cat") == "user_annotation"}
    assert {"torch_range", "our_range", "Optimizer.step#SGD.step", "with_op"} <= set(ranges)
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"}
    by_name = {kernels[c["args"]["correlation"]]["name"]: (c, kernels[c["args"]["correlation"]])
               for c in ev if c.get("cat") == "cuda_runtime"}
    assert set(by_name) == {"in_torch_range", "in_our_range", "in_optimizer_step", "gemm_kernel"}
    for name in ("in_torch_range", "in_our_range", "in_optimizer_step"):
        call, kernel = by_name[name]
        assert "External id" not in call["args"] and "External id" not in kernel["args"], (call, kernel)
    call, kernel = by_name["gemm_kernel"]
    op = next(e for e in ev if e.get("name") == "xpuproftest::launching_mm")
    assert call["args"]["External id"] == kernel["args"]["External id"] == op["args"]["External id"]


def test_with_generic_categories_calls_outside_ops_say_external_id_0_as_tensorboards_kineto_did(
        tmp_path, launching_ops):
    # torch-tb-profiler 0.4 attaches a runtime call with External id 0 to the root; one without the
    # arg is "Runtime with external id None don't correlate to any operator!".
    from xpuprof.config.options import ProfilerConfig

    _, launch = launching_ops
    prof = _launches_in_user_ranges_outside_ops(launch, config=ProfilerConfig(generic_categories=True))
    ev = json.loads(open(prof.export_chrome_trace(tmp_path / "t.json"), "rb").read())["traceEvents"]
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"}
    calls = [e for e in ev if e.get("cat") == "runtime"]
    assert len(calls) == 4
    for call in calls:
        kernel = kernels[call["args"]["correlation"]]
        assert list(call["args"])[0] == "External id" and list(kernel["args"])[0] == "External id"
        assert call["args"]["External id"] == kernel["args"]["External id"]
        assert (call["args"]["External id"] == 0) == (kernel["name"] != "gemm_kernel"), (call, kernel)


@pytest.mark.parametrize("activities", [["user_annotation", "cuda"], ["cpu", "cuda"]], ids=["no-cpu_op", "no-op-run"])
def test_without_torch_ops_our_ranges_keep_giving_their_id_to_the_calls_inside(tmp_path, launcher, activities):
    # torch imported (as in any process that imported it for something else) but no op run in the cycle:
    # the trace is what a torch-free program gets
    with xpuprof.profile(backends=["launchtest"], activities=activities) as prof:
        with xpuprof.record_function("ours"):
            launcher("in_our_range")
    ev = json.loads(open(prof.export_chrome_trace(tmp_path / "t.json"), "rb").read())["traceEvents"]
    ours = next(e for e in ev if e.get("name") == "ours" and e.get("cat") == "user_annotation")
    call = next(e for e in ev if e.get("cat") == "cuda_runtime")
    kernel = next(e for e in ev if e.get("cat") == "kernel")
    assert call["args"]["External id"] == kernel["args"]["External id"] == ours["args"]["External id"] > 0
    assert prof.builder.metadata.get("torch_ops", {}).get("ops", 0) == 0
    assert "runtime_calls_outside_ops" not in prof.builder.metadata.get("torch_ops", {})


def test_torch_profiler_asked_for_device_activities_inside_is_refused_naming_both(launcher):
    # Without the guard torch takes the one Kineto session over and the process dies at stop (SIGSEGV).
    from xpuprof.host.torch_ops import TorchOpsError

    with xpuprof.profile(backends=["launchtest"], activities=["cpu", "cuda"]) as prof:
        # (a CPU-only torch drops CUDA from the activities it passes on; a CUDA torch passes both)
        with pytest.raises(TorchOpsError, match=r"torch.profiler cannot start \(activities .*CPU.*\) while "
                                                r"xpuprof.profile is recording.*backend\(s\) launchtest own"):
            torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                               torch.profiler.ProfilerActivity.CUDA]).start()
        torch.ones(2) + 1
    assert prof.builder.metadata["torch_ops"]["ops"] >= 1
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tp:  # free again after
        torch.ones(2) + 1
    assert any(e.name == "aten::add" for e in tp.events())


def test_a_device_backend_without_cpu_op_refuses_torch_profilers_device_activities_not_its_cpu_ones(launcher):
    # Our backend owns CUPTI/PTI whether or not xpuprof records torch's ops; torch's CPU-only profiler
    # touches no device tracing API, so it may run inside when xpuprof does not record ops through it.
    from xpuprof.host.torch_ops import TorchOpsError

    cpu, cuda = torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA
    with xpuprof.profile(backends=["launchtest"], activities=["cuda"]) as prof:
        with pytest.raises(TorchOpsError, match=r"torch.profiler cannot start \(activities .*CUDA.*\) while "
                                                r"xpuprof.profile is recording.*backend\(s\) launchtest own"):
            torch.profiler.profile(activities=[cpu, cuda]).start()
        # torch.autograd.profiler.profile(use_device="cuda") on a CUDA torch reaches torch's entry point
        # with CUDA in its activities (a CPU-only torch drops it before, as it has no CUPTI to touch)
        with pytest.raises(TorchOpsError, match=r"activities .*CUDA"):
            torch.autograd.profiler._prepare_profiler(None, {cpu, cuda})
        with torch.profiler.profile(activities=[cpu]) as tp:
            torch.ones(2) + 1
    assert any(e.name == "aten::add" for e in tp.events())
    assert "torch_ops" not in prof.builder.metadata
    with torch.profiler.profile(activities=[cpu, cuda]):  # free again after
        pass


def test_a_running_torch_profiler_is_refused_by_a_device_backend_without_cpu_op(launcher):
    from xpuprof.host import recorder
    from xpuprof.host.torch_ops import TorchOpsError

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        prof = xpuprof.profile(backends=["launchtest"], activities=["cuda"])
        with pytest.raises(TorchOpsError, match=r"torch.profiler is already running.*xpuprof.profile.*backend\(s\) "
                                                r"launchtest own the device tracing API"):
            prof.start()
        assert recorder.active_recorder() is None
    with xpuprof.profile(backends=["launchtest"], activities=["cuda"]):  # nothing stayed half-started
        pass


def test_gpu_user_annotations_of_our_ranges_survive_the_op_linking():
    # sim launches inside our innermost range; linking moves the calls to the aten op around them, and
    # the range must still be drawn on the device rows (Kineto keeps a separate user correlation).
    a = torch.randn(64, 64)
    with xpuprof.profile(backends=["sim"], activities=["cpu", "xpu"]) as prof:
        for i in range(4):
            with xpuprof.record_function(f"step{i}"):
                a @ a
    names = slice_table(prof.builder, "gpu_user_annotation")["name"].tolist()
    assert sorted(names) == ["step0", "step1", "step2", "step3"]
    assert prof.builder.metadata["torch_ops"]["runtime_calls_linked"] >= 1
