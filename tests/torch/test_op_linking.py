"""Issue 12: device work linked to the torch op that launched it.

The sim backend launches only inside our own record_function ranges, so the ``launcher`` test
backend (conftest) is used: a custom torch op calls ``launch()`` while it runs, as a CUDA/XPU op
calls the runtime. Every runtime call must carry the External id of the innermost
op (or range) around it, and its kernel the same id through the ac2g flow and correlation.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs torch==2.13.0; "
                            "pip install torch==2.13.0 to run the PyTorch-op tests)")

import xpuprof  # noqa: E402


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

    def innermost(call):
        inside = [e for e in host if e["tid"] == call["tid"] and e["ts"] <= call["ts"] < e["ts"] + e["dur"]]
        return min(inside, key=lambda e: e["dur"], default=None)

    by_kernel = {}
    for call in calls:
        op = innermost(call)
        ext = call["args"].get("External id")
        if op is None:
            assert ext is None, call  # outside every op and range: no link
            continue
        assert ext == op["args"]["External id"], (call, op)
        kernel = kernels[call["args"]["correlation"]]
        assert kernel["args"]["External id"] == ext  # the kernel reaches the op through its call
        by_kernel[kernel["name"]] = op["name"]
    assert by_kernel == {"gemm_kernel": "xpuproftest::launching_mm", "first_kernel": "xpuproftest::two_launches",
                         "range_kernel": "inner_range", "annotation_kernel": "annotated"}
    flows = [e for e in ev if e.get("cat") == "ac2g"]
    for call in calls:  # the ac2g flow starts at the call and ends at its kernel
        cid = call["args"]["correlation"]
        assert {(f["ph"], f["ts"]) for f in flows if f["id"] == cid} == {("s", call["ts"]),
                                                                          ("f", kernels[cid]["ts"])}
    assert prof.builder.metadata["torch_ops"]["runtime_calls_linked"] == 6


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
    from xpuprof.host import annotations
    from xpuprof.host.torch_ops import TorchOpsError

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        prof = xpuprof.profile(backends=["launchtest"], activities=["cuda"])
        with pytest.raises(TorchOpsError, match=r"torch.profiler is already running.*xpuprof.profile.*backend\(s\) "
                                                r"launchtest own the device tracing API"):
            prof.start()
        assert annotations.active_recorder() is None
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
    names = prof.builder.slice_table("gpu_user_annotation")["name"].tolist()
    assert sorted(names) == ["step0", "step1", "step2", "step3"]
    assert prof.builder.metadata["torch_ops"]["runtime_calls_linked"] >= 1
