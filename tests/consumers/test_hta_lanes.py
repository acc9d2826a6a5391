"""HTA's analyses give the same results on a trace whose slices the layout pass put on lanes as on the same
trace with every slice back on its thread (issue 38): PyTorch's ResNet-18 profiler tutorial (its schedule,
``tensorboard_trace_handler``, record_shapes, profile_memory, with_stack) on the ResNet-18-style model of the
tests (torchvision does not import on CPU torch 2.13), the CUDA-flavoured sim as the device, and a
data-prefetch range per step that is entered before the step's forward and left inside it (so it does not
nest and goes to a lane).

The lanes change only where the moved ranges are drawn: HTA's breakdowns, queue lengths, launch stats and
critical path read device rows and runtime calls by their stream and correlation.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (.ci/run installs it with pandas<3)")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
if int(pd.__version__.split(".")[0]) >= 3:
    pytest.skip(f"HTA 0.5 breaks on pandas {pd.__version__}; .ci/run pins pandas<3", allow_module_level=True)

from hta.trace_analysis import TraceAnalysis  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof.trace.layout.check import nesting_report  # noqa: E402

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))


def _tutorial(out: Path) -> Path:
    """The tutorial's loop: wait 1, warmup 1, active 3 steps of ResNet-18 training, one trace per rank."""
    from resnet_like import ResNet18

    torch.manual_seed(0)
    model = ResNet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = [(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))) for _ in range(5)]
    cfg = xpuprof.ProfilerConfig(custom={"sim_vendor": "cuda", "sim_seed": 0})
    with xpuprof.profile(activities=["cpu", "cuda"], backends=["sim"], config=cfg,
                         schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                         on_trace_ready=xpuprof.trace_handler(str(out), worker_name="resnet"),
                         record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for x, y in batches:
            prefetch = xpuprof.record_function("prefetch next batch")  # left inside the forward: no nesting
            prefetch.__enter__()
            with xpuprof.record_function("forward"):
                out_ = model(x)
                prefetch.__exit__(None, None, None)
                loss = loss_fn(out_, y)
            with xpuprof.record_function("backward"):
                opt.zero_grad()
                loss.backward()
            with xpuprof.record_function("optimizer.step"):
                opt.step()
            prof.step()
    (path,) = out.glob("*.pt.trace.json*")
    return path


def _back_on_their_threads(src: Path, dst: Path) -> None:
    """The trace as it would be without lanes: each moved slice (and flow end) on its original tid."""
    import gzip

    raw = src.read_bytes()
    data = json.loads(gzip.decompress(raw) if src.name.endswith(".gz") else raw)
    lanes = {(d["pid"], d["lane_tid"]): d["tid"] for d in data.pop("laneLayout")["lanes"]}
    events = []
    for e in data["traceEvents"]:
        key = (e.get("pid"), e.get("tid"))
        if e.get("ph") == "M" and key in lanes:
            continue  # the lanes' own thread names
        if key in lanes:
            e = {**e, "tid": lanes[key]}
            if isinstance(e.get("args"), dict):
                e["args"] = {k: v for k, v in e["args"].items() if k != "original tid"}
        events.append(e)
    data["traceEvents"] = events
    dst.write_text(json.dumps(data))


def _results(trace_dir: Path) -> dict:
    ta = TraceAnalysis(trace_dir=str(trace_dir), include_last_profiler_step=True)
    out = {"temporal": ta.get_temporal_breakdown(visualize=False),
           "kernels": ta.get_gpu_kernel_breakdown(visualize=False)[0],
           "kernel_names": ta.get_gpu_kernel_breakdown(visualize=False)[1],
           "idle": ta.get_idle_time_breakdown(visualize=False)[0],
           "queue": ta.get_queue_length_summary(ranks=[0]),
           "launches": ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]}
    graph, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=None)
    out["critical_path_ok"] = ok
    if ok:
        cp = graph.get_critical_path_breakdown()
        out["critical_path"] = cp.groupby(["bound_by", "type"])["duration"].sum().reset_index()
    return out


def test_htas_analyses_of_the_resnet18_tutorial_trace_are_the_same_with_lanes(tmp_path):
    laid = _tutorial(tmp_path / "laid")
    assert nesting_report(laid).improper == 0
    moved = json.loads(laid.read_text())["laneLayout"]["moved_slices"]
    assert moved > 0  # the prefetch ranges (and what they hold) are on a lane
    (tmp_path / "threads").mkdir()
    _back_on_their_threads(laid, tmp_path / "threads" / laid.name)
    assert nesting_report(tmp_path / "threads" / laid.name).improper > 0  # as the trace was before the pass
    before, after = _results(tmp_path / "threads"), _results(tmp_path / "laid")
    assert before["critical_path_ok"] == after["critical_path_ok"]
    for key, value in before.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value.reset_index(drop=True), after[key].reset_index(drop=True),
                                          check_like=True, obj=key)
    assert len(after["launches"]) > 0 and len(after["kernels"]) > 0
