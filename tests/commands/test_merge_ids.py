"""A merged view's pids are ones every viewer keeps, for any number of ranks (issue 38), the view says which
rank and process each pid is, views written before still read, and each rank's rows are laid out.

Before: ``xpuprof merge`` gave rank r's processes pids ``(r + 1) * 10**9 + i``: from rank 4 on they passed
2**32 - 1, and Perfetto, which keeps pids within 32 bits, merged processes of different ranks (31 JSON pids
became 22 processes for 6 ranks).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from xpuprof.analysis.merge import merge_traces
from xpuprof.analysis.report import build_report
from xpuprof.trace.ids import MAX_ID, merged_row_ranks
from xpuprof.trace.layout.check import nesting_report
from xpuprof.trace.read.kineto import read_trace

REPO = Path(__file__).resolve().parents[2]
MERGED_V1 = REPO / "tests" / "data" / "merged_v1" / "job.merged.json"  # written by merge before this change


def small_rank_trace(path: Path, rank: int, world: int, *, events: int = 12) -> Path:
    """A rank's trace as torch.profiler writes one: a host process, a device process, the Spans rows."""
    ev = [{"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python"}},
          {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
          {"ph": "M", "name": "process_sort_index", "pid": 0, "tid": 0, "args": {"sort_index": 5000000}}]
    for i in range(events // 2):
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 4242, "tid": 4242, "ts": 10.0 + 20 * i,
                   "dur": 8.0, "args": {"External id": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 14.0 + 20 * i, "dur": 5.0,
                   "args": {"External id": i + 1, "stream": 7, "device": 0, "correlation": i + 1}})
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": 0.0, "dur": 200.0})
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": world},
                                "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": ev}))
    return path


def _merged(tmp_path: Path, ranks: int) -> tuple[dict, Path]:
    d = tmp_path / "ranks"
    d.mkdir()
    paths = [small_rank_trace(d / f"w.rank{r}.pt.trace.json", r, ranks) for r in range(ranks)]
    out = tmp_path / "job.merged.json"
    merge_traces(paths, out)
    return json.loads(out.read_text()), out


def test_merged_pids_stay_in_range_and_say_their_rank(tmp_path):
    data, out = _merged(tmp_path, 32)
    events = data["traceEvents"]
    pids = {e["pid"] for e in events if isinstance(e.get("pid"), int)}
    assert len(pids) == 32 * 3 and all(0 <= p <= MAX_ID for p in pids)  # host, device, Spans per rank
    merged = data["mergedRanks"]
    assert merged["pid_stride"] == 10
    table = {pid: (rank, original) for pid, rank, original in merged["pids"]}
    assert set(table) == pids
    assert {(r, o) for r, o in table.values()} == {(r, o) for r in range(32) for o in (4242, 0, "Spans")}
    assert all(pid // merged["pid_stride"] - 1 == rank for pid, (rank, _) in table.items())  # a pid reads as its rank
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    assert all(names[pid].startswith(f"[rank {rank}] ") for pid, (rank, _) in table.items())
    sort = {e["pid"]: e["args"]["sort_index"] for e in events if e.get("ph") == "M" and e["name"] == "process_sort_index"}
    assert all(0 <= v <= MAX_ID for v in sort.values())
    # every row finds its rank again: the reader, and the report
    t = read_trace(out)
    assert sorted(set(t.slices.rank.tolist())) == list(range(32))
    assert Counter(t.slices.rank.tolist()) == {r: 13 for r in range(32)}
    assert build_report([out]).ranks == list(range(32))


def test_a_merged_view_written_before_still_reads():
    t = read_trace(MERGED_V1)
    assert t.traces[0].merged_ranks == [0, 1]
    ranks = t.slices.rank.tolist()
    assert set(ranks) == {0, 1} and -1 not in ranks  # pids (r + 1) * 10**9 + i: the stride of then
    report = build_report([MERGED_V1])
    assert report.ranks == [0, 1]


def test_merged_row_ranks_reads_each_scheme():
    pid = np.array([10, 21, 3_000_000_001, 7], np.int64)
    ints = np.ones(4, bool)
    assert merged_row_ranks(pid, ints, {"pids": [[10, 0, 1], [21, 1, 5]]}).tolist() == [0, 1, -1, -1]
    assert merged_row_ranks(pid, ints, {"pid_stride": 10}).tolist() == [0, 1, 299999999, -1]
    assert merged_row_ranks(pid, ints, {}).tolist() == [-1, -1, 2, -1]  # views before: 10**9


def test_merge_lays_out_each_ranks_rows(tmp_path):
    """A rank trace torch.profiler wrote with interleaving ranges (asyncio tasks) is laid out in the view."""
    d = tmp_path / "r"
    d.mkdir()
    paths = [small_rank_trace(d / f"w.rank{r}.pt.trace.json", r, 2) for r in range(2)]
    data = json.loads(paths[1].read_text())
    data["traceEvents"] += [{"ph": "X", "cat": "user_annotation", "name": f"task{i}", "pid": 4242, "tid": 4242,
                             "ts": 300.0 + 5 * i, "dur": 50.0} for i in range(4)]
    paths[1].write_text(json.dumps(data))
    assert nesting_report(paths[1]).improper == 3
    out = tmp_path / "job.merged.json"
    merge_traces(paths, out)
    assert nesting_report(out).improper == 0
    merged = json.loads(out.read_text())
    assert merged["mergedRanks"]["layout"]["1"]["laneLayout"]["moved_slices"] == 3
    assert "0" not in merged["mergedRanks"]["layout"]
    assert sum(1 for e in merged["traceEvents"] if e.get("ph") == "X") == 2 * 13 + 4


def test_a_metadata_pid_beyond_64_bits_is_laid_out_without_a_traceback(tmp_path, capsys):
    """Found by the hostile-input fuzz once merge ran on the table: a metadata row's pid of 2**63 (no int64 holds
    it) reached the layout's id remap, which built an int64 array of the pids to rewrite and raised
    OverflowError. Such a pid is given an id in range like any other; no row of the int64 columns can hold it."""
    for rank in (0, 1):
        (tmp_path / f"r{rank}.json").write_text(json.dumps(
            {"distributedInfo": {"rank": rank},
             "traceEvents": [{"ph": "X", "ts": 0, "dur": 1, "name": "a", "pid": 1, "tid": 1},
                             {"ph": "M", "pid": 2 ** 63, "name": "process_name", "args": {"name": "p"}}]}))
    out = tmp_path / "m.json"
    from xpuprof.cli import main

    rc = main(["merge", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"), "-o", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and rc == 0, err
    pids = {e["pid"] for e in json.loads(out.read_text())["traceEvents"] if isinstance(e.get("pid"), int)}
    assert all(0 <= p < 2 ** 31 for p in pids), pids
