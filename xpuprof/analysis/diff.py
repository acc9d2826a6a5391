"""Per-kernel time and metric deltas between two runs.

Either side may be a trace file, a directory of traces, a ``summary.jsonl`` (or an older
``summary.json``) written by ``xpuprof run`` (compared point by point, matched on the point label) or the JSON of
``xpuprof report --format json``. A kernel whose time grew by more than the threshold is a
regression; ``xpuprof diff`` exits non-zero when there is one (for CI).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ..inputs import InputError, check_json_start, read_input
from .kernel_identity import pair
from .report import KernelStat, ReportError
from .report_schema import SCHEMA, main_rows

TIME_FIELDS = ("avg", "total", "min", "max")


class DiffError(ValueError):
    """An input that cannot be compared; the message names the file and what was wrong."""


@dataclass
class Side:
    """One side of a diff, read once: kernel rows per point ("" for a single trace set or report), the
    telemetry series' (mean, peak), the EU stall shares (None without samples) and the metrics' units."""

    kernels: dict[str, list[KernelStat]]
    telemetry: dict[str, tuple[float, float]] = field(default_factory=dict)
    stalls: dict | None = None
    units: dict[str, str] = field(default_factory=dict)


def read_side(path: str | Path, say=None) -> Side:
    """A trace file, a directory of traces or a store (read once, as one TraceTable), a run's ``summary.jsonl``
    or a report's JSON; ``say``: where the lines on skipped files go."""
    p = Path(path)
    if not p.exists():
        raise DiffError(f"{p}: no such file or directory")
    data = _document(p)  # a run summary or report JSON; None for a trace (told without reading it whole)
    if data is not None:
        return _document_side(p, data)
    from .report import read_report_inputs, report_of
    from .stalls import read_stalls, stall_shares

    try:
        table = read_report_inputs([p], say=say)
        report = report_of(table)
    except ReportError as exc:
        raise DiffError(str(exc)) from None
    try:
        stalls = stall_shares(read_stalls(table))
    except ReportError:  # no stall samples: nothing to compare
        stalls = None
    return Side({"": report.stats}, {t.key: (t.mean, t.peak) for t in report.telemetry}, stalls,
                dict(report.table.units))


def load_side(path: str | Path) -> dict[str, list[KernelStat]]:
    """point label -> kernel rows ("" when the input is a single trace set or report)."""
    return read_side(path).kernels


def _document_side(p: Path, data) -> Side:
    """A run summary ("points") or a report's JSON document (``report`` or ``report --stalls``)."""
    from .stalls import stall_shares

    units: dict[str, str] = {}
    if isinstance(data, dict):
        got = data.get("units")
        units.update({str(k): v for k, v in (got.items() if isinstance(got, dict) else ()) if isinstance(v, str)})
        for pt in data.get("points") or () if isinstance(data.get("points"), list) else ():
            got = pt.get("metric_units") if isinstance(pt, dict) else None
            units.update({str(k): v for k, v in (got.items() if isinstance(got, dict) else ()) if isinstance(v, str)})
    if isinstance(data, dict) and isinstance(data.get("points"), list):
        out = {}
        for i, pt in enumerate(data["points"]):
            if not isinstance(pt, dict):
                raise DiffError(f"{p}: points[{i}] is {type(pt).__name__}, not a point object")
            label = pt.get("label", i)
            if not isinstance(label, (str, int)) or isinstance(label, bool):
                raise DiffError(f"{p}: points[{i}].label is {type(label).__name__}, not a string")
            out[str(label)] = _rows(p, pt.get("kernels"), f"points[{i}].kernels")
        return Side(out, units=units)
    try:
        rows = main_rows(data) if isinstance(data, dict) else None
    except AttributeError:  # "tables" (or a table) that is not an object
        raise DiffError(f"{p}: its report tables are not objects of rows") from None
    if rows is not None:
        return Side({"": _rows(p, rows)}, _document_telemetry(p, data), None, units)
    if isinstance(data, dict) and isinstance((data.get("tables") or {}).get("stall_reasons"), dict):
        return Side({"": []}, stalls=stall_shares(data))  # `report --stalls` JSON: stall shares only
    raise DiffError(f"{p}: neither a trace, an xpuprof run summary.jsonl (\"points\") nor a report "
                    f"JSON (\"schema\": \"{SCHEMA}\")")


