"""``xpuprof run CONFIG.yaml [--set key=value …] [--out DIR]``: run the workload a benchmark
config names under the profiler, once per matrix point and repeat, with a progress bar; print a
summary table and write ``summary.jsonl`` (machine-readable, ``xpuprof diff`` compares two)."""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..outputs import OutputError, output_target, write_error_line, write_output_bytes
from ._options import positive_int, top_count

if TYPE_CHECKING:  # the config reader (PyYAML) loads when a run starts, not to parse or show --help
    from ..config.yamlconfig import BenchmarkConfig

DEFAULT_KEEP = 200  # analysis.history.DEFAULT_KEEP (not imported here: `xpuprof --help` stays light)

# One JSON object on one line. Not ".json": HTA's TraceAnalysis(trace_dir=...) reads every .json/.gz
# in a directory as a rank's trace, and the summary sits beside a single point's traces.
SUMMARY_NAME = "summary.jsonl"


def summary_name() -> str:
    """``summary.jsonl``, or ``summary.rank<r>.jsonl`` when this run has a rank (a launcher's, or a bare
    ``RANK``): ranks sharing one --out directory each keep their own summary instead of replacing each
    other's."""
    from ..rank import process_rank

    rank = process_rank()
    return SUMMARY_NAME if rank is None else f"summary.rank{rank}.jsonl"


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a YAML benchmark config under the profiler", description=__doc__)
    p.add_argument("config", metavar="CONFIG.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted, value parsed as YAML), e.g. --set workload.kwargs.n=1024")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (overrides output.dir)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the run points, run nothing")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first point that fails")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    p.add_argument("--top", type=top_count, default=10, metavar="N",
                   help="kernels shown per point in the summary (a positive integer, or 'all')")
    p.add_argument("--wide", action="store_true",
                   help="every column of the summary tables, however wide the terminal (default: they fit it)")
    p.add_argument("--history", default=None, metavar="DIR",
                   help="append each point's per-kernel and per-range call statistics to the run history in DIR "
                        "(created if new; overrides the config's history:); `xpuprof gate` compares a run with it")
    p.add_argument("--keep", type=positive_int, default=None, metavar="N",
                   help=f"history retention: each series keeps its newest N runs (default {DEFAULT_KEEP})")
    xpu = p.add_argument_group("XPU (unitrace's flags; added to the config's kernels: and stall_sampling:)")
    xpu.add_argument("--include-kernels", action="append", default=[], metavar="REGEXES",
                     help='keep only kernels whose name matches one of the comma-separated regexes (quote an item '
                          'holding a comma: foo,"a{1,3}"); repeatable')
    xpu.add_argument("--exclude-kernels", action="append", default=[], metavar="REGEXES",
                     help="drop kernels whose name matches one of the regexes; repeatable")
    xpu.add_argument("--include-kernels-file", action="append", default=[], metavar="FILE",
                     help="file of include patterns (one or more per line, # comments)")
    xpu.add_argument("--exclude-kernels-file", action="append", default=[], metavar="FILE",
                     help="file of exclude patterns")
    xpu.add_argument("--stall-sampling", action="store_true",
                     help="sample EU stalls per kernel and instruction (an Intel GPU that supports it)")
    xpu.add_argument("--stall-sampling-period-ns", type=int, default=None, metavar="NS",
                     help="EU stall sampling period (default: PTI's, 100000 ns)")
    p.set_defaults(func=run)


