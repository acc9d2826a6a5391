"""``xpuprof metrics``: list the metric collectors (telemetry sampled on a thread: which metrics,
whether each can run here and why not) and the metric catalogs (groups, metrics, units, meanings,
derived)."""
from __future__ import annotations

import sys

import orjson

from .. import catalogs


def register(subparsers) -> None:
    p = subparsers.add_parser("metrics", help="list hardware metrics from the catalogs in metrics/")
    p.add_argument("--vendor", choices=["xpu", "cuda", "rocm"], default=None, help="vendor directory (default: all)")
    p.add_argument("--device", default=None, help="device family, alias or device name (e.g. bmg, pvc, lnl)")
    p.add_argument("--group", default=None, help="only this metric group")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--collectors", action="store_true", help="only the metric collectors, not the catalogs")
    p.set_defaults(func=run)


def _selected(args) -> list[catalogs.Catalog]:
    if args.device:
        return [catalogs.find_catalog(args.device, vendor=args.vendor)]
    return catalogs.load_catalogs(args.vendor)


def _collector_rows() -> list[dict]:
    from ..collectors import registry as collector_registry

    return collector_registry.describe_collectors()


def _print_collectors(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Metric collectors (sampled; ask for a metric by name, or as collector:metric)")
    for col in ("Collector", "Scope", "Available", "Metric", "Unit", "Meaning"):
        table.add_column(col, overflow="fold")
    for r in rows:
        status = "yes" if r["status"] == "available" else f"no: {r['reason']}"
        for i, (name, unit, desc) in enumerate(r["metrics"] or [("", "", "")]):
            first = i == 0
            table.add_row(escape(r["name"] + (f" ({r['origin']})" if first and r["origin"] else "")) if first else "",
                          r["scope"] if first else "", escape(status) if first else "", escape(name), escape(unit),
                          escape(desc))
    Console().print(table)


def run(args) -> int:
    with_collectors = args.collectors or not (args.vendor or args.device or args.group)
    if args.collectors:
        rows = _collector_rows()
        if args.format == "json":
            sys.stdout.write(orjson.dumps({"collectors": rows}, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            _print_collectors(rows)
        return 0
    try:
        cats = _selected(args)
        if args.group and not any(args.group in c.groups for c in cats):
            known = sorted({g for c in cats for g in c.groups})
            raise catalogs.CatalogError(f"unknown metric group {args.group!r}; groups: {', '.join(known)}")
    except (catalogs.CatalogError, catalogs.MetricSelectionError) as exc:
        print(f"xpuprof metrics: {exc}", file=sys.stderr)
        return 2
    rows = [(c, g, m) for c in cats for g in c.groups.values() if not args.group or g.name == args.group
            for m in g.metrics.values()]
    derived = [(c, d) for c in cats for d in c.derived.values() if not args.group or d.group == args.group]
    if args.format == "json":
        out = {"metrics": [{"vendor": c.vendor, "family": c.family, "group": g.name, "name": m.name, "unit": m.unit,
                            "description": m.description, "type": m.type, "value_type": m.value_type,
                            "source": m.source_url} for c, g, m in rows],
               "derived": [{"vendor": c.vendor, "family": c.family, "group": d.group, "name": d.name,
                            "formula": d.formula, "unit": d.unit, "description": d.description,
                            "source": d.source_url} for c, d in derived]}
        if with_collectors:
            out["collectors"] = _collector_rows()
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Hardware metrics", show_lines=False)
    for col in ("Device", "Group", "Metric", "Unit", "Meaning"):
        table.add_column(col, overflow="fold")
    for c, g, m in rows:
        table.add_row(*map(escape, (f"{c.vendor}/{c.family}", g.name, m.name, m.unit, m.description)))
    for c, d in derived:
        table.add_row(*map(escape, (f"{c.vendor}/{c.family}", d.group, f"{d.name} = {d.formula}", d.unit, d.description)))
    Console().print(table)
    if with_collectors:
        _print_collectors(_collector_rows())
    return 0
