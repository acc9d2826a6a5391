"""KinetoConfig: Kineto's parse algorithm, value rules and keys; ProfilerConfig.from_kineto."""
import logging
import os
import time

import pytest

from xpuprof.activity import ActivityType, default_activity_types
from xpuprof.config import KinetoConfig, ProfilerConfig


def parsed(text, on_demand=False):
    kc = KinetoConfig()
    kc.set_on_demand(on_demand)
    assert kc.parse(text) is True
    return kc


def test_defaults():
    kc = KinetoConfig()
    assert kc.selected_activity_types == set(default_activity_types())
    assert kc.activities_duration_ms == 500 and kc.activities_iterations == 0
    assert kc.activities_warmup_iterations == 0 and kc.profile_start_time_ms == 0
    assert kc.request_trace_id == "" and kc.request_group_trace_id == ""
    assert kc.activities_log_file == f"/tmp/libkineto_activities_{os.getpid()}.json"
    assert kc.xpupti_profiler_metrics == [] and kc.xpupti_profiler_enable_per_kernel is False
    assert kc.xpupti_profiler_max_scopes == 0


def test_comments_blank_lines_and_trimming():
    kc = parsed("# header\n\n  \t\nACTIVITIES_DURATION_MSECS = 250 # trailing comment\n\tREQUEST_TRACE_ID=\tabc \n")
    assert kc.activities_duration_ms == 250 and kc.request_trace_id == "abc"


def test_carriage_return_is_not_whitespace():
    kc = KinetoConfig()
    assert kc.parse("ACTIVITIES_DURATION_MSECS=100\r\n") is False  # "100\r" is not an integer


def test_malformed_line_returns_false_with_earlier_lines_applied():
    kc = KinetoConfig()
    assert kc.parse("ACTIVITIES_ITERATIONS=3\nNOT A CONFIG LINE\nACTIVITIES_WARMUP_ITERATIONS=9") is False
    assert kc.activities_iterations == 3 and kc.activities_warmup_iterations == 0
    assert kc.profile_start_time_ms == 0  # validate did not run
    assert any("exactly one '='" in e for e in kc.errors)


def test_two_equals_is_malformed():
    assert KinetoConfig().parse("REQUEST_TRACE_ID=a=b") is False


@pytest.mark.parametrize("value", ["", "-1", "1.5", "abc", "12x", "2147483648"])
def test_bad_int32_values(value):
    kc = KinetoConfig()
    assert kc.parse(f"ACTIVITIES_DURATION_MSECS={value}") is False
    assert kc.activities_duration_ms == 500


def test_int_ranges():
    assert parsed("ACTIVITIES_DURATION_MSECS=2147483647").activities_duration_ms == 2147483647
    assert parsed("XPUPTI_PROFILER_MAX_SCOPES=9223372036854775807").xpupti_profiler_max_scopes == (1 << 63) - 1
    assert KinetoConfig().parse("XPUPTI_PROFILER_MAX_SCOPES=9223372036854775808") is False


@pytest.mark.parametrize("word,value", [("y", True), ("YES", True), ("t", True), ("True", True), ("1", True),
                                        ("n", False), ("No", False), ("f", False), ("FALSE", False), ("0", False)])
def test_bools(word, value):
    assert parsed(f"ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS={word}").activities_display_cuda_sync_wait_events is value


def test_bad_bool():
    assert KinetoConfig().parse("ACTIVITIES_ENABLED=maybe") is False


def test_activity_types_replace_set_with_aliases_case_insensitive():
    kc = parsed("ACTIVITY_TYPES = CUDA_Runtime, kernel,, xpu_scope_profiler")
    assert kc.selected_activity_types == {ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL,
                                          ActivityType.XPU_SCOPE_PROFILER}


def test_activity_types_empty_becomes_defaults_at_validate():
    assert parsed("ACTIVITY_TYPES=").selected_activity_types == set(default_activity_types())


def test_bad_activity_type_fails_parse():
    kc = KinetoConfig()
    assert kc.parse("ACTIVITY_TYPES=kernel,kernal") is False
    assert "kernel" in kc.errors[-1]


