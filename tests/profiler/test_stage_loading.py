"""The trace stages load on a thread of their own from profile.start(), and everything that needs them
waits for it: preparing a cycle, and a fork (no child may start with an import half-done)."""
from __future__ import annotations

import sys
import threading

import pytest

from xpuprof.profiler import stages


@pytest.fixture
def fresh_stages(monkeypatch):
    monkeypatch.setattr(stages, "_loaded", threading.Event())
    monkeypatch.setattr(stages, "_loader", None)
    monkeypatch.setattr(stages, "_failure", [])
    return stages


def test_preparing_waits_for_the_background_load(fresh_stages, monkeypatch):
    gate, order = threading.Event(), []

    def slow_import(name):
        gate.wait(10)
        order.append(name)
        return sys.modules.get(name)

    monkeypatch.setattr(stages.importlib, "import_module", slow_import)
    stages.start_loading()
    assert stages._loader is not None and stages._loader.is_alive()
    stages.start_loading()  # once per process
    threading.Timer(0, gate.set).start()
    stages.load_trace_stages()
    # the stages, then the C parts they use, through xpuprof._native's loader (the scanner torch's events are
    # read with, the layout pass's walks) where no earlier test imported them already
    stage_count = len(stages.TRACE_STAGE_MODULES)
    assert order[:stage_count] == list(stages.TRACE_STAGE_MODULES) and not stages._loader.is_alive()
    assert set(order[stage_count:]) <= {"xpuprof._native.tracescan", "xpuprof._native.lanes"}


def test_a_fork_waits_for_the_background_load(fresh_stages, monkeypatch):
    gate = threading.Event()
    monkeypatch.setattr(stages.importlib, "import_module", lambda name: gate.wait(10))
    stages.start_loading()
    threading.Timer(0, gate.set).start()
    stages._finish_before_fork()  # what os.fork runs first
    assert not stages._loader.is_alive() and stages._loaded.is_set()


def test_a_broken_stage_is_raised_to_the_profile_and_retried(fresh_stages, monkeypatch):
    calls = []

    def broken(name):
        calls.append(name)
        if name == "xpuprof.trace.read.scan":
            raise RuntimeError("scan module failed to initialize")

    monkeypatch.setattr(stages.importlib, "import_module", broken)
    stages.start_loading()
    with pytest.raises(RuntimeError, match="scan module failed"):
        stages.load_trace_stages()
    with pytest.raises(RuntimeError, match="scan module failed"):  # imported again, failing again
        stages.load_trace_stages()
    assert calls.count("xpuprof.trace.read.scan") == 2


CYCLE = """
import os, sys, tempfile
import xpuprof
with xpuprof.profile(activities=["cpu"]) as prof:
    for i in range(100):
        with xpuprof.record_function("step", {"i": i}):
            pass
prof.export_chrome_trace(os.path.join(tempfile.mkdtemp(), "t.json"))
print("numpy.ma" in sys.modules)
"""


def test_a_cycle_does_not_import_numpy_ma():
    """numpy 2's plain np.unique imports numpy.ma on its first call (40-120 ms of CPU): a cycle's stop, build
    and write ask for distinct values in a form that does not (host.distinct)."""
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CYCLE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_distinct_is_np_unique():
    import numpy as np

    from xpuprof.host.distinct import distinct

    rng = np.random.default_rng(5)
    for a in (rng.integers(-5, 50, 1000), np.zeros(0, np.int64), np.array([7]), rng.integers(0, 3, (4, 5))):
        assert np.array_equal(distinct(a), np.unique(a))


@pytest.mark.parametrize("wait, first", [(1, "select"), (0, "start_loading")])
def test_the_background_load_starts_after_the_selection_unless_the_first_step_records(monkeypatch, wait, first):
    """Begun before the backend selection, the loader's imports took the GIL each time the selection's file
    reads released it: ``profile.__enter__`` of the tutorial's schedule (wait=1) took 72 ms instead of 35.
    When the first step records, its stages are needed at once: the load starts first, beside the selection."""
    import xpuprof
    from xpuprof.profiler import api

    order = []
    select = api.profile._select
    monkeypatch.setattr(api, "start_loading", lambda: order.append("start_loading"))
    monkeypatch.setattr(api.profile, "_select", lambda self: (order.append("select"), select(self))[1])
    prof = xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=wait, warmup=0, active=1))
    with prof:
        assert order[0] == first and "start_loading" in order
