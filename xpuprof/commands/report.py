"""``xpuprof report TRACE…``: a table per name (calls, total, self, %, avg, min, max, metric columns)
of the kernels, copies and fills in one or more traces (ranks together or ``--by-rank``), or of the
host ranges and ops when a trace has no device work; as a table, CSV, JSON (a versioned document,
docs/report-schema.md) or HTML."""
from __future__ import annotations

import csv
import io
import sys
from typing import TYPE_CHECKING

from ._options import UsageError, check_categories, output_format, top_count

if TYPE_CHECKING:  # the report's modules load when a report is made, not to parse or show --help
    from ..analysis.report import Report

# analysis.report_render.FORMATS, named here for the parser (tests/commands/test_cli_startup.py keeps them equal)
FORMATS = ("table", "csv", "json", "html")



def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="kernel summary table from trace files (any number of ranks)",
                              description=__doc__)
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace files (.json/.json.gz/.pftrace) or directories of them, or one trace store (xpuprof convert)")
    p.add_argument("--top", type=top_count, default=None, metavar="N",
                   help="only the N busiest kernels (a positive integer, or 'all': the default)")
    p.add_argument("--name", default=None, metavar="REGEX", help="only kernels whose name matches REGEX")
    p.add_argument("--start", type=float, default=None, metavar="MS", help="only kernels starting at or after MS ms into each trace")
    p.add_argument("--end", type=float, default=None, metavar="MS", help="only kernels starting before MS ms into each trace")
    p.add_argument("--cat", action="append", default=None, metavar="CATEGORY",
                   help="event categories to summarize (repeatable; default: kernel, gpu_memcpy, gpu_memset, "
                        "or host annotations/ops when a trace has no device events)")
    p.add_argument("--by-rank", action="store_true",
                   help="one row per (rank, kernel) instead of all ranks together, and with two ranks or more the "
                        "per-rank view: what each rank waits in collectives against the others, and the ranks they "
                        "wait for (as `xpuprof analyze STORE stragglers`)")
    p.add_argument("--sort", default=None, metavar="KEY",
                   help="total (the default), self, calls, avg, max, name, or a metric column: "
                        "'<metric>[::<unit>][ mean|min|max]'; with --by op torch's keys (default cpu_time_total)")
    p.add_argument("--by", default="kernel", choices=("kernel", "op"),
                   help="kernel: the kernel table (default); op: torch's key_averages() table of the traces "
                        "(ops, ranges, runtime calls and kernels by name, self/total CPU and device time)")
    p.add_argument("--stalls", action="store_true",
                   help="XPU EU stall samples instead of times: per kernel its stall-reason mix and hottest source "
                        "lines (traces recorded with stall sampling)")
    p.add_argument("--lines", type=top_count, default=5, metavar="N",
                   help="with --stalls: the N hottest source lines per kernel (default 5; 'all')")
    p.add_argument("--format", default=None, choices=FORMATS,
                   help="table (default), csv, json or html; with -o the file's extension picks it (r.html: html)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--wide", action="store_true",
                   help="every column, however wide the terminal (default: the table fits it, columns left out "
                        "are named under it)")
    p.add_argument("--history", default=None, metavar="DIR",
                   help="with --format html and one run directory (what `xpuprof run` wrote): add a history plot "
                        "per kernel from the run history in DIR (`xpuprof gate`'s verdicts)")
    from ._options import add_progress_option

    add_progress_option(p)
    p.set_defaults(func=run)




def stall_report(args) -> str:
    """``--stalls``: the EU stall report in the chosen format."""
    from ..analysis import stalls, stalls_render
    from ..analysis.report import ReportError
    from ..analysis.report_render import json_bytes

    unsupported = [flag for flag, v in (("--start", args.start), ("--end", args.end), ("--cat", args.cat))
                   if v is not None] + (["--by op"] if getattr(args, "by", "kernel") == "op" else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} do not apply to --stalls (stall samples have no timestamps); "
                          "--stalls takes --name, --by-rank, --top, --lines, --format and -o")
    report = stalls.read_stalls(args.traces, by_rank=args.by_rank, name=args.name)
    if args.format == "json":
        doc = stalls.document(report, top=args.top, lines=args.lines,
                              filters={"name": args.name, "by_rank": args.by_rank, "top": args.top, "lines": args.lines})
        return json_bytes(doc).decode() + "\n"
    if args.format == "csv":
        return stalls_render.to_csv(report, top=args.top, lines=args.lines)
    if args.format == "html":
        return stalls_render.to_html(report, top=args.top, lines=args.lines)
    return stalls_render.text(report, top=args.top, lines=args.lines, width=_width(args))


def _width(args) -> int | None:
    """The table's width: the terminal's (a file or a pipe: 160), or unbounded with ``--wide``."""
    from ..analysis.text import terminal_width

    return None if getattr(args, "wide", False) else terminal_width()


