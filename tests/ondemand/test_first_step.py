"""An iteration request that arrives before the process's first step (issue 40 item 4): it waits for that
step (bounded: XPUPROF_ONDEMAND_FIRST_STEP_WAIT_S) and records the iterations asked, in 10 of 10 runs, through
the real dynolog daemon; the trace says it waited. Before, it fell back to 500 ms at once and traced 0
optimizer steps. (A program that never steps falls back after the wait: test_daemon_requests.)"""
from __future__ import annotations

import pytest

from odhelpers import PYTHON, Program, client_env, events, load_trace, needs_daemon, wait_for_file, write_program

pytestmark = [pytest.mark.slow, needs_daemon]

# xpuprof first (it registers at once), torch only once the test says so: the request is certainly picked
# up before the first step, while torch is not even imported yet
LATE_TORCH = """
import logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
import xpuprof
stop, go = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
import torch
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 16)
while not os.path.exists(stop):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.002)
"""

RUNS = 10  # at once: ten torch imports and trainings on this machine's cores are the "loaded machine"


def test_iterations_requested_before_the_first_step_are_recorded(daemon, sockdir):
    prog = write_program(sockdir, LATE_TORCH)
    runs = []
    for run in range(RUNS):
        stop, go = sockdir / f"stop{run}", sockdir / f"go{run}"
        p = Program([PYTHON, str(prog), str(stop), str(go)], client_env(sockdir, KINETO_LOG_LEVEL="6"), sockdir, stop)
        runs.append((run, p, go))
    for run, p, go in runs:
        p.out.wait("ready")
        daemon.wait_registered(p.command_pid)
        config = (f"ACTIVITIES_LOG_FILE={sockdir}/it{run}.json\nPROFILE_START_ITERATION=0\n"
                  "PROFILE_START_ITERATION_ROUNDUP=1\nACTIVITIES_ITERATIONS=3\nACTIVITIES_WARMUP_PERIOD_SECS=0")
        assert daemon.request(config, pids=[p.command_pid])["activityProfilersTriggered"] == [p.command_pid]
    for run, p, go in runs:
        p.err.wait(r"on-demand request accepted: 3 iteration")
        go.touch()  # now torch imports and the program steps
    recorded = 0
    for run, p, go in runs:
        trace = load_trace(wait_for_file(sockdir / f"it{run}_{p.command_pid}.json", timeout=180))
        assert p.finish() == 0
        od = trace["ondemand"]
        assert "iterations" not in od.get("notes", {}), (run, od)
        assert od["first_step_wait_ms"] >= 0 and od["last_iteration"] - od["first_iteration"] + 1 == 3, (run, od)
        step_ranges = [e for e in events(trace) if e["name"].startswith("ProfilerStep#")]
        assert len(step_ranges) == 3, (run, [e["name"] for e in step_ranges])
        assert sum(e["name"].startswith("Optimizer.step#SGD.step") for e in events(trace)) >= 3, run
        recorded += 1
    assert recorded == RUNS
