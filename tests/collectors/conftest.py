"""Collector tests: clean collector and plugin registries and environment for every test."""
from __future__ import annotations

import pytest

from xpuprof.collectors import registry as collector_registry
from xpuprof.plugins import faults, loader
from xpuprof.plugins import registry as plugin_registry

ENV_KEYS = ("XPUPROF_PLUGIN_PATH", "KINETO_PLUGIN_LIB_DIR_PATH", "XPUPROF_DISABLE_BACKENDS", "KINETO_DISABLE_CUPTI",
            "XPUPROF_PLUGIN_DEADLINE_S")


def _reset() -> None:
    collector_registry.reset()
    plugin_registry.reset()
    loader.reset()
    faults.clear()


@pytest.fixture(autouse=True)
def clean_collectors(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    _reset()
    yield
    _reset()
