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
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the comparison's modules load when a diff runs, not to parse or show --help
    from ..analysis.diff import DiffResult

# analysis.diff.TIME_FIELDS, named here for the parser (tests/commands/test_cli_startup.py keeps them equal)
TIME_FIELDS = ("avg", "total", "min", "max")

FORMATS = ("table", "json", "html")


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
    p.add_argument("--format", default=None, choices=FORMATS,
                   help="table (default), json or html (charts of what changed; with --history a history plot per "
                        "kernel, needs -o); with -o the file's extension picks it (d.html: html)")
    p.add_argument("--all", action="store_true", help="also list unchanged kernels")
    p.add_argument("--wide", action="store_true",
                   help="every column, however wide the terminal (default: the tables fit it)")
    from .gate import add_gate_options

    gate = p.add_argument_group("--history DIR: the run A against its history, as `xpuprof gate` (statistics "
                                "instead of --threshold)")
    add_gate_options(gate, history_required=False)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    from ._options import add_progress_option

    add_progress_option(p)
    p.set_defaults(func=run)


def _signed(value: float, unit: str) -> str:
    """A difference in its unit with its sign: ``+1.2 %``, ``-3.400 us``."""
    from ..analysis.text import format_value

    text = format_value(abs(value), unit)
    return ("-" if value < 0 else "+") + text


class _Spec:
    """A table before it is rendered: title, columns, cells, and lines under it (text) or beside it (HTML)."""

    def __init__(self, title: str, columns: list, cells: list, notes=None, empty: str = "") -> None:
        # notes: the lines under the table for a width (None: unwrapped), or None for no lines
        self.title, self.columns, self.cells, self.notes, self.empty = title, columns, cells, notes, empty

    def text(self, width: int | None) -> str:
        from ..analysis.text import render_table

        notes = self.notes(width) if self.notes else ""
        if not self.cells:
            return render_table([], [], title=self.title, width=width, boxed=False) + self.empty + notes
        return render_table(self.columns, self.cells, title=self.title, width=width) + notes

    def html(self, table_id: str) -> str:
        from ..analysis.html import _esc, columns_table

        if not self.cells:
            return f'<p class="meta">{_esc(self.empty.strip())}</p>'
        return columns_table(self.columns, self.cells, table_id)


def _kernel_spec(result: DiffResult, show_all: bool, units: dict[str, str] | None = None) -> _Spec:
    from ..analysis.tables import metric_label
    from ..analysis.text import Column, format_ns

    units = units or {}
    rows = [r for r in result.rows if show_all or r.status != "same"]
    title = (f"Kernel {result.field} time: B vs A (threshold {result.threshold_pct:g}%), "
             f"{len(result.regressions)} regression(s)")
    notes = partial(_pairing_notes, result)  # wrapped to the width the table is rendered at
    empty = "no kernel changed by more than the threshold\n"
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
    return _Spec(title, columns, cells, notes, empty)


def _table(result: DiffResult, show_all: bool, units: dict[str, str] | None = None, width: int | None = None) -> str:
    return _kernel_spec(result, show_all, units).text(width)


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
    from ._options import UsageError, output_format

    try:
        args.format = output_format(args.format, args.output, FORMATS)
    except UsageError as exc:
        print(f"xpuprof diff: {exc}", file=sys.stderr)
        return 2
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
    if args.accept or args.keep:
        print("xpuprof diff: --accept and --keep apply with --history (a run against its history)", file=sys.stderr)
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
    units = {**a.units, **b.units} if args.format != "json" else {}
    if args.format == "json":
        out = result.to_dict()
        out["telemetry"] = telemetry
        if stalls:
            out["stalls"] = {"threshold_points": args.threshold, "grew": len(grew), "rows": stalls}
        text = encode_json(out).decode() + "\n"
    elif args.format == "html":
        text = _html(args, result, telemetry, stalls, units)
    else:
        from ..analysis.text import terminal_width

        width = None if args.wide else terminal_width()
        text = _table(result, args.all, units, width)
        if telemetry:
            text += "\n" + _telemetry_table(telemetry, width=width)
        if stalls:
            text += "\n" + _stall_table(stalls, args.threshold, args.all, width)
    if not _emit(args, text):
        return 2
    return 1 if result.regressions or grew else 0


