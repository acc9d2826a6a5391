"""Chrome's trace viewer (Catapult's importer, headless chromium) and TensorBoard's profiler plugin on traces
whose slices the layout pass put on lanes (issue 38): every slice of the lane-laid-out JSON shows, with zero
import warnings and every flow bound at both ends; TensorBoard builds its views, serves every event, and
counts each operator as the trace holds it.
"""
from __future__ import annotations

import shutil
from collections import Counter

import pytest

from test_catapult import run_importer

pytestmark = pytest.mark.slow

LANES = ["asyncio_tasks", "asyncio_sim_launches", "device_annotations_metrics", "torch_asyncio_converted",
         "merged_32_ranks"]


def _events(path):
    from perfetto_sql import _events as read

    return read(path)


@pytest.fixture(scope="module")
def imported(viewer_corpus, tmp_path_factory):
    traces = {f"{name}.json": viewer_corpus[name].path for name in LANES}
    return run_importer(traces, tmp_path_factory.mktemp("catapult_lanes"))


@pytest.mark.parametrize("name", LANES)
def test_catapult_shows_every_slice_of_the_lanes(viewer_corpus, imported, name):
    events = _events(viewer_corpus[name].path)
    got = imported[f"{name}.json"]
    assert got["warnings"] == []
    assert got["slices"] == len([e for e in events if e.get("ph") == "X"])
    assert got["flows"] == len([e for e in events if e.get("ph") == "s"]) and got["unbound"] == []
    if name != "merged_32_ranks":
        assert any("original tid" in (e.get("args") or {}) for e in events)  # it holds lanes


def _tensorboard(logdir):
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")
    from test_tensorboard import _load

    return [p for k, p in _load(logdir).items() if k[0] != "All"]


@pytest.mark.parametrize("name", ["asyncio_tasks", "torch_asyncio_converted"])
def test_tensorboard_shows_every_slice_of_the_lanes(viewer_corpus, name, tmp_path):
    import gzip
    import json

    entry = viewer_corpus[name]
    logdir = tmp_path / "run"
    logdir.mkdir()
    shutil.copyfile(entry.path, logdir / "worker0.1.pt.trace.json")
    (prof,) = _tensorboard(logdir)
    assert "trace" in {v.name for v in prof.views}
    events = _events(entry.path)
    raw = (logdir / "worker0.1.pt.trace.json").read_bytes()  # what its trace route serves (plugin.trace_route):
    served = json.loads(gzip.decompress(prof.append_gpu_metrics(raw)) if prof.has_kernel else raw)
    have = Counter((e.get("ph"), e.get("name"), e.get("tid")) for e in served["traceEvents"])
    assert all(have[(e.get("ph"), e.get("name"), e.get("tid"))] for e in events if e.get("ph") == "X")
    ops = Counter(e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    if ops:  # its operator view: each op as often as the trace holds it, wherever its lane
        nodes: Counter = Counter()

        def walk(node):
            for child in node.children:
                nodes[child.name] += 1
                walk(child)

        for tree in prof.tid2tree.values():
            walk(tree)
        assert {k: nodes[k] for k in ops} == dict(ops)
