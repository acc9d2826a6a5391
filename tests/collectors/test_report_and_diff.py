"""Telemetry in ``xpuprof report`` (table, JSON, HTML plots) and ``xpuprof diff`` (mean/peak)."""
from __future__ import annotations

import sys
from pathlib import Path

import orjson

import xpuprof
from xpuprof import Collector, ExperimentalConfig, MetricInfo
from xpuprof.cli import main


def _trace_with(values, path: Path) -> Path:
    vals = iter(values)

    class Steps(Collector):
        name = "steps"
        scope = "host"

        @classmethod
        def metrics(cls):
            return [MetricInfo("step_value", "1")]

        def read(self):
            return [next(vals, values[-1])]

    xpuprof.register_collector(Steps, replace=True)
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(profiler_metrics=["step_value"]))
    with prof:
        pass  # the sample at stop: one value
    return prof.export_chrome_trace(path)


def test_report_json_table_and_html_show_telemetry(tmp_path, capsys):
    trace = _trace_with([3.0], tmp_path / "a.pt.trace.json")
    assert main(["report", str(trace), "--format", "json"]) == 0
    tel = orjson.loads(capsys.readouterr().out)["tables"]["telemetry"]["rows"]
    assert tel == [{"track": "steps", "pid": "host", "metric": "step_value", "samples": 1, "mean": 3.0,
                    "peak": 3.0, "min": 3.0, "unit": "1"}]
    assert main(["report", str(trace)]) == 0
    assert "Telemetry (counter tracks)" in capsys.readouterr().out
    assert main(["report", str(trace), "--format", "html"]) == 0
    html = capsys.readouterr().out
    # a chart with axes per series (issue 39: was a sparkline); its caption names the series and its extremes
    assert '<div id="telemetry"' in html and '<svg class="chart" id="telemetry-0"' in html
    assert "steps step_value [1]: [host], 1 samples" in html and "max 3" in html


def test_diff_compares_mean_and_peak_per_metric(tmp_path, capsys):
    a = _trace_with([2.0], tmp_path / "a.pt.trace.json")
    b = _trace_with([5.0], tmp_path / "b.pt.trace.json")
    data = orjson.loads(b.read_bytes())  # another process: another host pid
    for e in data["traceEvents"]:
        if e.get("ph") == "C":
            e["pid"] = 424242
    b.write_bytes(orjson.dumps(data))
    main(["diff", str(a), str(b), "--format", "json"])
    rows = orjson.loads(capsys.readouterr().out)["telemetry"]
    assert [r["series"] for r in rows] == ["steps [host] step_value"]
    assert rows[0]["a_mean"] == 2.0 and rows[0]["b_mean"] == 5.0 and rows[0]["mean_delta_pct"] == 150.0
    assert rows[0]["peak_delta_pct"] == 150.0
    main(["diff", str(a), str(b)])
    assert "Telemetry: average and peak per metric" in capsys.readouterr().out
