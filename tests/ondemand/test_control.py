"""`xpuprof trigger --pause/--resume`: a running capture of a process under `xpuprof exec` (its whole run, or
an on-demand capture) paused and resumed from outside, through the embedded daemon (each process answers
its outcome) and the real dynolog daemon (the control text passed through); the paused span is in the
written trace and no range starts inside it. A command that finds no capture running is said."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from odhelpers import (IMPORTED_PROGRAM, PYTHON, Program, client_env, events, load_trace, needs_daemon, wait_for_file,
                       write_program)

pytestmark = pytest.mark.slow
XPUPROF = [PYTHON, "-m", "xpuprof"]
EMBEDDED_WAIT_S = "8"  # the embedded daemon's window: several of the programs' 1 s polls, on a loaded machine
# (4 s once saw no poll in CI, with the slow tier on both CPUs)


def exec_env(sockdir, **extra):
    env = client_env(sockdir, XPUPROF_DISABLE_BACKENDS="cuda,rocm", **extra)
    env.pop("KINETO_USE_DAEMON")  # processes under `xpuprof exec` poll without Kineto's opt-in
    return env


def start_exec(sockdir, *exec_args, **env):
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([*XPUPROF, "exec", "--out", str(sockdir / "out"), *exec_args, "--", PYTHON, str(prog),
                 str(sockdir / "stop")], exec_env(sockdir, **env), sockdir, sockdir / "stop")
    p.out.wait("ready")
    return p


def trigger(*args, env, timeout=120):
    return subprocess.run([*XPUPROF, "trigger", *args], capture_output=True, text=True, env=env, timeout=timeout)


def more_steps(p, n=5):
    """Wait until the program has done ``n`` more steps."""
    seen = len(p.out.lines)
    for _ in range(n):
        p.out.wait(r"^step \d+", start=seen)
        seen = len(p.out.lines)


def assert_paused_span_holds_no_range(trace):
    (note,) = [n for n in trace["collection_paused"] if n["source"] == "host"]
    start, end = note["ts"], note["ts"] + note["dur"]
    (span,) = [e for e in events(trace) if e["name"] == "xpuprof collection paused: host"]
    assert (span["ts"], span["dur"]) == (note["ts"], note["dur"])
    work = [e for e in events(trace) if e["name"].startswith("work")]
    before = [e for e in work if e["ts"] < start]
    after = [e for e in work if e["ts"] > end]
    assert before and after  # recorded on both sides of the pause
    assert not [e for e in work if start <= e["ts"] <= end], "a range started while collection was paused"
    steps = sorted(int(e["name"][4:]) for e in work)
    # the steps done while paused are missing from the trace, not merely moved
    assert steps[-1] - steps[0] + 1 > len(steps)


def test_pause_and_resume_a_whole_run_capture_through_the_embedded_daemon(sockdir):
    p = start_exec(sockdir)
    env = exec_env(sockdir)
    more_steps(p)
    paused = trigger("--embedded", "--wait", EMBEDDED_WAIT_S, "--pid", str(p.command_pid), "--pause", env=env)
    assert paused.returncode == 0, paused.stdout + paused.stderr
    assert "embedded: 1 matched, pause sent to 1" in paused.stdout and f"pid {p.command_pid}: paused" in paused.stdout
    more_steps(p)
    again = trigger("--embedded", "--wait", EMBEDDED_WAIT_S, "--pid", str(p.command_pid), "--pause", "--json", env=env)
    assert '"outcomes"' in again.stdout and "already paused" in again.stdout and again.returncode == 0
    resumed = trigger("--embedded", "--wait", EMBEDDED_WAIT_S, "--pid", str(p.command_pid), "--resume", env=env)
    assert resumed.returncode == 0 and f"pid {p.command_pid}: resumed" in resumed.stdout, resumed.stdout
    more_steps(p)
    assert p.finish() == 0
    (path,) = (sockdir / "out").glob("*.pt.trace.json")
    assert_paused_span_holds_no_range(load_trace(path))


def test_a_control_that_finds_no_capture_is_said_by_the_process_and_by_trigger(sockdir):
    p = start_exec(sockdir, "--on-demand")
    proc = trigger("--embedded", "--wait", EMBEDDED_WAIT_S, "--pid", str(p.command_pid), "--pause", env=exec_env(sockdir))
    assert proc.returncode == 1, proc.stdout
    assert f"pid {p.command_pid}: no capture running" in proc.stdout
    p.err.wait(rf"pause request ignored \(pid {p.command_pid}\): no capture is running")
    assert p.finish() == 0
    assert not list((sockdir / "out").glob("*.json"))


@needs_daemon
def test_pause_and_resume_an_on_demand_capture_through_dynolog(daemon, sockdir):
    p = start_exec(sockdir, "--on-demand")
    daemon.wait_registered(p.command_pid)
    env = exec_env(sockdir)
    port = str(daemon.port)
    log_file = sockdir / "ctl.json"
    started = trigger("--port", port, "--pid", str(p.command_pid), "--duration-ms", "600000", "--log-file", str(log_file),
                      "--no-wait", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    # --out given to exec: its on-demand traces go there, named by the one rule (issue 39)
    planned = re.search(rf"pid {p.command_pid}: capture accepted; its trace will be (\S+) ", started.stdout).group(1)
    assert planned.startswith(str(sockdir / "out") + "/") and planned.endswith(".pt.trace.json")
    p.err.wait(r"on-demand capture recording")
    more_steps(p)
    paused = trigger("--port", port, "--pid", str(p.command_pid), "--pause", env=env)
    assert paused.returncode == 0, paused.stdout + paused.stderr
    assert "1 matched, pause sent to 1" in paused.stdout, paused.stdout
    assert f"pid {p.command_pid}: paused" in paused.stdout  # the process answers the trigger on its machine (issue 40)
    p.err.wait(rf"collection paused by a control request \(pid {p.command_pid}\)")
    more_steps(p)
    resumed = trigger("--port", port, "--pid", str(p.command_pid), "--resume", env=env)
    assert resumed.returncode == 0, resumed.stdout
    p.err.wait(rf"collection resumed by a control request \(pid {p.command_pid}\)")
    more_steps(p)
    assert p.finish() == 0  # the capture is cut short at exit and written
    trace = load_trace(wait_for_file(Path(planned)))
    assert_paused_span_holds_no_range(trace)
