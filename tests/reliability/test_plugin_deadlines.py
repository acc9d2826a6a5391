"""Deadlines that hold everywhere a plugin is called: a C plugin's ``destroy()`` at exit (a crashed
program still exits), and a call that returned only after its deadline because it held the
interpreter lock (it could not be abandoned) is reported in ``backend_errors`` with its duration."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the plugin tests' helpers

from plugintest_helpers import HERE as PLUGIN_TESTS, build_plugin, python_plugin, reset_plugins  # noqa: E402

import xpuprof  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 1.5
HOLD_S = 3.0

GIL_HOLDING_PY = '''
import ctypes
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof.plugins

_libc = ctypes.PyDLL(None)  # a PyDLL call keeps the interpreter lock for its whole duration


class _S(Session):
    def start(self): pass
    def stop(self): _libc.usleep({hold_us})
    def process(self, builder, window):
        builder.add_slice("gil_kernel", window.start_ns + 10, 100, "gilhold", 0, cat=ActivityType.CONCURRENT_KERNEL)


@xpuprof.plugins.register_backend
class _B(Backend):
    name = "gilhold"
    @classmethod
    def probe(cls): return ProbeResult.ok()
    @classmethod
    def supported_activities(cls): return frozenset({{ActivityType.CONCURRENT_KERNEL}})
    def configure(self, activity_types, config): return _S()
'''


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for key in ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "XPUPROF_DISABLE_BACKENDS", "KINETO_DISABLE_CUPTI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XPUPROF_PLUGIN_DEADLINE_S", str(DEADLINE_S))
    reset_plugins()
    yield
    reset_plugins()


def _plugin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    d.chmod(0o755)
    return d


@pytest.mark.slow
def test_a_stop_that_held_the_interpreter_lock_past_its_deadline_is_reported_with_its_duration(tmp_path):
    d = _plugin_dir(tmp_path)
    python_plugin(d, "gilhold.py", GIL_HOLDING_PY.format(hold_us=int(HOLD_S * 1e6)))
    with xpuprof.profile(activities=["cpu", "kernel"], config=xpuprof.ProfilerConfig(plugin_paths=[str(d)])) as prof:
        with xpuprof.record_function("user work"):
            pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    (late,) = [e for e in trace["backend_errors"]["gilhold"] if "past its" in e]
    assert "stop failed: returned after" in late and f"past its {DEADLINE_S:g} s deadline" in late
    took = float(late.split("returned after ", 1)[1].split(" s", 1)[0])
    assert took >= HOLD_S - 0.1
    assert any(e.get("name") == "gil_kernel" for e in trace["traceEvents"])  # it returned: its data is kept


@pytest.mark.slow
def test_a_c_plugin_whose_destroy_hangs_does_not_keep_a_crashed_program_from_exiting(tmp_path):
    d = _plugin_dir(tmp_path)
    build_plugin(PLUGIN_TESTS / "fault_plugin.c", d / "libhangdestroy.so", 'PLUGIN_NAME="hangdestroy"',
                 'FAULT_HANG="destroy"')
    program = textwrap.dedent(f"""
        import xpuprof
        prof = xpuprof.profile(activities=["cpu", "kernel"], config=xpuprof.ProfilerConfig(plugin_paths=[{str(d)!r}]))
        prof.start()
        assert "hangdestroy" in [name for name, _ in prof._recording.sessions], prof._recording.sessions
        raise RuntimeError("the training loop crashed")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "XPUPROF_PLUGIN_DEADLINE_S": str(DEADLINE_S)}
    try:
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the program did not exit: destroy() at exit has no deadline")
    assert done.returncode == 1 and "the training loop crashed" in done.stderr, done.stderr[-3000:]
    assert "destroy failed: did not return within the 1.5 s deadline" in done.stderr, done.stderr[-3000:]
