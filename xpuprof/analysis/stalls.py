"""EU stall samples from traces: per kernel its stall-reason mix and its hottest source lines.

Reads the ``xpu_stall_sampling`` metadata an XPU trace carries when it was recorded with stall
sampling (``ExperimentalConfig(stall_sampling=True)``, YAML ``stall_sampling:``, Kineto
``XPUPTI_STALL_SAMPLING=1``): per kernel the samples by reason and per instruction its offset,
source file:line (where PTI gave one) and samples. Kernels of one name are added up over the traces
(one row per rank and name with ``by_rank``). Knows no vendor API: only the trace's keys.

The JSON document follows the report schema (``docs/report-schema.md``): tables ``stall_kernels``
(one row per kernel), ``stall_reasons`` (one row per kernel and reason) and ``stall_lines`` (the
hottest source lines or instructions per kernel).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from .event_table import ReportError

METADATA_KEY = "xpu_stall_sampling"
ERROR_KEY = "xpu_stall_sampling_error"
SCHEMA, VERSION = "xpuprof.report", 1
HOW_TO_RECORD = ("record with EU stall sampling: ExperimentalConfig(stall_sampling=True), YAML `stall_sampling: "
                 "true` or Kineto XPUPTI_STALL_SAMPLING=1 (an Intel GPU that supports it is needed)")


@dataclass
class LineStalls:
    """Samples of one source line (every instruction PTI mapped to it) or of one instruction without source."""

    location: str  # "file:line" or "+0x<offset>"
    file: str
    line: int
    offsets: list[int]  # the listed (hottest) instructions of the line
    samples: np.ndarray  # by reason
    instructions: int = 1  # sampled instructions on the line

    @property
    def total(self) -> int:
        return int(self.samples.sum())


@dataclass
class KernelStalls:
    name: str
    rank: int | None
    samples: np.ndarray  # by reason, in StallReport.reasons order
    lines: list[LineStalls] = field(default_factory=list)

    @property
    def total(self) -> int:
        return int(self.samples.sum())

    def shares(self) -> np.ndarray:
        """Percent of this kernel's samples per reason."""
        t = self.total
        return self.samples * (100.0 / t) if t else np.zeros(len(self.samples))


@dataclass
class StallReport:
    reasons: list[str]
    descriptions: dict[str, str]
    kernels: list[KernelStalls]
    sources: list[str]
    ranks: list[int]
    periods_ns: list[int]
    notes: list[str] = field(default_factory=list)  # traces without samples, and why

    @property
    def total(self) -> int:
        return sum(k.total for k in self.kernels)


def _headers(paths: Iterable[str | Path]):
    """The traces the paths stand for, their top-level keys only (the samples are there, not in events)."""
    from .report import read_report_inputs

    return read_report_inputs(paths, kinds=())


def _kernel_lines(entry: dict, files: list[str], nreasons: int) -> list[LineStalls]:
    """The kernel's source lines (every one PTI mapped samples to), then its listed instructions that have
    no source (by offset), heaviest first."""
    out: list[LineStalls] = []
    lines = entry.get("lines") or {}
    for f, ln, n, samples in zip(lines.get("file") or [], lines.get("line") or [], lines.get("instructions") or [],
                                 lines.get("samples") or []):
        name = files[f] if isinstance(f, int) and 0 <= f < len(files) else "?"
        out.append(LineStalls(f"{name}:{int(ln)}", name, int(ln), [], np.asarray(samples, np.int64)[:nreasons]))
        out[-1].instructions = int(n)
    ins = entry.get("instructions") or {}
    for off, f, ln, samples in zip(ins.get("offset") or [], ins.get("file") or [], ins.get("line") or [],
                                   ins.get("samples") or []):
        if isinstance(f, int) and 0 <= f < len(files) and ln:
            for line in out:  # a listed instruction of a line: its offset shown with the line
                if line.file == files[f] and line.line == int(ln):
                    line.offsets.append(int(off))
            continue
        out.append(LineStalls(f"+0x{int(off):x}", "", 0, [int(off)], np.asarray(samples, np.int64)[:nreasons]))
    return sorted(out, key=lambda l: -l.total)


