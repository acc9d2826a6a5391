"""``xpuprof report TRACE…``: a table per name (calls, total, self, %, avg, min, max, metric columns)
of the kernels, copies and fills in one or more traces (ranks together or ``--by-rank``), or of the
host ranges and ops when a trace has no device work; as a table, CSV, JSON (a versioned document,
docs/report-schema.md) or HTML."""
from __future__ import annotations

import csv
import io
import sys

from ..analysis.report import Report, ReportError, build_report
from ..analysis.report_render import FORMATS, render  # noqa: F401 - the renderers of a report
from ..trace.builder.columns import encode_json
from ._options import top_count



def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="kernel summary table from trace files (any number of ranks)",
                              description=__doc__)
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace files (.json/.json.gz) or directories of them, or one trace store (xpuprof convert)")
    p.add_argument("--top", type=top_count, default=None, metavar="N",
                   help="only the N busiest kernels (a positive integer, or 'all': the default)")
    p.add_argument("--name", default=None, metavar="REGEX", help="only kernels whose name matches REGEX")
    p.add_argument("--start", type=float, default=None, metavar="MS", help="only kernels starting at or after MS ms into each trace")
    p.add_argument("--end", type=float, default=None, metavar="MS", help="only kernels starting before MS ms into each trace")
    p.add_argument("--cat", action="append", default=None, metavar="CATEGORY",
                   help="event categories to summarize (repeatable; default: kernel, gpu_memcpy, gpu_memset, "
                        "or host annotations/ops when a trace has no device events)")
    p.add_argument("--by-rank", action="store_true", help="one row per (rank, kernel) instead of all ranks together")
    p.add_argument("--sort", default="total", metavar="KEY",
                   help="total, calls, avg, max, name, or a metric column: '<metric>[::<unit>][ mean|min|max]'")
    p.add_argument("--by", default="kernel", choices=("kernel", "op"),
                   help="kernel: the kernel table (default); op: PyTorch operators by name, as torch's "
                        "key_averages() table (self/total host time, device time of the kernels each op launched)")
    p.add_argument("--stalls", action="store_true",
                   help="XPU EU stall samples instead of times: per kernel its stall-reason mix and hottest source "
                        "lines (traces recorded with stall sampling)")
    p.add_argument("--lines", type=top_count, default=5, metavar="N",
                   help="with --stalls: the N hottest source lines per kernel (default 5; 'all')")
    p.add_argument("--format", default="table", choices=FORMATS)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)




def stall_report(args) -> str:
    """``--stalls``: the EU stall report in the chosen format."""
    from ..analysis import stalls, stalls_render

    unsupported = [flag for flag, v in (("--start", args.start), ("--end", args.end), ("--cat", args.cat))
                   if v is not None] + (["--by op"] if getattr(args, "by", "kernel") == "op" else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} do not apply to --stalls (stall samples have no timestamps); "
                          "--stalls takes --name, --by-rank, --top, --lines, --format and -o")
    report = stalls.read_stalls(args.traces, by_rank=args.by_rank, name=args.name)
    if args.format == "json":
        doc = stalls.document(report, top=args.top, lines=args.lines,
                              filters={"name": args.name, "by_rank": args.by_rank, "top": args.top, "lines": args.lines})
        return encode_json(doc).decode() + "\n"
    if args.format == "csv":
        return stalls_render.to_csv(report, top=args.top, lines=args.lines)
    if args.format == "html":
        return stalls_render.to_html(report, top=args.top, lines=args.lines)
    from ..analysis.text import terminal_width

    return stalls_render.text(report, top=args.top, lines=args.lines, width=terminal_width(default=200))


def op_report(args) -> str:
    """``--by op``: every trace's operators together (--sort takes torch's names too)."""
    from ..analysis.ops import OpSummary
    from ..analysis.trace_files import load_traces
    from ..trace.read.store import is_store

    if any(is_store(t) for t in args.traces):
        raise ReportError("--by op reads trace files; for a trace store use the kernel report or `xpuprof analyze`")
    unsupported = [flag for flag, v in (("--name", args.name), ("--start", args.start), ("--end", args.end),
                                        ("--cat", args.cat)) if v is not None] + (["--by-rank"] if args.by_rank else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} apply to the kernel report; --by op takes --top, --sort, "
                          "--format and -o")
    traces = load_traces(args.traces, say=_say)
    evs = [e for t in traces for e in t.data["traceEvents"]]
    files = [t.path for t in traces]
    try:
        ops = OpSummary.from_events(evs)
    except ValueError as exc:  # a time no trace can hold: named with its event
        raise ReportError(str(exc)) from None
    sort = "host_total" if args.sort == "total" else args.sort
    try:
        rows = ops.rows(sort)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    rows = rows[:args.top] if args.top else rows
    if args.format == "html":
        from ..analysis.html import render_ops

        return render_ops(rows, sources=[str(p) for p in files])
    if args.format == "json":
        return encode_json([r.to_dict() for r in rows]).decode() + "\n"
    if args.format == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["op", "calls", "self_host_ns", "host_total_ns", "self_device_ns", "device_total_ns"])
        for r in rows:
            w.writerow([r.name, r.calls, r.self_host_ns, r.host_total_ns, r.self_device_ns, r.device_total_ns])
        return buf.getvalue()
    from ..analysis.text import terminal_width

    return ops.table(sort_by=sort, row_limit=args.top, width=terminal_width(default=200))


def _build(args) -> Report:
    """The kernel report of trace files, or of a trace store (one STORE given): the same report either way."""
    from ..trace.read.store import is_store

    stores = [t for t in args.traces if is_store(t)]
    if stores and len(args.traces) > 1:
        raise ReportError(f"{stores[0]} is a trace store: give it alone (a store holds every rank; convert more "
                          "traces into it with `xpuprof convert`)")
    report = build_report(args.traces, categories=args.cat, name=args.name, start_ms=args.start, end_ms=args.end,
                          by_rank=args.by_rank, sort_by=args.sort, top=args.top, say=_say)
    if stores and args.format == "html":  # the per-rank view: step time per rank, stragglers
        from ..analysis.cluster import stragglers
        from ..analysis.engines import EngineError, open_engine
        from ..trace.read.store import StoreError

        try:
            with open_engine(stores[0]) as engine:
                report.ranks_view = stragglers.run(engine)[0]
        except (StoreError, EngineError) as exc:
            raise ReportError(str(exc)) from None
    return report


def run(args) -> int:
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
    try:
        report = _build(args)
    except ReportError as exc:
        print(f"xpuprof report: {exc}", file=sys.stderr)
        return 2
    return _emit(args, render(report, args.format))


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
