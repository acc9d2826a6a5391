"""Plugin trust as OpenSSH's StrictModes judges a path: the plugin file and every directory from it
up to ``/`` (symlinks resolved) owned by root or the running user and writable by nobody else, a
root-owned sticky directory accepted above an entry of the user's; bytecode in ``__pycache__`` never
read or written. Each refusal is one line in the trace's ``plugin_load_errors``."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the plugin tests' helpers

from plugintest_helpers import GOOD_PY_BACKEND, python_plugin, reset_plugins  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof.backends import registry as core  # noqa: E402
from xpuprof.plugins import faults  # noqa: E402
from xpuprof.plugins.trust import untrusted  # noqa: E402

OTHER_UID = 65534  # nobody
root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="making files owned by another user (or by root) needs root")


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for key in ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "XPUPROF_DISABLE_BACKENDS", "KINETO_DISABLE_CUPTI"):
        monkeypatch.delenv(key, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def _dir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


def _trace(tmp_path: Path, plugin_dir: Path) -> dict:
    with xpuprof.profile(activities=["cpu", "kernel"],
                         config=xpuprof.ProfilerConfig(plugin_paths=[str(plugin_dir)])) as prof:
        with xpuprof.record_function("work"):
            pass
    return json.loads(prof.export_chrome_trace(tmp_path / "trace.json").read_text())


def _loaded(plugin_dir: Path, name: str) -> bool:
    return name in core.backend_names(xpuprof.ProfilerConfig(plugin_paths=[str(plugin_dir)]))


def test_a_private_plugin_directory_loads(tmp_path):
    d = _dir(tmp_path / "plugins")
    python_plugin(d, "good.py", GOOD_PY_BACKEND.format(name="goodtrust"))
    assert untrusted(d / "good.py") is None
    assert _loaded(d, "goodtrust") and not faults.faults()


def test_a_group_writable_plugin_file_is_refused(tmp_path):
    d = _dir(tmp_path / "plugins")
    bad = python_plugin(d, "grp.py", GOOD_PY_BACKEND.format(name="grpfile"))
    bad.chmod(0o664)
    trace = _trace(tmp_path, d)
    assert not _loaded(d, "grpfile")
    assert trace["plugin_load_errors"] == {
        f"python plugin {bad}": f"refused: file {bad} is writable by its group (mode 0664)"}


def test_a_group_writable_plugin_directory_is_refused(tmp_path):
    d = _dir(tmp_path / "plugins", 0o775)
    python_plugin(d, "g.py", GOOD_PY_BACKEND.format(name="grpdir"))
    trace = _trace(tmp_path, d)
    assert not _loaded(d, "grpdir")
    (origin, reason), = trace["plugin_load_errors"].items()
    assert origin == f"plugin directory {d}" and f"directory {d} is writable by its group (mode 0775)" in reason


def test_a_plugin_directory_under_a_world_writable_parent_is_refused(tmp_path):
    parent = _dir(tmp_path / "shared", 0o777)  # not sticky: anyone may rename our directory away and plant another
    d = _dir(parent / "plugins")
    python_plugin(d, "p.py", GOOD_PY_BACKEND.format(name="openparent"))
    trace = _trace(tmp_path, d)
    assert not _loaded(d, "openparent")
    (reason,) = trace["plugin_load_errors"].values()
    assert f"directory {parent} is writable by group and others (mode 0777)" in reason


def test_a_symlink_into_a_writable_directory_is_refused(tmp_path):
    elsewhere = _dir(tmp_path / "drop", 0o777)
    target = python_plugin(elsewhere, "real.py", GOOD_PY_BACKEND.format(name="linked"))
    d = _dir(tmp_path / "plugins")
    link = d / "linked.py"
    link.symlink_to(target)
    trace = _trace(tmp_path, d)
    assert not _loaded(d, "linked")
    (origin, reason), = trace["plugin_load_errors"].items()
    assert origin == f"python plugin {link}"
    assert f"directory {elsewhere} is writable by group and others" in reason and str(link) in reason


def test_a_symlink_to_a_private_file_loads(tmp_path):
    target = python_plugin(_dir(tmp_path / "src"), "real.py", GOOD_PY_BACKEND.format(name="linkok"))
    d = _dir(tmp_path / "plugins")
    (d / "linkok.py").symlink_to(target)
    assert _loaded(d, "linkok") and not faults.faults()


@root_only
def test_a_directory_owned_by_another_user_above_the_plugins_is_refused(tmp_path):
    parent = _dir(tmp_path / "theirs")
    os.chown(parent, OTHER_UID, OTHER_UID)  # 0755 but theirs: they can swap our directory for theirs
    d = _dir(parent / "plugins")
    python_plugin(d, "p.py", GOOD_PY_BACKEND.format(name="theirparent"))
    trace = _trace(tmp_path, d)
    assert not _loaded(d, "theirparent")
    (reason,) = trace["plugin_load_errors"].values()
    assert f"directory {parent} is owned by another user (uid {OTHER_UID})" in reason


@root_only
def test_a_plugin_file_owned_by_another_user_is_refused(tmp_path):
    d = _dir(tmp_path / "plugins")
    bad = python_plugin(d, "theirs.py", GOOD_PY_BACKEND.format(name="theirfile"))
    os.chown(bad, OTHER_UID, OTHER_UID)
    assert untrusted(bad) == f"file {bad} is owned by another user (uid {OTHER_UID})"
    assert not _loaded(d, "theirfile")


@root_only
def test_a_root_owned_sticky_directory_is_accepted_above_the_users_own_entry(tmp_path):
    sticky = _dir(tmp_path / "tmplike", 0o1777)  # as /tmp: root's, sticky, world-writable
    d = _dir(sticky / "plugins")
    python_plugin(d, "s.py", GOOD_PY_BACKEND.format(name="stickyok"))
    assert untrusted(d / "s.py") is None
    assert _loaded(d, "stickyok")


@root_only
def test_a_sticky_directory_does_not_cover_another_users_entry(tmp_path):
    sticky = _dir(tmp_path / "tmplike", 0o1777)
    theirs = _dir(sticky / "theirs")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    d = _dir(theirs / "plugins")
    python_plugin(d, "s.py", GOOD_PY_BACKEND.format(name="stickytheirs"))
    assert f"directory {theirs} is owned by another user" in untrusted(d / "s.py")
    assert not _loaded(d, "stickytheirs")


def test_a_non_sticky_world_writable_directory_is_not_accepted_above_an_own_entry(tmp_path):
    shared = _dir(tmp_path / "shared", 0o777)
    d = _dir(shared / "plugins")
    python_plugin(d, "s.py", GOOD_PY_BACKEND.format(name="nosticky"))
    assert f"directory {shared} is writable by group and others" in untrusted(d / "s.py")


PLANTED = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult
import xpuprof.plugins

@xpuprof.plugins.register_backend
class _Planted(Backend):
    name = "planted"
    @classmethod
    def probe(cls): return ProbeResult.ok()
    @classmethod
    def supported_activities(cls): return frozenset({ActivityType.CONCURRENT_KERNEL})
    def configure(self, activity_types, config): return None
'''


def test_bytecode_planted_in_pycache_is_never_run(tmp_path):
    """A ``.pyc`` matching the plugin's mtime and size, as another user could leave in ``__pycache__``."""
    import importlib._bootstrap_external as bx

    d = _dir(tmp_path / "plugins")
    src = python_plugin(d, "cached.py", GOOD_PY_BACKEND.format(name="fromsource"))
    st = src.stat()
    cache = Path(importlib.util.cache_from_source(str(src)))
    _dir(cache.parent, 0o777)
    cache.write_bytes(bx._code_to_timestamp_pyc(compile(PLANTED, str(src), "exec"), st.st_mtime, st.st_size))
    names = core.backend_names(xpuprof.ProfilerConfig(plugin_paths=[str(d)]))
    assert "planted" not in names and "fromsource" in names


def test_loading_a_plugin_writes_no_bytecode(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as in a default interpreter
    d = _dir(tmp_path / "plugins")
    python_plugin(d, "nocache.py", GOOD_PY_BACKEND.format(name="nocache"))
    assert _loaded(d, "nocache")
    assert not (d / "__pycache__").exists()
