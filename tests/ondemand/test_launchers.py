"""torchrun (2 ranks) and Debian's Open MPI mpirun (2 ranks) under `xpuprof exec`: one trace per rank, the
rank inside it, none for the launcher; on demand, a request naming the launcher's pid reaches its ranks."""
from __future__ import annotations

import os
import socket
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odhelpers import PYTHON, Program, client_env, load_trace, needs_daemon, wait_for_file, write_program
from test_exec import XPUPROF, base_env, traces

pytestmark = pytest.mark.slow

TORCHRUN = Path(PYTHON).with_name("torchrun")
MPIRUN = shutil.which("mpirun")
RANK_SCRIPT = "import os, xpuprof\nwith xpuprof.record_function('rank-work'):\n    sum(range(10000))\n"


def _ranks(found):
    return sorted(t["distributedInfo"]["rank"] for t in found)


@pytest.mark.skipif(not TORCHRUN.exists(), reason=f"torchrun is not installed ({TORCHRUN})")
def test_torchrun_two_ranks_two_traces(tmp_path):
    script = write_program(tmp_path, RANK_SCRIPT)
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", str(TORCHRUN), "--standalone",
                           "--nproc-per-node", "2", str(script)], capture_output=True, text=True, env=base_env(),
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = traces(tmp_path / "t")
    assert _ranks(found) == [0, 1]  # the launcher itself wrote none
    assert all(t["distributedInfo"]["world_size"] == 2 and t["distributedInfo"]["launcher"] == "torchrun" for t in found)
    # each rank's file is its own process's: <host>_<pid>.<ts>.pt.trace.json, the rank inside
    names = [os.path.basename(t["traceName"]) for t in found]
    assert len(set(names)) == 2 and all(n.startswith(f"{socket.gethostname()}_") for n in names), names


@pytest.mark.skipif(MPIRUN is None, reason="Open MPI's mpirun is not installed (apt-get install openmpi-bin; "
                    ".ci/run installs it when it runs as root)")
def test_mpirun_two_ranks_two_traces(tmp_path):
    script = write_program(tmp_path, RANK_SCRIPT)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", MPIRUN, *root, "--oversubscribe",
                           "-np", "2", PYTHON, str(script)], capture_output=True, text=True, env=base_env(), timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = traces(tmp_path / "t")
    assert _ranks(found) == [0, 1]
    assert all(t["distributedInfo"]["launcher"] == "openmpi" for t in found)


ON_DEMAND_RANK = textwrap.dedent("""
    import os, sys, time
    stop = sys.argv[1]
    # one write() each: both ranks share the launcher's stdout, and a print of several pieces
    # (unbuffered under the launcher) interleaved as "readyready 0 ..." once
    os.write(1, f"ready {os.environ['RANK']} {os.getpid()}\\n".encode())
    while not os.path.exists(stop):
        sum(range(5000))
        time.sleep(0.005)
""")


@needs_daemon
@pytest.mark.skipif(not TORCHRUN.exists(), reason=f"torchrun is not installed ({TORCHRUN})")
def test_a_request_to_the_launchers_pid_reaches_its_ranks(daemon, sockdir):
    """`dyno gputrace --pids <torchrun pid>`: the ranks register with their ancestors (the launcher among
    them); the launcher does not register itself."""
    script = write_program(sockdir, ON_DEMAND_RANK)
    env = client_env(sockdir, XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    p = Program([*XPUPROF, "exec", "--on-demand", "--", str(TORCHRUN), "--standalone",
                 "--nproc-per-node", "2", str(script), str(sockdir / "stop")], env, sockdir, sockdir / "stop")
    ranks = {int(m.group(1)): int(m.group(2)) for m in p.out.wait_all(r"ready (\d) (\d+)", 2)}
    for pid in ranks.values():
        daemon.wait_registered(pid)
    launcher_pid = p.command_pid  # torchrun, exec's child
    config = (f"ACTIVITIES_LOG_FILE={sockdir}/job.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=200\n"
              "ACTIVITIES_WARMUP_PERIOD_SECS=0")
    answer = daemon.request(config, pids=[launcher_pid], process_limit=8)
    assert sorted(answer["activityProfilersTriggered"]) == sorted(ranks.values())
    for rank, pid in ranks.items():
        trace = load_trace(wait_for_file(sockdir / f"job_{pid}.json"))
        assert trace["distributedInfo"]["rank"] == rank
    assert p.finish() == 0
    assert daemon.log.count(rf"Registered process \({launcher_pid}[,)]") == 0
