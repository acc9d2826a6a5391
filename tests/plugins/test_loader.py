"""Directory plugins: where they come from, load order, refusal of unsafe paths, Python plugin
failures, and the Python example plugin in a real run."""
from __future__ import annotations

import logging
import os
import shutil

import pytest
from plugintest_helpers import EXAMPLES, GOOD_PY_BACKEND, events, python_plugin, run_profile

from xpuprof.backends import registry as core
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import faults, loader
from xpuprof.plugins import registry as plugin_registry


def test_dirs_from_env_kineto_alias_and_config(tmp_path, monkeypatch, caplog):
    a, b, c, d = (tmp_path / x for x in "abcd")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", os.pathsep.join([str(a), str(b)]))
    monkeypatch.setenv("KINETO_PLUGIN_LIB_DIR_PATH", str(c))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    config = ProfilerConfig(plugin_paths=[str(d), str(a)])
    assert loader.plugin_dirs(config) == [a, b, c, d]
    loader.plugin_dirs(config)
    notices = [r.getMessage() for r in caplog.records]
    assert notices == ["notice: KINETO_PLUGIN_LIB_DIR_PATH is honoured as an alias of XPUPROF_PLUGIN_PATH; "
                       "please switch to XPUPROF_PLUGIN_PATH"]


def test_no_dirs_named_loads_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    python_plugin(tmp_path, "sneaky.py", GOOD_PY_BACKEND.format(name="sneaky"))
    assert loader.plugin_dirs() == []
    assert "sneaky" not in core.backend_names()
    assert loader.loaded_plugins() == []


def test_every_file_loads_in_stable_order(plugin_dir, monkeypatch):
    order_log = plugin_dir.parent / "order.txt"
    for name in ["zeta", "alpha", "mid"]:
        python_plugin(plugin_dir, f"{name}.py", f"open({str(order_log)!r}, 'a').write('{name}\\n')\n"
                      + GOOD_PY_BACKEND.format(name=name))
    (plugin_dir / "README.txt").write_text("not a plugin")
    (plugin_dir / "subdir.py").mkdir()  # not a regular file
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    names = core.backend_names()
    assert order_log.read_text().split() == ["alpha", "mid", "zeta"]
    assert {"alpha", "mid", "zeta"} <= set(names)
    assert plugin_registry.origin_of("mid") == f"python plugin {plugin_dir / 'mid.py'}"
    core.backend_names()  # first use loaded them; later uses load nothing again
    assert order_log.read_text().split() == ["alpha", "mid", "zeta"]
    assert faults.faults() == []


def test_config_plugin_paths(plugin_dir):
    python_plugin(plugin_dir, "fromcfg.py", GOOD_PY_BACKEND.format(name="fromcfg"))
    assert "fromcfg" not in core.backend_names()
    assert "fromcfg" in core.backend_names(ProfilerConfig(plugin_paths=[str(plugin_dir)]))


def test_world_writable_directory_is_refused(plugin_dir, monkeypatch, caplog):
    python_plugin(plugin_dir, "open.py", GOOD_PY_BACKEND.format(name="opendir"))
    os.chmod(plugin_dir, 0o777)
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    assert "opendir" not in core.backend_names()
    (fault,) = faults.faults()
    assert fault.origin == f"plugin directory {plugin_dir}"
    assert f"refused: directory {plugin_dir} is writable by group and others (mode 0777)" in fault.reason
    assert f"directory {plugin_dir} is writable by group and others" in caplog.records[0].getMessage()


def test_world_writable_file_is_refused_others_still_load(plugin_dir, monkeypatch):
    bad = python_plugin(plugin_dir, "a_open.py", GOOD_PY_BACKEND.format(name="openfile"))
    os.chmod(bad, 0o666)
    python_plugin(plugin_dir, "b_good.py", GOOD_PY_BACKEND.format(name="goodfile"))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    names = core.backend_names()
    assert "openfile" not in names and "goodfile" in names
    (fault,) = faults.faults()
    assert fault.origin == f"python plugin {bad}"
    assert fault.reason == f"refused: file {bad} is writable by group and others (mode 0666)"


