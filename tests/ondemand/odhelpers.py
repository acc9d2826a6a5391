"""Helpers of the on-demand tests. The real dynolog daemon (../shared/dynolog, dynolog's own on-demand code)
for each test: a private socket directory (KINETO_IPC_SOCKET_DIR), a port the kernel picks (--port 0, read
from its log), its log lines watched as they come (waits are on lines, files and processes, each with a
deadline)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DYNOLOG = Path(os.environ.get("XPUPROF_DYNOLOG_DIR") or REPO.parent / "shared" / "dynolog")
DAEMON_BIN = DYNOLOG / "bin" / "dynolog-ondemand"
PYTHON = sys.executable
DEADLINE_S = 60.0


def daemon_missing() -> str | None:
    if not DAEMON_BIN.is_file():
        return (f"the dynolog daemon is not at {DAEMON_BIN} (a checkout without ../shared; set XPUPROF_DYNOLOG_DIR "
                "to the folder holding bin/dynolog-ondemand and lib/)")
    return None


needs_daemon = pytest.mark.skipif(daemon_missing() is not None, reason=str(daemon_missing()))


class LineWatch:
    """Lines of a stream, collected by a thread; ``wait(pattern)`` blocks until one matches."""

    def __init__(self, stream, label: str) -> None:
        self.lines: list[str] = []
        self.label = label
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self, pattern: str, *, timeout: float = DEADLINE_S, start: int = 0) -> re.Match:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m
                    i += 1
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise AssertionError(f"{self.label}: no line matching {pattern!r} within {timeout:g} s; "
                                         f"last lines:\n" + "\n".join(self.lines[-30:]))
                self._cond.wait(left)

    def wait_all(self, pattern: str, n: int, *, timeout: float = DEADLINE_S) -> list[re.Match]:
        """The first ``n`` lines matching ``pattern``, waiting for them."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for m in map(rx.search, self.lines) if m]
                if len(found) >= n:
                    return found[:n]
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise AssertionError(f"{self.label}: {len(found)} of {n} lines matching {pattern!r} within "
                                         f"{timeout:g} s; last lines:\n" + "\n".join(self.lines[-30:]))
                self._cond.wait(left)

    def count(self, pattern: str) -> int:
        rx = re.compile(pattern)
        with self._cond:
            return sum(1 for line in self.lines if rx.search(line))

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def join(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)


class Daemon:
    def __init__(self, socket_dir: Path) -> None:
        self.socket_dir = socket_dir
        env = dict(os.environ, KINETO_IPC_SOCKET_DIR=str(socket_dir),
                   LD_LIBRARY_PATH=f"{DYNOLOG / 'lib'}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}")
        self.proc = subprocess.Popen([str(DAEMON_BIN), "--port", "0"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        self.log = LineWatch(self.proc.stderr, "dynolog")
        self.port = int(self.log.wait(r"Listening to connections on port (\d+)").group(1))
        self.log.wait(r"Starting LibkinetoConfigManager runloop")

    def request(self, config: str, *, pids=(0,), job_id: int = 0, process_limit: int = 3) -> dict:
        """setKinetOnDemandRequest, as the dyno CLI sends it."""
        from xpuprof.ondemand import trigger

        return trigger.rpc("127.0.0.1", self.port, {"fn": "setKinetOnDemandRequest", "config": config,
                                                    "job_id": job_id, "pids": list(pids),
                                                    "process_limit": process_limit})

    def wait_registered(self, pid: int, timeout: float = DEADLINE_S) -> None:
        self.log.wait(rf"Registered process \({pid}[,)]", timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.join()


def fast_poll_config(directory: Path, interval_s: int = 1) -> Path:
    """A Kineto base config (KINETO_CONFIG) with a short on-demand poll interval."""
    path = directory / "libkineto.conf"
    path.write_text(f"ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS={interval_s}\n")
    return path


def client_env(sockdir: Path, *, fast: bool = True, trace_dir: Path | None = None, **extra) -> dict:
    env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=str(sockdir), PYTHONUNBUFFERED="1")
    for key in ("XPUPROF_EXEC", "XPUPROF_HELPER", "SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    if fast:
        env["KINETO_CONFIG"] = str(fast_poll_config(sockdir))
    else:
        env.pop("KINETO_CONFIG", None)
    env["KINETO_ONDEMAND_TRACE_DIR"] = str(trace_dir or sockdir)
    env.update({k: str(v) for k, v in extra.items()})
    return env


LIVE: list["Program"] = []  # killed by the autouse fixture after each test, whatever the test did


class Program:
    """A process under test: stderr watched, stopped by creating its stop file (it checks each iteration)."""

    def __init__(self, args, env, cwd: Path, stop_file: Path) -> None:
        self.stop_file = stop_file
        self.proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        LIVE.append(self)
        self.err = LineWatch(self.proc.stderr, "program stderr")
        self.out = LineWatch(self.proc.stdout, "program stdout")

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def command_pid(self) -> int:
        """The pid of the process that records: under `xpuprof exec`, exec's child (exec is the command's parent,
        so that a command that crashes keeps its trace); otherwise the process itself. Read once, while it runs."""
        if self.proc.args[3:4] != ["exec"]:
            return self.pid
        if getattr(self, "_command_pid", None) is None:
            import psutil

            (child,) = psutil.Process(self.pid).children()
            self._command_pid = child.pid
        return self._command_pid

    def finish(self, timeout: float = DEADLINE_S) -> int:
        self.stop_file.touch()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"the program did not stop within {timeout:g} s:\n{self.err.text()[-3000:]}")
        self.err.join()
        self.out.join()
        return rc

    def kill(self) -> None:
        """End the process and its children (a launcher's ranks) if still running."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)


# A training-like loop: steps (xpuprof.step(), or torch's optimizer), ranges, until the stop file exists;
# a line per step ("step N"), and the count at the end.
IMPORTED_PROGRAM = """
import logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
import xpuprof
stop = sys.argv[1]
print("ready", flush=True)
i = 0
while not os.path.exists(stop):
    with xpuprof.record_function(f"work{i}"):
        sum(range(20000))
    xpuprof.step()
    print(f"step {i}", flush=True)
    i += 1
    time.sleep(0.005)
print("steps", i, flush=True)
"""

# Knows nothing of xpuprof: torch's optimizer steps are its iterations.
UNMODIFIED_TORCH_PROGRAM = """
import os, sys, time
import torch
stop = sys.argv[1]
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 32)
print("ready", flush=True)
while not os.path.exists(stop):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.005)
print("done", flush=True)
"""


def write_program(directory: Path, text: str, name: str = "prog.py") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def wait_for_file(path: Path, timeout: float = DEADLINE_S) -> Path:
    """Wait until ``path`` exists (traces are renamed into place whole, never written in place)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            listing = sorted(p.name for p in path.parent.iterdir()) if path.parent.exists() else []
            raise AssertionError(f"{path} did not appear within {timeout:g} s; the directory holds {listing}")
        time.sleep(0.02)
    return path


def load_trace(path: Path) -> dict:
    return json.loads(Path(path).read_bytes())


def events(trace: dict, ph: str = "X") -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == ph]
