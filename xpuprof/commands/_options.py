"""Argument types shared by the subcommands."""
from __future__ import annotations

import argparse


def top_count(text: str) -> int | None:
    """``--top N``: a positive row count, or ``all`` (None). Negatives and 0 are refused: a slice such as
    ``rows[:-1]`` would silently drop rows."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}")
    return n


def _number(text: str, kind, least, *, strict: bool, what: str):
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or value != value or value == float("inf") or value < least or (strict and value == least):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _number(text, int, 0, strict=True, what="a positive integer")


def non_negative_int(text: str) -> int:
    return _number(text, int, 0, strict=False, what="an integer >= 0")


def positive_seconds(text: str) -> float:
    return _number(text, float, 0.0, strict=True, what="a positive number of seconds")


def non_negative_seconds(text: str) -> float:
    return _number(text, float, 0.0, strict=False, what="a number of seconds >= 0")


def tcp_port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {text!r}")
    return value


# ----------------------------------------------------------------------------- mistakes: one line, exit 2
class UsageError(ValueError):
    """A command line that asks for something impossible: said in one line, exit status 2, before any work."""


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line (``xpuprof report: error: ...``) with the closest
    valid choice, instead of the usage text and the error."""

    def error(self, message: str):
        import re

        from ..suggest import did_you_mean

        hint = ""
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
        self.exit(2, f"{self.prog}: error: {message}{hint} ({self.prog} --help lists the options)\n")


FORMAT_OF_SUFFIX = {".html": "html", ".htm": "html", ".csv": "csv", ".json": "json", ".txt": "table"}


def output_format(fmt: str | None, output: str | None, formats, default: str = "table") -> str:
    """The format to write: ``--format`` as given, else the one the ``-o`` file's extension names (``r.html``:
    html), else ``default``. A ``--format`` the extension contradicts is refused (``UsageError``)."""
    from pathlib import Path

    implied = None
    if output:
        implied = FORMAT_OF_SUFFIX.get(Path(str(output)).suffix.lower())
        if implied not in formats:
            implied = None
    if fmt is None:
        return implied or default
    if implied is not None and implied != fmt:
        suffix = Path(str(output)).suffix
        wanted = [s for s, f in FORMAT_OF_SUFFIX.items() if f == fmt]
        other = f" or name the file {wanted[0]}" if wanted else ""
        raise UsageError(f"-o {output} is a {suffix} file ({implied}) but --format {fmt} was given; leave out "
                         f"--format (the extension picks {implied}){other}")
    return fmt


def check_categories(categories) -> list[str]:
    """Every ``--cat`` word names an activity type (any spelling: ``runtime``, ``cuda_runtime``, a plugin's);
    otherwise ``UsageError`` with the closest name and the valid ones."""
    from ..activity import ActivityType
    from ..suggest import did_you_mean

    for word in categories or ():
        try:
            ActivityType.parse(word)
        except (ValueError, TypeError):
            valid = [t.value for t in ActivityType]
            raise UsageError(f"--cat {word}: not an event category{did_you_mean(word, ActivityType.all_names()) or '.'}"
                             f" Valid: {', '.join(valid)} (or a vendor spelling: cuda_runtime, xpu_driver, ...)") \
                from None
    return list(categories or [])


def add_progress_option(parser) -> None:
    """``--no-progress``, as ``xpuprof run`` spells it: no bar on the terminal (there is none on a pipe)."""
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar on the terminal (none is drawn when stderr is not a terminal)")
