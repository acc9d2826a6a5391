"""The charts of the HTML pages, read from the page itself (the layout in a browser: tests/commands/
test_html_browser.py). Each defect of issue 39's plots has its test here: telemetry was a 230 px sparkline
without axes, metric histograms pooled every kernel, no view over time or per step, ``analyze --format html``
of many ranks was tables only, ``diff`` had no HTML."""
from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest

from html_job import ALLREDUCE, COMPUTE, write_job
from xpuprof.cli import main


def _svg(page: str, chart_id: str) -> str:
    found = re.search(rf'<svg class="chart[^"]*" id="{re.escape(chart_id)}".*?</svg>', page, re.S)
    charts = re.findall(r'<svg class="chart[^"]*" id="([^"]+)"', page)
    assert found, f"no chart {chart_id!r} in the page; charts: {charts}"
    return found.group(0)


def _texts(svg: str) -> list[str]:
    """Each text element's own text (its <title> left out)."""
    return [unescape(re.sub(r"<title>.*?</title>", "", t, flags=re.S))
            for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]


@pytest.fixture
def make_trace():
    """``make_trace(path, rank, **kw)``: a builder-made rank trace (tests/commands/conftest.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_commands_conftest", Path(__file__).parents[1] / "commands" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_rank_trace


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    return write_job(tmp_path_factory.mktemp("job") / "traces", ranks=4)[0].parent


@pytest.fixture(scope="module")
def report_page(job, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("pages") / "r.html"
    assert main(["report", str(sorted(job.iterdir())[0]), "-o", str(out)]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def store32(tmp_path_factory) -> Path:
    pytest.importorskip("duckdb", reason="analyze needs duckdb (pip install 'xpuprof[scale]')")
    d = tmp_path_factory.mktemp("job32")
    write_job(d / "traces", ranks=32)
    assert main(["convert", str(d / "traces"), "-o", str(d / "store")]) == 0
    return d / "store"


def test_telemetry_has_time_and_value_axes_and_its_extremes(report_page):
    """Was a 230 px sparkline with neither axis nor scale."""
    assert 'class="spark"' not in report_page
    power = _svg(report_page, "telemetry-0")
    texts = _texts(power)
    values = [t for t in texts if re.fullmatch(r"[\d,]+ W", t)]
    times = [t for t in texts if re.fullmatch(r"[\d.,]+ (ms|us|s)", t)]
    assert len(values) >= 3 and len(times) >= 3, texts
    assert "time since the trace's start" in texts
    peak, low = (next(t for t in texts if t.startswith(w + " ")) for w in ("max", "min"))
    assert re.fullmatch(r"max \d+(\.\d+)? W", peak) and re.fullmatch(r"min \d+(\.\d+)? W", low)
    assert 'figcaption>gpu power [W]' in report_page and "min " in report_page and "max " in report_page
    assert len(re.findall(r"<circle ", power)) == 2  # where the extremes are


def test_metric_distributions_draw_one_line_per_kernel_with_a_legend(report_page):
    """Metric histograms pooled every kernel into one."""
    svg = _svg(report_page, "metric-0")
    texts = _texts(svg)
    for name in COMPUTE:
        assert any(t.startswith(name) for t in texts), (name, texts)  # its legend entry, with its count
    lines = re.findall(r'<path d="[^"]+" stroke="(#[0-9a-f]{6})"', svg)
    assert len(lines) == len(COMPUTE) and len(set(lines)) == len(COMPUTE)  # one line per kernel, each its colour
    assert "SM_ACTIVE [percent] per kernel instance" in svg
    assert "Distribution of SM_ACTIVE [percent] per kernel" in report_page


def test_a_kernel_beyond_the_legends_room_is_counted_not_dropped(tmp_path, make_trace):
    kernels = {f"k{i}_kernel": (2, 10_000 * (i + 1)) for i in range(11)}
    trace = make_trace(tmp_path / "t.pt.trace.json", 0, kernels=kernels)
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    svg = _svg(out.read_text(), "metric-0")
    assert "and 3 more kernels (the table has them)" in _texts(svg)
    assert len(re.findall(r'<path d="[^"]+" stroke="#', svg)) == 8


def test_the_report_draws_a_timeline_of_the_steps(report_page):
    """There was no view over time or per step."""
    svg = _svg(report_page, "timeline")
    texts = _texts(svg)
    assert [t for t in texts if t.startswith("#")] == [f"#{i}" for i in range(1, 7)]
    assert {"steps", "compute kernels", "communication kernels", "copies"} <= set(texts)
    assert len(re.findall(r'<rect class="step"', svg)) == 6
    step_tip = re.search(r"<title>(ProfilerStep#1: [^<]+)</title>", svg).group(1)
    assert "compute kernels:" in step_tip and "communication kernels:" in step_tip
    assert any(re.fullmatch(r"\d+\.\d %  busy".replace("  ", " "), t) for t in texts)
    assert re.search(r'<rect class="busy"', svg)


def test_a_host_only_trace_gets_host_lanes(tmp_path):
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as prof:
        for _ in range(3):
            with xpuprof.record_function("work"):
                sum(range(20_000))
            prof.step()
    trace = prof.export_chrome_trace(tmp_path / "host.pt.trace.json")
    out = tmp_path / "h.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    texts = _texts(_svg(out.read_text(), "timeline"))
    assert "host ranges" in texts and "compute kernels" not in texts


def test_analyze_of_32_ranks_draws_idle_compute_and_non_compute_per_rank(store32, tmp_path):
    """``analyze --format html`` of 32 ranks was tables only."""
    out = tmp_path / "t.html"
    assert main(["analyze", str(store32), "temporal", "-o", str(out)]) == 0
    svg = _svg(out.read_text(), "temporal")
    texts = _texts(svg)
    assert [t for t in texts if t.startswith("rank ")] == [f"rank {r}" for r in range(32)]
    assert {"idle", "compute"} <= set(texts) and any(t.startswith("non-compute") for t in texts)
    assert len(re.findall(r'<rect class="bar"', svg)) == 3 * 32


def test_analyze_stragglers_draws_each_ranks_step_times(store32, tmp_path):
    out = tmp_path / "s.html"
    assert main(["analyze", str(store32), "stragglers", "-o", str(out)]) == 0
    page = out.read_text()
    svg = _svg(page, "step-times")
    assert [t for t in _texts(svg) if t.startswith("rank ")] == [f"rank {r}" for r in range(32)]
    assert 'fill="#d62728"' in svg  # rank 13, the straggler, in red
    assert _svg(page, "straggler-waits")


@pytest.mark.parametrize("analysis", ["kernels", "kernel-types", "idle", "overlap", "queue", "launch", "memory-bw"])
def test_every_analysis_with_rows_has_a_picture(store32, tmp_path, analysis):
    out = tmp_path / "a.html"
    assert main(["analyze", str(store32), analysis, "-o", str(out)]) == 0
    page = out.read_text()
    assert re.search(r'<svg class="chart"', page), page[:500]
    assert "<table" in page


def test_diff_writes_an_html_page_of_what_changed(tmp_path):
    """``diff A B --format html`` was refused (only with --history)."""
    a = write_job(tmp_path / "a", ranks=2)[0]
    b = write_job(tmp_path / "b", ranks=2, scale=1.3, seed=9)[0]
    out = tmp_path / "d.html"
    assert main(["diff", str(a), str(b), "--format", "html", "-o", str(out)]) == 1  # slower: still a regression
    page = out.read_text()
    svg = _svg(page, "time-change")
    texts = _texts(svg)
    assert any(t.startswith("gemm_kernel<float, 128>") for t in texts)
    assert any(re.fullmatch(r"\+\d+\.\d % \(.+ -> .+\)", t) for t in texts)
    assert "the threshold, +-5 %" in texts
    assert _svg(page, "telemetry-0") and _svg(page, "metric-change-0")
    assert '<table id="kernels">' in page and "regression" in page
    # the extension picks the format, as in report and analyze
    out2 = tmp_path / "d2.html"
    assert main(["diff", str(a), str(b), "-o", str(out2)]) == 1
    assert out2.read_text().startswith("<!DOCTYPE html>")


def test_pages_fetch_nothing_and_escape_names(tmp_path, make_trace):
    trace = make_trace(tmp_path / "t.pt.trace.json", 0,
                       kernels={'<script>alert("x")</script>_kernel': (3, 40_000), "b&q_kernel": (2, 5_000)})
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert not re.search(r"(src|href)=", page) and "https://" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_a_long_series_is_drawn_as_its_envelope():
    """A million samples stay a few hundred points, and the spike survives."""
    from xpuprof.analysis.plots.lines import Line, series_chart

    x = np.linspace(0, 1000, 1_000_000)
    y = np.sin(x / 50) * 10 + 100
    y[123_456] = 500.0
    svg = series_chart([Line("power", "#4e79a7", x, y)], unit="W", chart_id="big", what="power")
    points = re.search(r'<path d="M([^"]+)" stroke', svg).group(1).count(",")
    assert points < 1000 and len(svg) < 40_000
    assert "max 500 W" in _texts(svg)
    ys = [float(p.split(",")[1]) for p in re.search(r'<path d="M([^"]+)" stroke', svg).group(1).split(" L")]
    assert min(ys) < 20  # the spike reaches the top of the plot


def test_byte_and_time_ticks_are_whole_in_their_unit():
    from xpuprof.analysis.plots.svg import axis_ticks, tick_formatter

    _, _, _, labels = axis_ticks(0, 14.3 * 2**20, "bytes", 600, horizontal=True)
    assert all(re.fullmatch(r"\d+ MiB", s) for s in labels), labels
    _, _, _, labels = axis_ticks(0, 13.6, "ms", 600, horizontal=True)
    assert labels[:3] == ["0 ms", "2 ms", "4 ms"], labels
    assert tick_formatter("ms", 2500, 500)(1500) == "1.5 s"
    assert tick_formatter("MHz", 1430, 10)(1420) == "1,420 MHz"  # a prefixed unit is never prefixed again
    assert tick_formatter("", 2e6, 5e5)(1.5e6) == "1.5 M"


def test_ticks_leave_room_for_their_labels():
    from xpuprof.analysis.plots.svg import CHAR_W, axis_ticks

    for room in (120, 300, 900):
        _, _, values, labels = axis_ticks(0, 123_456_789, "ns", room, horizontal=True)
        spacing = room / max(len(values) - 1, 1)
        assert len(values) == 2 or spacing >= max(len(s) for s in labels) * CHAR_W + 12, (room, labels)


def test_a_legend_wraps_within_its_width():
    from xpuprof.analysis.plots.svg import legend_layout, text_w

    items = [(f"kernel_{i}_with_a_long_name", "#000") for i in range(9)]
    layout = legend_layout(items, 400)
    assert max(row for _, row, _, _ in layout) >= 2
    assert all(x + 14 + text_w(label) <= 400 for x, _, label, _ in layout)


def test_allreduce_kernels_are_communication_in_the_timeline(job):
    from xpuprof.analysis.report import read_report_inputs
    from xpuprof.analysis.step_timeline import step_timeline

    table = read_report_inputs([sorted(job.iterdir())[1]])
    tl = step_timeline(table, 0)
    lanes = {lane.name: lane for lane in tl.lanes}
    assert tl.rank == 1 and len(tl.step_names) == 6
    comm = lanes["communication kernels"]
    assert comm.events == 6 and ALLREDUCE  # one all-reduce per step
    busy = comm.busy_between(tl.step_starts, tl.step_ends)
    assert np.isclose(busy.sum(), comm.busy_ns)  # every all-reduce inside its step
