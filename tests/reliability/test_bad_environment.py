"""Garbage launcher variables (RANK, WORLD_SIZE, LOCAL_RANK) are one clear warning and a fallback, never
a lost trace: the Python API's trace handler and ``xpuprof run`` write their traces (named
``<worker>.<ts>``: the rank is in the trace's distributedInfo, not in the name). (A bad XPUPROF_PLUGIN_DEADLINE_S: test_deadline_setting.py.)"""
from __future__ import annotations

import json
import logging

import pytest

import xpuprof
from xpuprof import diagnostics
from xpuprof.cli import main

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "PMIX_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE",
                 "PALS_RANKID", "PALS_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, caplog):
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    diagnostics.forget("bad-setting")
    caplog.set_level(logging.WARNING, logger="xpuprof")


def _warnings(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def _two_cycles(out_dir):
    """Two recording cycles through the trace handler (two traces named by it)."""
    with xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=0, warmup=0, active=1, repeat=2),
                         on_trace_ready=xpuprof.trace_handler(out_dir, worker_name="w")) as prof:
        for i in range(3):
            with xpuprof.record_function(f"step work {i}"):
                pass
            prof.step()
    return sorted(out_dir.glob("*.pt.trace.json"))


@pytest.mark.parametrize("value", ["²", "1x", "-1", "99999999999999999999999", " "])
def test_a_garbage_bare_rank_is_one_warning_and_the_traces_are_written(value, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RANK", value)
    traces = _two_cycles(tmp_path)
    assert len(traces) == 2 and all(".rank" not in t.name for t in traces)
    assert all(any(e.get("name", "").startswith("step work") for e in json.loads(t.read_text())["traceEvents"])
               for t in traces)
    assert all("distributedInfo" not in json.loads(t.read_text()) for t in traces)
    said = _warnings(caplog, "RANK=")
    assert len(said) <= 1  # at most said once: a RANK without WORLD_SIZE names no rank
    if said:
        assert f"RANK={value.strip()[:40]!r} is not a rank or size" in said[0]


def test_a_garbage_world_size_is_one_warning_and_the_traces_are_written(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "abc")
    traces = _two_cycles(tmp_path)
    assert len(traces) == 2
    assert all("distributedInfo" not in json.loads(t.read_text()) for t in traces)
    said = _warnings(caplog, "WORLD_SIZE")
    assert len(said) == 1 and "ignoring launcher rank variables: environment variable WORLD_SIZE='abc'" in said[0]


@pytest.mark.parametrize("var,value", [("LOCAL_RANK", "-5"), ("LOCAL_RANK", "²"), ("LOCAL_WORLD_SIZE", "many")])
def test_a_garbage_local_rank_keeps_the_global_rank(var, value, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv(var, value)
    traces = _two_cycles(tmp_path)
    assert len(traces) == 2
    info = json.loads(traces[0].read_text())["distributedInfo"]
    assert (info["rank"], info["world_size"], info["local_rank"], info["local_world_size"]) == (1, 4, 1, 4)
    said = _warnings(caplog, var)
    assert len(said) == 1 and "the local rank and size are taken as the global ones (1 of 4)" in said[0]


def test_xpuprof_run_with_a_garbage_rank_writes_its_trace_and_summary(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RANK", "²")
    cfg = tmp_path / "b.yaml"
    cfg.write_text("workload: {builtin: gemm, kwargs: {n: 8}}\nwarmup: 0\niterations: 1\n")
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    (summary,) = out.glob("summary*.jsonl")
    (point,) = json.loads(summary.read_text())["points"]
    assert point["error"] is None and len(point["traces"]) == 1
    assert len(_warnings(caplog, "RANK='²'")) == 1
