"""``xpuprof gate RUN_DIR --history DIR``: is each kernel of a run slower, faster, the same, or can its noise
not tell, against the run history of the same config on the same kind of machine? ``RUN_DIR`` is what
``xpuprof run`` wrote (its ``summary.jsonl`` and traces); ``xpuprof run --history DIR`` builds the history.
One line per kernel and host range: the baseline median +- its run-to-run spread, the new median, the
effect +- its noise, the confidence. Exit 1 when a kernel regressed, 0 otherwise (inconclusive verdicts
included, and said), 2 on unusable input. ``--accept`` adds the run to the history afterwards (a gated
run joins the history only when accepted). ``xpuprof diff --history DIR RUN_DIR`` is the same command."""
from __future__ import annotations

import sys

FORMATS = ("table", "json", "html")


def add_gate_options(p, *, history_required: bool) -> None:
    """The gate's options (``gate`` and ``diff --history`` share them)."""
    from ._options import positive_int

    p.add_argument("--history", required=history_required, default=None, metavar="DIR",
                   help="the run history to compare with (written by `xpuprof run --history DIR`)")
    p.add_argument("--max-regression", type=_percent, default=3.0, metavar="PCT",
                   help="the effect that counts, in percent (default 3): a kernel is flagged when it is slower "
                        "beyond the noise by at least half of it, and called unchanged when the noise rules it out")
    p.add_argument("--alarm-rate", type=_percent, default=1.0, metavar="PCT",
                   help="the chance, in percent, that an unchanged run is flagged regressed, over all its kernels "
                        "together (default 1; as much again for improved)")
    p.add_argument("--min-runs", type=positive_int, default=5, metavar="N",
                   help="baseline runs a kernel needs before it is judged (default 5; fewer: inconclusive)")
    p.add_argument("--window", type=positive_int, default=20, metavar="N",
                   help="the newest N runs of the history are the baseline (default 20)")
    p.add_argument("--only", default=None, choices=("kernels", "ranges"),
                   help="judge only device kernels (their timings are the device's) or only host ranges "
                        "(default: both)")
    p.add_argument("--accept", nargs="?", const="passed", default=None, choices=("passed", "always"),
                   help="afterwards, add this run to the history: when nothing regressed (`--accept`, or "
                        "`--accept passed`), or whatever the verdict (`--accept always`: an intended change)")
    p.add_argument("--keep", type=positive_int, default=None, metavar="N",
                   help="history retention when accepting: each series keeps its newest N runs (default 200)")


def _percent(text: str) -> float:
    import argparse

    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a percentage above 0 (3 for 3 %), got {text!r}")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("gate", help="judge a run's kernels against the run history (exit 1 on a regression)",
                              description=__doc__)
    p.add_argument("run_dir", metavar="RUN_DIR", help="what `xpuprof run` wrote (its --out or output.dir)")
    add_gate_options(p, history_required=True)
    p.add_argument("--format", default="table", choices=FORMATS,
                   help="table (default), json, or html: a history plot per kernel (needs -o)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    return run_gate(args, args.run_dir, "xpuprof gate")


def run_gate(args, run_dir: str, prog: str) -> int:
    from ..analysis.gate import GateOptions, accept, gate_run_dir
    from ..analysis.history import DEFAULT_KEEP, HistoryError
    from ..analysis.run_records import RunDirError
    from ..outputs import OutputError, names_stdout, write_error_line, write_output_bytes

    if args.format == "html" and not args.output:
        print(f"{prog}: --format html needs -o FILE (the page is written to a file)", file=sys.stderr)
        return 2
    only = {"kernels": "kernel", "ranges": "range"}.get(args.only) if args.only else None
    options = GateOptions(args.max_regression, args.alarm_rate, args.min_runs, args.window, only)
    try:
        result = gate_run_dir(run_dir, args.history, options)
    except (RunDirError, HistoryError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.accept:
        try:
            accept(result, policy=args.accept, keep=args.keep or DEFAULT_KEEP)
        except (HistoryError, OSError) as exc:
            print(f"{prog}: the run was gated but not accepted: {write_error_line(args.history, exc) if isinstance(exc, OSError) else exc}",
                  file=sys.stderr)
            return max(result.exit_status, 1)
    from ..analysis.gate_text import render, summary_line

    if args.format == "table":
        text = render(result).encode()
    elif args.format == "json":
        from ..trace.builder.columns import encode_json

        text = encode_json(result.to_dict()) + b"\n"
    else:
        from ..analysis.history_html import render_gate_page

        text = render_gate_page(result).encode()
    if args.output:
        try:
            write_output_bytes(args.output, text)
        except (OutputError, OSError) as exc:
            print(f"{prog}: {write_error_line(args.output, exc)}", file=sys.stderr)
            return 2
        out = sys.stderr if names_stdout(args.output) else sys.stdout
        print(summary_line(result), file=out)
        print(f"wrote {args.output}", file=out)
    else:
        sys.stdout.write(text.decode())
    for path in result.accepted:
        print(f"history: {path}", file=sys.stderr if args.format != "table" else sys.stdout)
    return result.exit_status
