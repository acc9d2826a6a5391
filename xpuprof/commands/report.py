"""``xpuprof report TRACE…``: unitrace-style kernel table (calls, total, %, avg, min, max, metric
columns) from one or more traces (ranks together or ``--by-rank``), as a table, CSV, JSON or HTML."""
from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from ..analysis.report import Report, ReportError, build_report
from ..analysis.summary import format_ns
from ..trace.build.columns import encode_json
from ._options import top_count

FORMATS = ("table", "csv", "json", "html")


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
    p.add_argument("--format", default="table", choices=FORMATS)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)




def to_csv(report: Report) -> str:
    metrics = report.metric_names
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    by_rank = any(s.rank is not None for s in report.stats)
    w.writerow((["rank"] if by_rank else []) + ["kernel", "calls", "total_ns", "pct", "avg_ns", "min_ns", "max_ns"]
               + [f"{m}::{report.table.units.get(m, '')}" if report.table.units.get(m) else m for m in metrics]
               + [f"{m} {stat}" for m in metrics for stat in ("min", "max")])
    for s in report.stats:
        w.writerow(([s.rank] if by_rank else []) + [s.name, s.calls, s.total_ns, f"{s.pct:.4f}", f"{s.avg_ns:.3f}",
                                                    s.min_ns, s.max_ns] + [s.metrics.get(m, "") for m in metrics]
                   + [d.get(m, "") for m in metrics for d in (s.metric_min, s.metric_max)])
    return buf.getvalue()


def rich_table(report: Report, title: str = "Kernels"):
    from rich.markup import escape
    from rich.table import Table

    metrics = report.metric_names
    by_rank = any(s.rank is not None for s in report.stats)
    t = Table(title=escape(title), title_justify="left")
    if by_rank:
        t.add_column("Rank", justify="right")
    t.add_column("Kernel", overflow="fold", max_width=60)
    for col in ("Calls", "Total", "%", "Avg", "Min", "Max"):
        t.add_column(col, justify="right")
    for m in metrics:
        unit = report.table.units.get(m)
        t.add_column(escape(f"{m} [{unit}]" if unit else m), justify="right")
        t.add_column(escape(f"{m} min"), justify="right")
        t.add_column(escape(f"{m} max"), justify="right")
    for s in report.stats:
        t.add_row(*([str(s.rank)] if by_rank else []), escape(s.name), str(s.calls), format_ns(s.total_ns), f"{s.pct:.2f}",
                  format_ns(s.avg_ns), format_ns(s.min_ns), format_ns(s.max_ns),
                  *[f"{d[m]:.4g}" if m in d else "" for m in metrics for d in (s.metrics, s.metric_min, s.metric_max)])
    return t


def render(report: Report, fmt: str) -> str:
    if fmt == "csv":
        return to_csv(report)
    if fmt == "json":
        return encode_json(report.to_dict()).decode() + "\n"
    if fmt == "html":
        from ..analysis.html import render as render_html

        return render_html(report, ranks=report.ranks_view)
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=False)
    ranks = f", ranks {', '.join(map(str, report.ranks))}" if report.ranks else ""
    console.print(rich_table(report, title=f"Kernels ({len(report.sources)} trace(s){ranks}, "
                                           f"{len(report.table)} instances, {format_ns(report.total_ns)} total)"))
    if report.telemetry:
        from rich.markup import escape
        from rich.table import Table

        tel = Table(title="Telemetry (counter tracks)", title_justify="left")
        for col in ("Track", "Row", "Metric", "Samples", "Mean", "Peak", "Min"):
            tel.add_column(col, justify="left" if col in ("Track", "Metric") else "right")
        for t in report.telemetry:
            tel.add_row(escape(t.track), str(t.pid), escape(t.metric), str(len(t.values)), f"{t.mean:.4g}", f"{t.peak:.4g}",
                        f"{t.low:.4g}")
        console.print(tel)
    return console.export_text()


def op_report(args) -> str:
    """``--by op``: every trace's operators together (--sort takes torch's names too)."""
    from ..analysis.ops import OpSummary
    from ..analysis.report import expand_paths
    from ..trace.read.load import TraceLoadError, events

    if args.format == "html":
        raise ReportError("--by op writes table, csv or json (html is the kernel report)")
    from ..trace.read.store import is_store

    if any(is_store(t) for t in args.traces):
        raise ReportError("--by op reads trace files; for a trace store use the kernel report or `xpuprof analyze`")
    unsupported = [flag for flag, v in (("--name", args.name), ("--start", args.start), ("--end", args.end),
                                        ("--cat", args.cat)) if v is not None] + (["--by-rank"] if args.by_rank else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} apply to the kernel report; --by op takes --top, --sort, "
                          "--format and -o")
    evs: list = []
    try:
        for path in expand_paths(args.traces):
            evs.extend(events(path))
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    ops = OpSummary.from_events(evs)
    sort = "host_total" if args.sort == "total" else args.sort
    try:
        rows = ops.rows(sort)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    rows = rows[:args.top] if args.top else rows
    if args.format == "json":
        return encode_json([r.to_dict() for r in rows]).decode() + "\n"
    if args.format == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["op", "calls", "self_host_ns", "host_total_ns", "self_device_ns", "device_total_ns"])
        for r in rows:
            w.writerow([r.name, r.calls, r.self_host_ns, r.host_total_ns, r.self_device_ns, r.device_total_ns])
        return buf.getvalue()
    return ops.table(sort_by=sort, row_limit=args.top, width=200)


def _build(args) -> Report:
    """The kernel report of trace files, or of a trace store (one STORE given)."""
    from ..trace.read.store import is_store

    stores = [t for t in args.traces if is_store(t)]
    if not stores:
        return build_report(args.traces, categories=args.cat, name=args.name, start_ms=args.start, end_ms=args.end,
                            by_rank=args.by_rank, sort_by=args.sort, top=args.top)
    if len(args.traces) > 1:
        raise ReportError(f"{stores[0]} is a trace store: give it alone (a store holds every rank; convert more "
                          "traces into it with `xpuprof convert`)")
    from ..analysis.engines import EngineError
    from ..analysis.store_report import build_store_report
    from ..trace.read.store import StoreError

    try:
        report = build_store_report(stores[0], categories=args.cat, name=args.name, start_ms=args.start,
                                    end_ms=args.end, by_rank=args.by_rank, sort_by=args.sort, top=args.top)
        if args.format == "html":  # the per-rank view: step time per rank, stragglers
            from ..analysis.cluster import stragglers
            from ..analysis.engines import open_engine

            with open_engine(stores[0]) as engine:
                report.ranks_view = stragglers.run(engine)[0]
    except (StoreError, EngineError) as exc:
        raise ReportError(str(exc)) from None
    return report


def run(args) -> int:
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
