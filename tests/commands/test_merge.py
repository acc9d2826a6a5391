import json

import pytest

from xpuprof.analysis.merge import FLOW_ID_STRIDE, MergeError, merge_traces
from xpuprof.analysis.report import build_report
from xpuprof.cli import main


def _kernels_by_rank(events):
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    out = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and not e["name"].startswith("metrics: "):
            out.setdefault(names[e["pid"]], []).append(e)
    return out


@pytest.mark.parametrize("align, expected_gap_us", [("epoch", 5000.0), ("start", 0.0), ("step", 0.0)])
def test_merge_gives_each_rank_its_rows_and_aligns_clocks(rank_traces, tmp_path, align, expected_gap_us, kernel_spec):
    out = tmp_path / "job.merged.json"
    info = merge_traces(rank_traces, out, align=align)
    assert info.ranks == [0, 1]
    data = json.loads(out.read_text())  # plain json.load works on the merged file
    assert "distributedInfo" not in data and data["mergedRanks"]["ranks"] == [0, 1]
    by_rank = _kernels_by_rank(data["traceEvents"])
    assert set(by_rank) == {"[rank 0] XPU 0", "[rank 1] XPU 0"}
    r0, r1 = by_rank["[rank 0] XPU 0"], by_rank["[rank 1] XPU 0"]
    assert {e["pid"] for e in r0}.isdisjoint({e["pid"] for e in r1})
    assert min(e["ts"] for e in r1) - min(e["ts"] for e in r0) == pytest.approx(expected_gap_us, abs=0.01)
    labels = [e for e in data["traceEvents"] if e.get("name") == "process_labels"]
    assert {e["args"]["labels"] for e in labels} == {"rank 0", "rank 1"}
    assert data["traceEvents"][-1]["name"] == "Record Window End"
    # The merged trace still reports like its inputs.
    rep = build_report([out])
    assert {s.name: s.calls for s in rep.stats}["gemm_kernel"] == 2 * kernel_spec["gemm_kernel"][0]
    assert 0 < {s.name: s for s in rep.stats}["gemm_kernel"].metrics["XVE_STALL"]


def test_duplicate_ranks_and_cli(tmp_path, capsys, make_trace):
    a = make_trace(tmp_path / "a.pt.trace.json", 0)
    b = make_trace(tmp_path / "b.pt.trace.json", 0)
    with pytest.raises(MergeError, match=r"claim rank\(s\) \[0\]"):
        merge_traces([a, b], tmp_path / "m.json")
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 2
    assert "claim rank" in capsys.readouterr().err
    c = make_trace(tmp_path / "c.pt.trace.json", 1)
    out = tmp_path / "m.merged.json.gz"
    assert main(["merge", str(a), str(c), "-o", str(out), "--align", "start"]) == 0
    assert "merged ranks 0, 1" in capsys.readouterr().out
    assert build_report([out]).ranks == [0, 1]  # the ranks a merged view holds (mergedRanks), not one rank


def test_a_merged_view_cannot_be_named_like_a_rank_trace(tmp_path):
    """TensorBoard parses every *.pt.trace.json in a logdir (a merged file crashed its
    overview) and HTA reads one rank per file; the merged view is refused under such a name."""
    from xpuprof.analysis.merge import MergeError

    with pytest.raises(MergeError, match=r"must not be named like a rank trace.*job\.merged\.json"):
        merge_traces([tmp_path / "a.json"], tmp_path / "job.pt.trace.json.gz")


