"""XPUPROF_PLUGIN_DEADLINE_S=inf (or 1e300) made every healthy plugin fail with an
OverflowError (no wait accepts it), and =abc disabled every plugin as a "load failure" of its own.
Now the setting is read as one value: inf and anything larger than threading.TIMEOUT_MAX are capped
there (no practical limit; documented), and a value that is not a number of seconds > 0 is said once
(a warning naming it) and the default deadline used: profile(), ``xpuprof run`` and ``xpuprof devices``
run and write what they were asked for."""
from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the plugin tests' helpers

from plugintest_helpers import python_plugin, reset_plugins  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof.cli import main  # noqa: E402
from xpuprof.deadline import (DEFAULT_DEADLINE_S, ENV_DEADLINE, call_with_deadline,  # noqa: E402
                              default_deadline_s)
from xpuprof import diagnostics  # noqa: E402

HEALTHY_PY = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof.plugins


class _S(Session):
    def start(self): pass
    def stop(self): pass
    def process(self, builder, window):
        builder.add_slice("healthy_kernel", window.start_ns + 10, 100, "healthy", 0, cat=ActivityType.CONCURRENT_KERNEL)


@xpuprof.plugins.register_backend
class _B(Backend):
    name = "healthy"
    @classmethod
    def probe(cls):
        return ProbeResult.ok("a test plugin")
    @classmethod
    def supported_activities(cls):
        return frozenset({ActivityType.CONCURRENT_KERNEL})
    def configure(self, activity_types, config):
        return _S()
'''

BAD = ["abc", "0", "-3", "nan", "10s"]


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for key in ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", ENV_DEADLINE):
        monkeypatch.delenv(key, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def _plugin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(0o755)
    python_plugin(d, "healthy.py", HEALTHY_PY)
    return d


@pytest.mark.parametrize("value", ["inf", "1e300", "Infinity"])
def test_an_unbounded_deadline_is_capped_and_healthy_plugins_work(value, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_DEADLINE, value)
    assert default_deadline_s() == threading.TIMEOUT_MAX
    assert call_with_deadline(lambda: 42, what="a quick call") == 42
    d = _plugin_dir(tmp_path)
    with xpuprof.profile(activities=["cpu", "kernel"],
                         config=xpuprof.ProfilerConfig(plugin_paths=[str(d)])) as prof:
        with xpuprof.record_function("user work"):
            pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert trace["backends"] == ["healthy"] and "backend_errors" not in trace
    assert "plugin_load_errors" not in trace
    assert any(e.get("name") == "healthy_kernel" for e in trace["traceEvents"])


@pytest.fixture
def fresh_warnings(monkeypatch):
    diagnostics.forget("bad-setting")


@pytest.mark.parametrize("value", BAD)
def test_a_bad_deadline_is_one_warning_and_the_default(value, tmp_path, monkeypatch, caplog, fresh_warnings):
    monkeypatch.setenv(ENV_DEADLINE, value)
    caplog.set_level(logging.WARNING, logger="xpuprof")
    d = _plugin_dir(tmp_path)
    assert default_deadline_s() == DEFAULT_DEADLINE_S
    with xpuprof.profile(activities=["cpu", "kernel"], config=xpuprof.ProfilerConfig(plugin_paths=[str(d)])) as prof:
        with xpuprof.record_function("user work"):
            pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert trace["backends"] == ["healthy"] and "plugin_load_errors" not in trace
    assert any(e.get("name") == "user work" for e in trace["traceEvents"])
    said = [r.getMessage() for r in caplog.records if ENV_DEADLINE in r.getMessage()]
    assert said == [f"xpuprof: {ENV_DEADLINE}={value!r} is not a deadline (a number of seconds > 0, or inf for no "
                    f"practical limit); using the default {DEFAULT_DEADLINE_S:g} s"], said


@pytest.mark.parametrize("command", ["run", "devices"])
def test_a_bad_deadline_is_one_warning_from_the_cli_and_the_command_runs(command, tmp_path, monkeypatch, caplog,
                                                                         fresh_warnings):
    monkeypatch.setenv(ENV_DEADLINE, "abc")
    caplog.set_level(logging.WARNING, logger="xpuprof")
    marker = tmp_path / "workload-ran"
    (tmp_path / "markstep.py").write_text("def step(marker):\n    open(marker, 'w').close()\n")
    cfg = tmp_path / "w.yaml"
    cfg.write_text(f'name: w\nworkload: {{callable: "markstep:step", kwargs: {{marker: "{marker}"}}}}\n'
                   "warmup: 0\niterations: 1\nactivities: [user_annotation]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["run", str(cfg), "--out", str(tmp_path / "out"), "--no-progress"] if command == "run" else ["devices"]
    assert main(argv) == 0
    said = [r.getMessage() for r in caplog.records if ENV_DEADLINE in r.getMessage()]
    assert len(said) == 1 and "'abc' is not a deadline" in said[0], said
    if command == "run":
        assert marker.exists() and list((tmp_path / "out").glob("*.pt.trace.json"))
