"""torch's results API on xpuprof's trace: events() is torch's EventList (our ranges and the device time of
each op in it), key_averages groups as torch groups, export_stacks writes torch's collapsed stacks."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from slice_tables import slice_table
import xpuprof

pytestmark = pytest.mark.slow

P = torch.profiler


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, 16), torch.randn(8, 4)

    def train_step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    train_step()
    return train_step


def _ours(step, **kw):
    with xpuprof.profile(backends=["sim"], activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.XPU], **kw) as prof:
        with xpuprof.record_function("our_range"):
            step()
    return prof


def _theirs(step, **kw):
    with P.profile(activities=[P.ProfilerActivity.CPU], **kw) as prof:
        with xpuprof.record_function("our_range"):
            step()
    return prof


def test_events_is_torchs_event_list_with_our_ranges_and_device_time():
    from torch.autograd.profiler_util import EventList

    prof = _ours(_mlp())
    ev = prof.events()
    assert isinstance(ev, EventList)
    ours = [e for e in ev if e.name == "our_range"]
    assert len(ours) == 1 and ours[0].is_user_annotation and ours[0].cpu_children
    addmm = [e for e in ev if e.name == "aten::addmm"]
    assert addmm and all(e.device_time_total > 0 and e.kernels for e in addmm)
    assert {k.name for e in addmm for k in e.kernels} == {"sim_addmm"}
    assert all(e.device_time_total > e.self_device_time_total for e in addmm)  # + its bias copy_'s kernel
    device = [e for e in ev if e.device_type == torch.autograd.DeviceType.XPU]
    assert len(device) == len(slice_table(prof.builder, "kernel")["name"])
    assert ours[0].device_time_total == pytest.approx(sum(e.device_time_total for e in device), rel=1e-6)
    table = ev.table(sort_by="self_xpu_time_total", row_limit=5)
    assert "Self XPU" in table and "aten::" in table


def test_events_without_a_device_backend_are_torchs_cpu_events():
    step = _mlp()
    with xpuprof.profile(activities=["cpu"]) as prof:
        step()
    theirs = _theirs(step)
    names = sorted(e.name for e in prof.events() if e.name.startswith("aten::"))
    assert names == sorted(e.name for e in theirs.events() if e.name.startswith("aten::"))


def test_key_averages_by_input_shape_groups_as_torch():
    step = _mlp()
    ours = _ours(step, record_shapes=True).key_averages(group_by_input_shape=True)
    theirs = _theirs(step, record_shapes=True).key_averages(group_by_input_shape=True)
    keys = lambda avgs: {(a.key, str(a.input_shapes)) for a in avgs if a.key.startswith("aten::")}  # noqa: E731
    assert keys(ours) == keys(theirs)
    assert len({str(a.input_shapes) for a in ours if a.key == "aten::addmm"}) == 2  # the two Linear layers


def _verbose():  # torch 2.13 fills FunctionEvent.stack only with verbose=True (its own profile likewise)
    return torch._C._profiler._ExperimentalConfig(verbose=True)


def test_key_averages_by_stack_groups_as_torch():
    step = _mlp()
    avgs = _ours(step, with_stack=True, experimental_config=_verbose()).key_averages(group_by_stack_n=5)
    addmm = [a for a in avgs if a.key == "aten::addmm"]
    assert addmm and all(0 < len(a.stack) <= 5 for a in addmm)
    theirs = _theirs(step, with_stack=True, experimental_config=_verbose()).key_averages(group_by_stack_n=5)
    frames = lambda avgs: {tuple(f.split("(")[0] for f in a.stack) for a in avgs if a.key == "aten::addmm"}  # noqa
    assert frames(avgs) == frames(theirs)


def test_export_stacks_writes_collapsed_stacks(tmp_path):
    prof = _ours(_mlp(), with_stack=True, experimental_config=_verbose())
    for metric in ("self_cpu_time_total", "self_xpu_time_total"):
        path = prof.export_stacks(tmp_path / f"{metric}.txt", metric)
        lines = path.read_text().splitlines()
        assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
        assert any("train_step" in line for line in lines), metric
    with pytest.raises(ValueError, match="self_cuda_time_total"):
        prof.export_stacks(tmp_path / "x.txt", "cpu_time")


def test_export_stacks_needs_with_stack(tmp_path):
    prof = _ours(_mlp())
    with pytest.raises(ValueError, match="with_stack=True"):
        prof.export_stacks(tmp_path / "x.txt")


def test_events_before_any_cycle_is_a_clear_error():
    prof = xpuprof.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="completed recording cycle"):
        prof.events()
