import csv
import io
import json
import shutil
import subprocess

import pytest

from xpuprof.analysis.report import ReportError, build_report
from xpuprof.cli import main


def test_kernel_table_with_metrics(rank_traces, kernel_spec):
    rep = build_report([rank_traces[0]])
    by = {s.name: s for s in rep.stats}
    assert set(by) == set(kernel_spec)
    g = by["gemm_kernel"]
    assert (g.calls, g.total_ns, g.min_ns, g.max_ns) == (6, 300_000, 50_000, 50_000)
    assert abs(sum(s.pct for s in rep.stats) - 100.0) < 1e-6
    assert 7 < g.metrics["XVE_STALL"] < 13 and set(g.metrics) == {"XVE_STALL", "GPU_BUSY"}
    assert rep.table.units["XVE_STALL"] == "percent" and rep.ranks == [0]
    assert [s.name for s in rep.stats] == ["gemm_kernel", "axpy_kernel", "reduce_kernel"]  # by total time


def test_across_ranks_and_by_rank(rank_traces):
    rep = build_report([rank_traces[0].parent])
    assert rep.ranks == [0, 1]
    assert {s.name: s.calls for s in rep.stats}["gemm_kernel"] == 12
    per = build_report(rank_traces, by_rank=True)
    assert sorted((s.rank, s.name) for s in per.stats if s.name == "axpy_kernel") == [(0, "axpy_kernel"), (1, "axpy_kernel")]


def test_filters_name_top_and_window(rank_traces):
    rep = build_report([rank_traces[0]], name="gemm|reduce", top=1)
    assert [s.name for s in rep.stats] == ["gemm_kernel"]
    # gemm runs first (6 x 51 us from 10 us): a 0..0.1 ms window holds only the first two launches.
    early = build_report([rank_traces[0]], end_ms=0.1)
    assert {s.name: s.calls for s in early.stats} == {"gemm_kernel": 2}
    late = build_report([rank_traces[0]], start_ms=0.32)
    assert "gemm_kernel" not in {s.name for s in late.stats}
    with pytest.raises(ReportError, match="not a valid regular expression"):
        build_report([rank_traces[0]], name="(")
    with pytest.raises(ReportError, match="must be after --start"):
        build_report([rank_traces[0]], start_ms=2, end_ms=1)


def test_missing_and_bad_inputs(tmp_path, capsys):
    with pytest.raises(ReportError, match="no such trace file"):
        build_report([tmp_path / "nope.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="holds no"):
        build_report([tmp_path / "empty"])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", str(bad)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_cli_formats(rank_traces, tmp_path, capsys):
    assert main(["report", str(rank_traces[0])]) == 0
    out = capsys.readouterr().out
    assert "gemm_kernel" in out and "XVE_STALL [percent]" in out and "300.000 us" in out
    assert main(["report", str(rank_traces[0]), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["kernel"] == "gemm_kernel" and rows[0]["calls"] == "6" and "XVE_STALL::percent" in rows[0]
    assert main(["report", *map(str, rank_traces), "--format", "json", "--by-rank", "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == [0, 1] and len(data["kernels"]) == 2 and {k["rank"] for k in data["kernels"]} == {0, 1}


def test_host_only_trace_summarizes_annotations(tmp_path, make_trace):
    p = make_trace(tmp_path / "h.pt.trace.json", 0, kernels={})
    rep = build_report([p])
    assert [s.name for s in rep.stats] == ["ProfilerStep#*"]


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to check the HTML report")


def test_html_report_renders_in_headless_chromium(rank_traces, tmp_path):
    browser = _chromium()
    out = tmp_path / "report.html"
    assert main(["report", *map(str, rank_traces), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-charts="3"' in dom  # the bar chart and two metric histograms were laid out
    import re

    rendered = re.findall(r'id="time-per-kernel"[^>]*data-rendered="(\d+)x(\d+):([^"]*)"', dom) or \
        re.findall(r'data-rendered="(\d+)x(\d+):([^"]*)"[^>]*id="time-per-kernel"', dom)
    assert rendered, dom[:2000]
    w, h, bars = rendered[0]
    widths = [float(x) for x in bars.split(",")]
    assert int(w) > 0 and int(h) > 0 and len(widths) == 3
    assert widths[0] == max(widths) and widths[0] > 5 * widths[2]  # gemm's bar dwarfs reduce's
    assert "gemm_kernel" in dom and "Distribution of XVE_STALL" in dom


@pytest.mark.parametrize("generic", [False, True], ids=["vendor-names", "generic-names"])
@pytest.mark.parametrize("asked", ["runtime", "cuda_runtime", "CUDA_RUNTIME"])
@pytest.mark.parametrize("scanner", [True, False], ids=["scanned", "loaded"])
def test_cat_takes_either_spelling_of_a_category(tmp_path, monkeypatch, capsys, generic, asked, scanner):
    """`--cat runtime` on a trace written with the vendor's names (cuda_runtime), or `--cat
    cuda_runtime` on one written with the generic names, printed an empty table with rc 0: a category
    and its other spellings in the activity model (generic name, deprecated aliases, Kineto's vendor
    names) are one filter."""
    import time

    import xpuprof
    from xpuprof.trace.read import scan as scan_mod

    if not scanner:
        monkeypatch.setattr(scan_mod, "_native_module", None)  # the loaded-events path
    cfg = xpuprof.ProfilerConfig(custom={"sim_vendor": "cuda"}, generic_categories=generic)
    with xpuprof.profile(backends=["sim"], config=cfg) as prof:
        for i in range(6):
            with xpuprof.record_function(f"r{i}"):
                end = time.perf_counter_ns() + 20_000
                while time.perf_counter_ns() < end:
                    pass
    path = prof.export_chrome_trace(tmp_path / "t.json")
    written = "runtime" if generic else "cuda_runtime"
    rep = build_report([path], categories=[asked])
    assert {s.name: s.calls for s in rep.stats} == {"cudaLaunchKernel": 6, "cudaMemcpyAsync": 2}
    assert set(rep.table.cat.tolist()) == {written}
    assert main(["report", str(path), "--cat", asked, "--format", "csv"]) == 0
    assert "cudaLaunchKernel,6," in capsys.readouterr().out
