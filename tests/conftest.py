"""Suite-wide pytest setup. pytester drives the pytest-plugin tests (tests/runs)."""
pytest_plugins = ["pytester"]