def apply_xpu_flags(cfg: BenchmarkConfig, args) -> None:
    """The unitrace-style flags onto every point (raises ConfigError naming a bad pattern or file)."""
    from ..config.kernel_filter import KernelFilter, KernelFilterError, read_filter_file, split_filter_list
    from ..config.yamlconfig import ConfigError

    try:
        include = [p for text in args.include_kernels for p in split_filter_list(text)]
        exclude = [p for text in args.exclude_kernels for p in split_filter_list(text)]
        include += [p for f in args.include_kernels_file for p in read_filter_file(f)]
        exclude += [p for f in args.exclude_kernels_file for p in read_filter_file(f)]
        KernelFilter(tuple(include), tuple(exclude))
    except KernelFilterError as exc:
        raise ConfigError(str(exc)) from None
    period = args.stall_sampling_period_ns
    if period is not None and not 0 <= period <= 0xFFFFFFFF:
        raise ConfigError(f"--stall-sampling-period-ns must be from 0 (PTI's default) to {0xFFFFFFFF}, got {period}")
    for pt in cfg.points:
        pt.include_kernels = [*pt.include_kernels, *include]
        pt.exclude_kernels = [*pt.exclude_kernels, *exclude]
        if args.stall_sampling or period is not None:
            pt.experimental.stall_sampling = True
        if period is not None:
            pt.experimental.stall_sampling_period_ns = period


def _point_record(result, kernels, units: dict | None = None) -> dict:
    pt = result.point
    return {"index": pt.index, "label": pt.label, "slug": pt.slug, "params": pt.params, "workload": result.workload,
            "device": result.device, "info": result.info, "iterations": pt.iterations, "warmup": pt.warmup,
            "repeats": pt.repeats, "iteration_time": result.iteration_stats(),
            "traces": [str(p) for p in result.traces], "kernels": [k.to_dict() for k in kernels],
            "metric_units": {m: u for m, u in (units or {}).items()
                             if any(m in k.metrics for k in kernels)},
            "error": result.error,
            "interrupted": None if result.interrupted is None else result.interrupted.signal_name}


def _kernels(result) -> tuple[list, dict]:
    """(the per-name rows of a point's traces, metric -> unit)."""
    from ..analysis.report import EventTable, ReportError, build_report, kernel_stats
    from ..workloads.interrupt import RunInterrupted

    if not result.traces:
        return [], {}
    try:
        if len(result.tables) == len(result.traces) and all(t is not None for t in result.tables):
            table = EventTable.concat(result.tables)  # from memory: no trace read back
            return kernel_stats(table), dict(table.units)
        if all(p.parent.name.endswith(".store") for p in result.traces):  # rank partitions of stores
            return _store_kernels(result.traces), {}
        report = build_report(result.traces)
        return report.stats, dict(report.table.units)
    except ReportError as exc:
        result.error = result.error or f"cannot summarize traces: {exc}"
    except RunInterrupted as exc:  # a second signal while reading the traces back
        result.error = result.error or f"kernel summary abandoned on a second {exc.signal_name}"
    return [], {}


def _store_kernels(partitions) -> list:
    """The kernel rows of this process's store partitions (one per trace), merged by name."""
    from ..analysis.report import NameStat, build_report
    from ..trace.read.store_table import read_store

    merged: dict[str, NameStat] = {}
    for part in partitions:
        rank = int(part.name.split("=", 1)[1])
        for s in build_report(read_store(part.parent, ranks=[rank], kinds=("slices",))).stats:
            got = merged.get(s.name)
            if got is None:
                merged[s.name] = s
                continue
            n = got.calls + s.calls  # metric means weighted by calls (instances with the metric, per trace)
            got.metrics = {m: (got.metrics.get(m, v) * got.calls + v * s.calls) / n for m, v in s.metrics.items()}
            got.metric_min = {m: min(got.metric_min.get(m, v), v) for m, v in s.metric_min.items()}
            got.metric_max = {m: max(got.metric_max.get(m, v), v) for m, v in s.metric_max.items()}
            got.calls, got.total_ns = n, got.total_ns + s.total_ns
            got.self_ns = (got.self_ns or 0) + (s.self_ns or 0)
            got.min_ns, got.max_ns = min(got.min_ns, s.min_ns), max(got.max_ns, s.max_ns)
            got.avg_ns = got.total_ns / n
    grand = sum(s.self_ns or 0 for s in merged.values()) or 1
    for s in merged.values():
        s.pct = 100.0 * (s.self_ns or 0) / grand
    return sorted(merged.values(), key=lambda s: (-s.total_ns, s.name))


