"""torch.profiler scripts with ``xpuprof.profile`` in place of ``torch.profiler.profile``: torch's own
schedule, handler, ProfilerActivity lists, _ExperimentalConfig and every keyword torch's profile accepts."""
from __future__ import annotations

import json
import os
import socket
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from slice_tables import slice_table
import xpuprof
from xpuprof.profiler import ProfilerAction

pytestmark = pytest.mark.slow

P = torch.profiler


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, 16), torch.randn(8, 4)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    return step


def _loop(prof, steps, step):
    with prof:
        for _ in range(steps):
            step()
            prof.step()
    return prof


def test_torchs_schedule_records_and_calls_on_trace_ready():
    ready = []
    step = _mlp()
    prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU], schedule=P.schedule(wait=1, warmup=1, active=2),
                           on_trace_ready=lambda p: ready.append(p.step_num))
    _loop(prof, 4, step)
    assert ready == [4]  # called as step 4 begins, after the cycle's last active step (torch: the same)
    assert prof.builder.metadata["torch_ops"]["ops"] > 0
    names = {e for e in slice_table(prof.builder, "user_annotation")["name"].tolist()}
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= names and "ProfilerStep#1" not in names


def test_any_callable_returning_torchs_actions_is_a_schedule():
    acts = {0: P.ProfilerAction.WARMUP, 1: P.ProfilerAction.RECORD_AND_SAVE}
    ready = []
    prof = xpuprof.profile(activities=["cpu"], schedule=lambda s: acts.get(s, P.ProfilerAction.NONE),
                           on_trace_ready=lambda p: ready.append(p.step_num))
    _loop(prof, 3, lambda: None)
    assert ready == [2]


@pytest.mark.parametrize("answer", [None, "RECORD", 2, True])
def test_a_schedule_not_returning_an_action_is_one_error_at_start(answer):
    prof = xpuprof.profile(activities=["cpu"], schedule=lambda s: answer)
    with pytest.raises(TypeError) as info:
        prof.start()
    assert "step 0" in str(info.value) and repr(answer) in str(info.value) and "ProfilerAction" in str(info.value)
    assert not xpuprof.host.recorder.is_recording()
    with xpuprof.profile(activities=["cpu"]):  # nothing was left running
        pass


def test_device_stopped_from_a_schedule_is_refused():
    with pytest.raises(ValueError, match="DEVICE_STOPPED"):
        xpuprof.profile(activities=["cpu"], schedule=lambda s: P.ProfilerAction.DEVICE_STOPPED).start()


def test_a_bad_answer_later_fails_that_step_and_keeps_the_state():
    prof = xpuprof.profile(activities=["cpu"], schedule=lambda s: ProfilerAction.RECORD if s < 2 else "x")
    prof.start()
    prof.step()
    with pytest.raises(TypeError, match="step 2"):
        prof.step()
    assert prof.step_num == 1 and prof.current_action is ProfilerAction.RECORD
    prof.stop()
    assert prof.builder is not None


def test_tensorboard_trace_handler_writes_through_export_chrome_trace(tmp_path):
    step = _mlp()
    for python_export in (False, True):
        out = tmp_path / str(python_export)
        prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU], schedule=P.schedule(wait=0, warmup=1, active=1),
                               on_trace_ready=P.tensorboard_trace_handler(str(out), use_gzip=True,
                                                                         use_python_export=python_export))
        _loop(prof, 2, step)
        (name,) = os.listdir(out)
        assert name.startswith(f"{socket.gethostname()}_{os.getpid()}.") and name.endswith(".pt.trace.json.gz")
        import gzip
        data = json.loads(gzip.open(out / name).read())
        assert any(e.get("cat") == "cpu_op" for e in data["traceEvents"])


def test_every_keyword_of_torchs_profile_is_accepted():
    import inspect

    theirs = set(inspect.signature(P.profile.__init__).parameters) - {"self"}
    ours = set(inspect.signature(xpuprof.profile.__init__).parameters)
    assert theirs <= ours, theirs - ours


def test_torch_profile_kwargs_run_unchanged(tmp_path):
    observer = P.ExecutionTraceObserver().register_callback(str(tmp_path / "et.json"))
    ids = iter(["cycle-a", "cycle-b"])
    step = _mlp()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                               with_stack=True, with_flops=True, with_modules=True,
                               experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True),
                               execution_trace_observer=observer, acc_events=True, use_cuda=False,
                               custom_trace_id_callback=lambda: next(ids), post_processing_timeout_s=30.0,
                               schedule=P.schedule(wait=0, warmup=1, active=1, repeat=2))
        _loop(prof, 4, step)
    assert any("use_cuda" in str(w.message) for w in caught)  # torch's FutureWarning
    assert prof.get_trace_id() == "cycle-b"
    meta = prof.builder.metadata
    assert meta["trace_id"] == "cycle-b"
    for key in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
        assert meta[key] == 1, key
    assert meta["memory_events"]["events"] > 0
    assert (tmp_path / "et.json").stat().st_size > 0  # torch's observer ran for the active windows
    addmm = [e for e in prof.events() if e.name == "aten::addmm"]
    assert len(addmm) == 4 and all(e.flops > 0 for e in addmm)  # both cycles (acc_events), torch's FLOPs
    events = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())["traceEvents"]
    assert all(e["args"]["flops"] > 0 for e in events if e.get("name") == "aten::addmm")  # torch's arg, in the trace


