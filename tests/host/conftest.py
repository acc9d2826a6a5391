"""Host tests: a clean host recorder after every test (profiling stopped cleanly)."""
import json

import pytest

from xpuprof.host import recorder


@pytest.fixture(autouse=True)
def no_recorder_left():
    """Every test must leave no host recorder installed (profiling stopped cleanly)."""
    yield
    assert recorder.active_recorder() is None
    recorder.install(None)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def load_trace():
    return load_json