def _stall_spec(rows: list[dict], threshold: float, show_all: bool) -> _Spec:
    from ..analysis.text import Column, format_percent

    shown = [r for r in rows if show_all or r["status"] != "same"]
    grew = sum(r["status"] == "grew" for r in rows)
    title = (f"EU stall reasons: share of each kernel's samples, B vs A (threshold {threshold:g} points), "
             f"{grew} grew")
    columns = [Column("Kernel", "left", wrap=True, min_width=16), Column("Reason", "left", wrap=True, min_width=8),
               Column("Status", "left"), Column("A %"), Column("B %"), Column("Δ points"),
               Column("Samples A/B", optional=2)]
    cells = [[r["kernel"], r["reason"], r["status"], format_percent(r["a_pct"]), format_percent(r["b_pct"]),
              f"{r['delta_points']:+.1f} points", f"{r['a_samples']:,}/{r['b_samples']:,}"] for r in shown]
    return _Spec(title, columns, cells, empty="no stall reason's share changed by more than the threshold\n")


def _stall_table(rows: list[dict], threshold: float, show_all: bool, width: int | None = None) -> str:
    return _stall_spec(rows, threshold, show_all).text(width)


def _telemetry_spec(rows: list[dict], units: dict[str, str] | None = None) -> _Spec:
    from ..analysis.text import Column, format_value

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
    return _Spec("Telemetry: average and peak per metric, B vs A", columns, cells)


def _telemetry_table(rows: list[dict], units: dict[str, str] | None = None, width: int | None = None) -> str:
    return _telemetry_spec(rows, units).text(width)


def _series_of(path: str) -> dict:
    """key -> TelemetrySeries of a side that is traces (a report JSON or run summary holds no samples: {})."""
    from pathlib import Path

    from ..analysis.report import ReportError, build_report

    p = Path(path)
    if p.is_file() and p.suffix in (".json", ".jsonl") and not p.name.endswith(".pt.trace.json"):
        return {}
    try:
        return {t.key: t for t in build_report([p]).telemetry}
    except ReportError:
        return {}


def _html(args, result: DiffResult, telemetry: list[dict], stalls: list[dict], units: dict[str, str]) -> str:
    from ..analysis.plots.diff_page import render

    kernels = _kernel_spec(result, args.all, units)
    tables = [(kernels.title, kernels.html("kernels"))]
    series_a, series_b = (_series_of(args.a), _series_of(args.b)) if telemetry else ({}, {})
    if telemetry:  # the traces' series name their units (the collectors' metadata)
        spec = _telemetry_spec(telemetry, {k: t.unit for k, t in {**series_a, **series_b}.items() if t.unit})
        tables.append((spec.title, spec.html("telemetry")))
    if stalls:
        spec = _stall_spec(stalls, args.threshold, args.all)
        tables.append((spec.title, spec.html("stalls")))
    return render(result, a=args.a, b=args.b, units=units, telemetry=telemetry, series_a=series_a, series_b=series_b,
                  stalls=stalls, tables=tables, notes=_pairing_notes(result).splitlines())


def _emit(args, text: str) -> bool:
    """``text`` to -o (atomically; the path said on stderr) or stdout; False when the file cannot be written."""
    if not args.output:
        sys.stdout.write(text)
        return True
    from ..outputs import write_error_line, write_output_bytes

    try:
        write_output_bytes(args.output, text.encode("utf-8"))
    except OSError as exc:
        print(f"xpuprof diff: {write_error_line(args.output, exc)}", file=sys.stderr)
        return False
    print(f"xpuprof diff: wrote {args.output}", file=sys.stderr)
    return True


def _say(line: str) -> None:
    """A line on what a directory held that is not read (``trace.read.inputs``)."""
    print(f"xpuprof diff: {line}", file=sys.stderr)
