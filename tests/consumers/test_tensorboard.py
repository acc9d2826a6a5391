"""TensorBoard's profiler plugin (torch-tb-profiler 0.4.3), run for real on our traces: its RunLoader
(what TensorBoard runs on a logdir, worker processes included) builds the overview, kernel and trace
views, and the kernel table counts each kernel exactly as often as the trace holds it.

The plugin maps no ``cuda_runtime``/``xpu_runtime`` category (it predates them; torch's own traces
show the same ``Runtime: 0``), so runtime time is not asserted.
"""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path
import sys
from collections import Counter

import pytest

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")

from torch_tb_profiler import io as tb_io  # noqa: E402
from torch_tb_profiler.profiler.loader import RunLoader  # noqa: E402

pytestmark = pytest.mark.slow


def _load(logdir):
    """The run TensorBoard would show for ``logdir``: {(worker, span): RunProfile}."""
    cache = tb_io.Cache()
    try:
        run = RunLoader(logdir.name, str(logdir), cache).load()
    finally:
        cache._manager.shutdown()  # its server process would otherwise live until pytest exits
    return {key: p for key, p in run.profiles.items() if p is not None}


@pytest.fixture(scope="module", params=["sim_cuda", "sim_hip", "sim_xpu_metrics", "sim_yaml_cuda", "cuda_decoded"])
def loaded(request):
    facts = request.getfixturevalue(request.param)
    return facts, _load(facts.path.parent)


def _table(table):
    cols = [c["name"] for c in table["data"]["columns"]]
    return [dict(zip(cols, row)) for row in table["data"]["rows"]]


def test_overview_kernel_and_trace_views_build(loaded):
    facts, profiles = loaded
    runs = {k: p for k, p in profiles.items() if k[0] != "All"}
    assert len(runs) == 1, f"TensorBoard built {len(runs)} profiles from {facts.path.name}"
    ((worker, _), prof), = runs.items()
    assert facts.path.name.startswith(worker + ".")
    assert {"overall", "kernel", "trace"} <= {v.name for v in prof.views}
    steps = [e for e in facts.events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(prof.overview["steps"]["rows"]) == len(steps) > 0
    (perf,) = prof.overview["performance"]
    kernel_part = {c["name"]: c["value"] for c in perf["children"]}["Kernel"]
    assert perf["value"] > 0 and kernel_part > 0


def test_kernel_table_counts_equal_the_trace(loaded):
    facts, profiles = loaded
    (prof,) = [p for k, p in profiles.items() if k[0] != "All"]
    calls = {row["Name"]: row["Calls"] for row in _table(prof.kernel_table)}
    launched = facts.launched_kernels
    assert launched
    assert calls == dict(Counter(e["name"] for e in launched))  # one call per launch, nothing twice


def test_trace_view_serves_every_event(loaded):
    """The trace tab serves the file with the plugin's GPU-metric counters appended: still valid JSON
    holding every event of ours."""
    facts, profiles = loaded
    (prof,) = [p for k, p in profiles.items() if k[0] != "All"]
    raw = facts.path.read_bytes()
    raw = gzip.decompress(raw) if facts.path.name.endswith(".gz") else raw  # as the plugin's trace route
    served = json.loads(gzip.decompress(prof.append_gpu_metrics(raw)))
    names = Counter((e.get("ph"), e.get("name")) for e in served["traceEvents"])
    assert all(names[(e.get("ph"), e.get("name"))] for e in facts.events)
    assert len(served["traceEvents"]) >= len(facts.events)


def test_two_ranks_load_and_the_merged_view_is_not_a_run(sim_two_ranks, tmp_path):
    r0, r1 = sim_two_ranks
    logdir = tmp_path / "job"  # a logdir of our own: the shared one stays HTA's clean trace_dir
    logdir.mkdir()
    for f in (r0, r1):
        shutil.copyfile(f.path, logdir / f.path.name)
    merged = logdir / "job.merged.json"
    done = subprocess.run([sys.executable, "-m", "xpuprof", "merge", str(r0.path), str(r1.path), "-o", str(merged)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert merged.exists()
    profiles = _load(logdir)
    workers = {w for w, _ in profiles if w != "All"}
    assert len(workers) == 2 and not [w for w in workers if "merged" in w], workers
    for f in (r0, r1):
        (prof,) = [p for (w, _), p in profiles.items() if w != "All" and f.path.name.startswith(w + ".")]
        calls = {row["Name"]: row["Calls"] for row in _table(prof.kernel_table)}
        assert calls == dict(Counter(e["name"] for e in f.launched_kernels))


def _step_rows(logdir) -> list[str]:
    (prof,) = [p for k, p in _load(logdir).items() if k[0] != "All"]
    return [row[0] for row in prof.overview["steps"]["rows"]]


def _step_slices(events) -> list[str]:
    """The step number of every ``ProfilerStep#N`` slice, the host's and its device copies."""
    return [e["name"].removeprefix("ProfilerStep#") for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]


def test_steps_are_counted_on_a_sim_trace_as_on_htas_real_amd_trace(tmp_path):
    """TensorBoard 0.4.3 lists one overview row per ``ProfilerStep#N`` slice, its device copy
    (``gpu_user_annotation``, Kineto's drawing of a step that launched kernels outside any inner range)
    included. HTA's real ROCm trace (data/hta/amd_trace: steps 1 and 2, ``gpu_user_annotation
    ProfilerStep#1``) gets rows 1, 1, 2. A sim trace of torch ops whose steps launch their kernels directly
    gets the same rule: each step with its device copy, as Kineto draws it (docs/consumers.md)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    import xpuprof

    amd = next((Path(__file__).parents[1] / "data" / "hta" / "amd_trace").glob("*.json.gz"))
    real = tmp_path / "amd"
    real.mkdir()
    shutil.copyfile(amd, real / "worker0.pt.trace.json.gz")
    real_events = json.loads(gzip.decompress(amd.read_bytes()))["traceEvents"]
    assert Counter(_step_slices(real_events)) == {"1": 2, "2": 1}  # step 1 and its device copy, step 2
    assert sorted(_step_rows(real)) == sorted(_step_slices(real_events)) == ["1", "1", "2"]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 32)
    sim = tmp_path / "sim"
    with xpuprof.profile(activities=["cpu", "xpu"], backends=["sim"],
                         schedule=xpuprof.schedule(wait=0, warmup=1, active=3, repeat=1),
                         on_trace_ready=xpuprof.trace_handler(str(sim))) as prof:
        for _ in range(4):
            model(x).sum().backward()
            prof.step()
    (path,) = sim.glob("*.pt.trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    copies = Counter(e["name"] for e in events if e.get("cat") == "gpu_user_annotation")
    assert copies == {"ProfilerStep#1": 1, "ProfilerStep#2": 1, "ProfilerStep#3": 1}
    assert sorted(_step_rows(sim)) == sorted(_step_slices(events)) == ["1", "1", "2", "2", "3", "3"]
