"""What a person sees on a terminal: in a pseudo-terminal of 80 and of 200 columns, ``run``, ``report``, ``diff``,
``metrics``, ``devices``, ``analyze`` and ``key_averages().table()`` print no line wider than the terminal and
no number split across lines; every table they print (text and HTML) has a unit on every numeric column and one
number format per column (tests/tables_check.py)."""
from __future__ import annotations

import fcntl
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tables_check import boxed_tables, clean, column_problems, html_tables, widest_line

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
WIDTHS = (80, 200)
KEY_AVERAGES = """
import numpy as np, xpuprof
a = np.ones((96, 96))
with xpuprof.profile(activities=["cpu", "xpu"], backends=["sim"],
                     experimental_config=xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime", "XVE_STALL"])) as prof:
    for _ in range(3):
        with xpuprof.record_function("a_range_with_a_long_descriptive_name_that_wraps_on_narrow_terminals"):
            a = a @ a / 96
        with xpuprof.record_function("small"):
            a = a + 1
print(prof.key_averages().table(sort_by="self_xpu_time_total"))
"""


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def in_pty(argv: list[str], columns: int, cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal ``columns`` wide; (exit status, what it printed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=300), clean(b"".join(chunks).decode("utf-8", "replace"))


def _xpuprof(*args: str) -> list[str]:
    return [sys.executable, "-m", "xpuprof", *args]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tables")
    shutil.copytree(ROOT / "configs", d / "configs")
    for out, extra in (("runs/a", []), ("runs/b", ["--set", "workload.kwargs.n=512"]), ("runs/q", [])):
        config = "configs/quickstart.yaml" if out == "runs/q" else "configs/sim.yaml"
        done = subprocess.run(_xpuprof("run", config, "--out", out, "--no-progress", *extra), cwd=d, env=_env(),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(_xpuprof("convert", "runs/a", "runs/b", "-o", "job.store"), cwd=d, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (d / "ka.py").write_text(KEY_AVERAGES)
    return d


COMMANDS = {
    "run": _xpuprof("run", "configs/sim.yaml", "--out", "runs/c", "--no-progress"),
    "report": _xpuprof("report", "runs/a"),
    "report host ranges": _xpuprof("report", "runs/q"),
    "report --by op": _xpuprof("report", "runs/a", "--by", "op"),
    "report store": _xpuprof("report", "job.store"),
    "diff": _xpuprof("diff", "runs/a", "runs/b", "--all"),
    "metrics": _xpuprof("metrics"),
    "metrics device": _xpuprof("metrics", "--vendor", "xpu", "--device", "bmg"),
    "devices": _xpuprof("devices"),
    **{f"analyze {a}": _xpuprof("analyze", "job.store", a)
       for a in ("temporal", "kernels", "kernel-types", "idle", "overlap", "queue", "launch", "memory-bw",
                 "stragglers")},
    "key_averages().table()": [sys.executable, "ka.py"],
}


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_tables_fit_the_terminal_with_units_and_one_format_per_column(runs, name, columns):
    status, out = in_pty(COMMANDS[name], columns, runs)
    assert status in (0, 1), f"{name} exited {status}:\n{out[-3000:]}"  # diff: 1 is its regression verdict
    assert widest_line(out) <= columns, f"{name} printed a line wider than {columns} columns:\n{out}"
    tables = boxed_tables(out)
    if name not in ("metrics", "metrics device", "devices"):
        assert tables, f"{name} printed no table:\n{out}"
    problems = [p for headers, rows in tables for p in column_problems(headers, rows, f"{name} at {columns}")]
    assert not problems, "\n".join(problems) + "\n" + out


HTML = {
    "report": ["report", "runs/a"],
    "report host ranges": ["report", "runs/q"],
    "report --by op": ["report", "runs/a", "--by", "op"],
    "report store": ["report", "job.store"],
    **{f"analyze {a}": ["analyze", "job.store", a] for a in ("temporal", "kernels", "idle", "stragglers", "launch")},
}


@pytest.mark.parametrize("name", list(HTML))
def test_html_tables_have_units_and_one_format_per_column(runs, name, tmp_path):
    out = tmp_path / "page.html"
    done = subprocess.run(_xpuprof(*HTML[name], "-o", str(out)), cwd=runs, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    tables = html_tables(out.read_text(encoding="utf-8"))
    assert tables, name
    problems = [p for headers, rows in tables for p in column_problems(headers, rows, f"{name} (HTML)")]
    assert not problems, "\n".join(problems)
