"""``xpuprof merge TRACE… -o OUT``: combine per-rank traces into one file; each rank gets its
own process rows and all clocks are aligned on one reference (``--align epoch|start|step``)."""
from __future__ import annotations

import sys
import warnings

from ..outputs import names_stdout, write_error_line

# analysis.merge.ALIGN_MODES, named here for the parser (tests/commands/test_cli_startup.py keeps them equal)
ALIGN_MODES = ("epoch", "start", "step")


def register(subparsers) -> None:
    p = subparsers.add_parser("merge", help="merge per-rank traces into one trace", description=__doc__)
    p.add_argument("traces", nargs="+", metavar="TRACE", help="rank trace files or directories of them")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="merged view path, e.g. job.merged.json or .json.gz (never *.pt.trace.json: "
                        "TensorBoard and HTA would read it as one rank's trace)")
    p.add_argument("--align", default="epoch", choices=ALIGN_MODES,
                   help="epoch: absolute clocks (default); start: first events coincide; "
                        "step: first ProfilerStep# annotations coincide")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.merge import MergeError, MergeWarning, merge_traces

    try:
        with warnings.catch_warnings():  # the note is printed once below, as one plain line
            warnings.simplefilter("ignore", MergeWarning)
            info = merge_traces(args.traces, args.output, align=args.align)
    except MergeError as exc:
        print(f"xpuprof merge: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a directory or a read-only place at -o: one line, no traceback
        print(f"xpuprof merge: {write_error_line(args.output, exc)}", file=sys.stderr)
        return 1
    shifts = ", ".join(f"rank {r}: {s / 1e6:+.3f} ms" for r, s in sorted(info.shifts_ns.items()))
    print(f"merged ranks {', '.join(map(str, info.ranks))} ({info.events} events, clock shifts {shifts}) "
          f"into {info.path}", file=sys.stderr if names_stdout(args.output) else sys.stdout)
    if info.note:
        print(f"xpuprof merge: warning: {info.note}", file=sys.stderr)
    return 0
