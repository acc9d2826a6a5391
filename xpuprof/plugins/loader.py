"""Directory plugins: every ``*.py`` module and shared library in the directories the user named.

Directories come from ``XPUPROF_PLUGIN_PATH`` (``os.pathsep``-separated), Kineto's
``KINETO_PLUGIN_LIB_DIR_PATH`` (an alias, with a one-line notice) and ``ProfilerConfig.plugin_paths``,
in that order. Files load in a stable order (directory order, then file name). Nothing is loaded
from a directory the user did not name, and a file another user could change is refused with a
warning (``trust``: OpenSSH's StrictModes rule, every component up to ``/``). Python plugins are
compiled from their source each time; ``__pycache__`` is never read or written.

A Python plugin registers its backend(s) with ``xpuprof.register_backend``; a shared library
implements the C ABI of ``xpuprof/include/xpuprof_plugin.h`` (see ``c_abi``). A plugin that
fails to load is reported once with its file and the reason, and skipped.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import diagnostics
from . import faults
from . import registry as plugin_registry
from .isolation import PluginHung, call_plugin
from .trust import untrusted

log = logging.getLogger("xpuprof.plugins")

ENV_PLUGIN_PATH = "XPUPROF_PLUGIN_PATH"
ENV_KINETO_PLUGIN_PATH = "KINETO_PLUGIN_LIB_DIR_PATH"
SHARED_LIBRARY_SUFFIXES = {"linux": (".so",), "darwin": (".dylib", ".so"), "win32": (".dll",)}.get(
    sys.platform, (".so",))


@dataclass
class LoadedPlugin:
    path: Path
    kind: str  # "python" or "c"
    backends: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


_lock = threading.RLock()
_loaded: dict[Path, LoadedPlugin] = {}
_scanned: set[Path] = set()  # directories already loaded (first use loads, later uses are free)


def _notice_once(key: str, message: str) -> None:
    diagnostics.warn_once(log, ("plugin-path", key), "%s", message)


def _split(value: str | None) -> list[str]:
    return [p for p in (value or "").split(os.pathsep) if p.strip()]


def plugin_dirs(config=None, environ=None) -> list[Path]:
    """The plugin directories to load, de-duplicated, in order: env, Kineto alias, config."""
    env = os.environ if environ is None else environ
    dirs: list[str] = _split(env.get(ENV_PLUGIN_PATH))
    kineto = _split(env.get(ENV_KINETO_PLUGIN_PATH))
    if kineto:
        _notice_once("kineto-plugin-path", f"notice: {ENV_KINETO_PLUGIN_PATH} is honoured as an alias of "
                                           f"{ENV_PLUGIN_PATH}; please switch to {ENV_PLUGIN_PATH}")
        dirs += kineto
    if config is not None:
        paths = getattr(config, "plugin_paths", None) or []
        if isinstance(paths, (str, os.PathLike)):
            paths = _split(os.fspath(paths))
        dirs += [os.fspath(p) for p in paths]
    out: list[Path] = []
    for d in dirs:
        p = Path(os.path.expanduser(d))
        if p not in out:
            out.append(p)
    return out


def _is_plugin_file(path: Path) -> str | None:
    name = path.name
    if name.startswith("."):
        return None
    if name.endswith(".py"):
        return "python"
    if name.endswith(SHARED_LIBRARY_SUFFIXES):
        return "c"
    return None


def plugin_files(directory: Path) -> list[tuple[Path, str]]:
    """The plugin files of one directory in load order, refusing unsafe ones (reported)."""
    origin = f"plugin directory {directory}"
    try:
        st = directory.stat()
    except OSError as exc:
        faults.report(origin, "load", f"cannot read the directory: {exc.strerror or exc}")
        return []
    if not stat.S_ISDIR(st.st_mode):
        faults.report(origin, "load", "not a directory")
        return []
    why = untrusted(directory)
    if why:
        faults.report(origin, "load", f"refused: {why}; plugins are loaded only from directories that nobody "
                                      f"but you (or root) can write, up to /")
        return []
    out = []
    for path in sorted(directory.iterdir(), key=lambda p: p.name):
        kind = _is_plugin_file(path)
        if kind is None:
            continue
        try:
            fst = path.stat()
        except OSError as exc:
            faults.report(_origin(path, kind), "load", f"cannot stat: {exc.strerror or exc}")
            continue
        if not stat.S_ISREG(fst.st_mode):
            continue
        why = untrusted(path)
        if why:
            faults.report(_origin(path, kind), "load", f"refused: {why}")
            continue
        out.append((path, kind))
    return out


def _origin(path: Path, kind: str) -> str:
    return f"{'python' if kind == 'python' else 'C'} plugin {path}"


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the plugin's source every time: bytecode in ``__pycache__`` is neither read (a ``.pyc``
    there may be another user's) nor written (a cache the next load would have to trust)."""

    def get_code(self, fullname):
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)

    def set_data(self, path, data, *, _mode=0o666):
        """Writes nothing: plugins are never cached as bytecode (never called by get_code above)."""


