"""benchmarks/bench_scan.py runs as its docstring says, its baseline in the same alternation included: a
checkout with SIMD levels as the baseline (main's) once failed on a missing key after every measurement."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.trace.read import kineto_stream

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(kineto_stream.native() is None, reason="xpuprof._native.tracescan is not built: "
                                                                       "python setup.py build_ext --inplace")


def test_the_scan_benchmark_runs_against_a_baseline_checkout_with_simd_levels():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_scan.py"), "--n", "2000", "--runs", "1",
                           "--kinds", "host", "--levels", "scalar", "--baseline", str(REPO)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| host")]
    assert len(rows) == 3, proc.stdout  # the checkout, its baseline, the per-level row
    assert f"| host, baseline ({REPO}) | 2,009 |" in proc.stdout