def read_stalls(inputs, *, by_rank: bool = False, name: str | None = None) -> StallReport:
    """Every trace's EU stall samples, added up per kernel name (and rank with ``by_rank``): of a TraceTable, or
    of the traces and stores the paths ``inputs`` name (their top-level keys are read, not their events)."""
    try:
        pattern = re.compile(name) if name else None
    except re.error as exc:
        raise ReportError(f"--name {name!r} is not a valid regular expression: {exc}") from None
    reasons: list[str] = []
    descriptions: dict[str, str] = {}
    merged: dict[tuple, KernelStalls] = {}
    sources, ranks, periods, notes = [], set(), set(), []
    table = inputs if hasattr(inputs, "traces") else _headers(inputs)
    for info in table.traces:
        head, path = info.header, info.origin
        sources.append(str(path))
        md = head.get(METADATA_KEY)
        if not isinstance(md, dict):
            why = head.get(ERROR_KEY)
            notes.append(f"{path}: no EU stall samples" + (f" ({why})" if why else ""))
            continue
        rank = info.rank if info.named else None
        if rank is not None:
            ranks.add(rank)
        periods.add(int(md.get("period_ns") or 0))
        names = [str(r.get("name")) for r in md.get("reasons") or []]
        for r in md.get("reasons") or []:
            descriptions.setdefault(str(r.get("name")), str(r.get("description") or ""))
        for n in names:
            if n not in reasons:
                reasons.append(n)
        files = [str(f) for f in md.get("files") or []]
        for entry in md.get("kernels") or []:
            kname = str(entry.get("name", ""))
            if pattern is not None and not pattern.search(kname):
                continue
            local = np.zeros(len(names), np.int64)
            for r, v in (entry.get("by_reason") or {}).items():
                if r in names:
                    local[names.index(r)] = int(v)
            lines = _kernel_lines(entry, files, len(names))
            key = (rank if by_rank else None, kname)
            got = merged.get(key)
            if got is None:
                got = merged[key] = KernelStalls(kname, key[0], np.zeros(0, np.int64))
            got.samples = _widen(got.samples, len(reasons))
            idx = [reasons.index(n) for n in names]
            got.samples[idx] += local
            for line in lines:
                line.samples = _spread(line.samples, idx, len(reasons))
            got.lines = _merge_lines(got.lines, lines, len(reasons))
    if not merged:
        raise ReportError("no EU stall samples in " + ", ".join(sources) + ": " + HOW_TO_RECORD
                          + ("" if not notes else ". " + "; ".join(notes)))
    kernels = sorted(merged.values(), key=lambda k: (-k.total, k.name))
    for k in kernels:
        k.samples = _widen(k.samples, len(reasons))
    return StallReport(reasons, descriptions, kernels, sources, sorted(ranks), sorted(periods), notes)


def _widen(a: np.ndarray, n: int) -> np.ndarray:
    return a if len(a) == n else np.concatenate([a, np.zeros(n - len(a), np.int64)])


