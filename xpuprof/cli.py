"""The ``xpuprof`` command. Each subcommand lives in ``xpuprof/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xpuprof", description="Profile accelerator workloads into Kineto-compatible traces.")
    parser.add_argument("--version", action="version", version=f"xpuprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .deadline import DeadlineConfigError

    try:
        return int(args.func(args) or 0)
    except DeadlineConfigError as exc:  # a configuration error of the environment: one line, never a traceback
        print(f"xpuprof {args.command}: {exc}", file=sys.stderr)
        return 2


def console_main() -> int:
    """The ``xpuprof`` executable (and ``python -m xpuprof``).

    PTI's core library finds its sibling libraries only through LD_LIBRARY_PATH, which the
    dynamic loader reads at process start, so ``xpuprof run`` re-execs itself once with it set
    (a no-op without intel-pti). Only the executable does this, never ``main()`` called in-process.
    """
    argv = sys.argv[1:]
    if argv[:1] == ["run"]:
        from .vendors.pti import reexec_with_library_path

        reexec_with_library_path()
    return main(argv)
