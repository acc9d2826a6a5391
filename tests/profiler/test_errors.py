import os

import pytest

from slice_tables import slice_table
import xpuprof
from xpuprof.backends.base import BackendError
from xpuprof.host import recorder


def test_unknown_activity_fails_before_anything_starts():
    with pytest.raises(ValueError) as err:
        xpuprof.profile(activities=["kernel", "kernal"])
    msg = str(err.value)
    assert "'kernal'" in msg and "did you mean 'kernel'" in msg and "Valid names" in msg and "cpu" in msg
    assert recorder.active_recorder() is None


def test_activities_accept_members_aliases_and_groups():
    prof = xpuprof.profile(activities=[xpuprof.ActivityType.CONCURRENT_KERNEL, "xpu_runtime", "CPU"])
    acts = prof.config.activities
    assert xpuprof.ActivityType.RUNTIME in acts and xpuprof.ActivityType.USER_ANNOTATION in acts


def test_empty_activities_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        xpuprof.profile(activities=[])


def test_unknown_backend_name_is_an_error():
    with pytest.raises(ValueError, match="unknown backend 'nope'.*sim"):
        xpuprof.profile(backends=["nope"])


def test_disabled_and_requested_backend_conflict():
    cfg = xpuprof.ProfilerConfig(backends=["sim"], disabled_backends=["sim"])
    prof = xpuprof.profile(config=cfg)
    with pytest.raises(BackendError, match="disabled_backends"):
        prof.start()
    assert recorder.active_recorder() is None


def test_sim_rejects_unknown_metric_at_start():
    prof = xpuprof.profile(backends=["sim"],
                           experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["NoSuchMetric"]))
    with pytest.raises(BackendError, match="NoSuchMetric.*Valid metrics: GpuTime"):
        prof.start()


def test_exception_inside_profile_still_writes_a_complete_trace(tmp_path, load_trace):
    with pytest.raises(ZeroDivisionError):
        with xpuprof.profile(backends=["sim"], on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w")):
            with xpuprof.record_function("before"):
                pass
            with xpuprof.record_function("failing"):
                1 / 0
    (name,) = os.listdir(tmp_path)
    data = load_trace(tmp_path / name)
    names = [e.get("name") for e in data["traceEvents"]]
    assert "before" in names and "failing" in names  # the range open at the raise is closed and kept
    assert names[-1] == "Record Window End"
    assert data["profiled_block_exception"].startswith("ZeroDivisionError")
    assert data["backend"] == "sim"


def test_export_before_any_trace_is_an_error(tmp_path):
    prof = xpuprof.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="no trace"):
        prof.export_chrome_trace(tmp_path / "x.json")
    with pytest.raises(RuntimeError, match="no trace"):
        prof.key_averages()


def test_failing_trace_ready_callback_does_not_leave_profiling_on():
    def boom(_):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with xpuprof.profile(activities=["cpu"], on_trace_ready=boom):
            pass


def test_failed_start_leaves_nothing_running():
    import sys
    def other_tool(frame, event, arg):
        return None

    cfg = xpuprof.ProfilerConfig(python_functions=True)
    prof = xpuprof.profile(activities=["cpu"], backends=["sim"], config=cfg)
    sys.setprofile(other_tool)
    try:
        with pytest.raises(RuntimeError, match="another profiler"):
            prof.start()
        assert sys.getprofile() is other_tool
    finally:
        sys.setprofile(None)
    assert recorder.active_recorder() is None
    prof.stop()  # a no-op after a failed start
    with prof:  # and the same profile can start again once the conflict is gone
        with xpuprof.record_function("ok"):
            pass
    assert "ok" in slice_table(prof.builder)["name"].tolist()
