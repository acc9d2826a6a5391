"""Kernel name filters (unitrace's ``--include-kernels`` / ``--exclude-kernels`` and their ``-file``
variants), as regular expressions searched in each kernel's name.

A kernel is kept when no include pattern is given or one of them matches, and no exclude pattern
matches (unitrace: the excluded are taken out of the included). A plain word is a regex that matches
names containing it, so unitrace's substring lists work unchanged.

Patterns from the network (an on-demand request: whoever can reach the daemon chooses them) are matched
with RE2 (``linear=True``: ``google-re2``), whose time is linear in the name: a pattern that backtracks
for hours under Python's engine (``(.*.*)*z``) takes microseconds, and one RE2 cannot run in linear time
(backreferences, lookaround) is refused, naming it.

Lists are written as unitrace writes them: comma-separated, an item in double quotes may hold commas
(``foo,"bar,with,comma",baz``; ``\\"`` is a quote inside one). Files hold such lists, one or more per
line; blank lines and lines starting with ``#`` are skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

MAX_FILTER_FILE_BYTES = 16 << 20
# Every distinct kernel name is searched with every pattern, and Python's regex compiler takes superlinear
# time on a huge alternation (754 k patterns: still compiling after 90 s; 80 k: 11 s; 10 k: under 1 s). A
# list past this bound is refused in one line - counted before anything is compiled - never a long wait.
MAX_FILTER_PATTERNS = 10_000


class KernelFilterError(ValueError):
    """A pattern that does not compile or a filter list/file that cannot be read; the message says which."""


def too_many_patterns(count: int, what: str) -> KernelFilterError:
    return KernelFilterError(f"{what} holds {count:,} patterns; at most {MAX_FILTER_PATTERNS:,} are supported (every "
                             "kernel name is searched with each of them): use fewer, broader patterns - one regular "
                             "expression for a family of names")


def split_filter_list(text: str) -> list[str]:
    """``a,"b,c",d`` -> ["a", "b,c", "d"] (unitrace's syntax); empty items are dropped."""
    text = str(text)
    if '"' not in text:  # no quoting: one split, linear in C
        return [item.strip() for item in text.split(",") if item.strip()]
    out, cur, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == '"':
            cur.append('"')
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if quoted:
        raise KernelFilterError(f"kernel filter list {text!r} has an unclosed double quote")
    out.append("".join(cur))
    return [item.strip() for item in out if item.strip()]


def read_filter_file(path) -> list[str]:
    """The patterns of a unitrace-style filter file."""
    from ..inputs import InputError, open_regular

    p = Path(path)
    too_big = f"kernel filter file {p} is larger than {MAX_FILTER_FILE_BYTES >> 20} MiB"
    try:  # a regular file (a FIFO would hang the read, /dev/zero never end), at most the limit
        fd, st = open_regular(p, "kernel filter file")
        with open(fd, "rb") as f:
            if st.st_size > MAX_FILTER_FILE_BYTES:
                raise KernelFilterError(too_big)
            raw = f.read(MAX_FILTER_FILE_BYTES + 1)
        if len(raw) > MAX_FILTER_FILE_BYTES:  # grew while read
            raise KernelFilterError(too_big)
        text = raw.decode("utf-8")
    except InputError as exc:
        raise KernelFilterError(str(exc)) from None
    except OSError as exc:
        raise KernelFilterError(f"cannot read kernel filter file {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise KernelFilterError(f"kernel filter file {p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    out: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.extend(split_filter_list(line))
        except KernelFilterError as exc:
            raise KernelFilterError(f"{p}:{number}: {exc}") from None
        if len(out) > MAX_FILTER_PATTERNS:  # said at once, before the rest is read or anything compiled
            raise too_many_patterns(_count_patterns(text), f"kernel filter file {p}")
    return out


def _count_patterns(text: str) -> int:
    """How many patterns a filter file's text holds (for the refusal's message; quoted commas aside)."""
    return sum(line.count(",") + 1 for line in (raw.strip() for raw in text.splitlines())
               if line and not line.startswith("#"))


def normalize_patterns(value, what: str) -> list[str]:
    """A list of patterns from a list/tuple of strings or one unitrace-style list string."""
    if value is None:
        return []
    if isinstance(value, str):
        return split_filter_list(value)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise KernelFilterError(f"{what} must be a list of regular expressions (strings), not {value!r}")
    return [v for v in value if v]


def compile_patterns(patterns: Iterable[str], what: str) -> list[re.Pattern]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise KernelFilterError(f"{what} pattern {p!r} is not a valid regular expression: {exc}") from None
    return out


def compile_linear(patterns: Iterable[str], what: str) -> list:
    """The patterns compiled with RE2 (linear-time matching); ``KernelFilterError`` naming one RE2 cannot run
    in linear time, or when google-re2 is not installed."""
    try:
        import re2
    except ImportError:
        raise KernelFilterError(f"{what}: patterns from an on-demand request are matched with RE2 (linear time), "
                                "and google-re2 is not installed here (pip install google-re2)") from None
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern on the process's stderr
    out = []
    for p in patterns:
        try:
            out.append(re2.compile(p, options))
        except re2.error as exc:
            detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise KernelFilterError(f"{what} pattern {p!r} cannot be matched in linear time ({detail}); on-demand "
                                    "requests accept RE2 syntax: no backreferences or lookaround") from None
    return out


_BACKREF = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


def _one_search(patterns: list[re.Pattern]) -> list[re.Pattern]:
    """The patterns as one alternation (one search per name instead of one per pattern) when that means
    the same: not when a pattern refers to a group by number or name (the alternation renumbers them)."""
    if len(patterns) < 2 or any(_BACKREF.search(p.pattern) or p.groupindex for p in patterns):
        return patterns
    try:
        return [re.compile("|".join(f"(?:{p.pattern})" for p in patterns))]
    except re.error:  # e.g. flags set inside one pattern that Python wants at the start
        return patterns


@dataclass(frozen=True)
class KernelFilter:
    """Compiled include/exclude patterns. ``keep(name)`` per distinct name; ``keep_many`` for a list."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    linear: bool = False  # RE2: patterns from the network (on-demand requests)

    def __post_init__(self) -> None:
        for patterns, what in ((self.include, "include_kernels"), (self.exclude, "exclude_kernels")):
            if len(patterns) > MAX_FILTER_PATTERNS:
                raise too_many_patterns(len(patterns), what)
        if self.linear:
            object.__setattr__(self, "_inc", compile_linear(self.include, "include_kernels"))
            object.__setattr__(self, "_exc", compile_linear(self.exclude, "exclude_kernels"))
            return
        object.__setattr__(self, "_inc", _one_search(compile_patterns(self.include, "include_kernels")))
        object.__setattr__(self, "_exc", _one_search(compile_patterns(self.exclude, "exclude_kernels")))

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = (), *,
           linear: bool = False) -> "KernelFilter | None":
        """None when nothing is filtered (the decode path then does no work at all)."""
        if not include and not exclude:
            return None
        return cls(tuple(include), tuple(exclude), linear)

    def keep(self, name: str) -> bool:
        if self._inc and not any(p.search(name) for p in self._inc):
            return False
        return not any(p.search(name) for p in self._exc)

    def keep_many(self, names: Iterable[str]) -> list[bool]:
        return [self.keep(n) for n in names]

    def describe(self) -> dict:
        return {"include": list(self.include), "exclude": list(self.exclude)}
