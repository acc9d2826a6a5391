"""History runs built from what ``xpuprof run`` wrote (a run directory: ``summary.jsonl`` and its traces)
or from a profiled table (the pytest plugin): one ``history.HistoryRun`` per matrix point, holding the
per-call statistics of every kernel (device work) and every host range of the point's traces.

``run --history`` and ``gate`` both build their runs here, from the same files, so a run appended by the
one and a run gated by the other are summarized alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .event_table import DEVICE_CATEGORIES, DEVICE_WORK, EventTable
from .history import HistoryRun, KernelRecord, canonical_hash, git_revision, machine_fingerprint
from .machine_probe import ProbeResult
from .samples import stats_by_name

SUMMARY_NAMES = ("summary.jsonl",)
RANGE_CATEGORIES = ("user_annotation",)
RECORD_CATEGORIES = (*DEVICE_CATEGORIES, *RANGE_CATEGORIES)


class RunDirError(ValueError):
    """A run directory that cannot be read as one; the message names the file and what is wrong."""


@dataclass
class PointRecords:
    """The history runs of a run directory's points, and the points that could not be summarized."""

    runs: list[HistoryRun]
    skipped: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)


def kernel_records(table: EventTable) -> dict[str, KernelRecord]:
    """name -> record of every kernel (device work) and host range in ``table``; a range that shares a
    kernel's name is keyed ``<name> (host range)``."""
    if not len(table):
        return {}
    device = np.array([c in DEVICE_WORK for c in table.cat.tolist()], bool)
    ranges = np.isin(table.cat, list(RANGE_CATEGORIES))
    out: dict[str, KernelRecord] = {}
    for domain, mask in (("kernel", device), ("range", ranges & ~device)):
        if not mask.any():
            continue
        names = table.name[mask]
        stats = stats_by_name(names, table.dur_ns[mask])
        metrics = _metric_means(names, {m: col[mask] for m, col in table.metrics.items()})
        for name, s in stats.items():
            key = name if domain == "kernel" or name not in out else f"{name} (host range)"
            out[key] = KernelRecord(name, domain, s, metrics.get(name, {}))
    return out