def _spread(samples: np.ndarray, idx: list[int], n: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    out[idx] = samples
    return out


def _merge_lines(have: list[LineStalls], new: list[LineStalls], n: int) -> list[LineStalls]:
    by = {l.location: l for l in have}
    for l in new:
        got = by.get(l.location)
        if got is None:
            by[l.location] = l
        else:
            got.samples = _widen(got.samples, n) + _widen(l.samples, n)
            got.offsets += [o for o in l.offsets if o not in got.offsets]
            got.instructions = max(got.instructions, l.instructions)
    for l in by.values():
        l.samples = _widen(l.samples, n)
    return sorted(by.values(), key=lambda l: -l.total)


def top_reason(samples: np.ndarray, reasons: list[str]) -> tuple[str, float]:
    t = int(samples.sum())
    if not t:
        return "", 0.0
    i = int(np.argmax(samples))
    return reasons[i], 100.0 * float(samples[i]) / t


# ----------------------------------------------------------------------------- the report document
def _column(key: str, label: str, unit: str = "", meaning: str = "") -> dict:
    return {"key": key, "label": label, "unit": unit, "meaning": meaning}


def document(report: StallReport, *, top: int | None = None, lines: int = 5, filters: dict | None = None) -> dict:
    """The ``xpuprof report --stalls --format json`` document (report schema, version 1)."""
    kernels = report.kernels[:top] if top else report.kernels
    by_rank = any(k.rank is not None for k in kernels)
    rank_col = [_column("rank", "Rank", "", "the rank the kernel ran on (--by-rank)")] if by_rank else []
    kernel_rows, reason_rows, line_rows = [], [], []
    for k in kernels:
        base = ({"rank": k.rank} if by_rank else {}) | {"kernel": k.name}
        reason, share = top_reason(k.samples, report.reasons)
        kernel_rows.append(base | {"samples": k.total, "top_reason": reason, "top_reason_pct": round(share, 3),
                                   "mix_pct": {r: round(float(s), 3) for r, s in zip(report.reasons, k.shares()) if s}})
        for r, (v, s) in enumerate(zip(k.samples.tolist(), k.shares().tolist())):
            if v:
                reason_rows.append(base | {"reason": report.reasons[r], "samples": int(v), "share_pct": round(s, 3)})
        for line in k.lines[:lines]:
            lr, ls = top_reason(line.samples, report.reasons)
            line_rows.append(base | {"location": line.location, "file": line.file or None, "line": line.line or None,
                                     "instructions": line.instructions,
                                     "offsets": [f"0x{o:x}" for o in line.offsets], "samples": line.total,
                                     "share_pct": round(100.0 * line.total / k.total, 3) if k.total else 0.0,
                                     "top_reason": lr, "top_reason_pct": round(ls, 3)})
    tables = {
        "stall_kernels": {"title": "EU stall samples per kernel", "columns": rank_col + [
            _column("kernel", "Kernel"), _column("samples", "Samples", "", "EU stall samples of the kernel"),
            _column("top_reason", "Top reason", "", "the reason with the most samples"),
            _column("top_reason_pct", "Top %", "percent", "its share of the kernel's samples"),
            _column("mix_pct", "Mix", "percent", "share of the kernel's samples by reason (reasons with samples)")],
            "rows": kernel_rows},
        "stall_reasons": {"title": "EU stall samples per kernel and reason", "columns": rank_col + [
            _column("kernel", "Kernel"), _column("reason", "Reason", "", "PTI's stall reason (see reasons)"),
            _column("samples", "Samples"), _column("share_pct", "Share", "percent", "of the kernel's samples")],
            "rows": reason_rows},
        "stall_lines": {"title": "Hottest source lines per kernel" + (f" (top {lines})" if lines else ""),
                        "columns": rank_col + [
            _column("kernel", "Kernel"),
            _column("location", "Location", "", "file:line, or +0x<offset> for an instruction PTI gave no source for"),
            _column("file", "File"), _column("line", "Line"),
            _column("instructions", "Instructions", "", "sampled instructions on the line"),
            _column("offsets", "Offsets", "", "offsets of the line's hottest instructions in the kernel's binary"),
            _column("samples", "Samples"), _column("share_pct", "Share", "percent", "of the kernel's samples"),
            _column("top_reason", "Top reason"), _column("top_reason_pct", "Top %", "percent", "of the line's samples")],
            "rows": line_rows},
    }
    return {"schema": SCHEMA, "version": VERSION, "title": "EU stall samples", "sources": report.sources,
            "ranks": report.ranks, "filters": dict(filters or {}),
            "totals": {"samples": report.total, "kernels": len(report.kernels)},
            "sampling_period_ns": report.periods_ns,
            "reasons": [{"name": r, "description": report.descriptions.get(r, "")} for r in report.reasons],
            "notes": report.notes, "tables": tables}


def stall_shares(doc_or_report) -> dict[tuple[str, str], tuple[float, int]]:
    """(kernel, reason) -> (share of the kernel's samples in percent, kernel samples), from a StallReport or
    a ``report --stalls`` JSON document."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if isinstance(doc_or_report, StallReport):
        for k in doc_or_report.kernels:
            for r, s in zip(doc_or_report.reasons, k.shares().tolist()):
                out[(k.name, r)] = (s, k.total)
        return out
    totals = {}
    for row in ((doc_or_report.get("tables") or {}).get("stall_kernels") or {}).get("rows") or []:
        totals[str(row.get("kernel"))] = int(row.get("samples") or 0)
    for row in ((doc_or_report.get("tables") or {}).get("stall_reasons") or {}).get("rows") or []:
        kname = str(row.get("kernel"))
        out[(kname, str(row.get("reason")))] = (float(row.get("share_pct") or 0.0), totals.get(kname, 0))
    for kname in totals:  # reasons a kernel has no sample for are 0 %
        for reason in {r for _k, r in out}:
            out.setdefault((kname, reason), (0.0, totals[kname]))
    return out
