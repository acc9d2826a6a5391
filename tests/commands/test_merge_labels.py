"""Merging traces that carry their own process_labels (the host "CPU" row, device labels)."""
import json

import xpuprof
from xpuprof.analysis.merge import merge_traces


def _rank_trace(tmp_path, monkeypatch, rank):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with xpuprof.profile(backends=["sim"]) as prof:
        with xpuprof.record_function("step"):
            pass
    return prof.export_chrome_trace(tmp_path / f"r{rank}.pt.trace.json")


def test_each_merged_process_has_one_labels_row_keeping_rank_and_own_label(tmp_path, monkeypatch):
    paths = [_rank_trace(tmp_path, monkeypatch, r) for r in (0, 1)]
    out = tmp_path / "job.merged.json"
    merge_traces(paths, out)
    events = json.loads(out.read_text())["traceEvents"]
    labels = [e for e in events if e.get("ph") == "M" and e["name"] == "process_labels"]
    pids = [e["pid"] for e in labels]
    assert len(pids) == len(set(pids))  # a second row would replace the first in viewers
    values = {e["args"]["labels"] for e in labels}
    # the device's label as the XPU backend writes it (the sim's rows are the real emit stage's)
    assert {"rank 0,CPU", "rank 1,CPU", "rank 0,XPU 0", "rank 1,XPU 0"} <= values