def check_outputs_writable(cfg: BenchmarkConfig, multi_point: bool) -> str | None:
    """Every output directory creatable and writable, summary.jsonl not a directory or the like: checked
    before any workload runs (a read-only directory must not be found after the whole run). Returns the
    one-line problem, or None."""
    import tempfile

    from ..workloads.runner import trace_dir

    dirs = dict.fromkeys([cfg.points[0].output.dir, *(trace_dir(pt, multi_point) for pt in cfg.points)])
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".xpuprof-write-check.")  # a real write, not os.access
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            return f"cannot write outputs to {d}: {exc.strerror or exc}"
    try:
        output_target(cfg.points[0].output.dir / summary_name())
    except OutputError as exc:
        return str(exc)
    return _check_stores(cfg, multi_point)


def _check_stores(cfg: BenchmarkConfig, multi_point: bool) -> str | None:
    """A parquet run's stores must not already hold this process's rank (an earlier run into --out)."""
    from .. import rank as rank_env
    from ..workloads.runner import store_name, store_worker, trace_dir

    if not any(pt.output.format == "parquet" for pt in cfg.points):
        return None
    rank = rank_env.process_rank()  # unusable launcher variables: said once, read as one process
    rank = 0 if rank is None else rank
    for pt in cfg.points:
        if pt.output.format != "parquet":
            continue
        store = trace_dir(pt, multi_point) / store_name(store_worker(pt), 0)
        if (store / f"rank={rank}").exists():
            return (f"{store} already holds rank {rank} (from an earlier run?); remove it or choose another --out")
    return None


def check_profiler_setup(cfg: BenchmarkConfig) -> str | None:
    """What each point's profile() checks at start, without running anything: metric names known to a
    collector or a catalog and collectable by a backend here, named backends available. Returns the
    problem (naming the point), or None."""
    from ..backends.base import BackendError
    from ..profiler import profile

    seen: set[str] = set()
    for pt in cfg.points:
        config = pt.profiler_config()
        if repr(config) in seen:  # points differing only in workload parameters check alike
            continue
        seen.add(repr(config))
        try:
            profile(config=config).check()
        except (ValueError, BackendError) as exc:  # unknown names (CollectorError, ValueError), nothing to collect
            return f"point {pt.label!r}: {exc}"
    return None


