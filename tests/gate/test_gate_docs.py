"""The gate's documented workflows run as pasted: docs/cli.md's `xpuprof gate` block (after the run lines
it builds on) with the exit status each line's comment states, and docs/pytest.md's gated test with its
two pytest command lines."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _section(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's xpuprof, pytest
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    return env


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)


def _expected_status(line: str) -> int:
    m = re.search(r"#\s*exit (\d)", line)
    return int(m.group(1)) if m else 0


def test_the_cli_pages_gate_workflow_runs_as_pasted(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    needed = [line for line in _section("cli.md", "## `xpuprof run`").splitlines()
              if line.startswith("xpuprof run configs/sim.yaml --out runs/b")]
    (block,) = [body for kind, body in FENCE.findall(_section("cli.md", "## `xpuprof gate`")) if kind == "bash"]
    for line in [*needed, *block.splitlines()]:
        done = _shell(line, tmp_path)
        assert done.returncode == _expected_status(line), f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert 'class="new-run"' in (tmp_path / "gate.html").read_text()
    assert "Run history" in (tmp_path / "slow.html").read_text()


def test_the_pytest_pages_gated_test_runs_as_pasted(tmp_path):
    section = _section("pytest.md", "## Gating a test against its run history")
    blocks = FENCE.findall(section)
    (code,) = [body for kind, body in blocks if kind == "python"]
    (commands,) = [body for kind, body in blocks if kind == "" and "pytest" in body]
    (tmp_path / "test_speed.py").write_text(code, encoding="utf-8")
    for line in commands.splitlines():
        line = line.split("#", 1)[0].strip()
        done = _shell(f"python -m {line} -p no:cacheprovider", tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "1 passed" in done.stdout
    assert len(list((tmp_path / "perf-history").glob("*/*.json"))) == 1  # the accepted run; the second only gated
