"""torch's own Kineto and xpuprof in one process: one daemon client, one step count.

With ``KINETO_USE_DAEMON`` set, torch's Kineto starts its daemon client when it initializes (at
``import torch``, or at the first profiler start when that comes first; ``libkineto_init`` reads the
variable then, once) and ``torch.profiler`` registers an optimizer step hook that feeds
``KinetoStepTracker``. Two clients polling one daemon would answer one request with two traces, both
driving the same vendor tracing API. So:

* xpuprof first (``import xpuprof`` before torch, or ``xpuprof exec``): the variable moves to
  ``XPUPROF_KINETO_USE_DAEMON`` (``hide_daemon_variable``): torch's Kineto never sees it, whenever it
  initializes; child processes inherit the opt-in under that name and xpuprof reads both. The optimizer
  hook torch then skips is registered here. The process gives one trace: xpuprof's.
* torch first: its client already owns the link; xpuprof says so once and does not compete.

Either way, once torch is in, ``KinetoStepTracker``'s ``_kineto_step`` is hooked so iterations count
as Kineto counts them (``steps``). torch is never imported here: only observed when the program
imports it (a post-import hook on the top-level ``torch`` import).
"""
from __future__ import annotations

import importlib.abc
import logging
import os
import sys
import threading
from typing import Callable

from . import steps

log = logging.getLogger("xpuprof.ondemand")

USE_DAEMON_ENV = "KINETO_USE_DAEMON"
STASHED_ENV = "XPUPROF_KINETO_USE_DAEMON"  # the opt-in, kept where torch's Kineto does not look

_lock = threading.Lock()
_after_import: list[Callable[[object], None]] = []
_hooked = False
_finder: "_TorchImportFinder | None" = None


def torch_client_running() -> bool:
    """torch was imported with ``KINETO_USE_DAEMON`` set, before xpuprof could hide it: its Kineto polls."""
    torch = sys.modules.get("torch")
    return torch is not None and hasattr(torch, "_C") and USE_DAEMON_ENV in os.environ and not _hooked


def hide_daemon_variable() -> None:
    """Move ``KINETO_USE_DAEMON`` out of torch's sight, for this process and its children."""
    value = os.environ.pop(USE_DAEMON_ENV, None)
    if value is not None:
        os.environ[STASHED_ENV] = value


def on_torch_imported(callback: Callable[[object], None]) -> None:
    """Run ``callback(torch)`` once torch is imported (now, when it already is)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "_C") and _hooked:
        callback(torch)
        return
    with _lock:
        _after_import.append(callback)


def install() -> None:
    """Keep torch's daemon client from starting and hook its step count (now, or when torch is imported)."""
    global _finder
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "_C"):
        _torch_ready(torch)
        return
    with _lock:
        if _finder is None:
            _finder = _TorchImportFinder()
            sys.meta_path.insert(0, _finder)


class _TorchImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the top-level ``torch`` import: ``_torch_ready`` runs once it is complete."""

    def __init__(self) -> None:
        self._searching = False

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or self._searching:
            return None
        self._searching = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._searching = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module, _original=original):
            _original(module)
            # torch/__init__ has run to its end; the import system clears this flag right after we return,
            # and code that treats an initializing torch as absent (torch_ops) must see it complete now.
            module_spec = getattr(module, "__spec__", None)
            if module_spec is not None:
                module_spec._initializing = False
            _torch_ready(module)

        loader.exec_module = exec_module
        return spec


def _torch_ready(torch) -> None:
    global _hooked, _finder
    with _lock:
        if _finder is not None and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        if _hooked:
            return
        _hooked = True
        callbacks = list(_after_import)
        _after_import.clear()
    try:
        _hook_step_tracker(torch)
    except Exception as exc:  # a torch without these internals: iterations cannot be counted from torch
        log.warning("xpuprof: torch's step count (KinetoStepTracker) could not be hooked: %s: %s; iteration-"
                    "based captures count xpuprof.step() calls only", type(exc).__name__, exc)
    for callback in callbacks:
        try:
            callback(torch)
        except Exception:
            log.exception("xpuprof: a torch import callback failed")


def _hook_step_tracker(torch) -> None:
    import torch.autograd.profiler as autograd_profiler  # already imported by torch itself
    import torch.profiler  # noqa: F401  (the optimizer hook lives there)

    original = autograd_profiler._kineto_step

    def _kineto_step(_original=original):
        _original()
        steps.advance()

    autograd_profiler._kineto_step = _kineto_step
    steps.use_torch_tracker(autograd_profiler.KinetoStepTracker)
    # torch.profiler registers its optimizer hook only when it saw KINETO_USE_DAEMON at import.
    from torch.optim import optimizer as optim_module

    hook = getattr(torch.profiler, "_optimizer_post_hook", None)
    registered = getattr(optim_module, "_global_optimizer_post_hooks", {})
    if hook is None or hook not in registered.values():
        optim_module.register_optimizer_step_post_hook(hook or _optimizer_post_hook)


def _optimizer_post_hook(optimizer, args, kwargs) -> None:
    sys.modules["torch.autograd.profiler"].KinetoStepTracker.increment_step("Optimizer")


def _reset_for_tests() -> None:
    global _hooked, _finder
    with _lock:
        if _finder is not None and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder, _hooked = None, False
        _after_import.clear()
