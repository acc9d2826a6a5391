"""The one way into xpuprof's C extensions.

Every extension (``xpuprof/_native/<name>.c`` plus the ``shared/`` sources setup.py lists for it) is
reached through this module: ``load(name, needed_for)`` returns the module or raises ``NativeUnavailable``
saying which module is missing, why (never built, built but does not load, its import blocked), whether a
C compiler is there to build it and what needs it; ``optional(name)`` returns None instead, for callers that
have a slower path of their own. No other module of xpuprof imports ``xpuprof._native.<name>`` itself
(tests/contracts/test_native_boundary.py checks it).

Nothing is loaded here: importing this package costs one module. Each extension's Python-visible API is
in the ``<name>.pyi`` stub beside its source, checked against the built module by ``mypy.stubtest``
(the same test). ``EXTENSIONS`` names every extension and the C sources it is built from; setup.py builds
from it, so the list cannot drift from the build.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

__all__ = ["EXTENSIONS", "NativeUnavailable", "load", "optional"]

# name -> its C sources, relative to this folder: the extension's own file first, then the shared sources
# (``shared/*.c``, each with a declaration-only header) compiled into it.
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "hostrec": ("hostrec.c", "shared/correlation.c", "shared/int64log.c", "shared/nametable.c", "shared/argsarea.c",
                "shared/hostmem.c", "shared/jsonstr.c"),
    "keyindex": ("keyindex.c",),
    "lanes": ("lanes.c",),
    "pcsample": ("pcsample.c",),
    "pfdec": ("pfdec.c", "shared/protowire.c"),
    "pfenc": ("pfenc.c", "shared/protowire.c"),
    "ptibuf": ("ptibuf.c", "shared/bufqueue.c"),
    "records": ("records.c",),
    "rocbuf": ("rocbuf.c", "shared/bufqueue.c", "shared/bufqueue_py.c"),
    "rowfmt": ("rowfmt.c", "shared/jsonstr.c"),
    "tracescan": ("tracescan.c",),
    "zekernels": ("zekernels.c",),
    "zemem": ("zemem.c",),
}


class NativeUnavailable(ImportError):
    """A C extension of xpuprof that cannot be used here; the message says which, why, and how to build it.

    ``module`` is the extension's full name, ``reason`` the part of the message that says why."""

    def __init__(self, message: str, module: str, reason: str) -> None:
        super().__init__(message, name=module)
        self.module = module
        self.reason = reason


def _check_name(name: str) -> str:
    if name not in EXTENSIONS:
        raise ValueError(f"xpuprof has no C extension {name!r}; the extensions are: {', '.join(EXTENSIONS)}")
    return f"{__name__}.{name}"


def load(name: str, needed_for: str) -> ModuleType:
    """The extension ``xpuprof._native.<name>``; ``needed_for`` says what needs it (the error says "it is
    needed for <needed_for>").

    Raises ``NativeUnavailable`` (an ImportError) when it is not built, does not load, or its import is
    blocked. Each call goes through ``sys.modules``, so a test that blocks or replaces a module there is
    seen by every caller."""
    full = _check_name(name)
    try:
        return importlib.import_module(full)
    except ImportError as exc:
        what, reason, advice = _why_not(name, exc)
        message = f"{full} {what} ({reason}); it is needed for {needed_for}."
        raise NativeUnavailable(f"{message} {advice}".rstrip(), full, reason) from exc


def optional(name: str) -> ModuleType | None:
    """The extension ``xpuprof._native.<name>``, or None when ``load`` would raise (a caller with a path of
    its own; ``load`` gives the reason)."""
    full = _check_name(name)
    try:
        return importlib.import_module(full)
    except ImportError:
        return None


def _why_not(name: str, exc: ImportError, folder: str | None = None) -> tuple[str, str, str]:
    """(what is wrong, why, what to do) for an extension whose import failed: no built file, a file that
    does not load, a blocked import. ``folder``: where the extensions are (this package's folder)."""
    from importlib import machinery
    from pathlib import Path

    if sys.modules.get(f"{__name__}.{name}", ModuleType) is None:
        return "cannot be imported", "its import is blocked: None in sys.modules", ""
    here = Path(__file__).parent if folder is None else Path(folder)
    suffixes = machinery.EXTENSION_SUFFIXES
    built = sorted(p for p in here.glob(f"{name}.*") if any(p.name == name + s for s in suffixes))
    if built:
        why = str(exc) if str(built[0]) in str(exc) else f"{built[0]}: {exc}"
        return "is built but does not load", why, f"Rebuild it for this Python. {_compiler_state()}"
    source = here / EXTENSIONS[name][0]
    if not source.is_file():
        return "is not built", f"no {name}{suffixes[0]} in {here}, and no C sources to build it from", \
            "Reinstall xpuprof from its source distribution with a C compiler available."
    return "is not built", f"no {name}{suffixes[0]} in {here}", _compiler_state()


def _compiler_state() -> str:
    """Whether a C compiler is there to build the extensions, and the commands that do."""
    import os
    import shlex
    import shutil
    import sysconfig

    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(cc)
    compiler = words[0] if words else "cc"
    path = shutil.which(compiler)
    source = "$CC" if os.environ.get("CC") else "the compiler this Python was built with"
    if path is None:
        return (f"There is no C compiler to build it: {compiler} ({source}) is not on PATH; install one (e.g. "
                "apt-get install gcc), then `pip install -e .` in the source tree.")
    return (f"The C compiler {compiler} is at {path}: build the C parts with `pip install -e .` or "
            "`python setup.py build_ext --inplace` in the source tree.")
