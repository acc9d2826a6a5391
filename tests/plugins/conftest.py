"""Plugin tests: a clean plugin registry (and environment) for every test."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make plugintest_helpers importable

from plugintest_helpers import ENV_KEYS, reset_plugins  # noqa: E402


@pytest.fixture(autouse=True)
def clean_plugins(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture
def plugin_dir(tmp_path) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    os.chmod(d, 0o755)  # independent of the umask: nobody else may write it
    return d