def _load_python(path: Path, origin: str) -> list[str]:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    mod_name = f"xpuprof_plugin_{path.stem.replace('-', '_').replace('.', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path, loader=_SourceOnlyLoader(mod_name, str(path)))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot create an import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    from ..collectors import registry as collector_registry

    before = set(plugin_registry.plugin_backends())
    collectors_before = set(collector_registry.plugin_collectors())
    sys.modules[mod_name] = module

    def run_module() -> None:
        with plugin_registry.loading(origin):  # set in the helper thread: contextvars do not cross threads
            spec.loader.exec_module(module)

    try:
        call_plugin(origin, "load", run_module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        for name, o in plugin_registry.plugin_backends().items():
            if o == origin and name not in before:  # a half-loaded plugin leaves nothing behind
                plugin_registry.unregister_backend(name)
        for name, o in collector_registry.plugin_collectors().items():
            if o == origin and name not in collectors_before:
                collector_registry.unregister_collector(name)
        raise
    names = [n for n, o in plugin_registry.plugin_backends().items() if o == origin and n not in before]
    collectors = [n for n, o in collector_registry.plugin_collectors().items()
                  if o == origin and n not in collectors_before]
    if not names and not collectors:
        raise ImportError("the module registered no backend and no collector (decorate a Backend subclass with "
                          "@xpuprof.register_backend or a Collector subclass with @xpuprof.register_collector)")
    return names


def _forget_registrations(origin: str) -> None:
    """What a plugin abandoned at load registered before it hung (it may register more later: refused)."""
    from ..collectors import registry as collector_registry

    for name, o in plugin_registry.plugin_backends().items():
        if o == origin:
            plugin_registry.unregister_backend(name)
    for name, o in collector_registry.plugin_collectors().items():
        if o == origin:
            collector_registry.unregister_collector(name)


def load_file(path: Path, kind: str) -> LoadedPlugin:
    """Load one plugin file (once per process); failures are reported, never raised."""
    path = Path(path)
    key = path.resolve()
    with _lock:
        if key in _loaded:
            return _loaded[key]
        origin = _origin(path, kind)
        result = LoadedPlugin(path, kind)
        try:
            if kind == "python":
                result.backends = _load_python(path, origin)
            else:
                from .c_abi import load_c_plugin

                result.backends = [call_plugin(origin, "load", load_c_plugin, path, origin)]
        except PluginHung as exc:  # reported by call_plugin (stage "load"), the plugin is disabled
            result.error = exc.fault.split(": load failed: ", 1)[-1]
            _forget_registrations(origin)
        except Exception as exc:
            result.error = faults.describe_exception(exc) if kind == "python" else f"{exc}"
            faults.report(origin, "load", result.error)
        _loaded[key] = result
        return result


def load_plugins(config=None, environ=None) -> list[LoadedPlugin]:
    """Load every plugin of every named directory (idempotent: each file loads once)."""
    from ..deadline import default_deadline_s

    # A bad XPUPROF_PLUGIN_DEADLINE_S is said once here (and the default used), not once per plugin.
    default_deadline_s()
    results = []
    for directory in plugin_dirs(config, environ):
        with _lock:
            if directory in _scanned:
                results += [p for p in _loaded.values() if p.path.parent == directory]
                continue
            _scanned.add(directory)
        for path, kind in plugin_files(directory):
            results.append(load_file(path, kind))
    return results


def loaded_plugins() -> list[LoadedPlugin]:
    with _lock:
        return list(_loaded.values())


def reset() -> None:
    """Forget which files were loaded (tests). Backends they registered stay until unregistered."""
    with _lock:
        _loaded.clear()
        _scanned.clear()
    diagnostics.forget("plugin-path")
