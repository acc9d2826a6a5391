"""Helpers for the plugin tests: compiling C plugins with the system compiler, a full profile run
driven straight through backend sessions, and trace checks."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import xpuprof
from xpuprof import diagnostics
from xpuprof.activity import ActivityType, default_activity_types
from xpuprof.backends import registry as core
from xpuprof.backends.base import ProcessWindow
from xpuprof.clock import now_ns
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import loader
from xpuprof.plugins import registry as plugin_registry
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

HERE = Path(__file__).parent
REPO = HERE.parent.parent
INCLUDE = Path(xpuprof.__file__).parent / "include"
EXAMPLES = REPO / "examples" / "plugins"
ENV_KEYS = ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "XPUPROF_DISABLE_BACKENDS", "KINETO_DISABLE_CUPTI")


def reset_plugins() -> None:
    plugin_registry.reset()
    loader.reset()
    diagnostics.reset()


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc/gcc) on PATH: the C plugin tests build plugins with the system compiler")
    return cc


def build_plugin(source: Path, out: Path, *defines: str) -> Path:
    """Compile a plugin source into a shared library (mode 0o755 in a private directory)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [compiler(), "-shared", "-fPIC", "-O1", f"-I{INCLUDE}", *[f"-D{d}" for d in defines], "-o", str(out),
           str(source), "-lpthread"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def run_profile(names, tmp_path: Path, config: ProfilerConfig | None = None, file_name: str = "trace.json"):
    """Configure/start/stop/process the named backends into one builder and write the trace.

    Mirrors what the profiler does for backend sessions; returns (trace dict, builder, sessions).
    """
    # Kineto's defaults plus counter tracks (gpu_pm_counter is no default), which the
    # counter-writing example plugins need.
    config = config or ProfilerConfig(activities=default_activity_types() | {ActivityType.GPU_PM_COUNTER})
    sessions = []
    for name in names:
        cls = core.get_backend_class(name, config)
        if not cls.probe():
            continue
        types = frozenset(config.activities & cls.supported_activities())
        if not types:
            continue
        session = cls().configure(types, config)
        if session is not None:
            sessions.append(session)
    builder = TraceBuilder()
    start = now_ns()
    for s in sessions:
        s.start()
    for s in reversed(sessions):
        s.stop()
    end = now_ns()
    builder.set_window(start, end)
    window = ProcessWindow(start, end)
    for s in sessions:
        s.process(builder, window)
        for k, v in s.metadata().items():
            builder.set_metadata(k, v)
    path = write_chrome_trace(builder, tmp_path / file_name, vendor_categories=not config.generic_categories)
    return load_valid_trace(path), builder, sessions


def load_valid_trace(path: Path) -> dict:
    """Parse a trace and check the writer's contract held (complete file, closing instant)."""
    text = Path(path).read_text()
    trace = json.loads(text)
    assert trace["schemaVersion"] == 1
    assert trace["traceEvents"][-1]["name"] == "Record Window End"
    assert "traceName" in trace
    return trace


def events(trace: dict, ph: str | None = None, name: str | None = None, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"]
            if (ph is None or e.get("ph") == ph) and (name is None or e.get("name") == name)
            and (cat is None or e.get("cat") == cat)]


def python_plugin(directory: Path, file_name: str, body: str) -> Path:
    path = directory / file_name
    path.write_text(body)
    os.chmod(path, 0o644)
    return path


GOOD_PY_BACKEND = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof.plugins

class _S(Session):
    def start(self): pass
    def stop(self): pass
    def process(self, builder, window):
        builder.add_slice("{name}_kernel", window.start_ns + 10, 100, "{name}", 0, cat=ActivityType.CONCURRENT_KERNEL)

@xpuprof.plugins.register_backend
class _B(Backend):
    name = "{name}"
    @classmethod
    def probe(cls): return ProbeResult.ok()
    @classmethod
    def supported_activities(cls): return frozenset({{ActivityType.CONCURRENT_KERNEL}})
    def configure(self, activity_types, config): return _S()
'''
