"""What a person sees from the commands (issue 39): mistakes answered in one line with exit 2 before any work,
formats from the -o extension, one flag spelling, numbers with their units in one format per column, one
label set across report and run, reports that say what they found."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tables_check import boxed_tables, column_problems, html_tables
from xpuprof.activity import ActivityType
from xpuprof.cli import main
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

T = BASE_TIME_NS + 10**9


def _kernel_trace(path, *, host_only: bool = False):
    b = TraceBuilder(pid=7)
    if host_only:
        b.add_slices(names=["step", "inner"], ts=T + np.array([0, 10_000]), dur=np.array([100_000, 50_000]), pid=7,
                     tid=1, cat="user_annotation")
    else:
        b.add_slices(names=["gemm", "gemm", "copy"], ts=T + np.array([0, 50_000, 100_000]),
                     dur=np.array([3_606, 3_000, 136_083]), pid=0, tid=1, cat=ActivityType.CONCURRENT_KERNEL)
        b.add_per_kernel_metrics(kernel_names=["gemm", "gemm"], start_ns=T + np.array([0, 50_000]),
                                 end_ns=T + np.array([3_606, 53_000]), pid=0, tid=1,
                                 metrics={"GpuTime": [3606.0, 136083.0], "XVE_STALL": [19.77, 20.1]},
                                 units={"GpuTime": "ns", "XVE_STALL": "percent"})
    b.set_window(T, T + 300_000)
    return write_chrome_trace(b, path)


def test_an_unknown_category_is_one_line_and_exit_2(tmp_path, capsys):
    trace = _kernel_trace(tmp_path / "k.pt.trace.json")
    assert main(["report", str(trace), "--cat", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cat nonsense: not an event category" in err and "kernel" in err
    assert main(["report", str(trace), "--cat", "kernal"]) == 2
    assert "did you mean 'kernel'" in capsys.readouterr().err


def test_a_valid_category_without_events_says_so(tmp_path, capsys):
    trace = _kernel_trace(tmp_path / "k.pt.trace.json")
    assert main(["report", str(trace), "--cat", "cpu_op"]) == 0
    out = capsys.readouterr().out
    assert out == f"no cpu_op events in {trace}\n"  # not an empty table titled "Kernels"


def test_a_host_only_report_leads_with_its_host_ranges(tmp_path, capsys):
    trace = _kernel_trace(tmp_path / "h.pt.trace.json", host_only=True)
    assert main(["report", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Host ranges") and "Kernels" not in out and "step" in out


def test_the_output_extension_picks_the_format_and_a_contradiction_is_refused(tmp_path, capsys):
    trace = _kernel_trace(tmp_path / "k.pt.trace.json")
    html = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(html)]) == 0
    assert html.read_text().startswith("<!DOCTYPE html>")  # was: the text table in a .html file
    assert main(["report", str(trace), "-o", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "xpuprof.report"
    capsys.readouterr()
    assert main(["report", str(trace), "-o", str(tmp_path / "x.html"), "--format", "csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.html" in err and "--format csv" in err
    assert not (tmp_path / "x.html").exists()


def test_sort_keys_and_choices_get_did_you_mean(tmp_path, capsys):
    trace = _kernel_trace(tmp_path / "k.pt.trace.json")
    assert main(["report", str(trace), "--sort", "GpuTim"]) == 2
    assert "did you mean 'GpuTime'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", str(trace), "--format", "htm"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'html'" in err


def test_backend_names_get_did_you_mean():
    import xpuprof

    with pytest.raises(ValueError, match="unknown backend 'simm'; did you mean 'sim'"):
        xpuprof.profile(backends=["simm"])


def test_devices_format_json_and_its_json_alias(capsys):
    assert main(["devices", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert main(["devices", "--json"]) == 0
    assert [r["backend"] for r in json.loads(capsys.readouterr().out)] == [r["backend"] for r in rows]
    assert main(["metrics", "--json", "--vendor", "xpu", "--device", "bmg"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]


def test_a_failed_convert_leaves_nothing_behind(tmp_path, capsys):
    pytest.importorskip("pyarrow", reason="the trace store needs pyarrow (xpuprof[scale])")
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": 5}')
    for inputs in ([str(tmp_path / "empty")], [str(bad)]):
        store = tmp_path / "job.store"
        assert main(["convert", *inputs, "-o", str(store)]) == 2
        assert not store.exists(), inputs  # was: an empty store that later commands call "holds no ranks yet"
        assert "was not created" in capsys.readouterr().err


def test_report_and_run_label_the_same_quantities_the_same_way_with_units(tmp_path, capsys, monkeypatch):
    """run printed metric means without units (19.77, then 1.361e+05); report, run and the HTML label one
    quantity alike, with the unit in every cell."""
    from xpuprof.analysis.report import build_report
    from xpuprof.commands.run import _print_summary

    trace = _kernel_trace(tmp_path / "k.pt.trace.json")
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["report", str(trace)]) == 0
    (report_head, report_rows), = boxed_tables(capsys.readouterr().out)
    report = build_report([trace])

    class Cfg:
        name = "x"

    record = {"label": "p", "workload": "w", "device": "cpu", "traces": [str(trace)], "error": None,
              "iteration_time": {"count": 2, "mean_ms": 1.5, "min_ms": 1.0, "max_ms": 2.0},
              "metric_units": dict(report.table.units)}  # as _point_record writes it into summary.jsonl
    _print_summary(Cfg, [record], [report.stats], None, 250)
    out = capsys.readouterr().out
    assert "e+" not in out
    points, (run_head, run_rows) = boxed_tables(out)
    assert run_head == report_head and run_rows == report_rows
    gemm = next(r for r in run_rows if r[0] == "gemm")
    assert "69.844 us" in gemm and "19.9 %" in gemm  # GpuTime's mean in its unit; XVE_STALL's with %
    for headers, rows in (points, (run_head, run_rows)):
        assert not column_problems(headers, rows, "run")


def test_html_metric_headers_match_their_cells(tmp_path):
    """The HTML header said 'GpuTime [ns]' over cells in us."""
    from xpuprof.analysis.html import render
    from xpuprof.analysis.report import build_report

    page = render(build_report([_kernel_trace(tmp_path / "k.pt.trace.json")]))
    (headers, rows), = [t for t in html_tables(page) if "GpuTime" in t[0]]
    assert "GpuTime [ns]" not in headers and not column_problems(headers, rows, "html")


def test_analyze_columns_have_one_format_with_units():
    """analyze stragglers printed one us column as 126.537, 26367.4 and 4.51691e+06."""
    from xpuprof.analysis.cluster.result import AnalysisResult

    rows = [{"rank": r, "steps": 3, "mean_step_us": v, "vs_median_pct": p, "step_z": z, "straggler": s}
            for r, v, p, z, s in ((0, 126.537, -99.0, -0.7, False), (1, 26367.4, 0.0, 0.0, False),
                                  (2, 4.51691e6, 171.0, 3.9, True))]
    result = AnalysisResult("stragglers", ["rank", "steps", "mean_step_us", "vs_median_pct", "step_z", "straggler"],
                            rows, title="Per-step time per rank (µs)")
    text = result.table_text(80)
    (headers, body), = boxed_tables(text)
    assert [r[2] for r in body] == ["126.537 us", "26.367 ms", "4.517 s"]
    assert "e+" not in text and not column_problems(headers, body, "stragglers")
    assert result.render("csv").splitlines()[0] == "rank,steps,mean_step_us,vs_median_pct,step_z,straggler"  # HTA's