def test_merged_times_are_exact_to_the_ns_at_epoch_magnitudes(tmp_path):
    """A rank trace with epoch µs times and ns fractions (HTA's ns_resolution trace, base 0): the merged view holds
    every time exactly. Before, merge added float µs and rounded (1712195495502094.565 became ...094.5: 65 ns off)."""
    from xpuprof.trace.read.kineto import read_trace

    times = ["1712195495502094.565", "1712195495503313.409", "1712195495503313.999"]
    for r in (0, 1):
        rows = ",".join(f'{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 7, "tid": 7, "ts": {ts}, "dur": 1.001}}'
                        for i, ts in enumerate(times))
        (tmp_path / f"w.rank{r}.pt.trace.json").write_text(
            f'{{"distributedInfo": {{"rank": {r}}}, "baseTimeNanoseconds": 0, "traceEvents": [{rows}]}}')
    out = tmp_path / "out" / "job.merged.json"
    merge_traces([tmp_path / "w.rank0.pt.trace.json", tmp_path / "w.rank1.pt.trace.json"], out)
    view = read_trace(out)
    want = [int(t.replace(".", "")) for t in times]
    assert sorted(view.slices.ts.tolist()) == sorted(want * 2)
    assert view.slices.dur.tolist() == [1001] * 6


def test_every_kind_of_row_is_remapped_as_columns(tmp_path):
    """The merged view's rows are the ranks' columns rewritten: an int pid and a row label ("Spans") both get the
    rank's merged pid, a row without a pid keeps none, counters and instants move with their process, an int flow id
    is offset by rank (a string one is kept), each rank's closing instant gives way to one for the view, and
    --align step shifts every row of a rank by the same amount."""
    for r in (0, 1):
        ev = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "host"}},
              {"ph": "X", "name": "nopid", "tid": 3, "ts": 5.0, "dur": 1.0},
              {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 7, "tid": 7, "ts": 10.0, "dur": 5.0},
              {"ph": "X", "cat": "cpu_op", "name": "b", "pid": "Spans", "tid": "row", "ts": 12.0, "dur": 1.0},
              {"ph": "C", "name": "mem", "pid": 7, "tid": 0, "ts": 11.0, "args": {"used": 3.5}},
              {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": "s-1", "pid": 7, "tid": 7, "ts": 10.5},
              {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 7, "tid": 7, "ts": 11.5, "bp": "e"},
              {"ph": "i", "s": "t", "name": "inst", "pid": 7, "tid": 7, "ts": 13.0},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 7, "tid": 7, "ts": 9.0 + 3 * r,
               "dur": 20.0},
              {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 40.0}]
        (tmp_path / f"r{r}.json").write_text(json.dumps({"distributedInfo": {"rank": r}, "baseTimeNanoseconds": 10**6,
                                                         "traceEvents": ev}))
    out = tmp_path / "v" / "job.merged.json"
    info = merge_traces([tmp_path / "r0.json", tmp_path / "r1.json"], out, align="step")
    assert info.shifts_ns == {0: 0, 1: -3000}
    data = json.loads(out.read_text())
    pids = {(rank, orig): pid for pid, rank, orig in data["mergedRanks"]["pids"]}
    assert set(pids) == {(r, o) for r in (0, 1) for o in (7, "Spans")}
    ev = data["traceEvents"]
    for r in (0, 1):
        host, spans = pids[(r, 7)], pids[(r, "Spans")]
        mine = [e for e in ev if e.get("pid") in (host, spans) and e["ph"] != "M"]
        want = [("X", "a", 10.0), ("X", "b", 12.0), ("C", "mem", 11.0), ("s", "ac2g", 10.5), ("f", "ac2g", 11.5),
                ("i", "inst", 13.0), ("X", "ProfilerStep#4", 9.0 + 3 * r)]
        assert sorted((e["ph"], e.get("name"), e["ts"]) for e in mine) == sorted(
            (ph, name, ts - 3 * r) for ph, name, ts in want)  # rank 1's step on rank 0's, its rows with it
        assert {e["id"] for e in mine if e["ph"] in "sf"} == {"s-1", r * FLOW_ID_STRIDE + 5}
        assert next(e for e in mine if e.get("name") == "b")["tid"] == "row"
    assert sorted(e["ts"] for e in ev if e.get("name") == "nopid") == [5.0 - 3.0, 5.0] and all(
        "pid" not in e for e in ev if e.get("name") == "nopid")
    ends = [e for e in ev if e.get("name") == "Record Window End"]
    assert ends == [ev[-1]] and ends[0]["ts"] == 29.0 and ends[0]["pid"] == ""
