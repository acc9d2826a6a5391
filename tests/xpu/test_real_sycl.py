"""The real stack, no double: intel-pti 1.2.0 + the Level Zero loader and null driver in
../shared/level-zero + dpctl on the OpenCL CPU device (real SYCL/UR calls, real timestamps).

The usual user script must record runtime calls linked to its ranges, whatever the import
order xpuprof can control, and say so loudly (warning + trace metadata) where it cannot (SYCL already
initialized before PTI). Each order runs in a fresh process: PTI can abort, and load order is per process.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# ../shared/level-zero beside the checkout; XPUPROF_LEVEL_ZERO_DIR points elsewhere (e.g. from a git worktree).
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero") / "lib"
PREFIX_LIB = Path(sys.prefix) / "lib"


def _missing() -> str | None:
    if not (LEVEL_ZERO / "libze_loader.so.1").is_file():
        return f"the Level Zero loader + null driver are not at {LEVEL_ZERO} (a checkout without ../shared; set XPUPROF_LEVEL_ZERO_DIR to the folder holding lib/)"
    if not (PREFIX_LIB / "libpti_view.so").exists():
        return f"intel-pti is not installed in this environment ({PREFIX_LIB}/libpti_view.so)"
    if importlib.util.find_spec("dpctl") is None:
        return "dpctl is not installed (.ci/run installs the pinned SYCL-on-CPU stack: see its dpctl block)"
    if not (PREFIX_LIB / "libintelocl.so").exists():
        return f"the OpenCL CPU runtime (intel-opencl-rt) is not at {PREFIX_LIB}/libintelocl.so"
    return None


MISSING = _missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=f"real SYCL tier: {MISSING}")]

SCRIPT = textwrap.dedent("""
    import json, logging, sys, time
    order, out, idle_first = sys.argv[1], sys.argv[2], sys.argv[3] == "idle_first"
    if order in ("dpnp_imported_first", "dpnp_work_between"):
        import dpnp                  # the issue's usual user script: the array library imported first
    if order in ("sycl_imported_first", "sycl_initialized_first", "sycl_work_between"):
        import dpctl
        if order == "sycl_initialized_first":
            dpctl.get_devices()      # the SYCL runtime initializes here, before PTI
    import xpuprof
    from xpuprof.backends.xpu import early_load
    import dpctl, dpctl.memory
    import numpy as np
    if order == "sycl_work_between":  # SYCL initializes between `import xpuprof` and the first cycle
        q = dpctl.SyclQueue("opencl:cpu")
        dpctl.memory.MemoryUSMDevice(1 << 10, queue=q).copy_from_host(np.ones(1 << 10, dtype=np.uint8))
        q.wait()
    if order == "dpnp_work_between":  # a warm-up op before profiling
        a = dpnp.ones((64, 64), device="opencl:cpu")
        float((a @ a).sum())
    warnings = []
    class Collect(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())
    logging.getLogger("xpuprof").addHandler(Collect())
    cycles = []
    for cycle in range(2):
        t0 = time.time_ns()
        with xpuprof.profile(activities=["cpu", "xpu"]) as prof:   # no backend named: the real probe picks xpu
            with xpuprof.record_function(f"copy{cycle}"):
                if not (idle_first and cycle == 0):
                    q = dpctl.SyclQueue("opencl:cpu")
                    m = dpctl.memory.MemoryUSMDevice(1 << 20, queue=q)
                    m.copy_from_host(np.ones(1 << 18, dtype=np.float32).view(np.uint8))
                    q.wait()
        t1 = time.time_ns()
        path = prof.export_chrome_trace(f"{out}.{cycle}.json")
        cycles.append({"path": str(path), "t0": t0, "t1": t1})
    print(json.dumps({"warnings": warnings, "cycles": cycles, "early_load": early_load.status()}))