MAX_SUMMARY_BYTES = 256 << 20  # a run summary or report JSON, read whole (as ``run_records`` reads summaries)
_DOCUMENTS: dict[str, object] = {}  # path and version -> the summary or report JSON read there (each side is read once)


def _document(p: Path):
    """The run summary or report JSON at ``p``, parsed; None when ``p`` is a trace - a file holding a
    ``traceEvents`` array whatever its name (found without reading it whole: ``holds_trace_events``), a
    ``.json.gz`` - or a directory: those are read by the trace reader, with its bounds."""
    if not (p.is_file() and p.suffix in (".json", ".jsonl")) or p.name.endswith(".pt.trace.json"):
        return None
    st = p.stat()
    key = f"{p}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}"  # a file written again is read again
    if key not in _DOCUMENTS:
        from ..trace.read.kineto_stream import TraceLoadError, holds_trace_events

        try:
            trace = holds_trace_events(p)
        except TraceLoadError as exc:  # no JSON document at all (zeros, binary): said as the trace reader says it
            raise DiffError(str(exc)) from None
        _DOCUMENTS[key] = None if trace else _read_json(p)
    return _DOCUMENTS[key]


def _read_json(p: Path):
    """A summary or report JSON, read with bounds; ``DiffError`` for what is not one."""
    try:
        return orjson.loads(read_input(p, "summary", head=check_json_start(p, "summary"), limit=MAX_SUMMARY_BYTES))
    except InputError as exc:
        raise DiffError(str(exc)) from None
    except OSError as exc:
        raise DiffError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except orjson.JSONDecodeError as exc:
        raise DiffError(f"{p}: not valid JSON ({exc})") from None


def _rows(path: Path, items, where: str = "kernels") -> list[KernelStat]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise DiffError(f"{path}: {where} is {type(items).__name__}, not a list of kernel rows")
    rows = []
    for i, d in enumerate(items):
        try:
            rows.append(KernelStat.from_dict(d))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise DiffError(f"{path}: {where}[{i}] is not a kernel row ({what})") from None
    return rows


