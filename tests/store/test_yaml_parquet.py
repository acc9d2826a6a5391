"""YAML runs with ``output.format: parquet``: each trace goes into a store as this rank's partition,
the run's summary still has its kernels, and a rank an earlier run left in --out is refused before
anything runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.trace.read.store import open_store

pytestmark = pytest.mark.slow  # xpuprof run in fresh processes

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sim.yaml"


def run(out: Path, *sets: str, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "xpuprof", "run", str(CONFIG), "--out", str(out), "--no-progress",
            "--set", "output.compression=none", "--set", "iterations=4", "--set", "schedule.active=4", *sets]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_a_parquet_run_writes_a_store_and_summarizes_it(tmp_path):
    done = run(tmp_path, "--set", "output.format=parquet")
    assert done.returncode == 0, done.stderr[-3000:]
    st = open_store(tmp_path / "sim.store")
    assert st.ranks == [0] and st.meta(0)["writer"].endswith("export_parquet")
    assert not list(tmp_path.glob("*.pt.trace.json*"))
    (point,) = json.loads((tmp_path / "summary.jsonl").read_text())["points"]
    assert point["traces"] == [str(tmp_path / "sim.store" / "rank=0")]
    kernels = point["kernels"]
    assert any(k["name"].startswith("sim_gemm") and k["metrics"] for k in kernels)
    again = run(tmp_path, "--set", "output.format=parquet")
    err = [ln for ln in again.stderr.splitlines() if ln.strip()]
    assert again.returncode == 2 and len(err) == 1 and "already holds rank 0" in err[0], again.stderr


@pytest.mark.parametrize("sets,message", [
    (["--set", "output.format=arrow"], "unknown output format 'arrow'; valid: json, perfetto, parquet"),
    (["--set", "output.format=parquet", "--set", "output.compression=gzip"], "compression applies to json traces"),
])
def test_bad_output_format_settings_are_one_line(tmp_path, sets, message):
    done = subprocess.run([sys.executable, "-m", "xpuprof", "run", str(CONFIG), "--out", str(tmp_path), "--dry-run",
                           *sets], capture_output=True, text=True, timeout=120)
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(err) == 1 and message in err[0], done.stderr
