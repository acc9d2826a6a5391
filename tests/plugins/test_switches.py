"""Backend switches (XPUPROF_DISABLE_BACKENDS, disabled_backends, KINETO_DISABLE_CUPTI) and the
rows ``xpuprof devices`` shows (disabled / available / unavailable / plugin-provided / failed)."""
from __future__ import annotations

import logging

from plugintest_helpers import GOOD_PY_BACKEND, python_plugin

from xpuprof.backends import registry as core
from xpuprof.config.options import ProfilerConfig


def test_env_and_config_switches(monkeypatch):
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", " XPU, cuda ,,")
    config = ProfilerConfig(disabled_backends=["rocm", "cuda"])
    assert core.disabled_backends(config) == {
        "xpu": "disabled by XPUPROF_DISABLE_BACKENDS",
        "cuda": "disabled by XPUPROF_DISABLE_BACKENDS",
        "rocm": "disabled by the config key disabled_backends",
    }
    probes = core.probe_all(config)
    assert [n for n, p in probes.items() if not p.details.get("disabled")] == ["sim"]


def test_disabled_backends_are_not_probed(monkeypatch):
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "sim")
    called = []
    monkeypatch.setattr(core, "get_backend_class", lambda name, config=None: called.append(name))
    probes = core.probe_all()
    assert probes["sim"].available is False and probes["sim"].reason == "disabled by XPUPROF_DISABLE_BACKENDS"
    assert "sim" not in called


def test_kineto_disable_cupti_alias(monkeypatch, caplog):
    monkeypatch.setenv("KINETO_DISABLE_CUPTI", "1")
    caplog.set_level(logging.WARNING, logger="xpuprof.backends")
    assert core.disabled_backends() == {"cuda": "disabled by KINETO_DISABLE_CUPTI=1 (alias of "
                                                "XPUPROF_DISABLE_BACKENDS=cuda)"}
    core.disabled_backends()
    assert [r.getMessage() for r in caplog.records] == [
        "notice: KINETO_DISABLE_CUPTI=1 is honoured as an alias of XPUPROF_DISABLE_BACKENDS=cuda; "
        "please switch to XPUPROF_DISABLE_BACKENDS"]
    monkeypatch.setenv("KINETO_DISABLE_CUPTI", "0")
    assert core.disabled_backends() == {}


def test_unknown_disabled_name_warns_once_with_the_valid_names(monkeypatch, caplog):
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "cdua")
    caplog.set_level(logging.WARNING, logger="xpuprof.backends")
    core.probe_all()
    core.probe_all()
    (record,) = caplog.records
    assert record.getMessage() == ("warning: cannot disable unknown backend(s) 'cdua'; known backends: "
                                   "xpu, cuda, rocm, sim")


def test_device_rows_say_disabled_plugin_and_failed_to_load(plugin_dir, monkeypatch):
    from xpuprof.commands.devices import collect_rows

    python_plugin(plugin_dir, "good.py", GOOD_PY_BACKEND.format(name="synthdev"))
    python_plugin(plugin_dir, "broken.py", "import nope_not_here\n")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    monkeypatch.setenv("XPUPROF_DISABLE_BACKENDS", "xpu")
    by_name = {r.backend: r for r in collect_rows()}
    assert not by_name["xpu"].available and by_name["xpu"].reason == "disabled by XPUPROF_DISABLE_BACKENDS"
    assert by_name["sim"].available and any("used only when named" in n for n in by_name["sim"].notes)
    assert by_name["synthdev"].available
    for name in ("cuda", "rocm"):  # built-ins that cannot run here say why
        assert by_name[name].reason
    failed = by_name[f"python plugin {plugin_dir / 'broken.py'}"]
    assert not failed.available
    assert failed.reason.startswith("failed to load: ModuleNotFoundError: No module named 'nope_not_here'")
