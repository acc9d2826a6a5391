"""``xpuprof run CONFIG.yaml [--set key=value …] [--out DIR]``: run the workload a benchmark
config names under the profiler, once per matrix point and repeat, with a progress bar; print a
summary table and write ``summary.json`` (machine-readable, ``xpuprof diff`` compares two)."""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from .. import __version__
from ..config.yamlconfig import BenchmarkConfig, ConfigError, load_config
from ..trace.builder import encode_json
from ..trace.outputs import write_output_bytes


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a YAML benchmark config under the profiler", description=__doc__)
    p.add_argument("config", metavar="CONFIG.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted, value parsed as YAML), e.g. --set workload.kwargs.n=1024")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (overrides output.dir)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the run points, run nothing")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first point that fails")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="kernels shown per point in the summary")
    p.set_defaults(func=run)


def _point_record(result, kernels) -> dict:
    pt = result.point
    return {"index": pt.index, "label": pt.label, "slug": pt.slug, "params": pt.params, "workload": result.workload,
            "device": result.device, "info": result.info, "iterations": pt.iterations, "warmup": pt.warmup,
            "repeats": pt.repeats, "iteration_time": result.iteration_stats(),
            "traces": [str(p) for p in result.traces], "kernels": [k.to_dict() for k in kernels],
            "error": result.error}


def _kernels(result):
    from ..analysis.report import ReportError, build_report

    if not result.traces:
        return []
    try:
        return build_report(result.traces).stats
    except ReportError as exc:
        result.error = result.error or f"cannot summarize traces: {exc}"
        return []


def _print_summary(console, cfg: BenchmarkConfig, records: list[dict], top: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ..analysis.summary import format_ns

    t = Table(title=escape(f"{cfg.name}: {len(records)} point(s)"), title_justify="left")
    for col in ("Point", "Workload", "Device", "Iters", "Mean", "Min", "Max", "Traces", "Status"):
        t.add_column(col, justify="right" if col in ("Iters", "Mean", "Min", "Max", "Traces") else "left",
                     overflow="fold")
    for r in records:
        it = r["iteration_time"]
        t.add_row(escape(r["label"]), escape(r["workload"] or "-"), escape(r["device"] or "-"), str(it.get("count", 0)),
                  f"{it['mean_ms']:.3f} ms" if it else "-", f"{it['min_ms']:.3f} ms" if it else "-",
                  f"{it['max_ms']:.3f} ms" if it else "-", str(len(r["traces"])),
                  escape(f"error: {r['error']}") if r["error"] else "ok")
    console.print(t)
    for r in records:
        if not r["kernels"]:
            continue
        k = Table(title=escape(f"{r['label']}: top {min(top, len(r['kernels']))} of {len(r['kernels'])} kernels/ops"),
                  title_justify="left")
        for col in ("Name", "Calls", "Total", "%", "Avg", "Min", "Max"):
            k.add_column(col, justify="left" if col == "Name" else "right", overflow="fold")
        metrics = list(dict.fromkeys(m for row in r["kernels"] for m in row["metrics"]))
        for m in metrics:
            k.add_column(escape(m), justify="right")
        for row in r["kernels"][:top]:
            k.add_row(escape(row["name"]), str(row["calls"]), format_ns(row["total_ns"]), f"{row['pct']:.1f}",
                      format_ns(row["avg_ns"]), format_ns(row["min_ns"]), format_ns(row["max_ns"]),
                      *[f"{row['metrics'][m]:.4g}" if m in row["metrics"] else "" for m in metrics])
        console.print(k)


def run(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..workloads.runner import run_point

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        from ..workloads import run_names

        cfg = load_config(args.config, overrides=args.overrides, out_dir=args.out, names=run_names())
    except ConfigError as exc:
        print(f"xpuprof run: {exc}", file=sys.stderr)
        return 2
    if any(pt.experimental.profiler_metrics for pt in cfg.points):
        # Level Zero reads ZET_ENABLE_METRICS once, when the workload initializes it (a dpnp/torch import,
        # a first queue): set it now, before any workload is built, so metric collection can start later.
        os.environ.setdefault("ZET_ENABLE_METRICS", "1")
    if args.dry_run:
        for pt in cfg.points:
            print(f"{pt.slug}: {pt.workload.kind} {pt.workload.target} library={pt.workload.library} "
                  f"kwargs={pt.workload.kwargs} device={pt.device} iterations={pt.iterations} repeats={pt.repeats} "
                  f"-> {pt.output.dir}")
        return 0

    multi = len(cfg.points) > 1
    records: list[dict] = []
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

            try:
                result = run_point(pt, multi_point=multi, on_iteration=lambda: progress.advance(task),
                                   on_repeat=on_repeat)
            except Exception as exc:  # one failing point is reported; the sweep goes on unless --fail-fast
                from ..workloads.runner import PointResult

                result = PointResult(pt, error=f"{type(exc).__name__}: {exc}")
                progress.console.print(f"[red]point {pt.label!r} failed:[/red] {type(exc).__name__}: {exc}",
                                       markup=True, highlight=False)
            records.append(_point_record(result, _kernels(result)))
            if result.error and args.fail_fast:
                break

    _print_summary(console, cfg, records, args.top)
    out_dir = cfg.points[0].output.dir
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {"kind": "xpuprof-run-summary", "xpuprof_version": __version__, "name": cfg.name,
               "config": str(Path(args.config)), "overrides": list(args.overrides), "host": socket.gethostname(),
               "pid": os.getpid(), "started": started, "elapsed_s": round(time.time() - started, 3),
               "points": records}
    path = out_dir / "summary.json"
    try:
        write_output_bytes(path, encode_json(summary))  # atomic: a full disk never leaves a broken summary
    except OSError as exc:
        print(f"xpuprof run: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    console.print(f"summary: {path}")
    return 1 if any(r["error"] for r in records) else 0