def test_unknown_keys_listed_and_warned(caplog):
    with caplog.at_level(logging.WARNING, logger="xpuprof.config.kineto"):
        kc = parsed("EVENTS=foo\nREQUEST_TIMESTAMP=5\nactivities_iterations=4")
    assert kc.unknown_keys == ["EVENTS", "REQUEST_TIMESTAMP", "activities_iterations"]  # keys are case-sensitive
    assert kc.activities_iterations == 0
    assert "Unrecognized config line" in caplog.text


def test_duration_secs_iterations_and_request_timestamp():
    kc = parsed("ACTIVITIES_DURATION_SECS=3")
    assert kc.activities_duration_ms == 3000 and kc.activities_on_demand_timestamp_ms is not None
    kc = parsed("ACTIVITIES_ITERATIONS=5\nPROFILE_START_ITERATION=10")
    assert kc.iteration_mode and kc.activities_on_demand_timestamp_ms is not None
    assert parsed("ACTIVITIES_WARMUP_ITERATIONS=2").activities_warmup_iterations == 2
    assert parsed("ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=2").activities_max_gpu_buffer_size == 2 << 20


def test_validate_fills_start_time_and_roundup():
    before = time.time_ns() // 1_000_000
    kc = parsed("ACTIVITIES_WARMUP_PERIOD_SECS=1\nPROFILE_START_ITERATION_ROUNDUP=0")
    assert before + 3000 <= kc.profile_start_time_ms <= before + 3000 + 5000
    assert kc.profile_start_iteration_roundup == -1
    kc = parsed("PROFILE_START_ITERATION_ROUNDUP=4")
    assert kc.profile_start_iteration == 0


def test_start_time_in_the_past_fails_and_future_kept():
    now = time.time_ns() // 1_000_000
    assert KinetoConfig().parse(f"PROFILE_START_TIME={now - 60_000}") is False
    assert parsed(f"PROFILE_START_TIME={now + 60_000}").profile_start_time_ms == now + 60_000


def test_trace_ids_and_xpu_keys():
    kc = parsed("REQUEST_TRACE_ID=t1\nREQUEST_GROUP_TRACE_ID=g1\n"
                "XPUPTI_PROFILER_METRICS = GpuTime, XVE_ACTIVE ,AvgGpuCoreFrequencyMHz\n"
                "XPUPTI_PROFILER_ENABLE_PER_KERNEL=true\nXPUPTI_PROFILER_MAX_SCOPES=314159")
    assert (kc.request_trace_id, kc.request_group_trace_id) == ("t1", "g1")
    assert kc.xpupti_profiler_metrics == ["GpuTime", "XVE_ACTIVE", "AvgGpuCoreFrequencyMHz"]
    assert kc.xpupti_profiler_enable_per_kernel and kc.xpupti_profiler_max_scopes == 314159


@pytest.mark.parametrize("per_kernel,expected", [("true", 1500), ("false", 10)])
def test_client_defaults_pick_max_scopes_only_when_unset(per_kernel, expected):
    kc = parsed(f"XPUPTI_PROFILER_METRICS=GpuTime\nXPUPTI_PROFILER_ENABLE_PER_KERNEL={per_kernel}")
    kc.set_client_defaults()
    assert kc.xpupti_profiler_max_scopes == expected and kc.log_to_memory
    kc = parsed("XPUPTI_PROFILER_METRICS=GpuTime\nXPUPTI_PROFILER_MAX_SCOPES=7")
    kc.set_client_defaults()
    assert kc.xpupti_profiler_max_scopes == 7
    kc = KinetoConfig()
    kc.set_client_defaults()
    assert kc.xpupti_profiler_max_scopes == 0  # no metrics: nothing to size


