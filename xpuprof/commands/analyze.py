"""``xpuprof analyze INPUT ANALYSIS``: cluster-scale analyses over a trace store (``xpuprof convert``,
``profile.export_parquet``) or Kineto JSON traces (a file, or a directory of them), HTA-compatible, in
this process (default) or on a Ray cluster.

Analyses: temporal, kernels, kernel-types, idle, overlap, queue, launch, memory-bw (HTA 0.5's
definitions and numbers) and stragglers (the ranks the others wait for in collectives, and in which
steps). Times are µs, as HTA gives them."""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    from ..analysis.cluster import ANALYSES, FORMATS
    from ..analysis.engines import ENGINES
    from ._options import top_count

    p = subparsers.add_parser("analyze", help="analyses over a trace store or traces (any number of ranks; this "
                              "process or Ray)", description=__doc__)
    p.add_argument("store", metavar="INPUT", help="a trace store directory, a trace file (.json/.json.gz) or a "
                                                  "directory of them (one rank each)")
    p.add_argument("analysis", metavar="ANALYSIS", choices=list(ANALYSES),
                   help="; ".join(f"{a.name}: {a.help}" for a in ANALYSES.values()))
    p.add_argument("--format", default=None, choices=FORMATS,
                   help="table (default), csv, json or html; with -o the file's extension picks it (a.html: html)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--wide", action="store_true",
                   help="every column, however wide the terminal (default: the table fits it)")
    p.add_argument("--engine", default="duckdb", choices=ENGINES,
                   help="duckdb: this process (default); ray: tasks over a Ray cluster (RAY_ADDRESS, "
                        "--ray-address, or a local one on 127.0.0.1)")
    p.add_argument("--ray-address", default=None, metavar="ADDR", help="the Ray cluster to join (default: RAY_ADDRESS)")
    p.add_argument("--memory-limit", default=None, metavar="SIZE",
                   help="DuckDB's memory limit per process for SQL queries over a store, e.g. 2GB (default: "
                        "XPUPROF_DUCKDB_MEMORY or 1GB; it spills to disk beyond)")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="DuckDB threads per process (SQL queries)")
    p.add_argument("--group-events", type=int, default=None, metavar="N",
                   help="duckdb: slices per group of ranks read together, the groups one after the other "
                        "(default: XPUPROF_GROUP_EVENTS or 2000000; memory follows one group's size)")
    g = p.add_argument_group("analysis options (each analysis takes the ones HTA's method of that name takes)")
    g.add_argument("--include-last-step", action="store_const", const=True, default=None,
                   help="keep the last ProfilerStep (HTA drops it when there are several)")
    g.add_argument("--by-rank", action="store_const", const=True, default=None,
                   help="kernels: HTA's per-rank table (with its folding into 'others')")
    g.add_argument("--top", type=lambda s: -1 if s.strip().lower() == "all" else top_count(s), default=None,
                   metavar="N",
                   help="kernels: the N busiest names per kernel type, the rest as 'others' ('all': no folding; "
                        "--by-rank: default 10, HTA's)")
    g.add_argument("--duration-ratio", type=float, default=None, metavar="R", help="kernels --by-rank: HTA's ratio")
    g.add_argument("--no-memory", dest="include_memory", action="store_const", const=False, default=None,
                   help="kernels, kernel-types: leave memory kernels out")
    g.add_argument("--events", action="store_const", const=True, default=None,
                   help="launch: one row per launch (HTA's table) instead of per-rank statistics")
    g.add_argument("--runtime-cutoff", type=float, default=None, metavar="US", help="launch: runtime outlier, µs")
    g.add_argument("--launch-delay-cutoff", type=float, default=None, metavar="US", help="launch: delay outlier, µs")
    g.add_argument("--no-memory-events", dest="include_memory_events", action="store_const", const=False,
                   default=None, help="launch: leave cudaMemcpyAsync/cudaMemsetAsync out")
    g.add_argument("--consecutive-kernel-delay", type=float, default=None, metavar="US",
                   help="idle: a gap shorter than this is kernel wait (HTA's default 30)")
    g.add_argument("--threshold-pct", type=float, default=None, metavar="PCT",
                   help="stragglers: a rank is behind in a step when the others wait for it more than PCT %% of the "
                        "step, and a straggler when that adds up to PCT %% of the run (default 5)")
    g.add_argument("--min-us", type=float, default=None, metavar="US",
                   help="stragglers: the least wait, µs, that makes a rank behind in a step (default 100)")
    from ._options import add_progress_option

    add_progress_option(p)
    p.set_defaults(func=run)


ENGINE_FLAGS = {"memory_limit": "--memory-limit", "threads": "--threads", "group_events": "--group-events",
                "address": "--ray-address"}
OPTIONS = ("include_last_step", "by_rank", "top", "duration_ratio", "include_memory", "events", "runtime_cutoff",
           "launch_delay_cutoff", "include_memory_events", "consecutive_kernel_delay", "threshold_pct", "min_us")


def run(args) -> int:
    from ..analysis.cluster import FORMATS, AnalysisError, run_analysis
    from ..analysis.engines import (EngineError, check_engine_options, default_group_events, default_memory_limit,
                                    open_engine)
    from ..trace.read.source import TraceLoadError
    from ..trace.read.store import StoreError

    from ._options import UsageError, output_format

    try:
        args.format = output_format(args.format, args.output, FORMATS)
    except UsageError as exc:
        print(f"xpuprof analyze: {exc}", file=sys.stderr)
        return 2
    options = {k: getattr(args, k) for k in OPTIONS}
    given = {"memory_limit": args.memory_limit, "threads": args.threads, "group_events": args.group_events,
             "address": args.ray_address}
    try:  # every engine option checked, and one the engine does not take refused, before anything is read
        engine_opts = check_engine_options(args.engine, {k: v for k, v in given.items() if v is not None},
                                           ENGINE_FLAGS)
        default_memory_limit(), default_group_events()  # the environment's, too
    except EngineError as exc:
        print(f"xpuprof analyze: {exc}", file=sys.stderr)
        return 2
    try:
        with open_engine(args.store, args.engine, say=_say, **engine_opts) as engine:
            result = run_analysis(args.analysis, engine, **options)
    except (StoreError, EngineError, AnalysisError, TraceLoadError) as exc:
        print(f"xpuprof analyze: {exc}", file=sys.stderr)
        return 2
    from ..analysis.text import terminal_width

    text = result.render(args.format, None if args.wide else terminal_width())
    if args.format != "table":
        for note in result.notes:
            print(f"xpuprof analyze: note: {note}", file=sys.stderr)
    if args.output:
        from ..outputs import write_error_line, write_output_bytes

        try:
            write_output_bytes(args.output, text.encode("utf-8"))
        except OSError as exc:
            print(f"xpuprof analyze: {write_error_line(args.output, exc)}", file=sys.stderr)
            return 1
        print(f"xpuprof analyze: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _say(line: str) -> None:
    """A line on what a directory held that is not read (``trace.read.inputs``)."""
    print(f"xpuprof analyze: {line}", file=sys.stderr)
