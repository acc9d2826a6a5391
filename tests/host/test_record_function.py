import threading

from pathlib import Path

from slice_tables import slice_table
import xpuprof
from xpuprof.host import recorder


def test_record_function_is_a_noop_when_not_profiling():
    with xpuprof.record_function("idle") as rf:
        assert rf.correlation_id == 0
    xpuprof.instant("ignored")
    assert xpuprof.current_correlation_id() == 0


def test_decorator_nesting_and_args():
    @xpuprof.record_function("decorated", {"k": "v"})
    def f(x):
        return x * 2

    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("outer"):
            assert f(21) == 42
    t = slice_table(prof.builder, "user_annotation")
    by_name = dict(zip(t["name"].tolist(), zip(t["ts"].tolist(), t["dur"].tolist())))
    o_ts, o_dur = by_name["outer"]
    d_ts, d_dur = by_name["decorated"]
    assert o_ts <= d_ts and d_ts + d_dur <= o_ts + o_dur


def test_correlation_ids_are_unique_and_visible_inside_a_range():
    with xpuprof.profile(backends=["sim"]):
        with xpuprof.record_function("a") as a:
            assert xpuprof.current_correlation_id() == a.correlation_id
            with xpuprof.record_function("b") as b:
                assert xpuprof.current_correlation_id() == b.correlation_id
            assert xpuprof.current_correlation_id() == a.correlation_id
    assert a.correlation_id != b.correlation_id and a.correlation_id > 0


def test_instants_and_threads(load_trace, tmp_path):
    def worker():
        with xpuprof.record_function("in-thread"):
            xpuprof.instant("mark", {"n": 1})

    with xpuprof.profile(activities=["cpu"]) as prof:
        t = threading.Thread(target=worker, name="bg")
        t.start()
        t.join()
    data = load_trace(prof.export_chrome_trace(tmp_path / "t.json"))
    ev = data["traceEvents"]
    (mark,) = [e for e in ev if e.get("name") == "mark"]
    assert mark["ph"] == "i" and mark["s"] == "t" and mark["cat"] == "cpu_instant_event" and mark["args"] == {"n": 1}
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[mark["tid"]] == f"thread {mark['tid']} (bg)"


def test_instant_rejects_bad_scope():
    import pytest
    with pytest.raises(ValueError, match="scope"):
        xpuprof.instant("x", scope="q")


def test_range_left_open_across_stop_ends_there_and_is_not_recorded_into_a_later_trace():
    prof = xpuprof.profile(activities=["cpu"])
    prof.start()
    rf = xpuprof.record_function("straddle")
    rf.__enter__()
    prof.stop()
    rf.__exit__(None, None, None)
    assert recorder.active_recorder() is None
    assert slice_table(prof.builder)["name"].tolist().count("straddle") == 1  # closed at stop ("truncated")
    assert prof.builder.metadata["truncated_ranges"]["count"] == 1
    with xpuprof.profile(activities=["cpu"]) as later:
        pass
    assert "straddle" not in slice_table(later.builder)["name"].tolist()


def test_python_function_tracing_is_opt_in():
    def leaf():
        return 1

    def parent():
        return leaf() + leaf()

    with xpuprof.profile(activities=["cpu"]) as prof:
        parent()
    assert "python_function" not in set(slice_table(prof.builder)["cat"].tolist())

    cfg = xpuprof.ProfilerConfig(python_functions=True)
    with xpuprof.profile(activities=["cpu"], config=cfg) as prof:
        parent()
    t = slice_table(prof.builder, "python_function")
    names = t["name"].tolist()
    assert sum(n.endswith(": test_python_function_tracing_is_opt_in.<locals>.leaf") for n in names) == 2
    assert sum(n.endswith(".<locals>.parent") for n in names) == 1
    # the profiler's own frames stay out (its package directory, wherever the checkout lives: a clone
    # folder named "xpuprof" holds the tests too, so a "/xpuprof/" substring test would be wrong)
    package_dir = str(Path(xpuprof.__file__).resolve().parent) + "/"
    assert not any(n.split("(")[0].startswith(package_dir) or f"({package_dir}" in n for n in names), names
    import sys
    assert sys.getprofile() is None


import pytest  # noqa: E402

BOTH_PATHS = [recorder.record_function, recorder.PurePythonRecordFunction]