""")


def _run(order, tmp_path, idle_first=False):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, order, str(tmp_path / order),
                           "idle_first" if idle_first else "busy"], capture_output=True, text=True,
                          env=_stack_env(), timeout=240)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _stack_env():
    env = dict(os.environ, ZE_ENABLE_NULL_DRIVER="1", OCL_ICD_FILENAMES=str(PREFIX_LIB / "libintelocl.so"),
               LD_LIBRARY_PATH=f"{LEVEL_ZERO}{os.pathsep}{PREFIX_LIB}", PYTHONPATH=str(REPO))
    # PTI's view library sets the XPTI/UR variables in the environment of a process that loaded it (a pytest-xdist
    # worker that imported xpuprof): inherited, they would switch XPTI on before the script's own order ran
    for k in ("XPUPROF_PTI_LIBRARY", "XPUPROF_EARLY_PTI", "XPUPROF_DISABLE_BACKENDS", "XPTI_TRACE_ENABLE",
              "XPTI_FRAMEWORK_DISPATCHER", "XPTI_SUBSCRIBERS", "UR_ENABLE_LAYERS", "INTEL_LIBITTNOTIFY64"):
        env.pop(k, None)
    return env


def _events(path):
    return json.loads(Path(path).read_text())


NEEDS_DPNP = pytest.mark.skipif(importlib.util.find_spec("dpnp") is None,
                                reason="dpnp is not installed (pip install 'xpuprof[dpnp-cpu]')")


@pytest.mark.parametrize("order", ["xpuprof_first", "sycl_imported_first", "sycl_work_between",
                                   pytest.param("dpnp_imported_first", marks=NEEDS_DPNP),
                                   pytest.param("dpnp_work_between", marks=NEEDS_DPNP)])
def test_runtime_calls_recorded_and_linked_to_their_range(order, tmp_path):
    """*_work_between: the SYCL package imported first, then `import xpuprof`, then the first SYCL work
    before the first cycle: PTI's view library was loaded at import although SYCL was already mapped."""
    out = _run(order, tmp_path)
    assert not [w for w in out["warnings"] if "cannot be captured" in w]
    ids = []
    for cycle, info in enumerate(out["cycles"]):
        trace = _events(info["path"])
        assert trace["backends"] == ["xpu"] and "xpu_runtime_calls_missing" not in trace
        evs = trace["traceEvents"]
        (rng,) = [e for e in evs if e.get("ph") == "X" and e["name"] == f"copy{cycle}"]
        runtime = [e for e in evs if e.get("ph") == "X" and e["name"].startswith("ur")]
        driver = [e for e in evs if e.get("ph") == "X" and e["name"].startswith("ze")]
        assert runtime, f"cycle {cycle}: no ur* runtime calls recorded ({order})"
        assert driver, f"cycle {cycle}: no ze* driver calls recorded"
        base = trace["baseTimeNanoseconds"]
        for e in runtime:
            assert e["args"]["External id"] == rng["args"]["External id"]
            start = base + round(e["ts"] * 1000)
            assert info["t0"] <= start <= info["t1"], "runtime call outside the capture window"
            assert rng["ts"] <= e["ts"] <= rng["ts"] + rng["dur"]
            assert (e["pid"], e["tid"]) == (rng["pid"], rng["tid"]), "runtime call not on its calling thread"
        assert {e["name"] for e in runtime} >= {"urEnqueueUSMMemcpy"}
        ids.append(rng["args"]["External id"])
    assert ids[0] != ids[1]  # the two recording cycles stay separate
    assert out["early_load"].startswith("loaded at import: "), out["early_load"]


def test_sycl_initialized_before_pti_is_said_loudly(tmp_path):
    """Loading the view library after SYCL initialized is harmless (no crash; driver calls still come)
    but too late for runtime calls: one warning, and the metadata key in every trace."""
    out = _run("sycl_initialized_first", tmp_path)
    assert out["early_load"].startswith("loaded at import, after the SYCL runtime had initialized (")
    assert "libur_adapter_" in out["early_load"]
    said = [w for w in out["warnings"] if "cannot be captured" in w]
    assert len(said) == 1 and "`import xpuprof` before the first SYCL work" in said[0], said
    for info in out["cycles"]:
        trace = _events(info["path"])
        assert "cannot be captured" in trace["xpu_runtime_calls_missing"]
        slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        assert not [e for e in slices if e["name"].startswith("ur")]
        assert [e for e in slices if e["name"].startswith("ze")], "no ze* driver calls either"


