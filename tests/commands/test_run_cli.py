import json

import pytest

from xpuprof.cli import main


def _write(tmp_path, text, name="bench.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_quickstart_end_to_end(tmp_path, capsys):
    from pathlib import Path

    cfg = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
    out = tmp_path / "qs"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "quickstart" in printed and "gemm[numpy] n=256 float32" in printed
    (trace,) = out.glob("*.pt.trace.json")
    data = json.load(open(trace))  # plain json.load
    events = data["traceEvents"]
    ann = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
           and e["name"].startswith("gemm[numpy]")]
    assert len(ann) == 6  # schedule: wait 1, warmup 1, active 6
    named = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in ann} <= named
    assert data["benchmark"]["name"] == "quickstart"
    summary = json.loads((out / "summary.jsonl").read_text())
    (point,) = summary["points"]
    assert point["iteration_time"]["count"] == 8 and point["error"] is None
    assert point["traces"] == [str(trace)]
    rows = {k["name"]: k for k in point["kernels"]}
    assert rows["gemm[numpy] n=256 float32"]["calls"] == 6 and rows["ProfilerStep#*"]["calls"] == 6
    # `xpuprof report` reads the same trace back.
    assert main(["report", str(out)]) == 0
    assert "gemm[numpy] n=256 float32" in capsys.readouterr().out


def test_sim_matrix_repeats_and_metrics(tmp_path, capsys):
    cfg = _write(tmp_path, """
name: simrun
workload: {builtin: elementwise, library: numpy, kwargs: {size: 1024}}
device: cpu
warmup: 0
iterations: 4
repeats: 2
backends: [sim]
activities: [user_annotation, runtime, kernel, gpu_memcpy, xpu_scope_profiler]
metrics: {names: [XVE_STALL]}
matrix:
  workload.kwargs.dtype: [float32, float64]
output: {compression: gzip}
""")
    out = tmp_path / "o"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.jsonl").read_text())
    assert [p["label"] for p in summary["points"]] == ["dtype=float32", "dtype=float64"]
    for p in summary["points"]:
        assert len(p["traces"]) == 2 and all(t.endswith(".pt.trace.json.gz") for t in p["traces"])
        assert p["traces"][0].startswith(str(out / p["slug"]))
        kernels = [k for k in p["kernels"] if k["name"].startswith("sim_")]
        assert kernels and all("XVE_STALL" in k["metrics"] for k in kernels)
    capsys.readouterr()
    # Two identical sim runs diff clean; summary.jsonl is a diff input.
    assert main(["diff", str(out / "summary.jsonl"), str(out / "summary.jsonl")]) == 0
    older = tmp_path / "summary.json"  # what runs before 2026-11-24 wrote
    older.write_bytes((out / "summary.jsonl").read_bytes())
    assert main(["diff", str(older), str(out / "summary.jsonl")]) == 0


def test_rank_from_launcher_env_sets_distributed_info(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = _write(tmp_path, "workload: {builtin: gemm, kwargs: {n: 8}}\niterations: 2\nactivities: [user_annotation]\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    (trace,) = (tmp_path / "o").glob("*.pt.trace.json")
    assert "rank" not in trace.name  # trace_file_name: the rank is inside the trace
    text = trace.read_text()
    assert '"distributedInfo": {"rank": 1, "world_size": 2' in text  # HTA's "rank":\s+(\d+)


def test_failing_point_is_reported_and_exit_code_is_1(tmp_path, capsys):
    cfg = _write(tmp_path, "workload: {builtin: gemm, library: numpy}\ndevice: xpu\niterations: 1\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    summary = json.loads((tmp_path / "o" / "summary.jsonl").read_text())
    assert "host CPU only" in summary["points"][0]["error"]


def test_config_errors_exit_2_with_line(tmp_path, capsys):
    cfg = _write(tmp_path, "workload:\n  builtin: gemm\nactivities: [kernal]\n")
    assert main(["run", str(cfg)]) == 2
    assert f"{cfg}:3: activities: unknown activity type 'kernal'" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_dry_run_lists_points(tmp_path, capsys):
    cfg = _write(tmp_path, "workload: {builtin: gemm}\nmatrix: {workload.kwargs.n: [8, 16]}\n")
    assert main(["run", str(cfg), "--dry-run", "--set", "iterations=3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and "iterations=3" in lines[0] and "'n': 16" in lines[1]


def test_run_sets_zet_enable_metrics_before_the_workload_builds_when_metrics_are_asked(tmp_path, monkeypatch, capsys):
    """Level Zero reads ZET_ENABLE_METRICS when the workload initializes it, so the
    launcher must set it before the workload is built, not when the profiler configures a session."""
    monkeypatch.delenv("ZET_ENABLE_METRICS", raising=False)
    (tmp_path / "envprobe_wl.py").write_text(
        "import os\n"
        "SEEN = []\n"
        "def make(**kw):\n"
        "    SEEN.append(os.environ.get('ZET_ENABLE_METRICS'))\n"
        "    return lambda: None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = """
name: envprobe
workload: {callable: "envprobe_wl:make", factory: true}
device: cpu
warmup: 0
iterations: 2
backends: [sim]
"""
    import importlib

    wl = importlib.import_module("envprobe_wl")
    assert main(["run", str(_write(tmp_path, base, "plain.yaml")), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert wl.SEEN == [None]  # no metrics asked: the environment is left alone
    cfg = _write(tmp_path, base + "metrics: {names: [XVE_STALL]}\n", "metrics.yaml")
    assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    assert wl.SEEN == [None, "1"]
    capsys.readouterr()
