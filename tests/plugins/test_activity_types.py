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


# ----------------------------------------------------------------------------- C ABI
def test_c_plugin_declares_types_and_old_plugins_still_load(tmp_path, monkeypatch):
    from plugintest_helpers import build_plugin

    from xpuprof.plugins import loader

    d = tmp_path / "cplugins"
    d.mkdir()
    os.chmod(d, 0o755)
    src = os.path.join(os.path.dirname(__file__), "declared_types_plugin.c")
    new = build_plugin(src, d / "libacmec.so", "PLUGIN_NAME=\"acmec\"", "WITH_DECLARED")
    old = build_plugin(src, d / "libacmeold.so", "PLUGIN_NAME=\"acmeold\"")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(d))
    cfg = ProfilerConfig(activities=["cpu_op", "acmec_fence", "kernel"])  # parsing loads the plugins
    fence = ActivityType.parse("acmec_fence")
    assert fence.origin == f"C plugin {new}" and fence.type_id >= activity_types.PLUGIN_ID_BASE
    assert [p.error for p in loader.loaded_plugins()] == ["", ""]  # the 1.0-shaped plugin loads too
    prof = xpuprof.profile(config=cfg, backends=["acmec", "acmeold"])
    with prof:
        pass
    trace = orjson.loads(prof.export_chrome_trace(tmp_path / "t.json").read_bytes())
    cats = sorted((e["name"], e["cat"]) for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("name", "").startswith("type "))
    # acmec got kernel (6) and its declared type 1 (0x40000001) at create; acmeold got kernel only
    assert cats == [("type 1073741825", "acmec_fence"), ("type 6", "kernel"), ("type 6", "kernel")]
    assert old.exists()


def test_c_plugin_declaring_a_builtin_name_is_refused(tmp_path):
    from plugintest_helpers import build_plugin

    from xpuprof.plugins import loader

    src = (open(os.path.join(os.path.dirname(__file__), "declared_types_plugin.c")).read()
           .replace('{"acmec_dma", "acmec_fence"}', '{"kernel", "acmec_fence"}'))
    (tmp_path / "bad.c").write_text(src)
    d = tmp_path / "p"
    d.mkdir()
    os.chmod(d, 0o755)
    lib = build_plugin(tmp_path / "bad.c", d / "libbad.so", "PLUGIN_NAME=\"badtypes\"", "WITH_DECLARED")
    result = loader.load_file(lib, "c")
    assert "clashes with the built-in activity type 'kernel'" in result.error
