"""Consumers of torch-op traces. TensorBoard's profiler plugin (torch-tb-profiler) builds its
operator view from our trace with every runtime call correlated to an operator; HTA attributes kernels
to aten ops. The MLP runs under a dispatch mode that makes every aten op launch a "kernel" through the
``launcher`` test backend, as ops on a GPU do; other launches happen inside user ranges but in no op
(torch's record_function, ours, an optimizer step hook), as a torch.cuda.synchronize() or a
hand-written launch does."""
from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs torch==2.13.0; "
                            "pip install torch==2.13.0 to run the PyTorch-op tests)")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import xpuprof  # noqa: E402

pytestmark = pytest.mark.slow


class LaunchEveryOp(TorchDispatchMode):
    def __init__(self, launch):
        super().__init__()
        self.launch = launch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.launch(f"kernel_{func.__name__.split('.')[0]}")  # inside the op's RecordFunction
        return func(*args, **(kwargs or {}))


def _mlp_trace(tmp_path, launch, generic_categories=False):
    from xpuprof.config.options import ProfilerConfig

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, 16), torch.randn(8, 4)
    hook = opt.register_step_post_hook(lambda *_: launch("in_optimizer_step"))  # in Optimizer.step#SGD.step
    sched = xpuprof.schedule(wait=0, warmup=0, active=2, repeat=1)
    with xpuprof.profile(backends=["launchtest"], activities=["cpu", "cuda"], schedule=sched,
                         record_shapes=True, config=ProfilerConfig(generic_categories=generic_categories)) as prof:
        for _ in range(2):
            with LaunchEveryOp(launch):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), target).backward()
                opt.step()
            with torch.profiler.record_function("synchronize_like"):
                launch("in_torch_range")
            with xpuprof.record_function("ours"):
                launch("in_our_range")
            prof.step()
    hook.remove()
    path = tmp_path / "worker0.1.pt.trace.json"
    prof.export_chrome_trace(path)
    return prof, path


def test_tensorboard_plugin_builds_the_operator_view_with_every_runtime_correlated(tmp_path, launcher, caplog):
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")
    from torch_tb_profiler.profiler.data import RunProfileData

    # torch-tb-profiler 0.4 maps only the generic `runtime` category to runtime calls (README: categories)
    prof, path = _mlp_trace(tmp_path, launcher, generic_categories=True)
    assert prof.builder.metadata["torch_ops"]["runtime_calls_linked"] > 20
    with caplog.at_level(logging.DEBUG):
        data = RunProfileData.parse("worker0", "1", str(path), str(tmp_path))
        data.process()
    assert prof.builder.metadata["torch_ops"]["runtime_calls_outside_ops"] == 6
    assert not [r for r in caplog.records if "correlate to any operator" in r.getMessage()]
    assert not [r for r in caplog.records if "different external id" in r.getMessage()]
    ops = {agg.name: agg for agg in data.op_list_groupby_name}
    assert "aten::addmm" in ops and "aten::mm" in ops
    assert ops["aten::addmm"].calls >= 4  # two Linear layers, two steps (the dispatch mode re-enters the op)
    assert ops["aten::addmm"].device_duration > 0  # its kernels reached it


def test_hta_attributes_kernels_to_aten_ops(tmp_path, launcher):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis)")
    from hta.trace_analysis import TraceAnalysis

    _, path = _mlp_trace(tmp_path, launcher)
    analysis = TraceAnalysis(trace_dir=str(tmp_path))
    table = analysis.get_aten_op_kernels_and_delay(ranks=[0])[0]
    assert len(table) > 0
    text = table.to_string()
    assert "aten::addmm" in text and "kernel_addmm" in text
