"""The HTML pages of ``report``, ``analyze`` (32 ranks) and ``diff`` laid out by a real browser (headless
Chromium) in windows of 1,000 and 1,600 px: no chart text overlaps another or leaves its chart, every chart
draws marks, nothing leaves the page (``tests/html_layout.py``: what is checked, from the DOM). A failure
names the page, the width, the chart and the text."""
from __future__ import annotations

from pathlib import Path

import pytest

from html_job import write_job
from html_layout import WIDTHS, assert_layout, check_page, chromium
from xpuprof.cli import main

pytestmark = pytest.mark.slow  # a headless browser, two windows per page

ANALYSES = ["temporal", "stragglers", "kernels", "kernel-types", "idle", "overlap", "queue", "launch", "memory-bw"]


@pytest.fixture(scope="module")
def job32(tmp_path_factory) -> dict[str, Path]:
    chromium()
    d = tmp_path_factory.mktemp("job32")
    write_job(d / "a", ranks=32)
    write_job(d / "b", ranks=32, scale=1.2, seed=11)
    out = {"a": d / "a", "b": d / "b", "pages": d / "pages"}
    out["pages"].mkdir()
    if pytest.importorskip("duckdb", reason="analyze needs duckdb (pip install 'xpuprof[scale]')"):
        assert main(["convert", str(d / "a"), "-o", str(d / "store")]) == 0
        out["store"] = d / "store"
    return out


def _page(job32, name: str, argv: list[str], rc: int = 0) -> Path:
    out = job32["pages"] / f"{name}.html"
    assert main([*argv, "-o", str(out)]) == rc
    return out


@pytest.mark.parametrize("which", ["one-trace", "32-ranks", "store"])
def test_report_pages_lay_out_at_both_widths(job32, which):
    source = {"one-trace": sorted(job32["a"].iterdir())[0], "32-ranks": job32["a"], "store": job32.get("store")}[which]
    page = _page(job32, f"report-{which}", ["report", str(source)])
    facts = assert_layout(page, min_charts=5)
    charts = {c["chart"] for c in facts[WIDTHS[0]]["charts"]}
    assert {"#timeline", "#time-per-kernel", "#metric-0", "#metric-1", "#telemetry-0"} <= charts
    if which != "one-trace":
        assert {"#straggler-waits", "#step-times"} <= charts


@pytest.mark.parametrize("analysis", ANALYSES)
def test_analyze_pages_of_32_ranks_lay_out_at_both_widths(job32, analysis):
    page = _page(job32, f"analyze-{analysis}", ["analyze", str(job32["store"]), analysis])
    assert_layout(page, min_charts=2 if analysis == "stragglers" else 1)


@pytest.mark.parametrize("variant", [["launch", "--events"], ["kernels", "--by-rank"], ["kernels", "--top", "all"]])
def test_analyze_variants_lay_out(job32, variant):
    page = _page(job32, "analyze-" + "-".join(v.strip("-") for v in variant), ["analyze", str(job32["store"]), *variant])
    assert_layout(page, min_charts=1)


@pytest.mark.parametrize("which", ["directories", "traces"])
def test_diff_pages_lay_out_at_both_widths(job32, which):
    a, b = job32["a"], job32["b"]
    if which == "traces":
        a, b = sorted(a.iterdir())[0], sorted(b.iterdir())[0]
    page = _page(job32, f"diff-{which}", ["diff", str(a), str(b)], rc=1)
    facts = assert_layout(page, min_charts=4)
    assert {"#time-change", "#metric-change-0", "#telemetry-0"} <= {c["chart"] for c in facts[WIDTHS[0]]["charts"]}


def test_the_check_finds_what_is_wrong_and_names_it(tmp_path):
    """The checks can fail: text on text, text outside its chart, a chart without marks, a chart wider than
    the page, a page that scrolls sideways; each problem names its chart and text."""
    from xpuprof.analysis.plots.page import _page as page_of

    bad = [
        '<svg class="chart" id="overlapping" xmlns="http://www.w3.org/2000/svg" width="300" height="60" '
        'viewBox="0 0 300 60"><rect x="0" y="30" width="100" height="10" fill="#4e79a7"/>'
        '<text x="10" y="20">first label</text><text x="40" y="22">second label</text></svg>',
        '<svg class="chart" id="outside" xmlns="http://www.w3.org/2000/svg" width="200" height="60" '
        'viewBox="0 0 200 60"><rect x="0" y="30" width="100" height="10" fill="#4e79a7"/>'
        '<text x="150" y="20">a label that runs past the edge</text></svg>',
        '<svg class="chart" id="empty" xmlns="http://www.w3.org/2000/svg" width="200" height="60" '
        'viewBox="0 0 200 60"><line class="axis" x1="0" y1="50" x2="200" y2="50" stroke="#888"/>'
        '<text x="10" y="20">nothing drawn</text></svg>',
        '<div style="width:1400px">wide</div><svg class="chart" id="too-wide" xmlns="http://www.w3.org/2000/svg" '
        'width="1300" height="40" style="max-width:none" viewBox="0 0 1300 40">'
        '<rect x="0" y="0" width="1300" height="10" fill="#4e79a7"/></svg>',
    ]
    path = tmp_path / "bad.html"
    path.write_text(page_of("bad", bad))
    problems, facts = check_page(path, 1000)
    text = "\n".join(problems)
    assert 'chart #overlapping: text "second label" overlaps text "first label"' in text, text
    assert 'chart #outside: text "a label that runs past the edge" leaves its chart' in text, text
    assert "chart #empty draws no marks" in text, text
    assert "chart #too-wide leaves the page" in text, text
    assert "the page scrolls sideways" in text, text
    assert len(facts["charts"]) == 4
    with pytest.raises(AssertionError, match=r"bad.html at 1600 px: chart #empty draws no marks"):
        assert_layout(path)
