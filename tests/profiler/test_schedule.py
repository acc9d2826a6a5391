import pytest

from slice_tables import slice_table
import xpuprof
from xpuprof import ProfilerAction as A


def actions(fn, n):
    return [fn(i) for i in range(n)]


def test_schedule_matches_torch_semantics():
    fn = xpuprof.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert actions(fn, 11) == [A.NONE,  # skip_first
                               A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                               A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                               A.NONE, A.NONE]  # repeat exhausted


def test_schedule_repeat_zero_cycles_forever():
    fn = xpuprof.schedule(wait=0, warmup=0, active=1)
    assert set(actions(fn, 50)) == {A.RECORD_AND_SAVE}


@pytest.mark.parametrize("kwargs, word", [
    (dict(wait=-1, warmup=0, active=1), "wait"),
    (dict(wait=0, warmup=0, active=0), "active"),
    (dict(wait=0, warmup=0, active=1, repeat=-2), "repeat"),
    (dict(wait=0, warmup=0, active=1, skip_first=1.5), "skip_first"),
])
def test_schedule_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        xpuprof.schedule(**kwargs)


def _step_names(builder):
    t = slice_table(builder, "user_annotation")
    return sorted(n for n in t["name"].tolist() if n.startswith("ProfilerStep#"))


def test_steps_drive_cycles_and_trace_ready():
    ready = []
    prof = xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=1, warmup=1, active=2, repeat=2),
                           on_trace_ready=lambda p: ready.append((p.step_num, _step_names(p.builder))))
    with prof:
        for _ in range(10):
            with xpuprof.record_function("work"):
                pass
            prof.step()
    # torch semantics: on_trace_ready at the end of each active cycle (after step 3 and step 7).
    assert ready == [(4, ["ProfilerStep#2", "ProfilerStep#3"]), (8, ["ProfilerStep#6", "ProfilerStep#7"])]


def test_ranges_outside_active_steps_are_not_recorded():
    seen = []
    prof = xpuprof.profile(activities=["user_annotation"], schedule=xpuprof.schedule(wait=2, warmup=0, active=1),
                           on_trace_ready=lambda p: seen.append(sorted(slice_table(p.builder)["name"].tolist())))
    with prof:
        for i in range(3):
            with xpuprof.record_function(f"step{i}"):
                pass
            prof.step()
    assert seen == [["ProfilerStep#2", "step2"]]


def test_stop_inside_active_cycle_still_delivers_trace():
    ready = []
    prof = xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=0, warmup=0, active=5),
                           on_trace_ready=ready.append)
    prof.start()
    with xpuprof.record_function("only"):
        pass
    prof.step()
    prof.stop()
    assert len(ready) == 1
    assert "only" in slice_table(prof.builder)["name"].tolist()


def test_without_schedule_everything_is_one_trace_and_no_step_ranges():
    ready = []
    with xpuprof.profile(activities=["cpu"], on_trace_ready=ready.append) as prof:
        for i in range(3):
            with xpuprof.record_function("r"):
                pass
            prof.step()
    assert len(ready) == 1
    names = slice_table(prof.builder)["name"].tolist()
    assert names.count("r") == 3 and not any(n.startswith("ProfilerStep") for n in names)


def test_step_before_start_and_double_start_are_errors():
    prof = xpuprof.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="before start"):
        prof.step()
    prof.start()
    with pytest.raises(RuntimeError, match="already started"):
        prof.start()
    prof.stop()