def _at_config_key(config_path: str, problem: str) -> str:
    """A metric-name problem points at the config's ``metrics:`` line, as a misspelt key's does."""
    if "metric" not in problem:
        return problem
    try:
        lines = Path(config_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return problem
    for number, line in enumerate(lines, 1):
        if line.split("#", 1)[0].strip().startswith(("names:", "metrics:")) and "metrics" in "".join(lines[:number]):
            return f"{config_path}:{number}: metrics.names: {problem}"
    return problem


def _print_summary(cfg: BenchmarkConfig, records: list[dict], point_stats: list[list], top: int | None,
                   width: int | None) -> None:
    """The points table, then each point's per-name table (``analysis.tables``: report's labels and formats)."""
    from ..analysis.tables import AVG, MAX, MIN, stats_table
    from ..analysis.text import Column, format_count, format_ns, render_table

    rows = []
    for r in records:
        it = r["iteration_time"]
        status = (f"error: {r['error']}" if r["error"] else
                  f"interrupted ({r['interrupted']})" if r.get("interrupted") else "ok")
        rows.append([r["label"], r["workload"] or "-", r["device"] or "-", format_count(it.get("count", 0)),
                     *(format_ns(it[k] * 1e6) if it else "-" for k in ("mean_ms", "min_ms", "max_ms")),
                     format_count(len(r["traces"])), status])
    columns = [Column("Point", "left", wrap=True, min_width=10), Column("Workload", "left", wrap=True, min_width=12),
               Column("Device", "left", wrap=True, min_width=6), Column("Iterations"), Column(AVG), Column(MIN, optional=2),
               Column(MAX, optional=2), Column("Traces", optional=3), Column("Status", "left", wrap=True, min_width=8)]
    out = [render_table(columns, rows, title=f"{cfg.name}: {len(records)} point(s), time per iteration", width=width)]
    for r, stats in zip(records, point_stats):
        if not stats:
            continue
        shown = stats if top is None else stats[:top]
        nests = any(s.self_ns is not None and s.self_ns != s.total_ns for s in stats)
        what = "host ranges/ops (self time leaves out the rows nested inside)" if nests else "kernels/ops"
        out.append(stats_table(shown, units=r.get("metric_units") or {}, nests=nests, width=width,
                               title=f"{r['label']}: top {len(shown)} of {len(stats)} {what}"))
    sys.stdout.write("".join(out))
    sys.stdout.flush()


def run(args) -> int:
    from rich.console import Console

    from ..config.yamlconfig import ConfigError, load_config

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    from ..deadline import default_deadline_s

    try:
        from ..workloads import run_names

        default_deadline_s()  # a bad setting is said once, here, before any point
        cfg = load_config(args.config, overrides=args.overrides, out_dir=args.out, names=run_names())
        apply_xpu_flags(cfg, args)
    except ConfigError as exc:
        print(f"xpuprof run: {exc}", file=sys.stderr)
        return 2
    if any(pt.experimental.profiler_metrics or pt.experimental.stall_sampling for pt in cfg.points):
        # Level Zero reads ZET_ENABLE_METRICS once, when the workload initializes it (a dpnp/torch import,
        # a first queue): set it now, before any workload is built, so metric collection can start later.
        os.environ.setdefault("ZET_ENABLE_METRICS", "1")
    problem = check_profiler_setup(cfg)  # metric names, backends: a typo stops the run before it starts
    if problem is not None:
        print(f"xpuprof run: {_at_config_key(args.config, problem)}", file=sys.stderr)
        return 2
    if args.dry_run:
        for pt in cfg.points:
            print(f"{pt.slug}: {pt.workload.kind} {pt.workload.target} library={pt.workload.library} "
                  f"kwargs={pt.workload.kwargs} device={pt.device} iterations={pt.iterations} repeats={pt.repeats} "
                  f"-> {pt.output.dir}")
        return 0

    multi = len(cfg.points) > 1
    problem = _check_history(args, cfg) or check_outputs_writable(cfg, multi)
    if problem is not None:
        print(f"xpuprof run: {problem}", file=sys.stderr)
        return 2
    from ..workloads.interrupt import InterruptGuard

    with InterruptGuard() as guard:
        return _run_points(args, cfg, console, multi, guard)


def _run_points(args, cfg: BenchmarkConfig, console, multi: bool, guard) -> int:
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..config.experiment import point_hash
    from ..trace.builder.columns import encode_json
    from ..workloads.runner import PointResult, TraceWriteError, run_point

    records: list[dict] = []
    point_stats: list[list] = []  # each point's per-name rows (report.NameStat), for the tables
    interrupted = None
    total = sum(pt.repeats * pt.iterations for pt in cfg.points)
    started = time.time()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.no_progress, transient=False) as progress:
        task = progress.add_task("starting", total=total)
        for pt in cfg.points:
            progress.update(task, description=f"[{pt.index + 1}/{len(cfg.points)}] {pt.label} repeat 1/{pt.repeats}")

            def on_repeat(done: int, pt=pt) -> None:
                if done + 1 < pt.repeats:
                    progress.update(task, description=f"[{pt.index + 1}/{len(cfg.points)}] {pt.label} "
                                                      f"repeat {done + 2}/{pt.repeats}")

            result = PointResult(pt)  # kept when the point fails: what was measured before stays in the summary
            from ..analysis.machine_probe import GuardedProbe

            probe = GuardedProbe()  # the machine's own speed right around the iterations, for the gate
            try:
                run_point(pt, multi_point=multi, on_iteration=lambda: progress.advance(task),
                          on_repeat=on_repeat, guard=guard, result=result, probe=probe)
            except Exception as exc:  # one failing point is reported; the sweep goes on unless --fail-fast
                result.error = str(exc) if isinstance(exc, TraceWriteError) else f"{type(exc).__name__}: {exc}"
                # the message may hold [brackets] (install hints such as xpuprof[dpnp-cpu]): escaped, not markup
                progress.console.print(f"[red]point {escape(repr(pt.label))} failed:[/red] {escape(result.error)}",
                                       markup=True, highlight=False)
            guard.phase = "summarizing the traces"
            stats, units = _kernels(result)
            records.append(_point_record(result, stats, units))
            records[-1]["config_hash"] = point_hash(cfg, pt)
            records[-1]["machine_probe"] = probe.record()
            point_stats.append(stats)
            if result.interrupted is not None or guard.signum is not None:
                interrupted = result.interrupted or guard.interrupted
                break
            if result.error and args.fail_fast:
                break

    from ..analysis.text import terminal_width

    _print_summary(cfg, records, point_stats, args.top, None if args.wide else terminal_width())
    if interrupted is None and guard.signum is not None:  # landed after the last point (printing the tables)
        interrupted = guard.interrupted
    out_dir = cfg.points[0].output.dir
    summary = {"kind": "xpuprof-run-summary", "xpuprof_version": __version__, "name": cfg.name,
               "config": str(Path(args.config)), "overrides": list(args.overrides), "host": socket.gethostname(),
               "pid": os.getpid(), "started": started, "elapsed_s": round(time.time() - started, 3),
               **_where_it_ran(args),
               "interrupted": None if interrupted is None else {"signal": interrupted.signal_name,
                                                                 "during": guard.during},
               "points": records}
    path = out_dir / summary_name()
    guard.phase = f"writing {path.name}"
    try:
        with guard.protected():
            out_dir.mkdir(parents=True, exist_ok=True)
            write_output_bytes(path, encode_json(summary) + b"\n")  # atomic: a full disk never leaves a broken summary
    except OSError as exc:
        print(f"xpuprof run: {write_error_line(path, exc)}", file=sys.stderr)
        return 1
    if interrupted is not None:
        for r in records:
            for trace in r["traces"]:
                console.print(f"trace: {trace}", markup=False)
        console.print(f"summary: {path}", markup=False)
        console.print(f"xpuprof run: stopped by {interrupted.signal_name} while {guard.during}; "
                      f"{len(records)} of {len(cfg.points)} point(s) recorded", markup=False)
        return interrupted.exit_status
    console.print(f"summary: {path}", markup=False)
    status = 1 if any(r["error"] for r in records) else 0
    history = history_dir(args, cfg)
    if history is not None:
        status = max(status, _append_history(console, history, out_dir, args.keep))
    return status


