"""User workloads: a Python callable (``module:function``) or a script run with argv."""
from __future__ import annotations

import importlib
import runpy
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Workload, WorkloadError


@contextmanager
def _search_path(base_dir: Path | None):
    # Modules next to the config file are importable without installing them.
    added = base_dir is not None and str(base_dir) not in sys.path
    if added:
        sys.path.insert(0, str(base_dir))
    try:
        yield
    finally:
        if added:
            sys.path.remove(str(base_dir))


def resolve_callable(target: str, base_dir: Path | None = None):
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise WorkloadError(f"callable workload {target!r} must be written 'module:function'")
    with _search_path(base_dir):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise WorkloadError(f"callable workload {target!r}: cannot import module {module_name!r} ({exc})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise WorkloadError(f"callable workload {target!r}: module {module_name!r} has no attribute {attr!r}; "
                                f"callables there: {', '.join(names) or 'none'}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise WorkloadError(f"callable workload {target!r} is a {type(obj).__name__}, not a callable")
    return obj


def make_callable(target: str, kwargs: dict[str, Any], *, factory: bool = False, device: str = "auto",
                  base_dir: Path | None = None) -> Workload:
    """``factory: false``: ``function(**kwargs)`` is one iteration. ``factory: true``:
    ``function(**kwargs)`` is called once and returns the per-iteration callable (setup stays
    out of the measured loop); it may also return ``(step, sync)``."""
    fn = resolve_callable(target, base_dir)
    if not factory:
        return Workload(target, lambda: fn(**kwargs), device=device, info={"callable": target})
    made = fn(**kwargs)
    sync = None
    if isinstance(made, tuple) and len(made) == 2:
        made, sync = made
    if not callable(made) or (sync is not None and not callable(sync)):
        raise WorkloadError(f"factory workload {target!r} must return a callable or (step, sync), "
                            f"not {type(made).__name__}")
    return Workload(target, made, sync or (lambda: None), device=device, info={"callable": target, "factory": True})


def make_script(path: Path, argv: list[str], device: str = "auto") -> Workload:
    """Each iteration runs the script as ``__main__`` with ``sys.argv = [path, *argv]``."""
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"script workload {str(path)!r} does not exist")

    def step():
        saved = sys.argv
        sys.argv = [str(path), *map(str, argv)]
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise WorkloadError(f"script {str(path)!r} exited with status {exc.code}") from None
        finally:
            sys.argv = saved

    return Workload(path.name, step, device=device, info={"script": str(path), "argv": list(map(str, argv))})
