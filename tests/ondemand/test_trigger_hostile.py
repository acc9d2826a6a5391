"""`xpuprof trigger` against a broken or hostile daemon on its RPC port (issue 40): every answer read with
bounds - one line, exit status 2, never a traceback, never a made-up "triggered" - within 1 GiB of address
space (a 2 GiB announced length was a MemoryError)."""
from __future__ import annotations

import json
import resource
import socket
import struct
import subprocess
import threading

import pytest

from odhelpers import PYTHON, client_env

LENGTH = struct.Struct("@i")


def framed(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


HOSTILE = {
    "2 GiB length": LENGTH.pack(0x7FFFFFFF) + b"{",
    "negative length": LENGTH.pack(-5),
    "not JSON": framed(b"\xff\xfe not json"),
    "a JSON list": framed(b"[1, 2, 3]"),
    "pids as a string": framed(json.dumps({"processesMatched": "abc", "activityProfilersTriggered": []}).encode()),
    "triggered, none matched": framed(json.dumps({"processesMatched": [],
                                                  "activityProfilersTriggered": [11, 12, 13]}).encode()),
    "busy as text": framed(json.dumps({"processesMatched": [7], "activityProfilersTriggered": [7],
                                       "activityProfilersBusy": "x"}).encode()),
    "pids as floats": framed(json.dumps({"processesMatched": [1e300], "activityProfilersTriggered": [1e300]}).encode()),
    "nested 100000 deep": framed(b"[" * 100_000 + b"]" * 100_000),
    "cut short": LENGTH.pack(100) + b'{"processesMatched"',
    "a refusal without status": framed(json.dumps({"status": {"x": "y" * 10_000}}).encode()),
}


class HostileDaemon:
    """A loopback TCP server answering each connection with ``payload`` once it read the request."""

    def __init__(self, payload: bytes, *, trickle: bool = False) -> None:
        self.payload = payload
        self.trickle = trickle
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    head = conn.recv(4)
                    size = LENGTH.unpack(head)[0]
                    got = 0
                    while got < size:
                        got += len(conn.recv(size - got))
                    if self.trickle:  # one byte at a time, forever: only an overall deadline ends it
                        conn.sendall(LENGTH.pack(1000))
                        while not self.stop.wait(0.3):
                            conn.sendall(b" ")
                    else:
                        conn.sendall(self.payload)
                        self.stop.wait(0.5)  # then close
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(5)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_trigger(port: int, env) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "xpuprof", "trigger", "--port", str(port), "--no-wait"], capture_output=True,
                          text=True, env=env, timeout=60, preexec_fn=_limit_memory)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_answer_is_one_line_and_exit_2(case, sockdir):
    daemon = HostileDaemon(HOSTILE[case])
    try:
        proc = run_trigger(daemon.port, client_env(sockdir))
    finally:
        daemon.close()
    assert proc.returncode == 2, (case, proc.returncode, proc.stdout, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xpuprof trigger: dynolog at localhost:"), (case, proc.stderr)
    assert "Traceback" not in proc.stderr and "triggered" not in proc.stdout
    assert len(lines[0]) < 400  # the hostile bytes are not echoed back whole


@pytest.mark.slow
def test_a_daemon_that_trickles_its_answer_is_given_one_deadline(sockdir):
    daemon = HostileDaemon(b"", trickle=True)
    try:
        proc = run_trigger(daemon.port, client_env(sockdir))
    finally:
        daemon.close()
    assert proc.returncode == 2 and "did not finish its answer within 10 s" in proc.stderr, proc.stderr[-2000:]


def test_one_hostile_host_among_several_is_its_line_and_exit_2(sockdir):
    """--hosts: each host's answer is its own line; a host that answered something that is not dynolog's
    answer makes the exit status 2 (the others are still printed)."""
    bad = HostileDaemon(HOSTILE["a JSON list"])
    fine = HostileDaemon(framed(json.dumps({"processesMatched": [], "activityProfilersTriggered": [],
                                            "activityProfilersBusy": 0}).encode()))
    try:
        proc = subprocess.run([PYTHON, "-m", "xpuprof", "trigger", "--hosts",
                               f"127.0.0.1:{bad.port},127.0.0.1:{fine.port}", "--no-wait"], capture_output=True,
                              text=True, env=client_env(sockdir), timeout=60)
    finally:
        bad.close()
        fine.close()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"127.0.0.1:{bad.port}: dynolog at 127.0.0.1:{bad.port} answered a JSON list" in proc.stdout
    assert f"127.0.0.1:{fine.port}: no process matched" in proc.stdout and "Traceback" not in proc.stderr
