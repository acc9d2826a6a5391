"""Suite-wide pytest setup. pytester drives the pytest-plugin tests (tests/commands).

The fast tier (``pytest -m "not slow"``) does not even import the files marked slow as a whole
(``pytestmark = pytest.mark.slow``): several import torch, HTA or hypothesis, seconds each.
"""
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make slice_tables importable

pytest_plugins = ["pytester"]

# Text tables fit COLUMNS when it is set (pytest-xdist sets 80 in its workers): tests see what a pipe
# or a file gets unless they set a width themselves.
os.environ.pop("COLUMNS", None)

_SLOW_FILE = re.compile(r"^pytestmark = \[?pytest\.mark\.slow\b", re.M)


def pytest_ignore_collect(collection_path, config):
    if config.getoption("markexpr", "").strip() != "not slow" or collection_path.suffix != ".py":
        return None
    try:
        return True if _SLOW_FILE.search(collection_path.read_text(encoding="utf-8")) else None
    except OSError:
        return None
