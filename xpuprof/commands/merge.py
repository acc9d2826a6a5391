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
                   help="merged view path, e.g. job.merged.json, .json.gz or .pftrace (Perfetto protobuf); "
                        "never *.pt.trace.json: TensorBoard and HTA would read it as one rank's trace")
    from ._options import add_progress_option

    add_progress_option(p)
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
    from ..analysis.text import format_ranks

    print(f"merged ranks {format_ranks(info.ranks)} ({info.events:,} events, {_shifts(info.shifts_ns)}) "
          f"into {info.path}", file=sys.stderr if names_stdout(args.output) else sys.stdout)
    if info.note:
        print(f"xpuprof merge: warning: {info.note}", file=sys.stderr)
    return 0


SHIFTS_LISTED = 8  # more ranks than this: the shifts' range, not one per rank (one line for 1,000 ranks)


def _shifts(shifts_ns: dict[int, int]) -> str:
    """Each rank's clock shift (``rank 0: +0.000 ms, ...``), or for many ranks their range and who has the
    extremes; the clocks as recorded when none moved (``--align epoch``)."""
    if not any(shifts_ns.values()):
        return "clocks as recorded"
    items = sorted(shifts_ns.items())
    if len(items) <= SHIFTS_LISTED:
        return "clock shifts " + ", ".join(f"rank {r}: {s / 1e6:+.3f} ms" for r, s in items)
    low, high = min(items, key=lambda kv: kv[1]), max(items, key=lambda kv: kv[1])
    return (f"clock shifts from {low[1] / 1e6:+.3f} ms (rank {low[0]}) to {high[1] / 1e6:+.3f} ms "
            f"(rank {high[0]})")
