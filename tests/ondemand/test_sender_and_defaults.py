"""Who may configure a process (root or its own user, by the kernel's SCM_CREDENTIALS), and the one test at
Kineto's defaults: 5 s poll interval, 5 s warm-up, against the real daemon."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from odhelpers import (IMPORTED_PROGRAM, PYTHON, Program, client_env, load_trace, needs_daemon, wait_for_file,
                       write_program)

pytestmark = pytest.mark.slow


def client_socket(sockdir):
    (name,) = [p for p in sockdir.iterdir() if p.name.startswith("dynoconfigclient")]
    return str(name)


def config_datagram(text: str) -> bytes:
    payload = text.encode()
    return struct.pack("@N32s", len(payload), b"req") + payload


def send_as(path: str, datagram: bytes, uid: int | None) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        if uid is None:
            s.sendto(datagram, path)
        else:  # root may state any uid in its credentials; the kernel passes them on as the sender's
            creds = struct.pack("@iII", os.getpid(), uid, uid)
            s.sendmsg([datagram], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0, path)


@needs_daemon
@pytest.mark.skipif(os.geteuid() != 0, reason="sending as another user needs root (CAP_SETUID) to state the uid")
def test_a_config_from_another_user_is_ignored_and_said_once(daemon, sockdir):
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir), sockdir, sockdir / "stop")
    p.out.wait("ready")
    daemon.wait_registered(p.command_pid)
    target = client_socket(sockdir)
    evil = config_datagram(f"ACTIVITIES_LOG_FILE={sockdir}/evil.json\nACTIVITIES_DURATION_MSECS=100")
    for _ in range(3):
        send_as(target, evil, uid=54321)
    line = p.err.wait(r"ignored an on-demand datagram from uid 54321").group(0)
    assert "only root or this process's own user" in p.err.text()
    # the daemon's own requests still work after it
    daemon.request(f"ACTIVITIES_LOG_FILE={sockdir}/ok.json\nACTIVITIES_DURATION_MSECS=100\n"
                   "ACTIVITIES_WARMUP_PERIOD_SECS=0", pids=[p.command_pid])
    wait_for_file(sockdir / f"ok_{p.command_pid}.json")
    assert p.finish() == 0
    assert p.err.count(r"ignored an on-demand datagram from uid 54321") == 1, line
    assert not list(sockdir.glob("evil*"))


def test_the_process_own_user_may_configure_it_without_a_daemon(sockdir):
    """The rule is the sender's uid, not the daemon's name: root or the process's own user (who could
    attach a debugger to it anyway)."""
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir), sockdir, sockdir / "stop")
    p.out.wait("ready")
    p.err.wait(r"no on-demand daemon answers")
    send_as(client_socket(sockdir), config_datagram(
        f"ACTIVITIES_LOG_FILE={sockdir}/mine.json\nACTIVITIES_DURATION_MSECS=100"), uid=None)
    wait_for_file(sockdir / f"mine_{p.command_pid}.json")
    assert p.finish() == 0


@needs_daemon
def test_at_kinetos_defaults_the_trace_comes_within_one_poll_interval(daemon, sockdir):
    """No KINETO_CONFIG (5 s poll), no warm-up override: registered at once (the first poll), traced at the
    next poll after the request. Kineto would also wait its 5 s warm-up plus 2 s; xpuprof starts when ready."""
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    p = Program([PYTHON, str(prog), str(sockdir / "stop")], client_env(sockdir, fast=False), sockdir,
                sockdir / "stop")
    p.out.wait("ready")
    daemon.wait_registered(p.command_pid, timeout=15)
    sent = time.time()
    answer = daemon.request(f"ACTIVITIES_LOG_FILE={sockdir}/def.json\nPROFILE_START_TIME=0\n"
                            "ACTIVITIES_DURATION_MSECS=500", pids=[p.command_pid])
    assert answer["activityProfilersTriggered"] == [p.command_pid]
    trace = load_trace(wait_for_file(sockdir / f"def_{p.command_pid}.json", timeout=30))
    assert p.finish() == 0
    od = trace["ondemand"]
    assert od["received_ms"] / 1e3 - sent <= 5.0 + 1.0  # at most one 5 s poll interval
    assert od["started_ms"] - od["received_ms"] < 5000  # not Kineto's 5 s warm-up + 2 s
    assert "polling every 5 s" in p.err.text()
