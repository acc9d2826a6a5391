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
    p.set_defaults(func=run)




def _by_rank(report: Report) -> bool:
    return any(s.rank is not None for s in report.stats)


def to_csv(report: Report) -> str:
    metrics = report.metric_names
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    by_rank = _by_rank(report)
    name = "kernel" if set(report.categories) <= {"kernel"} else "name"  # what the rows are
    w.writerow((["rank"] if by_rank else []) + [name, "calls", "total_ns", "self_ns", "pct", "avg_ns", "min_ns",
                                                "max_ns"]
               + [f"{m}::{report.table.units.get(m, '')}" if report.table.units.get(m) else m for m in metrics]
               + [f"{m} {stat}" for m in metrics for stat in ("min", "max")] + _interval_keys(report))
    for s in report.stats:
        w.writerow(([s.rank] if by_rank else []) + [s.name, s.calls, s.total_ns, s.self_ns, f"{s.pct:.4f}",
                                                    f"{s.avg_ns:.3f}", s.min_ns, s.max_ns]
                   + [s.metrics.get(m, "") for m in metrics]
                   + [d.get(m, "") for m in metrics for d in (s.metric_min, s.metric_max)]
                   + [report.interval_of(s).get(key, "") for key in _interval_keys(report)])
    return buf.getvalue()


def _interval_keys(report: Report) -> list[str]:
    """The submission-interval columns (unitrace -s) when the traces carry them."""
    from ..analysis.intervals import COLUMNS

    return [key for key, *_ in COLUMNS] if report.intervals else []


def _title(report: Report) -> str:
    from ..analysis.text import format_ns

    traces = f"{len(report.sources)} trace{'s' if len(report.sources) != 1 else ''}"
    ranks = f", ranks {', '.join(map(str, report.ranks))}" if report.ranks else ""
    if report.nests:
        return (f"{report.title} ({traces}{ranks}, {len(report.table):,} rows covering {format_ns(report.total_ns)}; "
                "self time leaves out the rows nested inside)")
    return f"{report.title} ({traces}{ranks}, {len(report.table):,} instances, {format_ns(report.total_ns)} total)"


def text_table(report: Report, width: int | None = None) -> str:
    """The per-name table as text, fitted to ``width`` (``analysis.tables``: the label set ``run`` shares)."""
    from ..analysis.intervals import COLUMNS as INTERVALS
    from ..analysis.tables import stats_table

    return stats_table(report.stats, units=report.table.units, nests=report.nests, title=_title(report), width=width,
                       sort_by=report.filters.get("sort") or "total",
                       intervals=[(k, label) for k, label, *_ in INTERVALS][:2] if report.intervals else None,
                       interval_of=report.interval_of)


def telemetry_table(report: Report, width: int | None = None) -> str:
    """Mean, peak and min of each telemetry series, in its unit (``[no unit]`` when the trace gives none)."""
    from ..analysis.text import Column, format_count, format_value, render_table

    unitless = any(not t.unit for t in report.telemetry)
    head = " [no unit]" if unitless and not any(t.unit for t in report.telemetry) else ""
    columns = [Column("Track", "left", wrap=True, min_width=10), Column("Row"),
               Column("Metric", "left", wrap=True, min_width=10), Column("Samples"),
               Column(AVG + head), Column(PEAK + head), Column(MIN + head)]
    rows = [[t.track, str(t.pid), t.metric, format_count(len(t.values)),
             *(format_value(v, t.unit) for v in (t.mean, t.peak, t.low))] for t in report.telemetry]
    return render_table(columns, rows, title="Telemetry (counter tracks)", width=width)


AVG, PEAK, MIN = "Avg", "Peak", "Min"


def _nothing_found(report: Report) -> str:
    """One line for a report with no rows: what was looked for, and where."""
    asked = report.filters.get("categories")
    what = ", ".join(asked) if asked else "kernel, copy, fill or host range"
    where = ", ".join(report.sources) if len(report.sources) <= 3 else f"{len(report.sources)} traces"
    narrowed = [f"--{k} {v}" for k, v in (("name", report.filters.get("name")), ("start", report.filters.get("start_ms")),
                                          ("end", report.filters.get("end_ms"))) if v is not None]
    return f"no {what} events in {where}" + (f" matching {' '.join(narrowed)}" if narrowed else "") + "\n"


def render(report: Report, fmt: str, width: int | None = None) -> str:
    from ..trace.builder.columns import encode_json

    if fmt == "csv":
        return to_csv(report)
    if fmt == "json":
        return encode_json(report.to_dict()).decode() + "\n"
    if fmt == "html":
        from ..analysis.html import render as render_html

        return render_html(report, ranks=report.ranks_view)
    text = text_table(report, width) if report.stats else _nothing_found(report)
    if report.telemetry:
        text += "\n" + telemetry_table(report, width)
    if report.resources:
        from ..analysis.resources import resources_text

        text += "\n" + resources_text(report.resources, width)
    return text


def stall_report(args) -> str:
    """``--stalls``: the EU stall report in the chosen format."""
    from ..analysis import stalls, stalls_render
    from ..analysis.report import ReportError
    from ..trace.builder.columns import encode_json

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
    return stalls_render.text(report, top=args.top, lines=args.lines, width=_width(args))


def _width(args) -> int | None:
    """The table's width: the terminal's (a file or a pipe: 160), or unbounded with ``--wide``."""
    from ..analysis.text import terminal_width

    return None if getattr(args, "wide", False) else terminal_width()


def op_report(args) -> str:
    """``--by op``: torch's key_averages() of every trace together (``analysis.summary.KeyAverages``)."""
    from ..analysis.report import ReportError, expand_paths
    from ..analysis.summary import KeyAverages
    from ..trace.builder.columns import encode_json
    from ..trace.read.load import TraceLoadError, load
    from ..trace.read.store import is_store

    if any(is_store(t) for t in args.traces):
        raise ReportError("--by op reads trace files; for a trace store use the kernel report or `xpuprof analyze`")
    unsupported = [flag for flag, v in (("--name", args.name), ("--start", args.start), ("--end", args.end),
                                        ("--cat", args.cat)) if v is not None] + (["--by-rank"] if args.by_rank else [])
    if unsupported:
        raise ReportError(f"{', '.join(unsupported)} apply to the kernel report; --by op takes --top, --sort, "
                          "--format, --wide and -o")
    evs: list = []
    meta: dict = {}
    try:
        for path in expand_paths(args.traces):
            data = load(path)
            evs.extend(e for e in (data.get("traceEvents") or []) if isinstance(e, dict))
            meta = {**data, "traceEvents": None, **meta}
    except TraceLoadError as exc:
        raise ReportError(str(exc)) from None
    try:
        avgs = KeyAverages.from_events(evs, metadata=meta)
    except ValueError as exc:  # a time no trace can hold: named with its event
        raise ReportError(str(exc)) from None
    sort = args.sort or "cpu_time_total"
    try:
        rows = avgs.sorted(sort)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    rows = rows[:args.top] if args.top else rows
    if args.format == "html":
        from ..analysis.html import render_ops

        return render_ops(avgs, rows, sources=[str(p) for p in expand_paths(args.traces)])
    if args.format == "json":
        return encode_json([r.to_dict() for r in rows]).decode() + "\n"
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
    """The kernel report of trace files, or of a trace store (one STORE given)."""
    from ..analysis.report import ReportError, build_report
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
    from ..analysis.report import ReportError

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
        report = _build(args)
    except ReportError as exc:
        print(f"xpuprof report: {exc}", file=sys.stderr)
        return 2
    return _emit(args, render(report, args.format, _width(args)))


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