def test_on_demand_log_file_confined(monkeypatch):
    monkeypatch.delenv("KINETO_ONDEMAND_TRACE_DIR", raising=False)
    kc = parsed("ACTIVITIES_LOG_FILE=/tmp/run.json", on_demand=True)
    assert kc.activities_log_file == "/tmp/run.json"
    default = KinetoConfig().activities_log_file
    for bad in ("/etc/run.json", "/tmp/../etc/run.json", "/tmpx/run.json"):
        kc = parsed(f"ACTIVITIES_LOG_FILE={bad}", on_demand=True)  # ignored, parse still succeeds
        assert kc.activities_log_file == default
    monkeypatch.setenv("KINETO_ONDEMAND_TRACE_DIR", "/data/traces")
    assert parsed("ACTIVITIES_LOG_FILE=/data/traces/a.json", on_demand=True).activities_log_file == "/data/traces/a.json"
    assert parsed("ACTIVITIES_LOG_FILE=/data/tracesX/a.json", on_demand=True).activities_log_file == default
    assert parsed("ACTIVITIES_LOG_FILE=/etc/x.json").activities_log_file == "/etc/x.json"  # not on demand


def test_log_url_inserts_pid():
    pid = os.getpid()
    assert parsed("ACTIVITIES_LOG_FILE=/traces/run.json").activities_log_url == f"file:///traces/run_{pid}.json"
    kc = parsed("ACTIVITIES_LOG_FILE=/traces/run.pt.trace.json")
    assert kc.activities_log_url == f"file:///traces/run_{pid}.pt.trace.json"


def test_profiler_config_from_kineto():
    kc = parsed("ACTIVITY_TYPES=xpu_runtime,kernel,xpu_scope_profiler,python_function\n"
                "XPUPTI_PROFILER_METRICS=GpuTime\nXPUPTI_PROFILER_ENABLE_PER_KERNEL=1\n"
                "PROFILE_REPORT_INPUT_SHAPES=1\nPROFILE_WITH_STACK=1\nREQUEST_TRACE_ID=abc\nCUSTOM_CONFIG=opaque")
    pc = ProfilerConfig.from_kineto(kc)
    assert pc.activities == {ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL, ActivityType.XPU_SCOPE_PROFILER,
                             ActivityType.PYTHON_FUNCTION}
    assert pc.experimental.profiler_metrics == ["GpuTime"] and pc.experimental.profiler_measure_per_kernel
    assert pc.record_shapes and pc.with_stack and pc.python_functions and pc.trace_id == "abc"
    assert pc.custom == {"CUSTOM_CONFIG": "opaque"}


def test_custom_config_with_equals_is_malformed_like_kineto():
    assert KinetoConfig().parse("CUSTOM_CONFIG=a=b") is False


def test_from_kineto_text_and_errors():
    pc = ProfilerConfig.from_kineto("ACTIVITY_TYPES=cuda_driver\nACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=1")
    assert pc.activities == {ActivityType.DRIVER} and pc.max_gpu_buffer_bytes == 1 << 20
    assert not pc.python_functions
    with pytest.raises(ValueError, match="ACTIVITIES_ITERATIONS"):
        ProfilerConfig.from_kineto("ACTIVITIES_ITERATIONS=-3")
    with pytest.raises(TypeError):
        ProfilerConfig.from_kineto(42)


def test_request_trace_id_names_the_trace():
    """A Kineto config's REQUEST_TRACE_ID (what a daemon's request carries) is the trace's trace_id, as
    Kineto writes it; without one, each cycle gets torch's random id."""
    import xpuprof

    config = ProfilerConfig.from_kineto("ACTIVITY_TYPES=kernel\nREQUEST_TRACE_ID=12345\nREQUEST_GROUP_TRACE_ID=g1")
    config.backends = ["sim"]
    with xpuprof.profile(config=config) as prof:
        pass
    assert prof.builder.metadata["trace_id"] == "12345" and prof.builder.metadata["group_trace_id"] == "g1"
    assert prof.get_trace_id() == "12345"
    plain = ProfilerConfig.from_kineto("ACTIVITY_TYPES=kernel")
    plain.backends = ["sim"]
    with xpuprof.profile(config=plain) as prof:
        pass
    assert len(prof.builder.metadata["trace_id"]) == 32