@pytest.mark.parametrize("rf", BOTH_PATHS, ids=["default", "pure-python"])
def test_both_paths_record_the_same_rows(rf):
    @rf("deco")
    def f():
        return 7

    with xpuprof.profile(backends=["sim"]) as prof:
        with rf("outer", {"a": 1}) as outer:
            assert xpuprof.current_correlation_id() == outer.correlation_id
            assert f() == 7
    t = slice_table(prof.builder, "user_annotation")
    assert sorted(t["name"].tolist()) == ["deco", "outer"]
    kernels = slice_table(prof.builder, "kernel")
    assert len(kernels["name"]) == 1  # only the innermost range launches simulated work
    with rf("idle") as idle:
        pass
    assert idle.correlation_id == 0


def test_default_path_is_the_c_extension_when_built():
    import os
    import xpuprof._native as native
    built = any(name.startswith("hostrec.") and name.endswith((".so", ".pyd")) for name in os.listdir(native.__path__[0]))
    if os.environ.get("XPUPROF_PURE_PYTHON") == "1" or not built:
        pytest.skip("C fast path not built or disabled by XPUPROF_PURE_PYTHON=1")
    assert recorder.FAST_PATH and xpuprof.record_function.__name__ == "record_function"


def test_c_constructor_errors_are_clear():
    with pytest.raises(TypeError):
        xpuprof.record_function()
    with pytest.raises(TypeError):
        xpuprof.record_function("a", None, "extra")
    assert xpuprof.record_function(name="kw", args={"x": 1}).args == {"x": 1}


def test_columns_from_c_records_write_the_same_events_as_one_add_slice_per_range(tmp_path):
    """stop() reads the C records as columns; the events must be exactly those the
    per-range path (builder.add_slice with the original args) writes."""
    import json

    import numpy as np

    from xpuprof.activity import ActivityType
    from xpuprof.clock import MONOTONIC_TO_EPOCH_NS
    from xpuprof.trace.builder.builder import TraceBuilder
    from xpuprof.trace.write.chrome import write_chrome_trace

    calls = []  # (name, args) in exit order: the ranges below do not nest
    for i in range(300):
        name = [f"op{i % 7}", b"bytes-name", "caf\u00e9", "a\"quote"][i % 4]
        args = [None, {"i": i}, {}, {"x": 1.5, "s": "t\u00e9", 3: "int key"}, {"set": {1, 2}},
                {"nan": float("nan"), "arr": np.arange(3)}][i % 6]
        calls.append((name, args))

    with xpuprof.profile(activities=["cpu"]) as prof:
        rec = recorder.active_recorder()
        for name, args in calls:
            with xpuprof.record_function(name, args):
                pass
    rows = recorder.log_array(rec.ranges).tolist()
    assert len(rows) == len(calls)
    ref = TraceBuilder(pid=prof.builder.pid)
    for (t0, t1, tid, cid, _name_i, _arg_i), (name, args) in zip(rows, calls):
        ref.add_slice(name, t0 + MONOTONIC_TO_EPOCH_NS, t1 - t0, ref.pid, tid, ActivityType.USER_ANNOTATION,
                      args=args, external_id=cid)
    ref.flush()

    def annotations_of(builder, path):
        write_chrome_trace(builder, path)
        events = json.loads(path.read_text())["traceEvents"]
        return sorted((e for e in events if e.get("cat") == "user_annotation"), key=lambda e: json.dumps(e))

    got = annotations_of(prof.builder, tmp_path / "got.json")
    want = annotations_of(ref, tmp_path / "want.json")
    assert len(got) == len(calls)
    assert got == want


def test_a_stale_c_extension_is_refused_with_the_rebuild_command():
    """A hostrec built from the older source (Python row lists, no Int64Log) must not be used."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, types, warnings\n"
        "stale = types.ModuleType('xpuprof._native.hostrec')\n"
        "sys.modules['xpuprof._native.hostrec'] = stale\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    from xpuprof.host import recorder\n"
        "assert not recorder.FAST_PATH\n"
        "print([str(x.message) for x in w if 'out of date' in str(x.message)][0])\n"
        "import xpuprof\n"
        "with xpuprof.profile(activities=['cpu']) as prof:\n"
        "    with xpuprof.record_function('still recorded'):\n"
        "        pass\n"
        "b = prof.builder\n"
        "b.flush()\n"
        "assert [b.strings.strings[i] for s in b.slices for i in s.name.tolist()] == ['still recorded']\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "build_ext --inplace" in proc.stdout
