"""torch's own Kineto and xpuprof in one process: one daemon client, one step count.

With ``KINETO_USE_DAEMON`` set, torch's Kineto starts its daemon client when libkineto first initializes:
when libtorch loads (``import torch``; a static initializer reads the variable with ``getenv``, after
``KINETO_DAEMON_INIT_DELAY_S`` when that is set) or at the first profiler start, whichever comes first,
once per process. ``torch.profiler`` also registers an optimizer step hook that feeds
``KinetoStepTracker``. Two clients polling one daemon would answer one request with two traces, both
driving the same vendor tracing API. So:

* xpuprof first (``import xpuprof`` before torch, or ``xpuprof exec``): while ``import torch`` runs, the
  variable is taken out of the C environment only (``os.unsetenv``: ``os.environ`` keeps it), and libkineto
  is initialized right after, still without it (``_init_kineto_unregistered``: one empty profiler start and
  stop of torch's, well under a millisecond); then the C environment gets the variable back. torch's client
  never starts in this process, and every child process (a shell, libtorch in another venv, a Python child
  without xpuprof) inherits the variable as the user set it. The optimizer hook is torch.profiler's own (it
  reads ``os.environ``). The process gives one trace: xpuprof's.
* torch first: its client already owns the link; xpuprof says so once and does not compete.

Either way, once torch is in, ``KinetoStepTracker``'s ``_kineto_step`` is hooked so iterations count
as Kineto counts them (``steps``). torch is never imported here: only observed when the program
imports it (a post-import hook on the top-level ``torch`` import).
"""
from __future__ import annotations

import contextlib
import importlib.abc
import logging
import os
import sys
import threading
from typing import Callable

from . import steps

log = logging.getLogger("xpuprof.ondemand")

USE_DAEMON_ENV = "KINETO_USE_DAEMON"
INIT_DELAY_ENV = "KINETO_DAEMON_INIT_DELAY_S"  # torch's delayed libkineto init reads KINETO_USE_DAEMON later
KINETO_LOG_LEVEL_ENV = "KINETO_LOG_LEVEL"

_lock = threading.Lock()
_after_import: list[Callable[[object], None]] = []
_hooked = False
_finder: "_TorchImportFinder | None" = None


def torch_client_running() -> bool:
    """torch was imported with ``KINETO_USE_DAEMON`` set, before xpuprof could keep its client off: its
    Kineto polls."""
    torch = sys.modules.get("torch")
    return torch is not None and hasattr(torch, "_C") and USE_DAEMON_ENV in os.environ and not _hooked


@contextlib.contextmanager
def hidden_from_torch():
    """While the block runs, the C environment (what libtorch's ``getenv`` reads) lacks ``KINETO_USE_DAEMON``
    and ``KINETO_DAEMON_INIT_DELAY_S`` (so torch's init runs at once, and sees no opt-in); ``os.environ`` is
    untouched, and the C environment gets both back from it after."""
    names = [n for n in (USE_DAEMON_ENV, INIT_DELAY_ENV) if n in os.environ]
    for name in names:
        os.unsetenv(name)
    try:
        yield
    finally:
        for name in names:
            value = os.environ.get(name)
            if value is not None:
                os.putenv(name, value)


def _init_kineto_unregistered(torch) -> None:
    """libkineto initialized now (inside ``hidden_from_torch``): torch registers its profiler at the first
    profiler start, reading ``KINETO_USE_DAEMON`` then; after it, no later start reads it again. One empty
    start and stop of torch's profiler (CPU only, nothing recorded), with Kineto's log level at its top so
    that its ``USDT: profiler_start/stop`` lines do not reach the program's stderr. Skipped when a profiler
    already runs (it initialized libkineto)."""
    autograd = torch._C._autograd
    if autograd._profiler_enabled():
        return
    profiler = torch._C._profiler
    activities = {profiler.ProfilerActivity.CPU}
    config = profiler.ProfilerConfig(profiler.ProfilerState.KINETO, False, False, False, False, False,
                                     profiler._ExperimentalConfig())
    quiet = KINETO_LOG_LEVEL_ENV not in os.environ
    if quiet:
        os.environ[KINETO_LOG_LEVEL_ENV] = "6"
    try:
        autograd._prepare_profiler(config, activities)
        autograd._enable_profiler(config, activities)
        autograd._disable_profiler()
    finally:
        if quiet:
            os.environ.pop(KINETO_LOG_LEVEL_ENV, None)


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
            with hidden_from_torch():  # no-op without the opt-in in the environment
                _original(module)
                # torch/__init__ has run to its end; the import system clears this flag right after we return,
                # and code that treats an initializing torch as absent (torch_ops) must see it complete now.
                module_spec = getattr(module, "__spec__", None)
                if module_spec is not None:
                    module_spec._initializing = False
                _torch_ready(module)
                if USE_DAEMON_ENV in os.environ:
                    try:
                        _init_kineto_unregistered(module)
                    except Exception as exc:  # a torch without these internals: its client may start later
                        log.warning("xpuprof: torch's profiler could not be initialized without its on-demand "
                                    "client (%s: %s); a torch.profiler start in this process may register torch's "
                                    "own client beside xpuprof's", type(exc).__name__, exc)

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
