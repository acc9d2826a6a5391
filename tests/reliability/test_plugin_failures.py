"""Plugin and backend failures are never silent: a named plugin backend whose
supported_activities() raises, load-time failures (import error, world-writable or missing
directory, C probe/create errors), and ``xpuprof devices`` lists plugins that failed to load. Every
failure that changes what the trace holds is in the trace (backend_errors, plugin_load_errors) and logged
once. Also the crashing-plugin cases of the standing suite: a plugin raising in each phase never
costs the trace."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the plugin tests' helpers

from plugintest_helpers import HERE as PLUGIN_TESTS, build_plugin, python_plugin, reset_plugins  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof.cli import main as cli_main  # noqa: E402

pytestmark = pytest.mark.slow

RAISING_PY = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof.plugins

FAIL = {phase!r}


def fail(phase):
    if phase == FAIL:
        raise RuntimeError(f"injected failure in {{phase}}")


fail("load")


class _S(Session):
    def start(self): fail("start")
    def stop(self): fail("stop")
    def process(self, builder, window):
        builder.add_slice("crashpy_kernel", window.start_ns + 10, 100, "crashpy", 0, cat=ActivityType.CONCURRENT_KERNEL)
        fail("process")


@xpuprof.plugins.register_backend
class _B(Backend):
    name = "crashpy"
    @classmethod
    def probe(cls):
        fail("probe")
        return ProbeResult.ok("a test plugin")
    @classmethod
    def supported_activities(cls):
        fail("supported_activities")
        return frozenset({{ActivityType.CONCURRENT_KERNEL}})
    def configure(self, activity_types, config):
        fail("configure")
        return _S()
'''


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for key in ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "XPUPROF_DISABLE_BACKENDS", "KINETO_DISABLE_CUPTI"):
        monkeypatch.delenv(key, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def _plugin_dir(tmp_path: Path, mode: int = 0o755) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(mode)
    return d


def _profile(tmp_path: Path, plugin_dir: Path, backends=None) -> dict:
    with xpuprof.profile(activities=["cpu", "kernel"], backends=backends,
                         config=xpuprof.ProfilerConfig(plugin_paths=[str(plugin_dir)])) as prof:
        with xpuprof.record_function("user work"):
            pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert any(e.get("name") == "user work" for e in trace["traceEvents"])
    return trace


def test_a_named_backend_whose_supported_activities_raises_is_in_backend_errors(tmp_path):
    d = _plugin_dir(tmp_path)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase="supported_activities"))
    trace = _profile(tmp_path, d, backends=["crashpy"])
    assert trace["backends"] == []
    errors = trace["backend_errors"]["crashpy"]
    assert any("supported_activities failed: RuntimeError: injected failure in supported_activities" in e
               for e in errors), errors
    # the fault says why it took no part: one entry, not a second "took no part" line for the same failure
    assert len(errors) == 1, errors


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("xpuprof")]


# A named backend whose probe fails is refused at start (one error, no trace): probe is tried unnamed only.
@pytest.mark.parametrize("phase,named", [(phase, named) for phase in ("probe", "supported_activities", "configure",
                                                                     "start", "stop", "process")
                                         for named in (False, True) if not (named and phase == "probe")],
                         ids=lambda v: ("named" if v else "auto") if isinstance(v, bool) else v)
def test_a_plugin_failure_is_logged_exactly_once(phase, named, tmp_path, caplog):
    """Each failure was logged twice (plugins.faults, then the profiler's "xpuprof: backend crashpy: ..."),
    and a named plugin whose supported_activities raised printed 3-4 lines. One line per failure per
    process, however many traces it touches (each trace still lists it in backend_errors)."""
    d = _plugin_dir(tmp_path)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase=phase))
    with caplog.at_level(logging.WARNING):
        traces = [_profile(tmp_path, d, backends=["crashpy"] if named else None) for _ in range(2)]
    for trace in traces:
        assert any(f"injected failure in {phase}" in e for e in trace["backend_errors"]["crashpy"]), trace
    lines = [ln for ln in _warnings(caplog) if f"injected failure in {phase}" in ln]
    assert len(lines) == 1 and f"{phase} failed: RuntimeError: injected failure in {phase}" in lines[0], \
        _warnings(caplog)
    # and nothing else about this plugin but its one line (no "took no part", no "backend crashpy:")
    assert not [ln for ln in _warnings(caplog) if "crashpy" in ln and ln not in lines and "see backend_errors" not in ln]


@pytest.mark.parametrize("stage,where", [("probe", "probe"), ("create", "configure"), ("process", "process")])
def test_a_c_plugin_failure_is_logged_exactly_once(stage, where, tmp_path, caplog):
    d = _plugin_dir(tmp_path)
    build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / f"libcf_{stage}.so", 'PLUGIN_NAME="cfail"',
                 f'FAULT_STAGE="{stage}"')
    with caplog.at_level(logging.WARNING):
        _profile(tmp_path, d)
        _profile(tmp_path, d)
    lines = [ln for ln in _warnings(caplog) if f"injected failure in {stage}" in ln]
    assert len(lines) == 1 and f"{where} failed" in lines[0], _warnings(caplog)


@pytest.mark.parametrize("phase", ["probe", "supported_activities", "configure", "start", "stop", "process"])
def test_a_crashing_python_plugin_in_any_phase_is_in_the_trace(phase, tmp_path):
    d = _plugin_dir(tmp_path)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase=phase))
    trace = _profile(tmp_path, d)  # chosen automatically: nothing named, so a failure must not raise
    errors = trace["backend_errors"]["crashpy"]
    assert any(f"{phase} failed: RuntimeError: injected failure in {phase}" in e for e in errors), errors
    kernels = [e for e in trace["traceEvents"] if e.get("name") == "crashpy_kernel"]
    assert bool(kernels) == (phase == "process")  # events written before a process error stay


def test_an_import_error_is_in_the_trace_and_logged_once(tmp_path, caplog):
    d = _plugin_dir(tmp_path)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase="load"))
    with caplog.at_level(logging.WARNING):
        first = _profile(tmp_path, d)
        second = _profile(tmp_path, d)
    for trace in (first, second):
        (origin, reason), = trace["plugin_load_errors"].items()
        assert origin == f"python plugin {d / 'crashpy.py'}"
        assert reason.startswith("RuntimeError: injected failure in load")
    logged = [r for r in caplog.records if "injected failure in load" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in logged]


def test_a_world_writable_directory_is_in_the_trace(tmp_path):
    d = _plugin_dir(tmp_path, 0o777)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase="none"))
    trace = _profile(tmp_path, d)
    (origin, reason), = trace["plugin_load_errors"].items()
    assert origin == f"plugin directory {d}"
    assert reason.startswith(f"refused: directory {d} is writable by group and others (mode 0777)")
    assert "crashpy" not in trace["backends"]


def test_a_missing_directory_is_in_the_trace(tmp_path):
    missing = tmp_path / "no-such-dir"
    trace = _profile(tmp_path, missing)
    (origin, reason), = trace["plugin_load_errors"].items()
    assert origin == f"plugin directory {missing}" and reason.startswith("cannot read the directory")


@pytest.mark.parametrize("stage,where", [("probe", "probe"), ("create", "configure"), ("start", "start"),
                                         ("stop", "stop"), ("process", "process")])
def test_c_plugin_errors_in_each_phase_are_in_the_trace(stage, where, tmp_path):
    d = _plugin_dir(tmp_path)
    build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / f"libcf_{stage}.so", 'PLUGIN_NAME="cfail"',
                 f'FAULT_STAGE="{stage}"')
    trace = _profile(tmp_path, d)
    errors = trace["backend_errors"]["cfail"]
    assert any(f"{where} failed" in e and f"injected failure in {stage}" in e for e in errors), errors
    assert ("cfail" in trace["backends"]) == (stage in ("start", "stop", "process"))
    kernels = [e for e in trace["traceEvents"] if e.get("name") == "gemm_kernel"]
    assert bool(kernels) == (stage == "process")  # what it wrote before failing in process is kept


def test_a_c_load_error_is_in_the_trace(tmp_path):
    d = _plugin_dir(tmp_path)
    so = build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / "libabi.so", 'PLUGIN_NAME="cabi"', "FAULT_ABI_VERSION=99")
    trace = _profile(tmp_path, d)
    assert trace["plugin_load_errors"] == {
        f"C plugin {so}": "plugin ABI version 99 is not supported; this xpuprof implements XPUPROF_PLUGIN_ABI_VERSION 1"}


def test_xpuprof_devices_lists_plugins_that_failed_to_load(tmp_path, monkeypatch, capsys):
    d = _plugin_dir(tmp_path)
    python_plugin(d, "crashpy.py", RAISING_PY.format(phase="load"))
    so = build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / "libnosym.so", "FAULT_NO_SYMBOL")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(d))
    monkeypatch.setenv("COLUMNS", "400")  # rich folds long cells at the terminal width
    assert cli_main(["devices", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    py = rows[f"python plugin {d / 'crashpy.py'}"]
    assert py["available"] is False and "failed to load: RuntimeError: injected failure in load" in py["reason"]
    c = rows[f"C plugin {so}"]
    assert c["available"] is False and "missing symbol 'xpuprof_plugin_register'" in c["reason"]
    assert cli_main(["devices"]) == 0  # the table shows them too
    table = capsys.readouterr().out
    assert "crashpy.py" in table and "libnosym.so" in table
