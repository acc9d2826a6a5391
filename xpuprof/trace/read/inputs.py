"""Which files a command reads: the one directory rule, shared by ``report``, ``convert``, ``diff``, ``merge``
and ``analyze``; and ``read_inputs``, every input read into one TraceTable.

A path named on the command line is read as given: a file as a trace (whatever its name), a directory
holding a store manifest as a trace store. Any other directory stands for the trace files under it,
recursively: its regular files named ``*.json`` or ``*.json.gz``, in sorted order. Not taken, and said in
one line per directory (``Inputs.notes``): hidden entries (a writer's private ``.rank=N.tmp``, editor
files), trace stores inside (give a store by itself), symbolic links (a link another user planted is never
followed), and files of other names or kinds. What xpuprof itself writes beside its traces and is not a trace
(``COMPANIONS``: ``xpuprof run``'s ``summary.jsonl``) is passed over without a line: it is expected there.
A directory with no trace file is an error naming it.
"""
from __future__ import annotations

import logging
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..store_schema import MANIFEST

TRACE_SUFFIXES = (".json", ".json.gz")
COMPANIONS = frozenset({"summary.jsonl"})  # files xpuprof writes beside its traces (xpuprof run's summary)
log = logging.getLogger("xpuprof")


class InputsError(ValueError):
    """A path that names nothing to read; the message names it (``empty_dir``: a directory without traces)."""

    def __init__(self, text: str, empty_dir: Path | None = None) -> None:
        super().__init__(text)
        self.empty_dir = empty_dir


@dataclass
class Inputs:
    traces: list[Path] = field(default_factory=list)  # Kineto JSON files, in order
    stores: list[Path] = field(default_factory=list)  # trace store directories
    notes: list[str] = field(default_factory=list)  # per directory: what was not taken, and why
    errors: list[str] = field(default_factory=list)  # paths that name nothing to read (``strict=False``)


def is_store_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


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
                    raise InputsError(f"{p}: directory holds no *.json or *.json.gz files"
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


def _walk(top: Path) -> tuple[list[Path], str]:
    """The trace files under ``top`` (sorted, recursively) and one line on what was not taken."""
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
            entries = sorted(os.scandir(d), key=lambda e: e.name)
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
                skip("not *.json or *.json.gz", path)
        stack.extend(reversed(subdirs))
    found.sort()
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
    from ..table.model import TraceTable

    got = inputs if inputs is not None else expand_inputs(paths)
    say_skipped(got.notes, say)
    tables = []
    if got.traces:  # the JSON reader only for JSON files: a store's report imports none
        from .kineto import read_trace

        tables = [read_trace(p, position=i, kinds=kinds, slice_args=slice_args, counters=counters)
                  for i, p in enumerate(got.traces)]
    if got.stores:
        from .store_table import read_store
    for s in got.stores:
        kw = {} if kinds is None else {"kinds": kinds}
        tables.append(read_store(s, columns=columns, slice_args=slice_args, counters=counters, **kw))
    return TraceTable.concat(tables)
