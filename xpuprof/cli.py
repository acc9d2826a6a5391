"""The ``xpuprof`` command. Each subcommand lives in ``xpuprof/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from . import __version__, commands

_LITERAL = re.compile(r"``(.+?)``", re.S)
EXIT_CLOSED_STDOUT = 128 + 13  # the status of a process killed by SIGPIPE, as any Unix tool in a closed pipe


def plain(text: str | None) -> str | None:
    """Docstring markup (``literal``) as the plain text a terminal shows."""
    return _LITERAL.sub(r"\1", text) if text else text


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without breaking words at hyphens (``--by-rank`` stays whole)."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        import textwrap

        return textwrap.fill(self._whitespace_matcher.sub(" ", text).strip(), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Every description and help text of ``parser`` and its subcommands as plain text."""
    parser.formatter_class = _HelpFormatter
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:
        action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in action.choices.values():
                _plain_help(sub)


def command_of(argv: list[str]) -> str | None:
    """The command an argument list runs (its first word that is not an option), None when it names none."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``xpuprof`` parser. Given the argument list to parse, only the module of the command it names is
    imported (``xpuprof --help``: none); every other command is listed by its line in ``commands.SUMMARIES``.
    Without one, every command's full parser is built."""
    from .commands._options import OneLineParser  # usage errors in one line, with the closest choice

    parser = OneLineParser(prog="xpuprof", description="Profile accelerator workloads into Kineto-compatible traces.")
    parser.add_argument("--version", action="version", version=f"xpuprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None if argv is None else command_of(argv)
    for name in commands.names():
        if argv is None or name == wanted or name not in commands.SUMMARIES:
            importlib.import_module(f"{commands.__name__}.{name}").register(sub)
        else:
            sub.add_parser(name, help=commands.SUMMARIES[name])  # listed, not imported
    _plain_help(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a closed stdout (``xpuprof devices | head``) ends it quietly."""
    try:
        try:
            status = _main(argv)
        except SystemExit:  # argparse's --help, --version and usage errors: their output is flushed here too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # inside the try: an EPIPE on the last buffered bytes is the same case
        return status
    except BrokenPipeError:
        # Nothing more can be written; point stdout at /dev/null so the interpreter's own final flush
        # does not raise again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_CLOSED_STDOUT


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .progress import shown

    # long work draws a bar on a terminal (xpuprof.progress), nothing when stderr is not one or --no-progress
    with shown(enabled=not getattr(args, "no_progress", False)):
        return int(args.func(args) or 0)


def console_main() -> int:
    """The ``xpuprof`` executable (and ``python -m xpuprof``).

    PTI's core library finds its sibling libraries only through LD_LIBRARY_PATH, which the
    dynamic loader reads at process start, so ``xpuprof run`` re-execs itself once with it set
    (a no-op without intel-pti). Only the executable does this, never ``main()`` called in-process.
    """
    argv = sys.argv[1:]
    if argv[:1] == ["run"] and not {"-h", "--help"} & set(argv[1:]):  # help runs nothing: no PTI, no re-exec
        from .vendors.pti import reexec_with_library_path

        reexec_with_library_path()
    return main(argv)
