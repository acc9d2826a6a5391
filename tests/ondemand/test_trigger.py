"""`xpuprof trigger`: the dyno CLI's request to the real dynolog (what matched, where the traces go, exit
status), one request per host with one shared future start time (two daemons stand for two hosts), and the
embedded daemon on a machine without dynolog (same datagrams; only the user's own processes)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from odhelpers import (IMPORTED_PROGRAM, PYTHON, Daemon, Program, client_env, load_trace, needs_daemon,
                       wait_for_file, write_program)

pytestmark = pytest.mark.slow
XPUPROF = [PYTHON, "-m", "xpuprof"]


def start_program(sockdir, daemon=None, **env):
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir, **env), sockdir, sockdir / "stop")
    p.out.wait("ready")
    if daemon is not None:
        daemon.wait_registered(p.pid)
    else:
        p.err.wait(r"no on-demand daemon answers")
    return p


def trigger(*args, env, timeout=120):
    return subprocess.run([*XPUPROF, "trigger", *args], capture_output=True, text=True, env=env, timeout=timeout)


@needs_daemon
def test_trigger_prints_what_matched_and_where_the_traces_go(daemon, sockdir):
    p = start_program(sockdir, daemon)
    log_file = sockdir / "trig.json"
    proc = trigger("--port", str(daemon.port), "--pid", str(p.pid), "--duration-ms", "200", "--log-file",
                   str(log_file), "--set", "ACTIVITIES_WARMUP_PERIOD_SECS=0", env=client_env(sockdir))
    assert proc.returncode == 0, proc.stderr
    assert f"1 matched, 1 triggered" in proc.stdout and str(sockdir / f"trig_{p.pid}.json") in proc.stdout
    trace = load_trace(wait_for_file(sockdir / f"trig_{p.pid}.json"))
    assert p.finish() == 0
    assert trace["ondemand"]["duration_ms"] == 200
    as_json = trigger("--port", str(daemon.port), "--pid", "999999", "--log-file", str(log_file), "--json",
                      env=client_env(sockdir))
    assert as_json.returncode == 1
    (result,) = json.loads(as_json.stdout)["results"]
    assert result["matched"] == [] and result["triggered"] == []


def test_no_daemon_at_the_address_is_one_clear_line(sockdir):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = trigger("--port", str(port), "--log-file", str(sockdir / "x.json"), env=client_env(sockdir))
    assert proc.returncode == 1 and f"cannot reach dynolog at localhost:{port}" in proc.stdout


@needs_daemon
def test_one_request_per_host_with_one_shared_future_start_time(sockdir, tmp_path):
    """Two daemons stand for two hosts (each with its own socket directory and process)."""
    import shutil
    import tempfile
    from pathlib import Path

    dirs = [sockdir, Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))]
    daemons = [Daemon(d) for d in dirs]
    try:
        programs = [start_program(d, dm) for d, dm in zip(dirs, daemons)]
        hosts = ",".join(f"127.0.0.1:{dm.port}" for dm in daemons)
        # the file name is per host ({host}); each process confines it to its own KINETO_ONDEMAND_TRACE_DIR
        before = int(time.time() * 1000)
        proc = trigger("--hosts", hosts, "--start-delay", "3", "--duration-ms", "200", "--log-file",
                       "/tmp/mh_{host}.json", "--set", "ACTIVITIES_WARMUP_PERIOD_SECS=0", env=client_env(sockdir))
        after = int(time.time() * 1000)
        assert proc.returncode == 0, proc.stderr
        starts = set()
        for d, p in zip(dirs, programs):
            # outside this process's KINETO_ONDEMAND_TRACE_DIR: the default file (the one naming rule), in its dir
            p.err.wait(r"on-demand trace written to")
            (path,) = d.glob(f"*_{p.pid}.*.pt.trace.json")
            trace = load_trace(path)
            starts.add(trace["ondemand"]["requested_start_ms"])
            assert trace["ondemand"]["started_ms"] >= trace["ondemand"]["requested_start_ms"]
            assert p.finish() == 0
        (start,) = starts  # every host was given the same start time
        assert before + 3000 <= start <= after + 3000  # --start-delay 3, from when the trigger ran
        assert proc.stdout.count("1 matched, 1 triggered") == 2
    finally:
        for dm in daemons:
            dm.stop()
        shutil.rmtree(dirs[1], ignore_errors=True)


def test_embedded_daemon_serves_this_machines_processes(sockdir):
    """No dynolog: `xpuprof trigger` answers the polls itself for one interval (1 s here, read from the same
    KINETO_CONFIG the processes read)."""
    p = start_program(sockdir)
    env = client_env(sockdir)
    proc = trigger("--embedded", "--duration-ms", "200", "--log-file", str(sockdir / "emb.json"), "--set",
                   "ACTIVITIES_WARMUP_PERIOD_SECS=0", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "answering this machine's polling processes directly" in proc.stderr
    assert f"embedded: 1 matched, 1 triggered" in proc.stdout
    trace = load_trace(wait_for_file(sockdir / f"emb_{p.pid}.json"))
    assert trace["ondemand"]["trace_id"]  # the embedded daemon adds REQUEST_TRACE_ID as dynolog does
    assert not (sockdir / "dynolog").exists()  # its endpoint is gone with it
    other = trigger("--embedded", "--pid", "999999", "--wait", "1.5", "--log-file", str(sockdir / "o.json"), env=env)
    assert other.returncode == 1 and "no process matched" in other.stdout
    assert p.finish() == 0


@needs_daemon
def test_embedded_refuses_to_take_a_running_daemons_endpoint(daemon, sockdir):
    proc = trigger("--embedded", "--wait", "1", "--log-file", str(sockdir / "x.json"), env=client_env(sockdir))
    assert proc.returncode == 1 and "already holds the IPC endpoint" in proc.stdout
    assert daemon.proc.poll() is None and (sockdir / "dynolog").exists()


def test_bad_trigger_options_are_refused(sockdir):
    env = client_env(sockdir)
    for args, fact in ((["--hosts", "a:99999"], "99999"), (["--pid", "12,x"], "--pid"),
                       (["--log-file", "relative.json"], "absolute path"),
                       (["--start-time", "5", "--start-delay", "1"], "give one"),
                       (["--duration-ms", "0"], "positive integer"),
                       (["--set", "XPUPROF_NOTHING"], "KEY=VALUE")):
        proc = trigger(*args, env=env)
        assert proc.returncode == 2 and fact in proc.stderr.strip().splitlines()[-1], (args, proc.stderr)
