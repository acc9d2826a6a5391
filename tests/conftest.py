"""Suite-wide pytest setup. pytester drives the pytest-plugin tests (tests/runs)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make slice_tables importable

pytest_plugins = ["pytester"]
