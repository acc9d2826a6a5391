"""Which files a command reads: the one directory rule, shared by ``report``, ``convert``, ``diff``, ``merge``
and ``analyze``; and ``read_inputs``, every input read into one TraceTable.

A path named on the command line is read as given: a file as a trace (whatever its name: Kineto JSON or
Perfetto protobuf, told apart by its first bytes), a directory holding a store manifest as a trace store.
Any other directory stands for the trace files under it, recursively: its regular files named ``*.json``,
``*.json.gz``, ``*.pftrace`` or ``*.perfetto-trace``, in natural order (numbers in names compare as
numbers: ``rank2`` before ``rank10``, so ranks from positions and per-rank work run 0, 1, 2, ...). Not
taken, and said in one line per directory (``Inputs.notes``): hidden entries (a writer's private
``.rank=N.tmp``, editor files), trace stores inside (give a store by itself), symbolic links (a link
another user planted is never followed), and files of other names or kinds. What xpuprof itself writes beside its traces and is not a trace
(``COMPANIONS``: ``xpuprof run``'s ``summary.jsonl``) is passed over without a line: it is expected there.
A directory with no trace file is an error naming it.
"""
from __future__ import annotations

import logging
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence


TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".perfetto-trace")
TRACE_NAMES = "*.json, *.json.gz, *.pftrace or *.perfetto-trace"
COMPANIONS = frozenset({"summary.jsonl"})  # files xpuprof writes beside its traces (xpuprof run's summary)
log = logging.getLogger("xpuprof")
_DIGITS = re.compile(r"(\d+)")


class InputsError(ValueError):
    """A path that names nothing to read; the message names it (``empty_dir``: a directory without traces)."""

    def __init__(self, text: str, empty_dir: Path | None = None) -> None:
        super().__init__(text)
        self.empty_dir = empty_dir


@dataclass
class Inputs:
    traces: list[Path] = field(default_factory=list)  # trace files (Kineto JSON, Perfetto protobuf), in order
    stores: list[Path] = field(default_factory=list)  # trace store directories
    notes: list[str] = field(default_factory=list)  # per directory: what was not taken, and why
    errors: list[str] = field(default_factory=list)  # paths that name nothing to read (``strict=False``)


def is_store_dir(path: Path) -> bool:
    from .store import is_store

    return is_store(path)


def is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


def expand_inputs(paths: Iterable[str | Path], *, strict: bool = True) -> Inputs:
    """The traces and stores the paths stand for (the module's rule). ``strict``: a path naming nothing is an
    ``InputsError``; else it is listed in ``errors`` and the others are still expanded."""
    out = Inputs()
    for p in map(Path, paths):
        try:
            if not os.path.lexists(p):
                raise InputsError(f"{p}: no such trace file or directory")
            if p.is_dir():
                if is_store_dir(p):
                    out.stores.append(p)
                    continue
                found, note = _walk(p)
                if not found:
                    raise InputsError(f"{p}: directory holds no trace files ({TRACE_NAMES})"
                                      + (f" ({note.split(': ', 1)[1]})" if note else ""), p)
                out.traces += found
                if note:
                    out.notes.append(note)
            else:
                out.traces.append(p)
        except InputsError as exc:
            if strict:
                raise
            out.errors.append(str(exc))
    return out