@pytest.mark.parametrize("order", ["sycl_imported_first", pytest.param("dpnp_imported_first", marks=NEEDS_DPNP)])
def test_a_first_cycle_without_sycl_work_is_no_false_alarm(order, tmp_path):
    """SYCL mapped (package imported first), not initialized: a cycle that records no runtime call is
    not a lost one; the next cycle's SYCL work is recorded."""
    out = _run(order, tmp_path, idle_first=True)
    assert not [w for w in out["warnings"] if "cannot be captured" in w], out["warnings"]
    idle, busy = (_events(info["path"]) for info in out["cycles"])
    assert "xpu_runtime_calls_missing" not in idle and "xpu_runtime_calls_missing" not in busy
    assert not [e for e in idle["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ur")]
    assert [e for e in busy["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ur")]


SCHEDULE_SCRIPT = textwrap.dedent("""
    import json, sys
    import dpctl, dpctl.memory       # SYCL mapped before xpuprof, initialized by the first step's work
    import numpy as np
    import xpuprof
    out = sys.argv[1]
    paths = []
    def handler(prof):
        paths.append(str(prof.export_chrome_trace(f"{out}.{len(paths)}.json")))
    with xpuprof.profile(activities=["cpu", "xpu"], schedule=xpuprof.schedule(wait=1, warmup=1, active=1),
                         on_trace_ready=handler) as prof:
        for step in range(3):        # step 0 is the wait step: the first SYCL work of the process
            with xpuprof.record_function(f"step{step}"):
                q = dpctl.SyclQueue("opencl:cpu")
                m = dpctl.memory.MemoryUSMDevice(1 << 16, queue=q)
                m.copy_from_host(np.ones(1 << 16, dtype=np.uint8))
                q.wait()
            prof.step()
    print(json.dumps(paths))
""")


def test_a_schedule_whose_wait_step_starts_sycl_records_the_active_steps_runtime_calls(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCHEDULE_SCRIPT, str(tmp_path / "sched")], capture_output=True,
                          text=True, env=_stack_env(), timeout=240)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "cannot be captured" not in proc.stderr
    (path,) = json.loads(proc.stdout.strip().splitlines()[-1])
    trace = _events(path)
    assert "xpu_runtime_calls_missing" not in trace
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    (rng,) = [e for e in evs if e["name"] == "step2"]
    runtime = [e for e in evs if e["name"].startswith("ur")]
    assert {e["name"] for e in runtime} >= {"urEnqueueUSMMemcpy"}, "the active step recorded no runtime call"
    assert all(e["args"].get("External id") == rng["args"]["External id"] for e in runtime)


def _xpuprof_run(config: Path, out: Path):
    proc = subprocess.run([sys.executable, "-m", "xpuprof", "run", str(config), "--out", str(out)],
                          capture_output=True, text=True, env=_stack_env(), timeout=400, cwd=REPO)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return sorted(out.rglob("*.pt.trace.json"))  # a matrix writes one folder per point


def _assert_runtime_linked_to_iterations(trace):
    assert trace["backends"] == ["xpu"] and "xpu_runtime_calls_missing" not in trace
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ranges = {e["args"]["External id"]: e for e in evs if e.get("cat") == "user_annotation"}
    runtime = [e for e in evs if e["name"].startswith("ur")]
    assert runtime, "xpuprof run recorded no ur* runtime calls"
    for e in runtime:
        rng = ranges.get(e["args"].get("External id"))
        assert rng is not None, f"{e['name']} is not linked to an iteration range: {e['args']}"
        assert rng["ts"] <= e["ts"] and e["ts"] + e["dur"] <= rng["ts"] + rng["dur"] + 1, "outside its range"
    # every iteration range holds its own runtime calls
    assert {e["args"]["External id"] for e in runtime} == set(ranges)


def test_xpuprof_run_of_the_dpctl_config_links_runtime_calls_to_each_iteration(tmp_path):
    """configs/dpctl_cpu.yaml lists runtime+driver but not external_correlation: the External-id view
    must join by itself (Kineto does), or the ur* calls float unlinked."""
    (path,) = _xpuprof_run(REPO / "configs" / "dpctl_cpu.yaml", tmp_path / "out")
    _assert_runtime_linked_to_iterations(_events(path))


