"""Outputs of `xpuprof exec` you can find (issues 39 and 40): --out checked before the command runs, every
trace said on stderr, --on-demand --out honoured, traces named by the one rule that `report DIR`,
TensorBoard and HTA find."""
from __future__ import annotations

import re
import socket
import subprocess

import pytest

from odhelpers import IMPORTED_PROGRAM, PYTHON, Program, client_env, load_trace, write_program
from test_exec import XPUPROF, base_env

pytestmark = pytest.mark.slow
RULE = re.compile(rf"{re.escape(socket.gethostname())}_\d+\.\d+\.pt\.trace\.json")


def test_an_out_that_cannot_hold_traces_is_refused_before_the_command_runs(tmp_path):
    """Before: the whole command ran, exit 0, and the trace was lost at its end."""
    (tmp_path / "file").write_text("a file, not a directory")
    marker = tmp_path / "ran"
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "file" / "sub"), "--", PYTHON, "-c",
                           f"open({str(marker)!r}, 'w').close()"], capture_output=True, text=True, env=base_env(),
                          timeout=60)
    assert proc.returncode == 2 and not marker.exists(), proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("xpuprof exec: --out") and "file/sub" in line


def test_each_trace_is_said_and_named_by_the_one_rule(tmp_path):
    out = tmp_path / "t"
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(out), "--", PYTHON, "-c", "sum(range(1000))"],
                          capture_output=True, text=True, env=base_env(), timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("*.pt.trace.json")
    assert RULE.fullmatch(path.name)
    assert proc.stderr == f"xpuprof exec: wrote {path}\n"
    report = subprocess.run([*XPUPROF, "report", str(out)], capture_output=True, text=True, env=base_env(),
                            timeout=120)
    assert report.returncode == 0, report.stderr
    consts = pytest.importorskip("torch_tb_profiler.consts", reason="torch-tb-profiler is not installed")
    worker = consts.WORKER_PATTERN.match(path.name)  # TensorBoard's: worker <host>_<pid>, span <ts>
    assert worker and consts.NODE_PROCESS_PATTERN.match(worker.group(1)).group(1) == socket.gethostname()


def test_on_demand_honours_out(sockdir):
    """`exec --on-demand --out DIR`: a request's trace lands in DIR by the one rule (before: in /tmp as
    xpuprof_<host>_<pid>.json, which `report DIR` and TensorBoard skip); the trigger prints where."""
    out = sockdir / "out"
    prog = write_program(sockdir, IMPORTED_PROGRAM)
    env = client_env(sockdir, XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    env.pop("KINETO_USE_DAEMON")
    p = Program([*XPUPROF, "exec", "--on-demand", "--out", str(out), "--", PYTHON, str(prog), str(sockdir / "stop")],
                env, sockdir, sockdir / "stop")
    p.out.wait("ready")
    trig = subprocess.run([*XPUPROF, "trigger", "--embedded", "--pid", str(p.command_pid), "--duration-ms", "200"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert trig.returncode == 0, trig.stdout + trig.stderr
    (path,) = out.glob("*.pt.trace.json")
    assert RULE.fullmatch(path.name) and f"pid {p.command_pid}: wrote {path}" in trig.stdout
    assert load_trace(path)["ondemand"]["source"] == "daemon"
    assert p.finish() == 0
    assert f"xpuprof exec: wrote {path}" in p.err.text()
