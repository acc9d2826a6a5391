"""``xpuprof devices``: every known backend and metric collector, whether it can run here, and why not.

One line per row by default, fitted to the terminal; ``--details`` gives every reason in full and
what each one records; ``--format json`` (or ``--json``) gives the rows as data."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson

from ..backends import registry
from ..backends.base import ProbeResult


@dataclass
class DeviceRow:
    """One line of the table. Other sources (disabled backends, plugins) add rows of this shape."""

    backend: str
    available: bool
    reason: str
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    kind: str = "backend"  # "backend", "collector" or "plugin" (a plugin that failed to load): its section
    name: str = ""  # the name within its section (default: ``backend``)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "available": self.available, "reason": self.reason, "notes": self.notes,
                "details": self.details, "kind": self.kind}


def _backend_rows() -> list[DeviceRow]:
    rows = []
    for name, probe in registry.probe_all().items():
        notes = [f"used only when named (backends: [{name}])"] if name in registry.EXPLICIT_ONLY else []
        rows.append(DeviceRow(name, bool(probe.available), probe.reason, notes, dict(probe.details)))
    return rows


def _collector_rows() -> list[DeviceRow]:
    """Metric collectors (telemetry): whether each can run here and why not."""
    from ..collectors import registry as collector_registry

    rows = []
    for r in collector_registry.describe_collectors():
        notes = [f"metric collector ({r['scope']}): {', '.join(m[0] for m in r['metrics'])}"]
        if r["origin"]:
            notes.append(f"from {r['origin']}")
        rows.append(DeviceRow(f"collector {r['name']}", r["status"] == "available", r["reason"], notes, r["details"],
                              kind="collector", name=r["name"]))
    return rows


def _plugin_failure_rows() -> list[DeviceRow]:
    """Plugins that failed to load or were refused (their file and why): never missing from the list."""
    registry.ensure_plugins()
    return [DeviceRow(origin, False, f"failed to load: {reason}", ["plugin"], {"origin": origin}, kind="plugin")
            for origin, reason in registry.plugin_load_failures()]


# Each source returns rows; the table shows them in this order. Extend by appending a source.
ROW_SOURCES: list[Callable[[], list[DeviceRow]]] = [_backend_rows, _collector_rows, _plugin_failure_rows]



def collect_rows() -> list[DeviceRow]:
    rows: list[DeviceRow] = []
    for source in ROW_SOURCES:
        rows.extend(source())
    return rows


SECTIONS = {"backend": "Backends", "collector": "Metric collectors", "plugin": "Plugins that failed to load"}


def render(rows: list[DeviceRow], width: int | None = None) -> str:
    """One line per row: name, yes/no, the reason (elided at the end to fit ``width``)."""
    from ..analysis.text import Column, render_table, terminal_width

    width = width or terminal_width()
    out = []
    for kind, title in SECTIONS.items():
        section = [r for r in rows if r.kind == kind]
        if not section:
            continue
        cells = [[r.name or r.backend, "yes" if r.available else "no", _summary(r)] for r in section]
        columns = [Column(title, "left", shrink=kind == "plugin", min_width=16, elide="middle"),
                   Column("available", "left"), Column("reason / notes", "left", shrink=True, min_width=20, elide="end")]
        out.append(render_table(columns, cells, width=width, boxed=False))
    out.append("Full reasons and what each records: xpuprof devices --details (or --format json)\n")
    return "\n".join(out)


def _summary(row: DeviceRow) -> str:
    if row.kind == "collector":
        metrics = row.notes[0].split(": ", 1)[-1].split(", ") if row.notes else []
        text = f"{row.reason}; {len(metrics)} metrics" if row.available else row.reason
        return text
    return row.reason


def render_details(rows: list[DeviceRow], width: int | None = None) -> str:
    """Every row in full: its status, then reason and notes wrapped under it."""
    import textwrap

    from ..analysis.text import terminal_width

    width = width or terminal_width()
    out = []
    for r in rows:
        out.append(f"{r.backend}: {'available' if r.available else 'not available'}")
        for label, text in (("reason", r.reason), *(("note", n) for n in r.notes)):
            out.extend(textwrap.wrap(text, width=width, initial_indent=f"  {label}: ",
                                     subsequent_indent=" " * (len(label) + 4), break_on_hyphens=False) or [f"  {label}:"])
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    rows = collect_rows()
    if args.format == "json":
        print(orjson.dumps([r.to_dict() for r in rows], option=orjson.OPT_INDENT_2, default=str).decode())
    else:
        print(render_details(rows) if args.details else render(rows), end="")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("devices", help="list profiler backends: which can run here and why others cannot",
                              description=__doc__)
    p.add_argument("--details", action="store_true", help="every reason in full and what each backend or collector "
                                                          "records (default: one line each)")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json: the rows as data")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    p.set_defaults(func=run)


__all__ = ["DeviceRow", "SECTIONS", "ProbeResult", "ROW_SOURCES", "collect_rows", "register", "run"]