@pytest.mark.skipif(importlib.util.find_spec("dpnp") is None,
                    reason="dpnp is not installed (pip install 'xpuprof[dpnp-cpu]', ~830 MB); "
                           "configs/dpctl_cpu.yaml covers xpuprof run of SYCL without it")
def test_xpuprof_run_of_the_dpnp_config_profiles_the_device_side(tmp_path):
    paths = _xpuprof_run(REPO / "configs" / "dpnp_cpu.yaml", tmp_path / "out")
    assert len(paths) == 2  # the n matrix
    for path in paths:
        _assert_runtime_linked_to_iterations(_events(path))


def test_runtime_calls_sit_on_the_calling_thread(tmp_path):
    # intel-pti 1.2.0 writes _thread_id 0 in its RUNTIME_API (ur*) records (ze* driver records carry
    # the real thread): each call inside a range takes the thread that pushed its External id.
    out = _run("xpuprof_first", tmp_path)
    trace = _events(out["cycles"][0]["path"])
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    (rng,) = [e for e in evs if e["name"] == "copy0"]
    assert {e["tid"] for e in evs if e["name"].startswith("ur")} == {rng["tid"]}


CAPTURE_SCRIPT = textwrap.dedent("""
    import sys
    import xpuprof
    import dpctl, dpctl.memory
    import numpy as np
    out, raw = sys.argv[1:3]
    from xpuprof.config.options import ProfilerConfig
    with xpuprof.profile(activities=["cpu", "xpu"], config=ProfilerConfig(raw_capture_path=raw)) as prof:
        with xpuprof.record_function("copy"):
            q = dpctl.SyclQueue("opencl:cpu")
            m = dpctl.memory.MemoryUSMDevice(1 << 16, queue=q)
            m.copy_from_host(np.ones(1 << 16, dtype=np.uint8))
            q.wait()
    prof.export_chrome_trace(out)
""")


def _api_slices(trace):
    return sorted((e["name"], e["ts"], e["dur"], e["pid"], e["tid"], e["args"].get("External id"))
                  for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith(("ur", "ze")))


