"""``xpuprof metrics``: the metric catalogs (per device: groups, metrics, units, meanings, derived)
and the metric collectors (telemetry sampled on a thread: which metrics, whether each can run here).

A summary by default (one line per catalog and per collector); ``--device``/``--vendor``/``--group``
list metrics one per line; ``--details`` gives meanings and reasons in full; ``--format json`` all of
it as data."""
from __future__ import annotations

import sys
import textwrap

import orjson

from .. import catalogs


def register(subparsers) -> None:
    p = subparsers.add_parser("metrics", help="list hardware metrics (catalogs in metrics/) and metric collectors",
                              description=__doc__)
    p.add_argument("--vendor", choices=["xpu", "cuda", "rocm"], default=None, help="vendor directory (default: all)")
    p.add_argument("--device", default=None, help="device family, alias or device name (e.g. bmg, pvc, lnl)")
    p.add_argument("--group", default=None, help="only this metric group")
    p.add_argument("--details", action="store_true",
                   help="meanings, formulas and reasons in full (default: one line each, fitted to the terminal)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    p.add_argument("--collectors", action="store_true", help="only the metric collectors, not the catalogs")
    p.set_defaults(func=run)


def _selected(args) -> list[catalogs.Catalog]:
    if args.device:
        return [catalogs.find_catalog(args.device, vendor=args.vendor)]
    return catalogs.load_catalogs(args.vendor)


def _collector_rows() -> list[dict]:
    from ..collectors import registry as collector_registry

    return collector_registry.describe_collectors()


def _wrapped(label: str, text: str, width: int, indent: int = 2) -> list[str]:
    lead = " " * indent + (f"{label}: " if label else "")
    return textwrap.wrap(text, width=width, initial_indent=lead, subsequent_indent=" " * len(lead),
                         break_on_hyphens=False) or [lead.rstrip()]


def _collectors_text(rows: list[dict], *, details: bool, summary: bool, width: int) -> str:
    from ..analysis.text import Column, render_table

    if summary:
        cells = [[r["name"] + (f" ({r['origin']})" if r["origin"] else ""), r["scope"],
                  "yes" if r["status"] == "available" else "no", ", ".join(m[0] for m in r["metrics"])] for r in rows]
        return render_table([Column("Metric collector", "left", shrink=True, min_width=12), Column("scope", "left"),
                             Column("available", "left"), Column("metrics (by name, or collector:metric)",
                                                                 "left", shrink=True, min_width=20, elide="end")],
                            cells, width=width, boxed=False)
    out = []
    for r in rows:
        status = "available" if r["status"] == "available" else f"not available: {r['reason']}"
        head = f"{r['name']} ({r['scope']}){' from ' + r['origin'] if r['origin'] else ''}: {status}"
        out.extend(_wrapped("", head, width, indent=0) if details else [_elide(head, width)])
        for name, unit, desc in r["metrics"]:
            line = f"{name} [{unit}]: {desc}" if unit else f"{name}: {desc}"
            out.extend(_wrapped("", line, width, indent=2) if details else [_elide("  " + line, width)])
    return "\n".join(out) + "\n"


def _elide(text: str, width: int) -> str:
    from ..analysis.text import elide_end

    return elide_end(text, width)


def _catalog_summary(cats: list[catalogs.Catalog], width: int) -> str:
    from ..analysis.text import Column, render_table

    cells = [[f"{c.vendor}/{c.family}", str(len(c.groups)), str(len(c.all_metric_names())), str(len(c.derived)),
              ", ".join(c.aliases)] for c in cats]
    return render_table([Column("Metric catalog", "left"), Column("groups"), Column("metrics"), Column("derived"),
                         Column("also known as", "left", shrink=True, min_width=10, elide="end")],
                        cells, width=width, boxed=False)


def _metric_lines(rows, derived, *, details: bool, width: int) -> str:
    from ..analysis.text import Column, render_table

    if details:
        out = []
        for c, g, m in rows:
            out.extend(_wrapped("", f"{c.vendor}/{c.family} {g.name} {m.name}" + (f" [{m.unit}]" if m.unit else ""),
                                width, indent=0))
            out.extend(_wrapped("", m.description, width, indent=4))
        for c, d in derived:
            out.extend(_wrapped("", f"{c.vendor}/{c.family} {d.group} {d.name} = {d.formula}"
                                + (f" [{d.unit}]" if d.unit else ""), width, indent=0))
            out.extend(_wrapped("", d.description, width, indent=4))
        return "\n".join(out) + "\n"
    cells = [[f"{c.vendor}/{c.family}", g.name, m.name, m.unit, m.description] for c, g, m in rows]
    cells += [[f"{c.vendor}/{c.family}", d.group, d.name, d.unit, f"= {d.formula}: {d.description}"] for c, d in derived]
    # metric names whole on one line (they are what people copy); groups and meanings wrap
    return render_table([Column("Device", "left"), Column("Group", "left", wrap=True, min_width=8),
                         Column("Metric", "left"), Column("Unit", "left"),
                         Column("Meaning", "left", wrap=True, min_width=12)],
                        cells, width=width, boxed=False)


def run(args) -> int:
    from ..analysis.text import terminal_width

    width = terminal_width()
    filtered = bool(args.vendor or args.device or args.group)
    with_collectors = args.collectors or not filtered
    if args.collectors:
        rows = _collector_rows()
        if args.format == "json":
            sys.stdout.write(orjson.dumps({"collectors": rows}, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            sys.stdout.write(_collectors_text(rows, details=args.details, summary=False, width=width))
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
    if filtered or args.details:
        sys.stdout.write(_metric_lines(rows, derived, details=args.details, width=width))
        if with_collectors:
            sys.stdout.write("\n" + _collectors_text(_collector_rows(), details=True, summary=False, width=width))
        return 0
    sys.stdout.write(_catalog_summary(cats, width) + "\n")
    sys.stdout.write(_collectors_text(_collector_rows(), details=False, summary=True, width=width))
    hint = ("One device's metrics: xpuprof metrics --device FAMILY [--group GROUP]; meanings in full: --details; "
            "a collector's metrics: --collectors; everything as data: --format json")
    sys.stdout.write("\n" + "\n".join(textwrap.wrap(hint, width=width, break_on_hyphens=False)) + "\n")
    return 0