def test_missing_directory_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(tmp_path / "nope"))
    core.backend_names()
    (fault,) = faults.faults()
    assert fault.origin == f"plugin directory {tmp_path / 'nope'}" and "cannot read the directory" in fault.reason


@pytest.mark.parametrize("body, reason", [
    ("import xpuprof_no_such_module\n", "ModuleNotFoundError: No module named 'xpuprof_no_such_module'"),
    ("def broken(:\n", "SyntaxError"),
    ("x = 1\n", "ImportError: the module registered no backend"),
    ("raise RuntimeError('plugin exploded')\n", "RuntimeError: plugin exploded"),
    ("from xpuprof.plugins import register_backend\nfrom xpuprof.backends.base import Backend\n"
     "@register_backend\nclass Bad(Backend):\n    name = 'bad'\n",
     "TypeError: xpuprof_plugin_"),
])
def test_python_plugin_failures_are_reported_once_and_others_load(plugin_dir, monkeypatch, caplog, body, reason):
    broken = python_plugin(plugin_dir, "a_broken.py", body)
    python_plugin(plugin_dir, "b_fine.py", GOOD_PY_BACKEND.format(name="fine"))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    assert "fine" in core.backend_names()
    core.backend_names()
    (fault,) = faults.faults()
    assert fault.origin == f"python plugin {broken}" and fault.stage == "load"
    assert fault.reason.startswith(reason), fault.reason
    assert len([r for r in caplog.records if "a_broken.py" in r.getMessage()]) == 1
    assert not [n for n in core.registered() if n not in ("fine",)]


def test_half_loaded_plugin_leaves_no_backend(plugin_dir, monkeypatch):
    python_plugin(plugin_dir, "half.py", GOOD_PY_BACKEND.format(name="half") + "\nraise RuntimeError('late')\n")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    assert "half" not in core.backend_names()
    assert faults.faults()[0].reason.startswith("RuntimeError: late")


def test_python_plugin_name_clash_is_reported(plugin_dir, monkeypatch):
    python_plugin(plugin_dir, "a.py", GOOD_PY_BACKEND.format(name="same"))
    python_plugin(plugin_dir, "b.py", GOOD_PY_BACKEND.format(name="same"))
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    core.backend_names()
    assert plugin_registry.origin_of("same") == f"python plugin {plugin_dir / 'a.py'}"
    (fault,) = faults.faults()
    assert "BackendRegistrationError" in fault.reason and "already provided by python plugin" in fault.reason


def test_example_python_plugin_in_a_real_run(plugin_dir, monkeypatch, tmp_path):
    shutil.copy(EXAMPLES / "host_memory_plugin.py", plugin_dir)
    os.chmod(plugin_dir / "host_memory_plugin.py", 0o644)
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    assert core.get_backend_class("host_memory").probe().available
    trace, _, _ = run_profile(["host_memory"], tmp_path)
    samples = events(trace, "C", name="Resident memory (MiB)")
    assert len(samples) == 2  # start and stop
    assert all(s["args"]["rss"] > 1.0 and s["pid"] == "Host memory" for s in samples)
    assert events(trace, "M", name="process_name")[0]["args"] == {"name": "Host memory"}


def test_kineto_plugin_dir_alias_loads_plugins(plugin_dir, monkeypatch):
    python_plugin(plugin_dir, "viakineto.py", GOOD_PY_BACKEND.format(name="viakineto"))
    monkeypatch.setenv("KINETO_PLUGIN_LIB_DIR_PATH", str(plugin_dir))
    assert "viakineto" in core.backend_names()
    assert plugin_registry.origin_of("viakineto") == f"python plugin {plugin_dir / 'viakineto.py'}"