def history_dir(args, cfg: BenchmarkConfig) -> str | None:
    return args.history if getattr(args, "history", None) else cfg.history


def _check_history(args, cfg: BenchmarkConfig) -> str | None:
    """The history directory usable (created if new): checked before any workload runs."""
    directory = history_dir(args, cfg)
    if directory is None:
        return None
    from ..analysis.history import History, HistoryError

    try:
        History(directory).ensure()
    except (HistoryError, OSError) as exc:
        return str(exc)
    return None


def _where_it_ran(args) -> dict:
    """The summary's machine fingerprint and git revision (the history's keys), when a history may be kept
    or gated later: always, since `xpuprof gate RUN_DIR` reads them from any run."""
    from ..analysis.history import git_revision, machine_fingerprint

    return {"machine": machine_fingerprint(), "git": git_revision(Path(args.config).resolve().parent)}


def _append_history(console, directory: str, out_dir: Path, keep: int | None) -> int:
    """Append this run's points to the history; 0, or 1 when they could not be written (said)."""
    from ..analysis.history import DEFAULT_KEEP as KEEP, History, HistoryError
    from ..analysis.run_records import RunDirError, records_from_run_dir

    try:
        got = records_from_run_dir(out_dir, source="run --history")
        history = History(directory)
        written = [history.append(run, keep=keep or KEEP) for run in got.runs]
    except (RunDirError, HistoryError, OSError) as exc:
        console.print(f"xpuprof run: history not written: {exc}", markup=False)
        return 1
    for line in got.skipped:
        console.print(f"history: {line}", markup=False)
    for path in written:
        console.print(f"history: {path}", markup=False)
    return 0
