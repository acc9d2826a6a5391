"""Shared helpers of the collector tests."""
from __future__ import annotations

import orjson


def trace_of(prof, tmp_path, name="t.json") -> dict:
    return orjson.loads(prof.export_chrome_trace(tmp_path / name).read_bytes())


def counters(trace: dict, name: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "C" and (name is None or e["name"] == name)]


def series(trace: dict, track: str, metric: str) -> tuple[list[float], list[float]]:
    rows = [(e["ts"], e["args"][metric]) for e in counters(trace, track) if metric in e["args"]]
    return [t for t, _ in rows], [v for _, v in rows]