def test_torch_experimental_config_is_read_by_field():
    from xpuprof.profiler.torch_compat import TORCH_EXPERIMENTAL_FIELDS, torch_experimental_fields

    cfg = torch._C._profiler._ExperimentalConfig(
        profiler_metrics=["GpuTime"], profiler_measure_per_kernel=True, verbose=True, performance_events=[],
        enable_cuda_sync_events=True, adjust_profiler_step=False, disable_external_correlation=True,
        profile_all_threads=True, capture_overload_names=True, record_python_gc_info=False,
        expose_kineto_event_metadata=True, custom_profiler_config="X=1", adjust_timestamps=False, trace_only=True)
    fields = torch_experimental_fields(cfg)
    assert [n for n, _ in TORCH_EXPERIMENTAL_FIELDS] == list(fields)
    assert fields["profiler_metrics"] == ["GpuTime"] and fields["custom_profiler_config"] == "X=1"
    prof = xpuprof.profile(activities=["cpu", "xpu"], backends=["sim"], experimental_config=cfg)
    c = prof.config
    assert c.experimental.profiler_metrics == ["GpuTime"] and c.experimental.profiler_measure_per_kernel
    assert xpuprof.ActivityType.EXTERNAL_CORRELATION not in c.activities
    assert xpuprof.ActivityType.CUDA_SYNC in c.activities
    assert c.custom["CUSTOM_CONFIG"] == "X=1"
    assert c.torch_experimental == {"verbose": True, "profile_all_threads": True, "capture_overload_names": True,
                                    "expose_kineto_event_metadata": True, "trace_only": True}


@pytest.mark.parametrize("field,value", [("performance_events", ["cycles"]), ("adjust_profiler_step", True),
                                         ("record_python_gc_info", True)])
def test_a_torch_experimental_field_xpuprof_cannot_honour_is_named(field, value):
    cfg = torch._C._profiler._ExperimentalConfig(**{field: value})
    with pytest.raises(ValueError) as info:
        xpuprof.profile(activities=["cpu"], experimental_config=cfg)
    assert field in str(info.value) and repr(value) in str(info.value)


def test_trace_only_refuses_events_as_torch_does():
    cfg = torch._C._profiler._ExperimentalConfig(trace_only=True)
    with xpuprof.profile(activities=["cpu"], experimental_config=cfg) as prof:
        torch.ones(4) * 2
    with pytest.raises(RuntimeError, match="trace_only"):
        prof.events()


def test_an_unknown_keyword_is_one_type_error_naming_it():
    with pytest.raises(TypeError, match="use_kineto"):
        xpuprof.profile(use_kineto=True)


def test_profiler_activity_filters_select_those_types():
    prof = xpuprof.profile(activities=[P.ProfilerActivity.CPU, {P.ProfilerActivity.CUDA: ["GPU_MEMCPY", "CUDA_RUNTIME"]}])
    acts = prof.config.activities
    assert xpuprof.ActivityType.GPU_MEMCPY in acts and xpuprof.ActivityType.RUNTIME in acts
    assert xpuprof.ActivityType.CONCURRENT_KERNEL not in acts and xpuprof.ActivityType.CPU_OP in acts


def test_metadata_methods(tmp_path):
    with xpuprof.profile(activities=["cpu"]) as prof:
        prof.add_metadata("owner", "team")
        prof.add_metadata_json("cfg", '{"lr": 0.1}')
        prof.preset_metadata_json("tag", "[1, 2]")
    data = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert data["owner"] == "team" and data["cfg"] == {"lr": 0.1} and data["tag"] == [1, 2]
    assert len(data["trace_id"]) == 32 and data["trace_id"] == prof.get_trace_id()
    with pytest.raises(ValueError, match="cfg2"):
        prof.add_metadata_json("cfg2", "{not json")


def test_distributed_info_from_torch_distributed(tmp_path, monkeypatch):
    import socket as s

    import torch.distributed as dist

    sock = s.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        with xpuprof.profile(activities=["cpu"]) as prof:
            pass
    finally:
        dist.destroy_process_group()
    info = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())["distributedInfo"]
    assert info["backend"] == "gloo" and info["rank"] == 0 and info["world_size"] == 1 and info["pg_count"] >= 1
    assert info["pg_config"][0]["pg_desc"] == "default_pg"
