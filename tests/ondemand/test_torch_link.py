"""torch 2.13 with KINETO_USE_DAEMON=1 beside xpuprof, against the real daemon: xpuprof imported first gives
exactly one trace (xpuprof's; torch's Kineto never registers, even after xpuprof starts torch's profiler for
its ops); torch imported first keeps torch's client, and xpuprof says so once and stays out of its way."""
from __future__ import annotations

import importlib.util

import pytest

from odhelpers import PYTHON, Program, client_env, events, load_trace, needs_daemon, wait_for_file, write_program

pytestmark = [pytest.mark.slow, needs_daemon,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")]

PROGRAM = """
import logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
order, stop = sys.argv[1], sys.argv[2]
if order == "xpuprof_first":
    import xpuprof, torch
else:
    import torch, xpuprof
import threading
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 32)
def side():  # a second thread with torch work of its own (a data loader thread, say)
    while not os.path.exists(stop):
        torch.zeros(8).add_(1)
        time.sleep(0.005)
threading.Thread(target=side, daemon=True).start()
print("ready", os.environ.get("KINETO_USE_DAEMON"), flush=True)
while not os.path.exists(stop):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.005)
"""


def client_sockets(sockdir):
    return sorted(p.name for p in sockdir.iterdir() if p.name.startswith("dynoconfigclient"))


def run_order(order, daemon, sockdir, duration_ms: int = 300):
    prog = write_program(sockdir, PROGRAM)
    p = Program([PYTHON, str(prog), order, str(sockdir / "stop")], client_env(sockdir, KINETO_LOG_LEVEL="0"),
                sockdir, sockdir / "stop")
    # the opt-in stays in the environment as the user set it, whichever came first (issue 40)
    assert p.out.wait(r"ready (\S+)").group(1) == "1"
    daemon.wait_registered(p.command_pid)
    config = (f"ACTIVITIES_LOG_FILE={sockdir}/t.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS={duration_ms}\n"
              "ACTIVITIES_WARMUP_PERIOD_SECS=0")
    answer = daemon.request(config, pids=[p.command_pid])
    assert answer["activityProfilersTriggered"] == [p.command_pid]
    trace = load_trace(wait_for_file(sockdir / f"t_{p.command_pid}.json"))
    sockets = client_sockets(sockdir)
    assert p.finish() == 0
    return p, trace, sockets


def test_xpuprof_first_gives_one_trace_and_torch_never_registers(daemon, sockdir):
    p, trace, sockets = run_order("xpuprof_first", daemon, sockdir)
    assert daemon.log.count(rf"Registered process \({p.command_pid}[,)]") == 1
    assert len(sockets) == 1  # one client endpoint in the process: ours
    assert trace["ondemand"]["source"] == "daemon"
    assert trace["torch_ops"]["ops"] > 0  # torch's ops, recorded by xpuprof: every thread's, as Kineto's
    ops = [e for e in events(trace) if e.get("cat") == "cpu_op"]
    assert {e["name"] for e in ops} >= {"aten::linear", "aten::add_"}
    assert len({e["tid"] for e in ops}) >= 2
    assert "torch was imported before xpuprof" not in p.err.text()
    assert list(sockdir.glob(f"t_{p.command_pid}*")) == [sockdir / f"t_{p.command_pid}.json"]


CHILDREN = """
import os, subprocess, sys, time
import xpuprof, torch
stop = sys.argv[1]
print("env", os.environ.get("KINETO_USE_DAEMON"), flush=True)
print(subprocess.run(["sh", "-c", "echo shell=$KINETO_USE_DAEMON"], capture_output=True, text=True).stdout.strip(),
      flush=True)
# a child that is not xpuprof: libtorch alone, as in another venv; Kineto's own client must register it
child = subprocess.Popen([sys.executable, "-c", "import os, sys, time, torch\\nprint('child', os.getpid(), "
                          "flush=True)\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)", stop])
while not os.path.exists(stop):
    time.sleep(0.05)
child.wait()
"""


def test_children_keep_kinetos_opt_in_and_register_themselves(daemon, sockdir):
    """`import xpuprof` leaves KINETO_USE_DAEMON in the environment: a shell sees it, and a libtorch child
    without xpuprof registers with dynolog through torch's own client; the parent registers once (xpuprof's)."""
    prog = write_program(sockdir, CHILDREN)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir, KINETO_LOG_LEVEL="6"), sockdir,
                sockdir / "stop")
    assert p.out.wait(r"^env (\S+)").group(1) == "1"
    p.out.wait(r"^shell=1$")
    child = int(p.out.wait(r"^child (\d+)").group(1))
    daemon.wait_registered(p.command_pid)
    daemon.wait_registered(child, timeout=30)
    assert p.finish() == 0
    assert daemon.log.count(rf"Registered process \({p.command_pid}[,)]") == 1


def test_torch_first_keeps_torchs_client_and_says_so_once(daemon, sockdir):
    # Kineto's own capture: 300 ms held no cpu_op once in CI with the slow tier and the sanitizer tier sharing
    # two CPUs (the program's loop starved); a second gives its training loop time to run under load
    p, trace, sockets = run_order("torch_first", daemon, sockdir, duration_ms=1000)
    assert p.err.count(r"torch was imported before xpuprof with KINETO_USE_DAEMON set") == 1
    assert daemon.log.count(rf"Registered process \({p.command_pid}[,)]") == 1
    assert len(sockets) == 1  # torch's; xpuprof opened none
    assert "ondemand" not in trace  # Kineto's own trace
    assert any(e.get("cat") == "cpu_op" for e in events(trace))
    assert "on-demand config received" not in p.err.text()


OWN_PROFILER = """
import logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
import xpuprof, torch
stop, go, own = sys.argv[1], sys.argv[2], sys.argv[3]
x = torch.ones(16)
print("ready", flush=True)
while not os.path.exists(stop):
    x = torch.tanh(x) * 1.0001
    if os.path.exists(go) and not os.path.exists(own):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                x = torch.sigmoid(x)
        prof.export_chrome_trace(own)
        print("own profile written", flush=True)
    time.sleep(0.002)
"""


def test_the_programs_own_torch_profiler_takes_over_from_an_on_demand_capture(daemon, sockdir):
    """A request must never break the job: when the program starts torch.profiler during an on-demand
    capture, the capture stops first (its trace says so) and the program's profiler runs as if alone."""
    prog = write_program(sockdir, OWN_PROFILER)
    own, go = sockdir / "own.json", sockdir / "go"
    p = Program([PYTHON, str(prog), str(sockdir / "stop"), str(go), str(own)], client_env(sockdir, KINETO_LOG_LEVEL="6"),
                sockdir, sockdir / "stop")
    p.out.wait("ready")
    daemon.wait_registered(p.command_pid)
    daemon.request(f"ACTIVITIES_LOG_FILE={sockdir}/od.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=30000\n"
                   "ACTIVITIES_WARMUP_PERIOD_SECS=0", pids=[p.command_pid])
    p.err.wait(r"on-demand capture recording")
    go.touch()
    p.out.wait("own profile written")
    trace = load_trace(wait_for_file(sockdir / f"od_{p.command_pid}.json"))
    assert p.finish() == 0
    od = trace["ondemand"]
    assert "torch.profiler" in od["notes"]["preempted"] and od["stopped_ms"] - od["started_ms"] < 30000
    theirs = load_trace(own)
    assert any(e.get("name") == "aten::sigmoid" for e in events(theirs))
    assert "Traceback" not in p.err.text()
