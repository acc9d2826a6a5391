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
    assert "gemm_kernel" in out and "XVE_STALL" in out and "300.000 us" in out
    gemm = next(line for line in out.splitlines() if "gemm_kernel" in line)
    assert gemm.count(" %") == 7  # Self %, and two metrics' mean, min and max, each with its unit
    assert main(["report", str(rank_traces[0]), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["kernel"] == "gemm_kernel" and rows[0]["calls"] == "6" and "XVE_STALL::percent" in rows[0]
    assert main(["report", *map(str, rank_traces), "--format", "json", "--by-rank", "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == [0, 1] and len(data["tables"]["by_name"]["rows"]) == 2 and {k["rank"] for k in data["tables"]["by_name"]["rows"]} == {0, 1}


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


@pytest.mark.slow  # a headless browser
def test_html_report_renders_in_headless_chromium(rank_traces, tmp_path):
    browser = _chromium()
    out = tmp_path / "report.html"
    assert main(["report", *map(str, rank_traces), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    # the timeline, the bar chart, a distribution per metric and the ranks' two charts (two ranks: the per-rank
    # view) were laid out
    assert 'data-charts="6"' in dom
    import re

    assert re.findall(r'<svg class="chart" id="straggler-waits"[^>]*data-clipped="(\d+)"', dom) == ["0"]

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
    from xpuprof.trace.read import kineto_stream as scan_mod

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


# ----------------------------------------------------------------------------- what a report holds
def _nested_host_trace(path):
    """Three steps of 10 ms, each holding forward (6 ms) holding aten::mm (4 ms); a 1 ms gap after each."""
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace import TraceBuilder, write_chrome_trace

    b = TraceBuilder(pid=77)
    t = BASE_TIME_NS + 1_000_000_000
    for step in range(3):
        b.add_slice(f"ProfilerStep#{step}", t, 10_000_000, 77, 5, cat="user_annotation")
        b.add_slice("forward", t + 1_000_000, 6_000_000, 77, 5, cat="user_annotation")
        b.add_slice("aten::mm", t + 2_000_000, 4_000_000, 77, 5, cat="cpu_op")
        t += 11_000_000
    b.set_window(BASE_TIME_NS + 1_000_000_000, t)
    return write_chrome_trace(b, path)


def test_a_host_report_is_titled_by_what_it_holds_and_splits_self_from_inclusive(tmp_path, capsys):
    trace = _nested_host_trace(tmp_path / "host.pt.trace.json")
    assert main(["report", str(trace)]) == 0
    text = capsys.readouterr().out
    assert "Kernel" not in text and text.startswith("Host ranges and operators")
    assert "30.000 ms" in text.splitlines()[0]  # the time the ranges cover: 3 x 10 ms, not 60 ms of nesting
    header = next(line for line in text.splitlines() if "Name" in line)
    assert "Self" in header and "Total" in header
    rep = build_report([trace])
    rows = {s.name: s for s in rep.stats}
    assert rows["ProfilerStep#*"].total_ns == 30_000_000 and rows["ProfilerStep#*"].self_ns == 12_000_000
    assert rows["forward"].self_ns == 6_000_000 and rows["aten::mm"].self_ns == 12_000_000
    assert sum(s.pct for s in rep.stats) == pytest.approx(100.0)
    assert rows["ProfilerStep#*"].pct == pytest.approx(40.0)
    assert rep.total_ns == 30_000_000 and rep.inclusive_ns == 60_000_000


def test_self_times_are_the_same_read_as_columns_or_as_events(tmp_path, monkeypatch):
    from xpuprof.trace.read import kineto_stream as scan_mod

    trace = _nested_host_trace(tmp_path / "host.pt.trace.json")
    fast = {s.name: (s.self_ns, s.total_ns) for s in build_report([trace]).stats}
    monkeypatch.setattr(scan_mod, "_native_module", None)
    assert {s.name: (s.self_ns, s.total_ns) for s in build_report([trace]).stats} == fast


def test_long_kernel_names_wrap_whole_within_the_width(tmp_path, capsys, monkeypatch):
    """A name longer than the terminal is wrapped, never cut: every line fits and the name reads whole."""
    import numpy as np

    from xpuprof.activity import ActivityType
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace import TraceBuilder, write_chrome_trace

    long_name = "void at::native::elementwise_kernel<" + "float, " * 40 + "4>(int, Functor_add_end)"
    b = TraceBuilder(pid=9)
    ts = BASE_TIME_NS + 10**9 + np.arange(3, dtype=np.int64) * 100_000
    b.add_slices(names=[long_name, long_name, "short_kernel"], ts=ts, dur=np.full(3, 9_000), pid=1_000_000, tid=1,
                 cat=ActivityType.CONCURRENT_KERNEL)
    b.set_window(int(ts[0]), int(ts[-1]) + 9_000)
    trace = write_chrome_trace(b, tmp_path / "k.pt.trace.json")
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["report", str(trace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 120
    body = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert " ".join(body[:-1]).replace(", ", ",").replace(",", ", ") == long_name  # whole, over several lines
    assert "…" not in "".join(lines)
    assert body[-1] == "short_kernel"


def test_json_report_is_one_versioned_document(rank_traces, capsys):
    from xpuprof.analysis.report_schema import SCHEMA, VERSION

    assert main(["report", *map(str, rank_traces), "--format", "json", "--by-rank"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == SCHEMA == "xpuprof.report" and doc["version"] == VERSION == 1
    assert doc["title"] == "Kernels" and doc["categories"] == ["kernel"] and doc["nested"] is False
    table = doc["tables"]["by_name"]
    keys = [c["key"] for c in table["columns"]]
    for row in table["rows"]:
        assert set(row) <= set(keys), set(row) - set(keys)
        assert row["self_ns"] == row["total_ns"]  # device work does not nest
    assert doc["totals"]["rows"] == sum(r["calls"] for r in table["rows"])
    assert doc["filters"]["by_rank"] is True and doc["units"] == {"XVE_STALL": "percent", "GPU_BUSY": "percent"}


def test_report_schema_doc_names_every_key(rank_traces, tmp_path, capsys):
    from pathlib import Path

    from xpuprof.analysis.report_schema import by_name_columns

    doc_text = (Path(__file__).resolve().parents[2] / "docs" / "report-schema.md").read_text()
    assert main(["report", *map(str, rank_traces), "--format", "json", "--by-rank"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in [*doc, *doc["totals"], *doc["filters"]]:
        assert f"`{key}`" in doc_text, key
    for col in by_name_columns(build_report(rank_traces, by_rank=True)):
        assert f"`{col['key']}`" in doc_text, col["key"]


def test_diff_reads_the_json_report(rank_traces, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for trace, out in zip(rank_traces, (a, b)):
        assert main(["report", str(trace), "--format", "json", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--format", "json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert {k["name"] for k in data["kernels"]} == {"gemm_kernel", "axpy_kernel", "reduce_kernel"}


# ----------------------------------------------------------------------------- HTML
def _dump_dom(out):
    browser = _chromium()
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                          capture_output=True, text=True, timeout=120).stdout


@pytest.mark.slow  # a headless browser
def test_html_charts_are_drawn_whole_with_units(tmp_path, make_trace):
    import re

    long_name = "void gemm_kernel<" + "bf16, " * 30 + "128>(params)"
    trace = make_trace(tmp_path / "k.pt.trace.json", 0,
                       kernels={long_name: (4, 90_000_000), "tiny": (1, 1_000), "mid_kernel": (2, 4_000_000)})
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "--format", "html", "-o", str(out)]) == 0
    dom = _dump_dom(out)
    clipped = re.findall(r'data-clipped="(\d+)"', dom)
    # the timeline, the bar chart and a distribution per metric, nothing cut off
    assert len(clipped) == 4 and set(clipped) == {"0"}, clipped
    assert "[percent]" in dom  # the distributions' x axis names the metric's unit
    assert "share of each kernel's calls" in dom and "time per name" in dom


def test_html_shows_bytes_in_human_units(tmp_path):
    import numpy as np

    from xpuprof.activity import ActivityType
    from xpuprof.analysis.html import render
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace import TraceBuilder, write_chrome_trace

    b = TraceBuilder(pid=9)
    ts = BASE_TIME_NS + 10**9 + np.arange(4, dtype=np.int64) * 1_000_000
    b.add_slices(names=["copy_kernel"] * 4, ts=ts, dur=np.full(4, 500_000), pid=1_000_000, tid=1,
                 cat=ActivityType.CONCURRENT_KERNEL)
    b.add_per_kernel_metrics(kernel_names=["copy_kernel"] * 4, start_ns=ts, end_ns=ts + 500_000, pid=1_000_000, tid=1,
                             metrics={"GPU_MEMORY_BYTE_READ": np.full(4, 2.441e8)},
                             units={"GPU_MEMORY_BYTE_READ": "bytes"})
    b.set_window(int(ts[0]), int(ts[-1]) + 500_000)
    trace = write_chrome_trace(b, tmp_path / "bytes.pt.trace.json")
    page = render(build_report([trace]))
    assert "232.8 MiB" in page and "e+08" not in page


def test_html_of_operators(tmp_path):
    trace = _nested_host_trace(tmp_path / "host.pt.trace.json")
    out = tmp_path / "ops.html"
    assert main(["report", str(trace), "--by", "op", "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert 'id="time-per-op"' in page and 'id="operators"' in page and "aten::mm" in page
    assert "Self CPU" in page and "# of Calls" in page  # torch's labels
