"""The front ends get torch ops too: ``xpuprof run`` on configs/torch_cpu.yaml and the
pytest fixture (``xpuprof_trace.annotations(name="aten::mm")``)."""
from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs torch==2.13.0; "
                            "pip install torch==2.13.0 to run the PyTorch-op tests)")

from xpuprof.cli import main  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_run_torch_cpu_config_records_ops_and_report_groups_them(tmp_path, capsys):
    cfg = (REPO / "configs" / "torch_cpu.yaml").read_text().replace("dir: traces/torch_cpu", f"dir: {tmp_path}/out")
    (tmp_path / "c.yaml").write_text(cfg)
    assert main(["run", str(tmp_path / "c.yaml")]) == 0
    (trace,) = (tmp_path / "out").glob("*.pt.trace.json")
    ops = [e for e in json.loads(trace.read_bytes())["traceEvents"] if e.get("cat") == "cpu_op"]
    assert sum(e["name"] == "aten::mm" for e in ops) == 10  # one per measured iteration
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out"), "--by", "op", "--format", "json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}  # torch's key_averages names
    assert rows["aten::mm"]["count"] == 10 and rows["aten::matmul"]["cpu_time_total"] >= rows["aten::mm"]["cpu_time_total"]


def test_pytest_fixture_sees_torch_ops(pytester):
    eps = importlib.metadata.entry_points(group="pytest11")
    args = [] if any(ep.value.startswith("xpuprof.pytest_plugin") for ep in eps) else ["-p", "xpuprof.pytest_plugin"]
    pytester.makepyfile("""
        import torch

        def test_mm(xpuprof_trace):
            a = torch.ones(8, 8)
            for _ in range(3):
                a @ a
            assert xpuprof_trace.annotations(name="^aten::mm$").count == 3
    """)
    res = pytester.runpytest_subprocess(*args)
    res.assert_outcomes(passed=1)
