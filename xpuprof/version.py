"""xpuprof's version, in a module of its own so that any layer can say it without importing the package's
public names (``xpuprof/__init__`` loads the profiler, the backends' early loading, the plugins)."""

__version__ = "0.1.0"  # pyproject.toml's [project] version