def natural_key(name: str) -> tuple:
    """Sorts names with their numbers as numbers (``t2`` before ``t10``): text and numbers alternate."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(name)))


def _walk(top: Path) -> tuple[list[Path], str]:
    """The trace files under ``top`` (in natural order, recursively) and one line on what was not taken."""
    found: list[Path] = []
    skipped: Counter = Counter()
    examples: dict[str, str] = {}

    def skip(why: str, path: Path) -> None:
        skipped[why] += 1
        examples.setdefault(why, str(path.relative_to(top)))

    stack = [top]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: natural_key(e.name))
        except OSError as exc:
            skip(f"unreadable ({exc.strerror or exc})", d)
            continue
        subdirs = []
        for e in entries:
            path = Path(e.path)
            if e.name.startswith("."):
                skip("hidden", path)
                continue
            try:
                st = os.lstat(e.path)
            except OSError:
                skip("unreadable", path)
                continue
            if stat.S_ISLNK(st.st_mode):
                skip("symbolic link (not followed)", path)
            elif stat.S_ISDIR(st.st_mode):
                if is_store_dir(path):
                    skip("trace store (give it by itself)", path)
                else:
                    subdirs.append(path)
            elif not stat.S_ISREG(st.st_mode):
                skip("not a regular file", path)
            elif is_trace_name(e.name):
                found.append(path)
            elif e.name not in COMPANIONS:
                skip(f"not {TRACE_NAMES}", path)
        stack.extend(reversed(subdirs))
    found.sort(key=lambda p: tuple(map(natural_key, p.relative_to(top).parts)))
    if not skipped:
        return found, ""
    parts = [f"{n} {why} (e.g. {examples[why]})" for why, n in skipped.items()]
    return found, f"{top}: skipped {sum(skipped.values())}: " + "; ".join(parts)


def say_skipped(notes: Sequence[str], say: Callable[[str], None] | None = None) -> None:
    """Each directory's line on what it held that is not read: to ``say`` (a command prints it as its own
    line), else to the xpuprof logger."""
    for note in notes:
        if say is not None:
            say(note)
        else:
            log.warning("xpuprof: %s", note)


def read_inputs(paths: Sequence[str | Path], *, kinds: Sequence[str] | None = None,
                columns: dict[str, Sequence[str]] | None = None, slice_args=True, counters=True,
                inputs: Inputs | None = None,
                say: Callable[[str], None] | None = None):
    """Every trace the paths stand for as one TraceTable (JSON files first, each with its position among
    them, then the stores' ranks). Push-down: ``kinds`` (the kinds of rows), ``slice_args`` (the args of
    every slice, of none, or of those whose name satisfies a function), ``counters`` (every counter, or those
    whose category satisfies a function), ``columns`` (a store's columns per table). ``say``: where the lines on skipped entries go (``say_skipped``)."""
    from ...progress import bar
    from ..table.model import TraceTable

    got = inputs if inputs is not None else expand_inputs(paths)
    say_skipped(got.notes, say)
    tables = []
    size = input_bytes(got.traces)
    with bar("reading", len(got.traces) + len(got.stores), unit="inputs", size_bytes=size) as shown:
        # read_file imports a trace reader only for a trace file: a store's report imports none
        for i, p in enumerate(got.traces):
            tables.append(read_file(p, position=i, kinds=kinds, slice_args=slice_args, counters=counters))
            shown.advance()
        if got.stores:
            from .store_table import read_store
        for s in got.stores:
            kw = {} if kinds is None else {"kinds": kinds}
            tables.append(read_store(s, columns=columns, slice_args=slice_args, counters=counters, **kw))
            shown.advance()
    return TraceTable.concat(tables)


def read_file(path, **kw):
    """One trace file as a TraceTable, whichever format its first bytes say: Kineto JSON (``kineto.read_trace``)
    or Perfetto protobuf (``perfetto.read_perfetto``); the same keywords (rank, position, push-down)."""
    from .kineto import read_trace
    from .kineto_stream import NotKinetoJson
    from .source import FORMATS

    try:
        return read_trace(path, accept=FORMATS, **kw)  # the file opened once, its first bytes telling the format
    except NotKinetoJson:
        from .perfetto import read_perfetto

        return read_perfetto(path, **kw)


def input_bytes(files: Sequence[Path]) -> int:
    """The files' bytes (what a progress bar weighs; unreadable ones count 0: the reader says why)."""
    total = 0
    for f in files:
        try:
            total += os.stat(f).st_size
        except OSError:
            pass
    return total