def _metric_means(names: np.ndarray, metrics: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """name -> {metric: mean over the calls that have a value}: one grouping, a bincount per metric."""
    out: dict[str, dict[str, float]] = {}
    if not metrics or not len(names):
        return out
    uniq, codes = np.unique(names.astype(str), return_inverse=True)
    for m, col in metrics.items():
        ok = np.isfinite(col)
        n = np.bincount(codes[ok], minlength=len(uniq))
        total = np.bincount(codes[ok], weights=col[ok], minlength=len(uniq))
        for i in np.flatnonzero(n).tolist():
            out.setdefault(str(uniq[i]), {})[m] = float(total[i] / n[i])
    return out


def read_summary(run_dir: Path) -> tuple[Path, dict]:
    """(path, document) of the run directory's ``summary.jsonl``; ``RunDirError`` naming what is wrong."""
    import orjson

    from ..inputs import InputError, check_json_start, read_input

    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such run directory")
    path = run_dir / SUMMARY_NAMES[0] if run_dir.is_dir() else run_dir
    if not path.is_file():
        raise RunDirError(f"{run_dir}: holds no summary.jsonl; give the directory `xpuprof run` wrote (its --out "
                          "or output.dir)")
    try:
        data = orjson.loads(read_input(path, "run summary", head=check_json_start(path, "run summary"),
                                       limit=256 << 20))
    except (OSError, InputError, orjson.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: not a readable run summary ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != "xpuprof-run-summary" or not isinstance(data.get("points"), list):
        raise RunDirError(f'{path}: not an xpuprof run summary (no "kind": "xpuprof-run-summary" with points)')
    return path, data


def _trace_paths(point: dict, run_dir: Path, where: str) -> list[Path]:
    """The point's traces: as recorded, else found by name under the run directory (moved or relative)."""
    traces = point.get("traces")
    if not isinstance(traces, list) or not all(isinstance(t, str) for t in traces):
        raise RunDirError(f"{where}: traces must be a list of paths")
    out = []
    for t in traces:
        p = Path(t)
        candidates = [p] if p.is_absolute() else []
        candidates += [run_dir / p.name, run_dir / p.parent.name / p.name, p]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise RunDirError(f"{where}: trace {t} is neither where the summary says nor in {run_dir}")
        out.append(found)
    return out


def records_from_run_dir(run_dir: str | Path, *, source: str) -> PointRecords:
    """One history run per successful point of the run directory (a point that failed, was interrupted or
    wrote a trace store is skipped, and said)."""
    from .event_table import ReportError
    from .report import check_times, read_report_inputs

    run_dir = Path(run_dir)
    path, summary = read_summary(run_dir)
    base = path.parent
    machine = summary.get("machine") if isinstance(summary.get("machine"), dict) else None
    if machine is None or not isinstance(machine.get("id"), str):
        raise RunDirError(f"{path}: has no machine fingerprint (written by an older xpuprof?); run the config again")
    out = PointRecords([], [], summary)
    for i, point in enumerate(summary["points"]):
        where = f"{path}: point {i}"
        if not isinstance(point, dict):
            raise RunDirError(f"{where} is not an object")
        label = str(point.get("label", i))
        if not isinstance(point.get("config_hash"), str):
            raise RunDirError(f"{where} ({label}) has no config_hash (written by an older xpuprof?); run the config "
                              "again")
        if point.get("error") or point.get("interrupted"):
            out.skipped.append(f"point {label!r}: not recorded ({point.get('error') or 'interrupted'})")
            continue
        raw = point.get("traces")
        if isinstance(raw, list) and any(isinstance(t, str) and Path(t).parent.name.endswith(".store") for t in raw):
            out.skipped.append(f"point {label!r}: wrote trace stores (output.format: parquet); the history reads "
                               "JSON traces (output.format: json)")
            continue
        paths = _trace_paths(point, base, where)
        if not paths:
            out.skipped.append(f"point {label!r}: wrote no trace")
            continue
        tables, devices = [], set()
        for p in paths:
            try:
                trace = read_report_inputs([p])
                check_times(trace)
                table = EventTable.from_table(trace, RECORD_CATEGORIES)
            except ReportError as exc:
                raise RunDirError(str(exc)) from None
            tables.append(table)
            for info in trace.traces:
                devices.update(_device_names(info.header))
        kernels = kernel_records(EventTable.concat(tables))
        if not kernels:
            out.skipped.append(f"point {label!r}: its traces hold no kernels or host ranges")
            continue
        device = f"{point.get('device') or '-'}" + (f" [{', '.join(sorted(devices))}]" if devices else "")
        key = {"config_hash": point["config_hash"], "device": device, "machine": machine["id"]}
        run_label = {"name": summary.get("name"), "config": summary.get("config"), "point": label,
                     "workload": point.get("workload")}
        git = summary.get("git") if isinstance(summary.get("git"), dict) else None
        started = summary.get("started")
        t = float(started) if type(started) in (int, float) and math.isfinite(started) else None
        run = HistoryRun(key, kernels, run_label, machine, git, source, probe=_point_probe(point, label, out.skipped))
        if t is not None:
            run.time = t
        out.runs.append(run)
    return out


def _point_probe(point: dict, label: str, skipped: list[str]) -> ProbeResult | None:
    """The point's machine probe (``machine_probe``), None when it has none (an older xpuprof) or an
    unreadable one (said in ``skipped``: the run is still recorded, without a probe)."""
    block = point.get("machine_probe")
    if block is None:
        return None
    if isinstance(block, dict) and block.get("error"):
        skipped.append(f"point {label!r}: machine probe not taken ({str(block['error'])[:200]})")
        return None
    try:
        return ProbeResult.from_dict(block)
    except ValueError as exc:
        skipped.append(f"point {label!r}: machine probe unreadable ({exc}); recorded without it")
        return None


def _device_names(header: dict) -> list[str]:
    """The devices a trace ran on (its ``deviceProperties`` names), for the series key."""
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return []
    names = [str(p.get("name"))[:120] for p in props if isinstance(p, dict) and p.get("name")]
    return sorted(set(names))


def run_from_table(table: EventTable, *, test: str, options: dict, device: str, source: str,
                   directory: str | Path | None = None, probe: ProbeResult | None = None) -> HistoryRun:
    """A history run of one profiled table (the pytest plugin's test body): keyed by the test, its
    profiler options, the device and this machine; ``probe``: the machine probe taken around the body."""
    machine = machine_fingerprint()
    config_hash = canonical_hash({"pytest": test, "options": options})
    key = {"config_hash": config_hash, "device": device, "machine": machine["id"]}
    return HistoryRun(key, kernel_records(table), {"test": test}, machine, git_revision(directory), source,
                      probe=probe)
