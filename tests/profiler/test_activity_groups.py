"""Torch-style device groups, and metrics requests that select metric collection."""
from __future__ import annotations

import pytest

import xpuprof
from xpuprof import diagnostics
from xpuprof.activity import ActivityType, default_activity_types
from xpuprof.backends.base import BackendError
from xpuprof.config.options import ExperimentalConfig
from xpuprof.profiler import DEVICE_GROUP, METRIC_ACTIVITIES

A = ActivityType


@pytest.mark.parametrize("group", ["xpu", "gpu", "cuda", "XPU"])
def test_device_group_is_torchs_without_metric_collection(group):
    prof = xpuprof.profile(activities=["cpu", group])
    acts = prof.config.activities
    for wanted in (A.CONCURRENT_KERNEL, A.GPU_MEMCPY, A.GPU_MEMSET, A.RUNTIME,
                   A.DRIVER, A.XPU_SYNC, A.EXTERNAL_CORRELATION, A.CPU_OP, A.USER_ANNOTATION):
        assert wanted in acts, wanted
    assert not acts & METRIC_ACTIVITIES  # the scope profiler / PM counters join only with metric names


def test_torch_profiler_activity_enum_is_accepted_like_the_group_name():
    class ProfilerActivity:  # torch.profiler.ProfilerActivity's shape (an enum with .name)
        def __init__(self, name):
            self.name = name

    prof = xpuprof.profile(activities=[ProfilerActivity("CPU"), ProfilerActivity("XPU")])
    assert prof.config.activities & METRIC_ACTIVITIES == frozenset()
    assert A.CONCURRENT_KERNEL in prof.config.activities


def test_defaults_switch_no_counter_collection_on():
    prof = xpuprof.profile()
    assert prof.config.activities == default_activity_types()
    assert not prof.config.activities & METRIC_ACTIVITIES


@pytest.mark.parametrize("activities", [None, ["cpu", "xpu"], ["cpu", "kernel", "runtime"]])
def test_metric_names_with_device_work_select_metric_collection(activities):
    prof = xpuprof.profile(activities=activities,
                           experimental_config=ExperimentalConfig(profiler_metrics=["GpuTime"]))
    assert A.XPU_SCOPE_PROFILER in prof.config.activities
    assert A.GPU_PM_COUNTER in prof.config.activities


def test_metrics_without_device_work_keep_activities_as_asked():
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=["cpu_utilization"]))  # a host collector's name: no device session needed
    assert not prof.config.activities & METRIC_ACTIVITIES


def test_the_sim_collects_metrics_with_the_default_activities(tmp_path):
    with xpuprof.profile(backends=["sim"], experimental_config=ExperimentalConfig(
            profiler_metrics=["GpuTime"])) as prof:
        with xpuprof.record_function("work"):
            pass
    trace = prof.builder
    path = prof.export_chrome_trace(tmp_path / "t.json")
    import orjson
    events = orjson.loads(path.read_bytes())["traceEvents"]
    assert any(e.get("ph") == "C" and "GpuTime" in (e.get("args") or {}) for e in events), \
        "metrics asked for with default activities were silently dropped"
    assert trace is not None


def test_metrics_that_nothing_can_collect_are_one_clear_error(monkeypatch):
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "xpu,cuda,rocm")
    prof = xpuprof.profile(activities=["cpu", "xpu"],
                           experimental_config=ExperimentalConfig(profiler_metrics=["GpuTime"]))
    with pytest.raises(BackendError, match=r"'GpuTime' were requested but nothing can collect them"):
        prof.start()
    assert not prof._started


def test_device_work_asked_for_but_no_backend_is_said_once_and_recorded(monkeypatch, caplog):
    """Host activity only, because no device backend can run, is never silent."""
    from xpuprof import profiler

    if profiler.select_backends(xpuprof.ProfilerConfig(activities=["cpu_op", "kernel"])):
        pytest.skip("a device backend runs on this machine")
    diagnostics.reset()  # warned once per process: an earlier test may have said it
    metas = []
    with caplog.at_level("WARNING", logger="xpuprof"):
        for _ in range(2):
            with xpuprof.profile(activities=["cpu", "xpu"]) as prof:
                with xpuprof.record_function("r"):
                    pass
            metas.append(prof.builder.metadata.get("device_backends_unavailable"))
    said = [r for r in caplog.records if "no device backend can run here" in r.getMessage()]
    assert len(said) == 1 and "xpu:" in said[0].getMessage()
    assert all(m and "xpu" in m for m in metas)


def _as_profile_expands(words):
    return xpuprof.profile(activities=words).config.activities


@pytest.mark.parametrize("words", [["cpu", "xpu"], ["cpu", "gpu"], ["CPU", "cuda", "rocm"], ["cpu", "xpu", "runtime"]])
def test_group_names_are_accepted_wherever_activity_lists_are_parsed(words):
    """ProfilerConfig, YAML configs of `xpuprof run` and Kineto config files rejected the group names
    profile() accepted ("unknown activity types ['cpu', 'xpu']"); all expand them the same way now."""
    from xpuprof.activity import parse_activity_types
    from xpuprof.config.kineto import KinetoConfig
    from xpuprof.config.yamlconfig import parse_config
    from xpuprof.workloads import run_names

    expected = _as_profile_expands(words)
    assert parse_activity_types(words) == expected
    assert xpuprof.ProfilerConfig(activities=words).activities == expected
    assert xpuprof.ProfilerConfig(activities=",".join(words)).activities == expected
    yaml = f"workload: {{builtin: gemm}}\nactivities: [{', '.join(words)}]\n"
    (point,) = parse_config(yaml, "bench.yaml", names=run_names()).points
    assert point.profiler_config().activities == expected
    kineto = KinetoConfig()
    assert kineto.parse(f"ACTIVITY_TYPES={','.join(words)}") is not False
    assert kineto.selected_activity_types == set(expected)


def test_a_bad_word_next_to_group_names_names_the_groups_too():
    with pytest.raises(ValueError) as info:
        xpuprof.ProfilerConfig(activities=["cpu", "xpuu"])
    msg = str(info.value)
    assert "unknown activity type 'xpuu'; did you mean 'xpu'?" in msg and "Group names: cpu, gpu, xpu" in msg
