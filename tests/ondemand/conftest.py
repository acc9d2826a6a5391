"""Fixtures of the on-demand tests: a real dynolog daemon per test (odhelpers.Daemon) in a private socket
directory."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make odhelpers importable

from odhelpers import LIVE, Daemon, daemon_missing  # noqa: E402


@pytest.fixture(autouse=True)
def _no_program_outlives_its_test():
    yield
    while LIVE:
        LIVE.pop().kill()


@pytest.fixture
def sockdir():
    """A short private directory (a socket path holds at most 107 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon(sockdir):
    why = daemon_missing()
    if why:
        pytest.skip(why)
    d = Daemon(sockdir)
    yield d
    d.stop()