def _document_telemetry(p: Path, data: dict) -> dict[str, tuple[float, float]]:
    """series key ("track [row] metric") -> (mean, peak) of a report JSON's telemetry rows."""
    try:
        rows = ((data.get("tables") or {}).get("telemetry") or {}).get("rows") \
            if data.get("schema") == SCHEMA else data.get("telemetry")
    except AttributeError:  # "tables" (or its telemetry) that is not an object
        raise DiffError(f"{p}: its telemetry table is not an object of rows") from None
    rows = rows or []
    if not isinstance(rows, list):
        raise DiffError(f"{p}: telemetry is {type(rows).__name__}, not a list")
    out = {}
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            continue
        try:
            mean, peak = r["mean"], r["peak"]
            if not all(type(v) in (int, float) and math.isfinite(v) for v in (mean, peak)):
                raise ValueError(f"mean and peak must be finite numbers, not {mean!r}, {peak!r}"[:200])
            out[f"{r['track']} [{r['pid']}] {r['metric']}"] = (float(mean), float(peak))
        except (KeyError, ValueError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise DiffError(f"{p}: telemetry[{i}] is not a telemetry row ({what})") from None
    return out


def diff_telemetry(a: dict[str, tuple[float, float]], b: dict[str, tuple[float, float]]) -> list[dict]:
    """Mean and peak per telemetry metric, B against A (a series on one side only is listed too)."""
    def pct(x, y):
        return None if x is None or y is None or x == 0 else 100.0 * (y - x) / x

    rows = []
    for key in dict.fromkeys([*a, *b]):
        (am, ap), (bm, bp) = a.get(key, (None, None)), b.get(key, (None, None))
        rows.append({"series": key, "a_mean": am, "b_mean": bm, "mean_delta_pct": pct(am, bm),
                     "a_peak": ap, "b_peak": bp, "peak_delta_pct": pct(ap, bp)})
    return rows


@dataclass
class KernelDelta:
    point: str
    name: str
    status: str  # "regression", "improvement", "same", "added", "removed", "params" (same kernel, parameters changed)
    a_ns: float | None
    b_ns: float | None
    a_calls: int
    b_calls: int
    metrics: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    b_name: str | None = None  # B's name when it differs (matched by identity: kernel_identity)
    match: str = ""  # how A and B were matched: "name", "params", "ambiguous" (not paired), "" (one side only)
    note: str = ""  # the parameters that changed, or why an ambiguous kernel was not paired

    @property
    def delta_pct(self) -> float | None:
        if self.a_ns is None or self.b_ns is None or self.a_ns == 0:
            return None
        return 100.0 * (self.b_ns - self.a_ns) / self.a_ns

    def to_dict(self) -> dict:
        return {"point": self.point, "name": self.name, "b_name": self.b_name or (self.name if self.b_ns is not None
                                                                                  else None),
                "match": self.match, "note": self.note, "status": self.status, "a_ns": self.a_ns, "b_ns": self.b_ns,
                "delta_pct": self.delta_pct, "a_calls": self.a_calls, "b_calls": self.b_calls,
                "metrics": {m: {"a": a, "b": b, "delta": None if a is None or b is None else b - a}
                            for m, (a, b) in self.metrics.items()}}


@dataclass
class DiffResult:
    rows: list[KernelDelta]
    threshold_pct: float
    field: str

    @property
    def regressions(self) -> list[KernelDelta]:
        return [r for r in self.rows if r.status == "regression"]

    def to_dict(self) -> dict:
        return {"threshold_pct": self.threshold_pct, "field": self.field, "regressions": len(self.regressions),
                "kernels": [r.to_dict() for r in self.rows]}


def _value(stat: KernelStat, which: str) -> float:
    return {"avg": stat.avg_ns, "total": float(stat.total_ns), "min": float(stat.min_ns), "max": float(stat.max_ns)}[which]


def diff(a: dict[str, list[KernelStat]], b: dict[str, list[KernelStat]], *, threshold_pct: float = 5.0,
         field: str = "avg", min_ns: float = 0.0) -> DiffResult:
    """Compare kernel by kernel; ``min_ns`` ignores kernels faster than that on both sides."""
    if field not in TIME_FIELDS:
        raise DiffError(f"unknown time field {field!r}; valid: {', '.join(TIME_FIELDS)}")
    if threshold_pct < 0 or math.isnan(threshold_pct):
        raise DiffError(f"threshold must be >= 0 percent, got {threshold_pct}")
    points = list(dict.fromkeys([*a, *b]))
    if set(a) != set(b) and len(a) == 1 and len(b) == 1:
        points = [""]  # one set each, labelled differently (e.g. a trace against a one-point summary)
        a, b = {"": next(iter(a.values()))}, {"": next(iter(b.values()))}
    rows: list[KernelDelta] = []
    for point in points:
        sa = {s.name: s for s in a.get(point, [])}
        sb = {s.name: s for s in b.get(point, [])}
        for pr in pair(sa, sb):  # by identity: equal names, else one kernel whose parameters changed
            ka, kb = sa.get(pr.a) if pr.a else None, sb.get(pr.b) if pr.b else None
            name = pr.a if pr.a is not None else pr.b
            va = _value(ka, field) if ka else None
            vb = _value(kb, field) if kb else None
            if ka is None:
                status = "added"
            elif kb is None:
                status = "removed"
            elif pr.how == "params":
                status = "params"  # another problem: its time is shown, never a regression
            elif max(va, vb) < min_ns:
                status = "same"
            else:
                pct = 100.0 * (vb - va) / va if va else (math.inf if vb > 0 else 0.0)
                status = "regression" if pct > threshold_pct else "improvement" if pct < -threshold_pct else "same"
            metrics = {m: ((ka.metrics.get(m) if ka else None), (kb.metrics.get(m) if kb else None))
                       for m in dict.fromkeys([*(ka.metrics if ka else {}), *(kb.metrics if kb else {})])}
            rows.append(KernelDelta(point, name, status, va, vb, ka.calls if ka else 0, kb.calls if kb else 0, metrics,
                                    pr.b if pr.how == "params" else None, pr.how, pr.note))
    order = {"regression": 0, "improvement": 1, "params": 2, "added": 3, "removed": 4, "same": 5}
    rows.sort(key=lambda r: (order[r.status], -(abs(r.delta_pct) if r.delta_pct is not None else 0.0)))
    return DiffResult(rows, threshold_pct, field)
