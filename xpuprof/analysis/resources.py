"""Kernel resources of XPU traces (unitrace -d's kernel table): per kernel name its SIMD width, SLM per
work-group, private and spill memory per thread, register file size and JIT/AOT, from the
``xpu_kernel_resources`` metadata the XPU backend writes (Level Zero's properties at kernel creation).

A kernel whose value differs between traces (another build, another device) shows every value
seen ("16/32"). Values the driver did not report are empty, never 0.
"""
from __future__ import annotations

from typing import Iterable

METADATA_KEY = "xpu_kernel_resources"
COLUMNS = (("simd_width", "SIMD", "", "SIMD width (the kernel's largest sub-group size)"),
           ("slm_bytes", "SLM/WG", "bytes", "shared local memory per work-group"),
           ("private_bytes", "Private/thread", "bytes", "private memory per thread (not held in registers)"),
           ("spill_bytes", "Spill/thread", "bytes", "memory for registers spilled per thread"),
           ("register_file_size", "GRF", "registers", "register file size per thread"),
           ("compiled", "Compiled", "", "JIT (from SPIR-V at run time) or AOT (a device binary)"))


def resource_rows(metadata: Iterable[dict | None], names: list[str] | None = None) -> list[dict]:
    """One row per kernel name (in ``names`` order when given: the report's kernels; else every kernel
    the traces describe), with each column's value(s)."""
    seen: dict[str, dict[str, list]] = {}
    for md in metadata:
        if not isinstance(md, dict):
            continue
        for entry in md.get("kernels") or []:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("name", ""))
            cols = seen.setdefault(name, {key: [] for key, *_ in COLUMNS})
            for key, *_ in COLUMNS:
                v = entry.get(key)
                if v is not None and v not in cols[key]:
                    cols[key].append(v)
    order = [n for n in dict.fromkeys(names) if n in seen] if names is not None else list(seen)
    rows = []
    for name in order:
        row = {"kernel": name}
        for key, *_ in COLUMNS:
            vals = seen[name][key]
            if vals:
                row[key] = vals[0] if len(vals) == 1 else "/".join(map(str, vals))
        rows.append(row)
    return rows


def resources_table(rows: list[dict]) -> dict:
    """The report document's ``kernel_resources`` table (docs/report-schema.md)."""
    columns = [{"key": "kernel", "label": "Kernel", "unit": "", "meaning": "the kernel's name"}]
    columns += [{"key": k, "label": label, "unit": unit, "meaning": meaning} for k, label, unit, meaning in COLUMNS]
    return {"title": "Kernel resources (Level Zero, at kernel creation)", "columns": columns, "rows": rows}


def resources_text(rows: list[dict], width: int | None = None) -> str:
    """The table as text (``analysis.text``): one line per kernel, empty cells where nothing was reported."""
    from .text import Column, render_table

    columns = [Column("Kernel", "left", shrink=True, min_width=24)]
    columns += [Column(f"{label} [{unit}]" if unit and unit != "registers" else label) for _k, label, unit, _m in COLUMNS]
    cells = [[row["kernel"], *[str(row.get(key, "")) for key, *_ in COLUMNS]] for row in rows]
    return render_table(columns, cells, title="Kernel resources (Level Zero, at kernel creation; empty: not reported)",
                        width=width)


def unavailable_reasons(metadata: Iterable[dict | None]) -> list[str]:
    return sorted({str(md["unavailable"]) for md in metadata if isinstance(md, dict) and md.get("unavailable")})
