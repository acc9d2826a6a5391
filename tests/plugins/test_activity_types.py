"""Plugin-declared activity types: own id ranges, parsing like built-in names (Python lists,
Kineto ACTIVITY_TYPES, YAML), clear clash errors, handed to configure, carried as categories."""
from __future__ import annotations

import os

import orjson
import pytest

import xpuprof
from xpuprof.activity import ActivityType, PluginActivityType, parse_activity_types
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import BackendRegistrationError, activity_types

PLUGIN = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
import xpuprof

SEEN = []

class _S(Session):
    def __init__(self, types):
        self.types = types
    def start(self): pass
    def stop(self): pass
    def process(self, builder, window):
        for t in sorted(self.types):
            builder.add_slice(f"{{t}} op", window.start_ns + 10, 100, "{name}", 0, cat=t)

@xpuprof.register_backend
class _B(Backend):
    name = "{name}"
    activity_types = {types!r}
    @classmethod
    def probe(cls): return ProbeResult.ok()
    @classmethod
    def supported_activities(cls): return frozenset(ActivityType.parse(t) for t in cls.activity_types)
    def configure(self, types, config):
        SEEN.append(frozenset(types))
        return _S(types)
'''


def _load(tmp_path, name, types):
    ns: dict = {"__name__": f"plugin_{name}"}  # a module per plugin, as a real import gives
    exec(PLUGIN.format(name=name, types=tuple(types)), ns)
    return ns


def test_declared_types_parse_and_reach_the_plugin(tmp_path):
    ns = _load(tmp_path, "acme", ("acme_dma", "acme_fence"))
    dma = ActivityType.parse("ACME_DMA")
    assert isinstance(dma, PluginActivityType) and dma == "acme_dma"
    fence = ActivityType.parse("acme_fence")
    assert dma.type_id >= activity_types.PLUGIN_ID_BASE and fence.type_id == dma.type_id + 1
    assert parse_activity_types("cpu_op,acme_dma") == {ActivityType.CPU_OP, dma}
    kineto = ProfilerConfig.from_kineto("ACTIVITY_TYPES=cpu_op,acme_dma\n")
    assert dma in kineto.activities
    prof = xpuprof.profile(activities=["cpu", "acme_dma"], backends=["acme"])
    with prof:
        pass
    assert ns["SEEN"] == [frozenset({dma})]  # only the enabled one, at create time
    trace = orjson.loads(prof.export_chrome_trace(tmp_path / "t.json").read_bytes())
    cats = {e["cat"] for e in trace["traceEvents"] if e.get("name") == "acme_dma op"}
    assert cats == {"acme_dma"}


def test_each_plugin_gets_its_own_range_and_clashes_are_errors(tmp_path):
    _load(tmp_path, "one", ("one_x",))
    _load(tmp_path, "two", ("two_x",))
    a, b = ActivityType.parse("one_x"), ActivityType.parse("two_x")
    assert b.type_id - a.type_id == activity_types.PLUGIN_ID_SPAN
    with pytest.raises(BackendRegistrationError, match="clashes with the built-in activity type 'kernel'"):
        _load(tmp_path, "three", ("kernel",))
    with pytest.raises(BackendRegistrationError, match="'one_x' is already declared by register_backend\\(plugin_one._B\\)"):
        _load(tmp_path, "four", ("one_x",))
    with pytest.raises(ValueError, match="unknown activity type 'one_y'.*one_x"):
        parse_activity_types(["one_y"])


def test_directory_plugin_types_parse_before_the_backend_is_used(tmp_path, monkeypatch):
    d = tmp_path / "plugins"
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "dirplug.py").write_text(PLUGIN.format(name="dirplug", types=("dirplug_copy",)))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(d))
    cfg = ProfilerConfig(activities=["cpu_op", "dirplug_copy"])  # parsing loads the env's plugins
    assert "dirplug_copy" in cfg.activities
    assert ActivityType.parse("dirplug_copy").origin == f"python plugin {d / 'dirplug.py'}"
