"""``xpuprof exec --format perfetto``: every process's trace in --out is Perfetto protobuf, named by the one rule
(``<host>_<pid>.<ts>.pftrace``), said on stderr, and read by ``report DIR`` (issue 38 item 3)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.trace.read.source import trace_format

pytestmark = pytest.mark.slow  # starts Python processes that import xpuprof
REPO = Path(__file__).resolve().parents[2]
XPUPROF = [sys.executable, "-m", "xpuprof"]


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    for key in ("KINETO_USE_DAEMON", "XPUPROF_KINETO_USE_DAEMON", "XPUPROF_EXEC", "XPUPROF_HELPER", "KINETO_CONFIG",
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "PYTHONSTARTUP"):
        env.pop(key, None)
    return env


def test_exec_format_perfetto(tmp_path):
    out = tmp_path / "t"
    program = "import xpuprof\nfor i in range(3):\n    with xpuprof.record_function(f'r{i}'):\n        sum(range(1000))\n"
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(out), "--format", "perfetto", "--", sys.executable, "-c",
                           program], capture_output=True, text=True, env=_env(), timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("*")
    assert re.fullmatch(rf"{re.escape(socket.gethostname())}_\d+\.\d+\.pftrace", path.name)
    assert trace_format(path) == "perfetto"
    assert proc.stderr == f"xpuprof exec: wrote {path}\n"
    report = subprocess.run([*XPUPROF, "report", str(out), "--format", "csv"], capture_output=True, text=True,
                            env=_env(), timeout=120)
    assert report.returncode == 0, report.stderr
    assert sorted(line.split(",")[0] for line in report.stdout.splitlines()[1:]) == ["r0", "r1", "r2"]
    bad = subprocess.run([*XPUPROF, "exec", "--format", "protobuf", "--", sys.executable, "-c", "0"],
                         capture_output=True, text=True, env=_env(), timeout=60)
    assert bad.returncode == 2 and "--format" in bad.stderr and "perfetto" in bad.stderr
