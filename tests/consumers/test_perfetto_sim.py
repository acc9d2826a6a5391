"""The sim's traces as Perfetto's own trace processor imports them (issue 38): every vendor flavour's
calls, device rows and arrows where a viewer must find them, and no process merged into another.

- XPU syncs and overhead keep a process of their own: Kineto's pid -1 would become 0 there, merging
  them into device 0's process and renaming it "XPU Sync and Overhead".
- Every launch arrow starts at the launch call (a call with its op's own bounds made Perfetto draw the
  call above the op and start the arrow at the op), with torch ops as with ranges.
- No import error or data loss in ``stats``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from perfetto_sql import query

import xpuprof

pytestmark = pytest.mark.slow

ROWS = """select p.pid as pid, p.name as process, s.category as cat, count(*) as n
          from slice s join thread_track tt on s.track_id = tt.id join thread using (utid) join process p using (upid)
          group by p.upid, s.category"""
FLOWS = """select so.category as out_cat, so.name as out_name, si.category as in_cat, count(*) as n
           from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id group by 1, 2, 3"""
PROBLEMS = "select name, idx, value from stats where severity != 'info' and value > 0"
LAUNCH_CALLS = {"urEnqueueKernelLaunch", "urEnqueueUSMMemcpy", "urQueueFinish", "cudaLaunchKernel", "cudaMemcpyAsync",
                "cudaStreamSynchronize", "hipLaunchKernel", "hipMemcpyAsync", "hipStreamSynchronize"}


def test_xpu_sync_rows_keep_a_process_of_their_own(sim_xpu_metrics, tmp_path):
    from xpuprof.backends.xpu.emit import OVERHEAD_PID

    rows = query(sim_xpu_metrics.path, ROWS, tmp_path)
    processes = {(int(r["pid"]), r["process"]) for r in rows}
    assert len({pid for pid, _ in processes}) == len(processes)  # one process per pid
    by_cat = {}
    for r in rows:
        by_cat.setdefault(r["cat"], set()).add((int(r["pid"]), r["process"]))
    assert by_cat["xpu_sync"] == {(OVERHEAD_PID, "XPU Sync and Overhead")}
    assert by_cat["kernel"] == {(0, "xpuprof simulated accelerator")}  # device 0 keeps its own name
    assert not query(sim_xpu_metrics.path, PROBLEMS, tmp_path)


@pytest.mark.parametrize("flavour", ["sim_xpu_metrics", "sim_cuda", "sim_hip"])
def test_every_launch_arrow_starts_at_its_call(flavour, request, tmp_path):
    facts = request.getfixturevalue(flavour)
    flows = query(facts.path, FLOWS, tmp_path)
    assert sum(int(f["n"]) for f in flows) == len([e for e in facts.events if e.get("ph") == "s"]) > 0
    assert {f["out_name"] for f in flows} <= LAUNCH_CALLS, flows
    assert not query(facts.path, PROBLEMS, tmp_path)


def test_torch_op_launch_arrows_start_at_the_call_not_the_op(tmp_path):
    """With torch ops the launch call lies strictly inside its op: each arrow starts at the call."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    sys.path.insert(0, str(Path(__file__).parents[1] / "torch"))
    from resnet_like import ResNet18

    torch.manual_seed(0)
    model, x = ResNet18().eval(), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        model(x)
        with xpuprof.profile(backends=["sim"], activities=["cpu", "xpu"]) as prof:
            model(x)
    path = prof.export_chrome_trace(tmp_path / "resnet.json")
    starts = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "s"]
    flows = query(path, FLOWS, tmp_path)
    assert sum(int(f["n"]) for f in flows) == len(starts) > 20
    assert {(f["out_cat"], f["out_name"]) for f in flows} == {("xpu_runtime", "urEnqueueKernelLaunch")}, flows
    assert not query(path, PROBLEMS, tmp_path)