def test_raw_capture_replays_to_the_same_runtime_and_driver_slices(tmp_path):
    live, raw, replayed = tmp_path / "live.json", tmp_path / "run.ptiraw", tmp_path / "replayed.json"
    proc = subprocess.run([sys.executable, "-c", CAPTURE_SCRIPT, str(live), str(raw)], capture_output=True,
                          text=True, env=_stack_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # replay needs neither PTI nor Level Zero: a plain environment
    proc = subprocess.run([sys.executable, "-m", "xpuprof", "replay", str(raw), "-o", str(replayed)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _api_slices(_events(live))
    assert [s for s in want if s[0].startswith("ur")] and [s for s in want if s[0].startswith("ze")]
    assert _api_slices(_events(replayed)) == want


METRICS_SCRIPT = textwrap.dedent("""
    import sys, dpctl, xpuprof
    try:
        with xpuprof.profile(activities=["cpu", "xpu"],
                             experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=[sys.argv[1]])):
            dpctl.SyclQueue("opencl:cpu").wait()
    except Exception as exc:
        print(type(exc).__name__, repr(str(exc)))
    else:
        print("no error")
""")


@pytest.mark.parametrize("metrics_env,metric", [("1", "GpuTime"), (None, "GpuTime"), ("1", "Null Metric")])
def test_a_metrics_request_on_the_null_device_fails_clearly(metrics_env, metric):
    """It said "unknown metric name(s) on Null Device" for GpuTime and PTI's METRIC_NOT_FOUND for the
    null driver's own 'Null Metric': now that the null device cannot collect metrics at all."""
    env = _stack_env()
    env.pop("ZET_ENABLE_METRICS", None)
    if metrics_env:
        env["ZET_ENABLE_METRICS"] = metrics_env
    proc = subprocess.run([sys.executable, "-c", METRICS_SCRIPT, metric], capture_output=True, text=True, env=env,
                          timeout=240)
    assert proc.returncode == 0, f"PTI took the process down (status {proc.returncode}): {proc.stderr[-2000:]}"
    said = proc.stdout.strip().splitlines()[-1]
    assert said.startswith("MetricsScopeError") and f"per-kernel metrics {metric!r} cannot be collected" in said, said
    assert "the Level Zero null driver's test device" in said and "cannot collect metrics" in said, said


def test_the_trace_and_the_metrics_collector_say_the_null_device_is_a_test_device(tmp_path):
    out = _run("xpuprof_first", tmp_path)
    trace = _events(out["cycles"][0]["path"])
    (props,) = trace["deviceProperties"]
    assert props["name"] == "Null Device" and "null driver's test device" in props["note"]
    assert trace["xpu_test_device"].startswith("device 0: the Level Zero null driver's test device")
    probe = subprocess.run([sys.executable, "-m", "xpuprof", "devices", "--json"], capture_output=True, text=True,
                           env=_stack_env(), timeout=240)
    assert probe.returncode == 0, probe.stderr[-2000:]
    (row,) = [r for r in json.loads(probe.stdout) if r["backend"] == "collector xpu_metrics"]
    assert row["available"] is False, row  # it said "yes - 2 metrics-capable device(s)"
    assert "null driver's test device" in row["reason"] and "cannot collect metrics" in row["reason"], row


METRICS_AFTER_LEVEL_ZERO_SCRIPT = textwrap.dedent("""
    import sys, xpuprof
    if sys.argv[1] == "own_session":
        with xpuprof.profile(activities=["cpu", "xpu"]):    # xpuprof's own session initializes Level Zero
            pass
    else:
        import dpctl
        dpctl.get_devices()                                # SYCL initializes Level Zero (its adapter)
    try:
        with xpuprof.profile(activities=["cpu", "xpu"],
                             experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime"])):
            pass
    except Exception as exc:
        print(type(exc).__name__, str(exc))
    else:
        print("no error")
""")


@pytest.mark.parametrize("first", ["own_session", "sycl"])
def test_metrics_after_level_zero_initialized_name_who_initialized_it(first):
    env = _stack_env()
    env.pop("ZET_ENABLE_METRICS", None)
    proc = subprocess.run([sys.executable, "-c", METRICS_AFTER_LEVEL_ZERO_SCRIPT, first], capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout.strip().splitlines()[-1]
    assert said.startswith("MetricsScopeError") and "ZET_ENABLE_METRICS=1 python train.py" in said, said
    if first == "own_session":
        assert "xpuprof's own earlier XPU session in this process initialized it" in said, said
    else:
        assert "the SYCL runtime initialized it (libur_adapter_level_zero" in said, said


PYTEST_USER_SUITE = textwrap.dedent("""
    import json, os
    import dpctl, dpctl.memory          # the suite's own imports, at collection
    import numpy as np
    import pytest

    QUEUE = dpctl.SyclQueue("opencl:cpu")   # SYCL initializes at collection, after the plugin loaded

    @pytest.mark.xpuprof(activities=["cpu", "xpu"])
    def test_copy(xpuprof_trace):
        import xpuprof
        with xpuprof.record_function("copy"):
            m = dpctl.memory.MemoryUSMDevice(1 << 16, queue=QUEUE)
            m.copy_from_host(np.ones(1 << 16, dtype=np.uint8))
            QUEUE.wait()
        xpuprof_trace.stop()
        with open(os.environ["TRACE_OUT"], "w") as f:
            f.write(str(xpuprof_trace.path))
""")


def test_the_pytest_plugin_loads_pti_before_a_suite_starts_sycl(tmp_path):
    """The pytest plugin loads early, so a suite that imports dpctl and makes a queue at
    collection still gets its runtime calls (pytest autoloads the plugin through its entry point)."""
    (tmp_path / "test_suite.py").write_text(PYTEST_USER_SUITE)
    env = dict(_stack_env(), TRACE_OUT=str(tmp_path / "trace_path.txt"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"],
                          capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trace = _events((tmp_path / "trace_path.txt").read_text().strip())
    assert trace["backends"] == ["xpu"] and "xpu_runtime_calls_missing" not in trace
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    (rng,) = [e for e in evs if e["name"] == "copy"]
    runtime = [e for e in evs if e["name"].startswith("ur")]
    assert {e["name"] for e in runtime} >= {"urEnqueueUSMMemcpy"}
    assert all(e["args"].get("External id") == rng["args"]["External id"] for e in runtime)
