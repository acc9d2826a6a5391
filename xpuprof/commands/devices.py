"""``xpuprof devices``: every known backend, whether it can run here, and why not."""
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

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "available": self.available, "reason": self.reason, "notes": self.notes,
                "details": self.details}


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
        rows.append(DeviceRow(f"collector {r['name']}", r["status"] == "available", r["reason"], notes, r["details"]))
    return rows


def _plugin_failure_rows() -> list[DeviceRow]:
    """Plugins that failed to load or were refused (their file and why): never missing from the list."""
    registry.ensure_plugins()
    return [DeviceRow(origin, False, f"failed to load: {reason}", ["plugin"], {"origin": origin})
            for origin, reason in registry.plugin_load_failures()]


# Each source returns rows; the table shows them in this order. Extend by appending a source.
ROW_SOURCES: list[Callable[[], list[DeviceRow]]] = [_backend_rows, _collector_rows, _plugin_failure_rows]

COLUMNS: list[tuple[str, Callable[[DeviceRow], str]]] = [
    ("Backend", lambda r: r.backend),
    ("Available", lambda r: "yes" if r.available else "no"),
    ("Reason", lambda r: r.reason),
    ("Notes", lambda r: "; ".join(r.notes)),
]


def collect_rows() -> list[DeviceRow]:
    rows: list[DeviceRow] = []
    for source in ROW_SOURCES:
        rows.extend(source())
    return rows


def render(rows: list[DeviceRow]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="xpuprof backends on this machine", title_justify="left")
    for header, _ in COLUMNS:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(escape(fn(row)) for _, fn in COLUMNS))  # reasons may contain [brackets]
    Console().print(table)


def run(args: argparse.Namespace) -> int:
    rows = collect_rows()
    if args.json:
        print(orjson.dumps([r.to_dict() for r in rows], option=orjson.OPT_INDENT_2, default=str).decode())
    else:
        render(rows)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("devices", help="list profiler backends: which can run here and why others cannot",
                              description=__doc__)
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.set_defaults(func=run)


__all__ = ["COLUMNS", "DeviceRow", "ProbeResult", "ROW_SOURCES", "collect_rows", "register", "run"]
