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
