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
    assert order == list(stages.TRACE_STAGE_MODULES) and not stages._loader.is_alive()


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


def test_numpy_ma_is_a_stage():
    """numpy 2's np.unique imports numpy.ma on its first call: 10-25 ms inside the first cycle's stop."""
    assert "numpy.ma" in stages.TRACE_STAGE_MODULES
