"""What `xpuprof trigger` says comes from the processes (issues 39 and 40): where each trace was written
(it waits for it), a process that exits before writing (exit 1), a pending capture cancelled and the next
request served (not "busy" forever), and the default trace name by the one rule."""
from __future__ import annotations

import re
import socket
import subprocess

import pytest

from odhelpers import IMPORTED_PROGRAM, PYTHON, Program, client_env, load_trace, needs_daemon, write_program

pytestmark = pytest.mark.slow
XPUPROF = [PYTHON, "-m", "xpuprof"]
WAIT = ["--embedded", "--wait", "4"]  # several of the programs' 1 s polls, on a loaded machine


def start_program(sockdir):
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir), sockdir, sockdir / "stop")
    p.out.wait("ready")
    p.err.wait(r"no on-demand daemon answers")
    return p


def trigger(*args, env, timeout=180):
    return subprocess.run([*XPUPROF, "trigger", *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_the_trigger_says_where_each_trace_was_written(sockdir):
    """No --log-file: the process names its trace by the one rule in its trace directory, writes it, and
    the trigger prints that path once it exists (before: a path made up from the trigger's own settings)."""
    p = start_program(sockdir)
    proc = trigger(*WAIT, "--pid", str(p.pid), "--duration-ms", "200", env=client_env(sockdir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "embedded: 1 matched, 1 triggered" in proc.stdout
    path = re.search(rf"pid {p.pid}: wrote (\S+)", proc.stdout).group(1)
    name = path.rsplit("/", 1)[1]
    assert path.startswith(str(sockdir) + "/")
    assert re.fullmatch(rf"{re.escape(socket.gethostname())}_{p.pid}\.\d+\.pt\.trace\.json", name)
    assert load_trace(path)["ondemand"]["duration_ms"] == 200
    assert p.finish() == 0


def test_a_process_that_exits_before_writing_is_said_and_the_trigger_fails(sockdir):
    p = start_program(sockdir)
    env = client_env(sockdir)
    trig = subprocess.Popen([*XPUPROF, "trigger", *WAIT, "--pid", str(p.pid), "--duration-ms", "60000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    p.err.wait(r"on-demand capture recording")
    p.kill()
    out, err = trig.communicate(timeout=120)
    assert trig.returncode == 1, out + err
    assert f"pid {p.pid}: exited before writing its trace" in out
    assert "wrote" not in out


def test_a_pending_capture_is_cancelled_and_the_next_request_runs(sockdir):
    """A request with a start ten minutes ahead holds the process (every later request is busy, listed in
    its trace); `trigger --cancel` drops it, nothing is written, and the next request is traced."""
    p = start_program(sockdir)
    env = client_env(sockdir)
    pending = trigger(*WAIT, "--pid", str(p.pid), "--start-delay", "600", "--no-wait", env=env)
    assert pending.returncode == 0 and f"pid {p.pid}: capture accepted" in pending.stdout, pending.stdout
    busy = trigger(*WAIT, "--pid", str(p.pid), "--duration-ms", "100", "--no-wait", env=env)
    assert busy.returncode == 1 and f"pid {p.pid}: busy:" in busy.stdout, busy.stdout
    cancel = trigger(*WAIT, "--pid", str(p.pid), "--cancel", env=env)
    assert cancel.returncode == 0 and f"pid {p.pid}: cancelled before it recorded" in cancel.stdout, cancel.stdout
    nxt = trigger(*WAIT, "--pid", str(p.pid), "--duration-ms", "100", env=env)
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    path = re.search(rf"pid {p.pid}: wrote (\S+)", nxt.stdout).group(1)
    (listed,) = load_trace(path)["ondemand"]["requests_ignored"]  # the busy one, carried from the cancelled capture
    assert listed["asked"].startswith("100 ms")
    assert p.finish() == 0
    assert len(list(sockdir.glob("*.pt.trace.json"))) == 1


@needs_daemon
def test_through_a_local_dynolog_the_processes_answer_too(daemon, sockdir):
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir), sockdir, sockdir / "stop")
    p.out.wait("ready")
    daemon.wait_registered(p.pid)
    proc = trigger("--port", str(daemon.port), "--pid", str(p.pid), "--duration-ms", "200", env=client_env(sockdir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"localhost:{daemon.port}: 1 matched, 1 triggered" in proc.stdout
    path = re.search(rf"pid {p.pid}: wrote (\S+)", proc.stdout).group(1)
    assert load_trace(path)["ondemand"]["trace_id"]
    assert p.finish() == 0
