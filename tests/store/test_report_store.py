"""``xpuprof report STORE`` gives what ``xpuprof report`` gives over the same ranks' JSON files: the
kernel rows (calls, totals, min/max, percentages, per-kernel metrics), the instance count and the
telemetry tracks, with every filter and sort; its HTML adds a per-rank step-time view."""
from __future__ import annotations

import json
import re

import pytest

from xpuprof.cli import main

from storehelp import HTA_DATA

pytestmark = pytest.mark.slow  # real DuckDB reports over converted stores and sim runs

OPTIONS = [[], ["--by-rank"], ["--cat", "cpu_op", "--sort", "calls", "--top", "5"], ["--name", "^(void|nccl|Memcpy)"],
           ["--start", "1", "--end", "40"], ["--sort", "max", "--top", "3", "--by-rank"],
           ["--cat", "runtime", "--sort", "name"]]


def report_json(capsys, inputs, options) -> dict:
    assert main(["report", *map(str, inputs), "--format", "json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def rows(doc: dict) -> list[dict]:
    return doc["tables"]["by_name"]["rows"]


def assert_same_report(a: dict, b: dict) -> None:
    """The whole document but its sources (trace files there, the store's rank partitions here)."""
    assert a["schema"] == "xpuprof.report" and a["version"] == b["version"]
    assert rows(a) == rows(b)
    assert {k: v for k, v in a.items() if k != "sources"} == {k: v for k, v in b.items() if k != "sources"}


@pytest.mark.parametrize("options", OPTIONS, ids=[" ".join(o) or "default" for o in OPTIONS])
@pytest.mark.parametrize("name", ["trace_filter", "ns_resolution_trace"])
def test_report_of_hta_traces_equals_report_of_their_store(capsys, hta_stores, name, options):
    files = sorted((HTA_DATA / name).iterdir())
    a = report_json(capsys, files, options)
    b = report_json(capsys, [hta_stores[name]], options)
    assert_same_report(a, b)


@pytest.mark.parametrize("options", [[], ["--sort", "GpuTime max"], ["--by-rank", "--sort", "XVE_ACTIVE"],
                                     ["--name", "layer", "--start", "0.01"]])
def test_report_with_metrics_and_telemetry_equals(capsys, sim_metrics, options):
    _, trace, store = sim_metrics
    a = report_json(capsys, [trace], options)
    b = report_json(capsys, [store], options)
    assert rows(a) and any(k["metrics"] for k in rows(a)), "the sim run has per-kernel metrics"
    if not options:
        assert a["tables"]["telemetry"]["rows"], "the sim run has host telemetry"
    assert rows(a) == rows(b) or _close_metrics(rows(a), rows(b))
    assert (a["totals"], a["units"], a["tables"].get("telemetry")) == (b["totals"], b["units"], b["tables"].get("telemetry"))


def _close_metrics(x: list, y: list) -> bool:
    """Equal rows, metric means equal to 1e-12 (the same values summed in another order)."""
    if len(x) != len(y):
        return False
    for a, b in zip(x, y):
        if {k: v for k, v in a.items() if k != "metrics"} != {k: v for k, v in b.items() if k != "metrics"}:
            return False
        if a["metrics"].keys() != b["metrics"].keys():
            return False
        if any(abs(a["metrics"][m] - b["metrics"][m]) > 1e-12 * max(1.0, abs(a["metrics"][m])) for m in a["metrics"]):
            return False
    return True


@pytest.mark.parametrize("options", [[], ["--by-rank"]])
def test_report_of_four_ranks_equals(capsys, sim_ranks, options):
    traces, store = sim_ranks
    a = report_json(capsys, [traces / f"w.rank{r}.pt.trace.json" for r in range(4)], options)
    b = report_json(capsys, [store], options)
    assert a["ranks"] == [0, 1, 2, 3]
    assert_same_report(a, b)


def test_html_report_of_a_store_has_a_per_rank_view(capsys, sim_ranks, tmp_path):
    _, store = sim_ranks
    out = tmp_path / "r.html"
    assert main(["report", str(store), "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert 'id="straggler-waits"' in page and 'id="stragglers"' in page
    assert len(re.findall(r">rank \d+</text>", page)) == 4
    assert 'id="kernels"' in page  # the kernel table as for trace files


@pytest.mark.parametrize("options", [[], ["--by-rank"]])
def test_xpu_kernel_resources_and_submission_intervals_reach_the_store_report(capsys, sim_ranks, tmp_path, options):
    """The XPU backend's per-trace metadata (kernel resources, submission interval sums) is in each rank's
    header: the store's report shows the same columns and tables as the JSON files'."""
    from xpuprof.analysis.intervals import METADATA_KEY as INTERVALS
    from xpuprof.analysis.resources import METADATA_KEY as RESOURCES

    traces, _ = sim_ranks
    files = []
    for rank in range(2):
        doc = json.loads((traces / f"w.rank{rank}.pt.trace.json").read_text())
        names = sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"})
        assert names, "the sim ranks have kernels"
        doc[RESOURCES] = {"kernels": [{"name": n, "simd_width": 16 * (1 + rank), "slm_bytes": 1024 * i}
                                      for i, n in enumerate(names)]}
        doc[INTERVALS] = {"names": names, "queued": {"count": [3] * len(names), "total": [300.0 + rank] * len(names)},
                          "submit": {"count": [3] * len(names), "total": [90.0 * (i + 1) for i in range(len(names))]}}
        files.append(tmp_path / f"x.rank{rank}.pt.trace.json")
        files[-1].write_text(json.dumps(doc))
    store = tmp_path / "x.store"
    assert main(["convert", *map(str, files), "-o", str(store)]) == 0
    capsys.readouterr()
    a = report_json(capsys, files, options)
    b = report_json(capsys, [store], options)
    assert "kernel_resources" in a["tables"] and any("queued_avg_ns" in r for r in rows(a))
    assert_same_report(a, b)


def test_the_op_report_of_a_store_equals_the_one_of_its_traces(sim_ranks, capsys):
    """key_averages is computed once from a trace table: a store's ops report is its traces' (it was refused)."""
    traces, store = sim_ranks
    assert main(["report", str(traces), "--by", "op", "--format", "json"]) == 0
    from_traces = capsys.readouterr().out
    assert main(["report", str(store), "--by", "op", "--format", "json"]) == 0
    assert capsys.readouterr().out == from_traces and '"key":"ProfilerStep*"' in from_traces