def op_report(args) -> str:
    """``--by op``: torch's key_averages() of every trace together (``analysis.summary.KeyAverages``), trace files
    or a store alike."""
    from ..analysis.report import ReportError, check_times, read_report_inputs
    from ..analysis.summary import KeyAverages
    from ..analysis.report_render import json_bytes

    unsupported = [flag for flag, v in (("--name", args.name), ("--start", args.start), ("--end", args.end),
                                        ("--cat", args.cat)) if v is not None] + (["--by-rank"] if args.by_rank else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} apply to the kernel report; --by op takes --top, --sort, "
                          "--format, --wide and -o")
    table = read_report_inputs(args.traces, say=_say, kinds=("slices", "instants"), slice_args=True)
    check_times(table)  # a time no trace can hold: named with its event
    avgs = KeyAverages.from_table(table)
    sort = args.sort or "cpu_time_total"
    try:
        rows = avgs.sorted(sort)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    rows = rows[:args.top] if args.top else rows
    if args.format == "html":
        from ..analysis.html import render_ops

        return render_ops(avgs, rows, sources=[info.origin for info in table.traces])
    if args.format == "json":
        return json_bytes([r.to_dict() for r in rows]).decode() + "\n"
    if args.format == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        keys = ["key", "count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total", "device_time_total",
                "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage"]
        w.writerow([k if k in ("key", "count") or k.endswith("usage") else f"{k}_us" for k in keys])
        for r in rows:
            w.writerow([getattr(r, k) for k in keys])
        return buf.getvalue()
    from ..analysis.averages_table import render as render_averages

    return render_averages(avgs, sort_by=sort, row_limit=args.top, width=_width(args), wide=args.wide,
                           widen_hint="--wide shows them")


def _build(args) -> Report:
    """The kernel report of trace files, or of a trace store (one STORE given): the same report either way;
    with the per-rank view (stragglers) where it is wanted (``_ranks_view_wanted``)."""
    from ..analysis.report import ReportError, build_report
    from ..trace.read.store import is_store

    stores = [t for t in args.traces if is_store(t)]
    if stores and len(args.traces) > 1:
        raise ReportError(f"{stores[0]} is a trace store: give it alone (a store holds every rank; convert more "
                          "traces into it with `xpuprof convert`)")
    from ..analysis import report_summary

    # a store's ranks' summaries answer a whole-trace report; the HTML charts read the rows
    build = report_summary.build_report if args.format != "html" else build_report
    report = build(args.traces, categories=args.cat, name=args.name, start_ms=args.start, end_ms=args.end,
                   by_rank=args.by_rank, sort_by=args.sort, top=args.top, say=_say)
    if not _ranks_view_wanted(args, report):
        return report
    from ..analysis.cluster import stragglers
    from ..analysis.engines import EngineError, open_engine
    from ..trace.read.store import StoreError

    try:  # the rule of `analyze stragglers`, on the traces or the store alike
        with open_engine(args.traces) as engine:
            report.ranks_view = stragglers.run(engine)
    except (StoreError, EngineError) as exc:
        raise ReportError(str(exc)) from None
    return report


def _ranks_view_wanted(args, report: Report) -> bool:
    """The per-rank view (``analyze stragglers``: what each rank waits for the others, the ranks they wait
    for) goes with ``--by-rank`` and in every HTML report, when the traces hold two ranks or more; CSV
    holds one table, the per-name one."""
    return args.format != "csv" and (args.by_rank or args.format == "html") and len(report.ranks) >= 2


def run(args) -> int:
    from ..analysis.report import ReportError
    from ..analysis.report_render import render

    try:  # the command line's own mistakes: one line, exit 2, before any trace is read
        args.format = output_format(args.format, args.output, FORMATS)
        if args.cat:
            check_categories(args.cat)
    except UsageError as exc:
        print(f"xpuprof report: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "stalls", False):
        try:
            text = stall_report(args)
        except ReportError as exc:
            print(f"xpuprof report: {exc}", file=sys.stderr)
            return 2
        return _emit(args, text)
    if getattr(args, "by", "kernel") == "op":
        try:
            text = op_report(args)
        except ReportError as exc:
            print(f"xpuprof report: {exc}", file=sys.stderr)
            return 2
        return _emit(args, text)
    args.sort = args.sort or "total"
    try:
        history = _history_sections(args)
        report = _build(args)
    except ReportError as exc:
        print(f"xpuprof report: {exc}", file=sys.stderr)
        return 2
    if history:
        from ..analysis.html import render as render_html

        return _emit(args, render_html(report, ranks=report.ranks_view, extra_sections=history))
    return _emit(args, render(report, args.format, _width(args)))


def _history_sections(args) -> list[str]:
    """``--history DIR``: the gate's history plots of the one run directory given (``ReportError`` when the
    report is not an HTML page of one run directory, or the history cannot be read)."""
    from ..analysis.report import ReportError

    if not getattr(args, "history", None):
        return []
    if args.format != "html" or len(args.traces) != 1:
        raise ReportError("--history adds history plots to the HTML report of one run directory: give one "
                          "directory `xpuprof run` wrote and --format html")
    from ..analysis.gate import GateOptions, gate_run_dir
    from ..analysis.history import HistoryError
    from ..analysis.history_html import history_sections
    from ..analysis.run_records import RunDirError

    try:
        return history_sections(gate_run_dir(args.traces[0], args.history, GateOptions()))
    except (RunDirError, HistoryError, ValueError) as exc:
        raise ReportError(str(exc)) from None


def _say(line: str) -> None:
    """A line on what a directory held that is not read (``trace.read.inputs``)."""
    print(f"xpuprof report: {line}", file=sys.stderr)


def _emit(args, text: str) -> int:
    if args.output:
        from ..outputs import write_error_line, write_output_bytes

        try:  # atomic, and never over a directory or a device (xpuprof.outputs)
            write_output_bytes(args.output, text.encode("utf-8"))
        except OSError as exc:
            print(f"xpuprof report: {write_error_line(args.output, exc)}", file=sys.stderr)
            return 1
        print(f"xpuprof report: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
