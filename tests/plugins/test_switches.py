"""Backend switches (XPUPROF_DISABLE_BACKENDS, disabled_backends, KINETO_DISABLE_CUPTI) and the
rows ``xpuprof devices`` shows (disabled / available / unavailable / plugin-provided)."""
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
    assert core.enabled_backend_names(config) == ["sim"]


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
    core.enabled_backend_names()
    (record,) = caplog.records
    assert record.getMessage() == ("warning: cannot disable unknown backend(s) 'cdua'; known backends: "
                                   "xpu, cuda, rocm, sim")


def test_describe_backends_rows(plugin_dir, monkeypatch):
    python_plugin(plugin_dir, "good.py", GOOD_PY_BACKEND.format(name="synthdev"))
    python_plugin(plugin_dir, "broken.py", "import nope_not_here\n")
    monkeypatch.setenv("XPUPROF_PLUGIN_PATH", str(plugin_dir))
    rows = core.describe_backends(ProfilerConfig(disabled_backends=["xpu"]))
    by_name = {r["name"]: r for r in rows}
    assert by_name["xpu"]["status"] == "disabled"
    assert by_name["xpu"]["reason"] == "disabled by the config key disabled_backends"
    assert by_name["xpu"]["source"] == "built-in" and by_name["xpu"]["activities"] == []
    assert by_name["sim"]["status"] == "available" and by_name["sim"]["explicit_only"] is True
    assert by_name["synthdev"] == {
        "name": "synthdev", "status": "available", "reason": "available", "source": "plugin",
        "origin": f"python plugin {plugin_dir / 'good.py'}", "explicit_only": False, "activities": ["kernel"],
        "details": {}}
    for name in ("cuda", "rocm"):  # built-ins that cannot run here say why
        assert by_name[name]["status"] in ("available", "unavailable") and by_name[name]["reason"]
    (failed,) = [r for r in rows if r["name"] == ""]
    assert failed["status"] == "unavailable" and failed["source"] == "plugin"
    assert failed["origin"] == f"python plugin {plugin_dir / 'broken.py'}"
    assert failed["reason"].startswith("failed to load: ModuleNotFoundError: No module named 'nope_not_here'")
