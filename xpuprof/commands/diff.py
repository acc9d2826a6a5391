"""``xpuprof diff A B``: per-kernel time and metric deltas between two runs (traces, trace
directories, ``summary.jsonl`` files or report JSON). Kernels are matched by identity: equal names, or
one kernel whose parameters changed (``sim_gemm[numpy] n=128`` and ``n=512``: its time is shown, never a
regression); kernels that differ only in parameters and cannot be paired one to one are said and left
unpaired. Exits 1 when a kernel got slower by more than ``--threshold`` percent or, with EU stall
samples on both sides (XPU traces recorded with stall sampling, or ``report --stalls`` JSON), a stall
reason's share of a kernel's samples grew by more than ``--threshold`` points; 2 on unusable input, 0
otherwise. ``xpuprof diff --history DIR RUN_DIR`` is ``xpuprof gate RUN_DIR --history DIR``: a run
against its history, with statistics instead of a threshold."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the comparison's modules load when a diff runs, not to parse or show --help
    from ..analysis.diff import DiffResult

# analysis.diff.TIME_FIELDS, named here for the parser (tests/commands/test_cli_startup.py keeps them equal)
TIME_FIELDS = ("avg", "total", "min", "max")


def register(subparsers) -> None:
    p = subparsers.add_parser("diff", help="compare kernel times and metrics of two runs (non-zero exit on regression)",
                              description=__doc__)
    p.add_argument("a", metavar="A", help="baseline: trace, trace directory, summary.jsonl or report JSON (with "
                                          "--history: the run directory to gate)")
    p.add_argument("b", metavar="B", nargs="?", default=None, help="candidate, same kinds as A (not with --history)")
    p.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="a kernel slower by more than PCT percent is a regression (default 5); with EU stall samples "
                        "on both sides, a stall reason whose share of a kernel's samples grew by more than PCT "
                        "points is flagged too")
    p.add_argument("--field", default="avg", choices=TIME_FIELDS, help="time compared per kernel (default avg)")
    p.add_argument("--min-us", type=float, default=0.0, metavar="US",
                   help="ignore kernels faster than US microseconds on both sides")
    p.add_argument("--format", default="table", choices=("table", "json", "html"),
                   help="table (default), json; html with --history (a history plot per kernel, needs -o)")
    p.add_argument("--all", action="store_true", help="also list unchanged kernels")
    p.add_argument("--wide", action="store_true",
                   help="every column, however wide the terminal (default: the tables fit it)")
    from .gate import add_gate_options

    gate = p.add_argument_group("--history DIR: the run A against its history, as `xpuprof gate` (statistics "
                                "instead of --threshold)")
    add_gate_options(gate, history_required=False)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="with --history: write to FILE")
    p.set_defaults(func=run)


def _signed(value: float, unit: str) -> str:
    """A difference in its unit with its sign: ``+1.2 %``, ``-3.400 us``."""
    from ..analysis.text import format_value

    text = format_value(abs(value), unit)
    return ("-" if value < 0 else "+") + text


def _table(result: DiffResult, show_all: bool, units: dict[str, str] | None = None, width: int | None = None) -> str:
    from ..analysis.tables import metric_label
    from ..analysis.text import Column, format_ns, render_table

    units = units or {}
    rows = [r for r in result.rows if show_all or r.status != "same"]
    title = (f"Kernel {result.field} time: B vs A (threshold {result.threshold_pct:g}%), "
             f"{len(result.regressions)} regression(s)")
    notes = _pairing_notes(result, width)
    if not rows:
        return render_table([], [], title=title, width=width, boxed=False) + \
            "no kernel changed by more than the threshold\n" + notes
    metrics = list(dict.fromkeys(m for r in rows for m in r.metrics))
    points = any(r.point for r in rows)
    field = result.field.capitalize()
    columns = ([Column("Point", "left", wrap=True, min_width=8)] if points else []) + [
        Column("Kernel", "left", wrap=True, min_width=16), Column("Status", "left"), Column(f"{field} A"),
        Column(f"{field} B"), Column("Δ %"), Column("Calls A/B", optional=2)]
    columns += [Column("Δ " + metric_label(m, units.get(m, "")), optional=3) for m in metrics]
    cells = []
    for r in rows:
        pct = r.delta_pct
        name = f"{r.name} -> {r.b_name} ({r.note})" if r.b_name else r.name
        status = {"params": "params changed"}.get(r.status, r.status)
        line = ([r.point] if points else []) + [
            name, status, format_ns(r.a_ns) if r.a_ns is not None else "-",
            format_ns(r.b_ns) if r.b_ns is not None else "-", f"{pct:+.1f} %" if pct is not None else "-",
            f"{r.a_calls:,}/{r.b_calls:,}"]
        for m in metrics:
            a, b = r.metrics.get(m, (None, None))
            line.append(_signed(b - a, units.get(m, "")) if a is not None and b is not None else "-")
        cells.append(line)
    return render_table(columns, cells, title=title, width=width) + notes


def _pairing_notes(result: DiffResult, width: int | None = None) -> str:
    """What kernel identity paired across problem sizes, and what it could not pair (one note each, wrapped
    to ``width`` as the table is)."""
    import textwrap

    lines = []
    paired = [r for r in result.rows if r.match == "params"]
    if paired:
        lines.append(f"{len(paired)} kernel(s) matched by identity with changed parameters (shown, never counted as "
                     "regressions: another problem size is another measurement)")
    lines += [f"not paired: {note}" for note in dict.fromkeys(r.note for r in result.rows if r.match == "ambiguous")]
    return "".join((textwrap.fill(line, width) if width else line) + "\n" for line in lines)


def run(args) -> int:
    from ..analysis.diff import DiffError, diff, diff_telemetry, read_side
    from ..trace.builder.columns import encode_json

    if args.history:
        if args.b is not None:
            print(f"xpuprof diff: with --history give one run directory (the run to judge against the history), "
                  f"not two: {args.a} {args.b}", file=sys.stderr)
            return 2
        from .gate import run_gate

        return run_gate(args, args.a, "xpuprof diff --history")
    if args.b is None:
        print("xpuprof diff: give two runs to compare (A B), or one run directory with --history DIR",
              file=sys.stderr)
        return 2
    if args.format == "html" or args.output or args.accept:
        print("xpuprof diff: --format html, -o and --accept apply with --history (a run against its history)",
              file=sys.stderr)
        return 2
    try:
        a, b = read_side(args.a, say=_say), read_side(args.b, say=_say)  # each side read once
        result = diff(a.kernels, b.kernels, threshold_pct=args.threshold, field=args.field, min_ns=args.min_us * 1000.0)
        telemetry = diff_telemetry(a.telemetry, b.telemetry)
        from ..analysis.stall_diff import diff_stalls

        stalls = diff_stalls(a.stalls, b.stalls, threshold_points=args.threshold)
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
        from ..analysis.text import terminal_width

        width = None if args.wide else terminal_width()
        units = {**a.units, **b.units}
        sys.stdout.write(_table(result, args.all, units, width))
        if telemetry:
            sys.stdout.write("\n" + _telemetry_table(telemetry, width=width))
        if stalls:
            sys.stdout.write("\n" + _stall_table(stalls, args.threshold, args.all, width))
    return 1 if result.regressions or grew else 0


def _stall_table(rows: list[dict], threshold: float, show_all: bool, width: int | None = None) -> str:
    from ..analysis.text import Column, format_percent, render_table

    shown = [r for r in rows if show_all or r["status"] != "same"]
    grew = sum(r["status"] == "grew" for r in rows)
    title = (f"EU stall reasons: share of each kernel's samples, B vs A (threshold {threshold:g} points), "
             f"{grew} grew")
    if not shown:
        return render_table([], [], title=title, width=width, boxed=False) + \
            "no stall reason's share changed by more than the threshold\n"
    columns = [Column("Kernel", "left", wrap=True, min_width=16), Column("Reason", "left", wrap=True, min_width=8),
               Column("Status", "left"), Column("A %"), Column("B %"), Column("Δ points"),
               Column("Samples A/B", optional=2)]
    cells = [[r["kernel"], r["reason"], r["status"], format_percent(r["a_pct"]), format_percent(r["b_pct"]),
              f"{r['delta_points']:+.1f} points", f"{r['a_samples']:,}/{r['b_samples']:,}"] for r in shown]
    return render_table(columns, cells, title=title, width=width)


def _telemetry_table(rows: list[dict], units: dict[str, str] | None = None, width: int | None = None) -> str:
    from ..analysis.text import Column, format_value, render_table

    units = units or {}

    def num(key, v):
        return "-" if v is None else format_value(v, units.get(key, ""))

    def pct(v):
        return "-" if v is None else f"{v:+.1f} %"

    unitless = not any(units.get(r["series"]) for r in rows)
    tag = " [no unit]" if unitless else ""
    columns = [Column("Series", "left", wrap=True, min_width=16), Column("Avg A" + tag), Column("Avg B" + tag),
               Column("Avg Δ %"), Column("Peak A" + tag, optional=2), Column("Peak B" + tag, optional=2),
               Column("Peak Δ %", optional=2)]
    cells = [[r["series"], num(r["series"], r["a_mean"]), num(r["series"], r["b_mean"]), pct(r["mean_delta_pct"]),
              num(r["series"], r["a_peak"]), num(r["series"], r["b_peak"]), pct(r["peak_delta_pct"])] for r in rows]
    return render_table(columns, cells, title="Telemetry: average and peak per metric, B vs A", width=width)


def _say(line: str) -> None:
    """A line on what a directory held that is not read (``trace.read.inputs``)."""
    print(f"xpuprof diff: {line}", file=sys.stderr)
