"""``xpuprof diff A B``: per-kernel time and metric deltas between two runs (traces, trace
directories, ``summary.jsonl`` files or report JSON). Exits 1 when a kernel got slower by more
than ``--threshold`` percent or, with EU stall samples on both sides (XPU traces recorded with stall
sampling, or ``report --stalls`` JSON), a stall reason's share of a kernel's samples grew by more than
``--threshold`` points; 2 on unusable input, 0 otherwise."""
from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the comparison's modules load when a diff runs, not to parse or show --help
    from ..analysis.diff import DiffResult

# analysis.diff.TIME_FIELDS, named here for the parser (tests/commands/test_cli_startup.py keeps them equal)
TIME_FIELDS = ("avg", "total", "min", "max")


def register(subparsers) -> None:
    p = subparsers.add_parser("diff", help="compare kernel times and metrics of two runs (non-zero exit on regression)",
                              description=__doc__)
    p.add_argument("a", metavar="A", help="baseline: trace, trace directory, summary.jsonl or report JSON")
    p.add_argument("b", metavar="B", help="candidate, same kinds as A")
    p.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="a kernel slower by more than PCT percent is a regression (default 5); with EU stall samples "
                        "on both sides, a stall reason whose share of a kernel's samples grew by more than PCT "
                        "points is flagged too")
    p.add_argument("--field", default="avg", choices=TIME_FIELDS, help="time compared per kernel (default avg)")
    p.add_argument("--min-us", type=float, default=0.0, metavar="US",
                   help="ignore kernels faster than US microseconds on both sides")
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.add_argument("--all", action="store_true", help="also list unchanged kernels")
    p.set_defaults(func=run)


def _table(result: DiffResult, show_all: bool) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..analysis.summary import format_ns

    rows = [r for r in result.rows if show_all or r.status != "same"]
    metrics = list(dict.fromkeys(m for r in rows for m in r.metrics))
    points = any(r.point for r in rows)
    t = Table(title=f"Kernel {result.field} time: B vs A (threshold {result.threshold_pct:g}%), "
                    f"{len(result.regressions)} regression(s)", title_justify="left")
    if points:
        t.add_column("Point")
    for col in ("Kernel", "Status", "A", "B", "Δ%", "Calls A/B"):
        t.add_column(col, justify="left" if col in ("Kernel", "Status") else "right")
    for m in metrics:
        t.add_column(escape(f"Δ {m}"), justify="right")
    for r in rows:
        pct = r.delta_pct
        cells = ([escape(r.point)] if points else []) + [
            escape(r.name), r.status, format_ns(r.a_ns) if r.a_ns is not None else "-",
            format_ns(r.b_ns) if r.b_ns is not None else "-", f"{pct:+.1f}" if pct is not None else "-",
            f"{r.a_calls}/{r.b_calls}"]
        for m in metrics:
            a, b = r.metrics.get(m, (None, None))
            cells.append(f"{b - a:+.4g}" if a is not None and b is not None else "-")
        t.add_row(*cells)
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=False)
    console.print(t)
    if not rows:
        console.print("no kernel changed by more than the threshold")
    return console.export_text()


def run(args) -> int:
    from ..analysis.diff import DiffError, diff, diff_telemetry, load_side, load_telemetry
    from ..trace.builder.columns import encode_json

    try:
        result = diff(load_side(args.a), load_side(args.b), threshold_pct=args.threshold, field=args.field,
                      min_ns=args.min_us * 1000.0)
        telemetry = diff_telemetry(load_telemetry(args.a), load_telemetry(args.b))
        from ..analysis.stall_diff import diff_stalls, load_stall_side

        stalls = diff_stalls(load_stall_side(args.a), load_stall_side(args.b), threshold_points=args.threshold)
    except DiffError as exc:
        print(f"xpuprof diff: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - exit 1 means "regression": unusable input must never look like one
        print(f"xpuprof diff: cannot compare {args.a} and {args.b}: {type(exc).__name__}: {exc}"[:2000],
              file=sys.stderr)
        return 2
    grew = [r for r in stalls if r["status"] == "grew"]
    if args.format == "json":
        out = result.to_dict()
        out["telemetry"] = telemetry
        if stalls:
            out["stalls"] = {"threshold_points": args.threshold, "grew": len(grew), "rows": stalls}
        sys.stdout.write(encode_json(out).decode() + "\n")
    else:
        sys.stdout.write(_table(result, args.all))
        if telemetry:
            sys.stdout.write(_telemetry_table(telemetry))
        if stalls:
            sys.stdout.write(_stall_table(stalls, args.threshold, args.all))
    return 1 if result.regressions or grew else 0


def _stall_table(rows: list[dict], threshold: float, show_all: bool) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    shown = [r for r in rows if show_all or r["status"] != "same"]
    grew = sum(r["status"] == "grew" for r in rows)
    t = Table(title=f"EU stall reasons: share of each kernel's samples, B vs A (threshold {threshold:g} points), "
                    f"{grew} grew", title_justify="left")
    for col in ("Kernel", "Reason", "Status", "A %", "B %", "Δ points", "Samples A/B"):
        t.add_column(col, justify="left" if col in ("Kernel", "Reason", "Status") else "right")
    for r in shown:
        t.add_row(escape(r["kernel"]), escape(r["reason"]), r["status"], f"{r['a_pct']:.1f}", f"{r['b_pct']:.1f}",
                  f"{r['delta_points']:+.1f}", f"{r['a_samples']}/{r['b_samples']}")
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=False)
    console.print(t)
    if not shown:
        console.print("no stall reason's share changed by more than the threshold")
    return console.export_text()


def _telemetry_table(rows: list[dict]) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def num(v):
        return "-" if v is None else f"{v:.4g}"

    def pct(v):
        return "-" if v is None else f"{v:+.1f}"

    t = Table(title="Telemetry: mean and peak per metric, B vs A", title_justify="left")
    for col in ("Series", "Mean A", "Mean B", "Δ%", "Peak A", "Peak B", "Δ%"):
        t.add_column(col, justify="left" if col == "Series" else "right")
    for r in rows:
        t.add_row(escape(r["series"]), num(r["a_mean"]), num(r["b_mean"]), pct(r["mean_delta_pct"]),
                  num(r["a_peak"]), num(r["b_peak"]), pct(r["peak_delta_pct"]))
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=False)
    console.print(t)
    return console.export_text()
