"""The ``xpuprof`` subcommands, one module each: ``register(subparsers)`` adds the command's parser and sets
``func(args) -> int``.

``SUMMARIES`` holds each command's one-line help, so that a command line imports the module of the command it
runs and no other: ``xpuprof --help`` lists every command from here and imports none. A command module adds
its parser with the same line (tests/commands/test_cli_startup.py keeps the two in step); one not listed here
is still found, and imported to be listed.
"""
from __future__ import annotations

import os

SUMMARIES: dict[str, str] = {
    "analyze": "analyses over a trace store or traces (any number of ranks; this process or Ray)",
    "convert": ("traces into a columnar trace store (Parquet), or one trace into a trace every viewer shows whole "
                "(-o X.json, X.json.gz or X.pftrace)"),
    "devices": "list profiler backends: which can run here and why others cannot",
    "diff": "compare kernel times and metrics of two runs (non-zero exit on regression)",
    "exec": "run a command with xpuprof in every Python process it starts",
    "gate": "judge a run's kernels against the run history (exit 1 on a regression)",
    "merge": "merge per-rank traces into one trace",
    "metrics": "list hardware metrics (catalogs in metrics/) and metric collectors",
    "replay": "decode a raw PTI capture into a trace (no GPU needed)",
    "report": "kernel summary table from trace files (any number of ranks)",
    "run": "run a YAML benchmark config under the profiler",
    "trigger": "ask running processes for a trace (dynolog's on-demand request)",
}


def names() -> list[str]:
    """Every command module in this package, sorted: found on disk, none imported."""
    found = set()
    for entry in os.listdir(os.path.dirname(__file__)):
        stem, dot, ext = entry.partition(".")
        if dot and ext == "py" and stem.isidentifier() and not stem.startswith("_"):
            found.add(stem)
    return sorted(found)
