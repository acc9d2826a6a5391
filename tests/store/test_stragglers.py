"""``stragglers`` on real synchronous jobs: gloo ranks on CPU profiled with the sim backend (``gloo_jobs``),
2 and 4 ranks, balanced, with one rank slow in every step, and with one rank slow in steps 3, 6 and 9
(that one XPU-flavoured: oneCCL's kernels; the others CUDA's: NCCL's, which HTA reads).
The slow rank is exactly the one flagged, with its slow steps named, from the store (DuckDB), from the
JSON files (the report's path) and in the HTML; HTA 0.5's straggler analysis on the same traces, and
where it differs."""
from __future__ import annotations

import json
import logging
import re
import warnings
from dataclasses import replace

import numpy as np
import pytest

from xpuprof.analysis.cluster import run_analysis, stragglers
from xpuprof.analysis.engines import open_engine
from xpuprof.cli import main

from gloo_jobs import BASE_S, DELAY_S, SCENARIOS, SOME_STEPS, STEPS

pytestmark = pytest.mark.slow  # the jobs start 6 Python processes with torch (~20 s, once per session)

COMPARED = list(range(1, STEPS))  # ProfilerStep#1..#10; the last (#11) holds the profiler's stop


def _traces(d):
    return sorted(d.glob("*.pt.trace.json"))


def _flagged(result) -> list[int]:
    return [r["rank"] for r in result.rows if r["straggler"]]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_exactly_the_slow_rank_is_flagged_with_its_slow_steps(gloo_runs, name):
    traces, store = gloo_runs[name]
    world, slow, slow_steps = SCENARIOS[name]
    with open_engine(store) as engine:
        got = run_analysis("stragglers", engine)
    explanations = [r["explanation"] for r in got.rows]
    assert [r["rank"] for r in got.rows] == list(range(world))
    assert all(r["steps"] == len(COMPARED) for r in got.rows)
    assert _flagged(got) == ([] if slow < 0 else [slow]), explanations
    assert any("communication kernels" in n for n in got.notes)
    if slow < 0:
        return
    row = got.rows[slow]
    if slow_steps == SOME_STEPS:
        assert row["behind_steps"] == list(SOME_STEPS), explanations
    else:  # slow throughout; step 1 also holds how much later each rank's profiler started recording
        assert set(row["behind_steps"]) >= set(COMPARED[1:]), explanations
    # the others wait for it about the delay it sleeps in each of those steps
    per_step = row["cost_us"] / len(row["behind_steps"])
    assert 0.7 * DELAY_S * 1e6 < per_step < 1.5 * DELAY_S * 1e6
    assert row["wait_us"] < row["others_wait_us"]
    # the explanation: what it waits per step against the others, and what that costs them
    who = "the other rank's" if world == 2 else "the other ranks' median"
    assert f"waits {row['wait_us']:,.0f} µs per step in collectives against {who} {row['others_wait_us']:,.0f} µs" \
        in row["explanation"]
    assert "waits less" in row["explanation"] and f"{row['cost_share_pct']:.1f}%" in row["explanation"]
    if slow_steps == SOME_STEPS:
        assert "steps 3, 6, 9" in row["explanation"]


@pytest.mark.parametrize("name", ["2-slow", "4-some", "4-balanced"])
def test_the_json_files_give_the_store_answer(gloo_runs, name):
    """The report's path reads the JSON traces themselves: the same rows and notes."""
    traces, store = gloo_runs[name]
    with open_engine(store) as engine:
        want = run_analysis("stragglers", engine)
    got = stragglers.from_traces(_traces(traces))
    assert got.rows == want.rows and got.notes == want.notes and got.details == want.details


def test_an_xpu_run_waits_in_oneccls_kernels(gloo_runs):
    """The XPU-flavoured run's collectives are oneCCL's SYCL kernels (no NCCL name in it): the same answer."""
    traces, store = gloo_runs["4-some"]
    text = "".join(f.read_text() for f in _traces(traces))
    assert '"oneccl_' in text and '"nccl' not in text
    with open_engine(store) as engine:
        got = run_analysis("stragglers", engine)
    assert _flagged(got) == [1] and all(r["wait_us"] > 0 for r in got.rows)


def test_include_last_step_keeps_the_profilers_stop(gloo_runs):
    _, store = gloo_runs["4-slow"]
    with open_engine(store) as engine:
        got = run_analysis("stragglers", engine, include_last_step=True)
    assert all(r["steps"] == STEPS for r in got.rows) and _flagged(got) == [2]
    assert not any("left out" in n for n in got.notes)


def test_a_margin_above_the_delay_flags_nobody(gloo_runs):
    """--min-us: a rank is behind in a step only when the others wait for it longer than that."""
    _, store = gloo_runs["2-slow"]
    with open_engine(store) as engine:
        got = run_analysis("stragglers", engine, min_us=10 * DELAY_S * 1e6)
    assert _flagged(got) == [] and all(r["behind_steps"] == [] for r in got.rows)


def test_analyze_html_draws_the_wait_bars_and_the_slow_steps(gloo_runs, tmp_path):
    _, store = gloo_runs["4-some"]
    out = tmp_path / "s.html"
    assert main(["analyze", str(store), "stragglers", "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    svg = re.search(r'<svg class="chart" id="straggler-waits".*?</svg>', page, re.S).group(0)
    assert len(re.findall(r">rank \d</text>", svg)) == 4
    assert len(re.findall(r'class="bar straggler"', svg)) == 1 and len(re.findall(r'class="bar"', svg)) == 3
    red_cells = re.findall(r'<rect class="step"[^>]*fill="#d62728"><title>rank (\d), step (\d+):', svg)
    assert [step for rank, step in red_cells if rank == "1"] == [str(s) for s in SOME_STEPS]
    assert len(re.findall(r'<rect class="step"', svg)) == 4 * len(COMPARED)
    assert '<table id="stragglers">' in page


def test_report_by_rank_of_the_json_files_has_the_stragglers_table(gloo_runs, tmp_path, capsys, monkeypatch):
    traces, store = gloo_runs["2-slow"]
    for source in (traces, store):
        assert main(["report", str(source), "--by-rank", "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        table = doc["tables"]["stragglers"]
        assert [r["rank"] for r in table["rows"] if r["straggler"]] == [1]
        row = table["rows"][1]
        assert isinstance(row["wait_ns"], int) and row["wait_ns"] < row["others_wait_ns"]
        assert set(row["behind_steps"]) >= set(COMPARED[1:]) and {c["key"] for c in table["columns"]} == set(row)
        assert any("communication kernels" in n for n in table["notes"])
    monkeypatch.setenv("COLUMNS", "400")  # the text table's width: one line per rank
    assert main(["report", str(traces), "--by-rank"]) == 0
    text = capsys.readouterr().out
    assert "Stragglers: what ranks wait for" in text
    after = text.split("Stragglers: what ranks wait for", 1)[1]  # the kernel table has rank 1's rows too
    (row,) = [ln for ln in after.splitlines() if ln.startswith("│    1 │")]
    assert "│ yes " in row  # the straggler's row; its explanation a line under the table
    assert any(ln.startswith("rank 1: waits") and "the other rank waits for it (it waits less)" in ln
               for ln in text.splitlines())
    assert main(["report", str(traces), "--by-rank", "--format", "csv"]) == 0  # one table: the per-name one
    assert "straggler" not in capsys.readouterr().out
    assert main(["report", str(traces), "--format", "json"]) == 0  # without --by-rank: the per-name table only
    assert "stragglers" not in json.loads(capsys.readouterr().out)["tables"]


def test_hta_on_the_same_runs(gloo_runs):
    """HTA 0.5's ``get_potential_stragglers`` ranks the ranks by when their last long communication kernel
    starts, per iteration, and always names ``num_candidates`` of them: never "none", so the balanced runs
    get stragglers too; its default of 2 candidates raises IndexError on a 2-rank job. xpuprof names a
    rank only when the others wait for it, and none in a balanced run."""
    hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (the CI installs "
                                                           "HolisticTraceAnalysis with pandas<3)")
    logging.getLogger("hta").setLevel(logging.ERROR)
    for name in ("2-balanced", "2-slow", "4-balanced"):
        traces, store = gloo_runs[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ta = hta.TraceAnalysis(trace_dir=str(traces))
            one = _hta_or_error(ta, 1)
            two = _hta_or_error(ta, 2)
        # one name (or a crash: when its duration filter leaves no iteration with the kernel on two ranks,
        # its idxmax gives NaN and it raises TypeError), never "none", even where nobody waits for anybody
        assert isinstance(one, TypeError) or len(one) == 1, one
        if SCENARIOS[name][0] == 2:
            # 2 candidates among 2 ranks: both ranks named, or its IndexError/TypeError (which one depends on
            # how the gloo run's kernel durations fall against its filter)
            assert isinstance(two, (IndexError, TypeError)) or sorted(two) == [0, 1], two
        else:
            assert isinstance(two, (IndexError, TypeError)) or len(two) == 2, two
        with open_engine(store) as engine:
            ours = _flagged(run_analysis("stragglers", engine))
        assert ours == ([] if name.endswith("balanced") else [SCENARIOS[name][1]])


def _hta_or_error(ta, candidates: int):
    try:
        return ta.get_potential_stragglers(num_candidates=candidates)
    except (IndexError, TypeError) as exc:
        return exc


def test_the_jobs_took_what_they_were_told(gloo_runs):
    """The corpus is what the tests assume: steps at least BASE_S long, the slow ones about DELAY_S longer."""
    _, store = gloo_runs["4-some"]
    with open_engine(store) as engine:
        got = run_analysis("stragglers", engine)
    steps: dict[int, list[float]] = {}
    for d in got.details:
        steps.setdefault(d["step"], []).append(d["step_us"])
    assert all(min(durations) > 0.95 * BASE_S * 1e6 for durations in steps.values())
    slow = np.median([steps[s] for s in SOME_STEPS])
    others = np.median([steps[s] for s in steps if s not in SOME_STEPS])
    assert 0.8 * DELAY_S * 1e6 < slow - others < 1.5 * DELAY_S * 1e6


def test_the_html_reports_wait_chart_is_drawn_whole_in_a_browser(gloo_runs, tmp_path):
    """The report's HTML of the JSON traces: the wait bars and per-step cells laid out, no text clipped."""
    import shutil
    import subprocess

    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                   None)
    if browser is None:
        pytest.skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to check the HTML")
    traces, _ = gloo_runs["4-some"]
    out = tmp_path / "r.html"
    assert main(["report", str(traces), "--format", "html", "-o", str(out)]) == 0
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    svg = re.search(r'<svg class="chart" id="straggler-waits"[^>]*>', dom)
    assert svg, dom[:2000]
    assert 'data-clipped="0"' in svg.group(0)
    width, height, bars = re.search(r'data-rendered="(\d+)x(\d+):([^"]*)"', svg.group(0)).groups()
    widths = [float(w) for w in bars.split(",")]
    assert len(widths) == 4 and widths[1] == min(widths)  # rank 1 waits least: the others wait for it


def test_step_rows_are_the_same_from_a_rank_in_several_segments(tmp_path):
    """``step_waits.table_inputs`` gathers a rank's rows segment by segment (a store rank's row groups, a
    JSON file's chunks), each with its own strings: a rank cut into pieces with their dictionaries narrowed
    to what each uses gives the rows the rank in one piece gives."""
    from storehelp import synthetic_rank

    from xpuprof.analysis.cluster import step_waits
    from xpuprof.trace.read.store_table import read_store
    from xpuprof.trace.table.model import FlatSegment, TraceTable
    from xpuprof.trace.write.parquet import write_store

    write_store(synthetic_rank(3, steps=5, kernels_per_step=7), tmp_path / "s")
    table = read_store(tmp_path / "s")
    whole = table.columns("slices", 0)
    cuts = np.array_split(np.arange(len(whole)), 4)
    pieces = []
    for rows in cuts:  # each piece with a dictionary of its own strings, in another order
        piece = whole.take(rows)
        used = sorted({int(i) for i in np.concatenate([piece.name, piece.cat]) if i >= 0}, reverse=True)
        remap = np.full(len(whole.strings) + 1, -1, np.int64)
        remap[used] = np.arange(len(used))
        pieces.append(FlatSegment(replace(piece, strings=[whole.strings[i] for i in used],
                                          name=remap[piece.name], cat=remap[piece.cat]), rank=3))
    split = TraceTable(pieces + [s for s in table.segments if s.kind != "slices"], table.traces)
    a = step_waits.step_rows(step_waits.table_inputs(table, 0, 3))
    b = step_waits.step_rows(step_waits.table_inputs(split, 0, 3))
    assert len(a) == 5 and np.array_equal(a, b)
