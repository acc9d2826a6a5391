"""``--engine ray`` gives what ``--engine duckdb`` gives, on a real two-node Ray cluster
(``ray.cluster_utils.Cluster``) on 127.0.0.1 without a dashboard: every analysis, HTA's traces and
a generated 8-rank store, the tasks spread over both nodes; joining ``RAY_ADDRESS`` from the CLI,
and starting (and stopping) a local cluster when none is given."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from xpuprof.analysis.cluster import ANALYSES, run_analysis
from xpuprof.analysis.engines import open_engine
from xpuprof.trace.write.parquet import write_store

from storehelp import synthetic_rank

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason="the ray engine needs ray (pip install 'xpuprof[scale]')")

# Loopback only: Ray's "cluster" mode would advertise the host's network address for 127.0.0.1.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _start_cluster():
    from ray.cluster_utils import Cluster

    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                         "include_dashboard": False})
    try:
        head.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    except BaseException:
        head.shutdown()
        raise
    return head


@pytest.fixture(scope="module")
def cluster():
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)  # for the node processes this starts
    # ray (imported above) read the variable at import: its driver side must see it too, or it advertises
    # the host's network address, which a sandbox may not route
    from ray._private import ray_constants

    saved_cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    head = None
    try:
        try:
            head = _start_cluster()
        except Exception as exc:  # noqa: BLE001 - one retry, then the error as it is
            # A raylet gives its agents 15 s to start and aborts otherwise (ray-project/ray#65983): on a
            # loaded machine a first start can lose that race.
            if "timed out during startup" not in str(exc):
                raise
            head = _start_cluster()
        ray.init(address=head.address, logging_level=logging.WARNING, log_to_driver=False)
        head.wait_for_nodes()
        yield head
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if head is not None:
            head.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = saved_cluster_mode
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def eight_ranks(tmp_path_factory):
    store = tmp_path_factory.mktemp("ray8") / "store"
    for rank in range(8):
        write_store(synthetic_rank(rank, steps=4, step_ns=10_000_000 + rank * 50_000), store)
    return store


def _both(store, analysis: str, **options):
    with open_engine(store, "ray") as engine:
        got = run_analysis(analysis, engine, **options)
    with open_engine(store, "duckdb") as engine:
        want = run_analysis(analysis, engine, **options)
    return got, want


def test_every_analysis_equals_duckdb_on_two_nodes(cluster, eight_ranks, hta_stores):
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    for store in (eight_ranks, hta_stores["trace_filter"]):
        for analysis in ANALYSES:
            got, want = _both(store, analysis)
            assert got.rows == want.rows, (store.name, analysis)
            assert got.engine == "ray" and set(got.nodes) <= nodes
        got, want = _both(store, "kernels", by_rank=True)
        assert got.rows == want.rows
        got, want = _both(store, "launch", events=True)
        assert got.rows == want.rows
    got, _ = _both(eight_ranks, "temporal")
    assert set(got.nodes) == nodes  # the rank groups ran on both nodes
    assert len(got.rows) == 8


def test_the_cli_joins_ray_address(cluster, eight_ranks, tmp_path):
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    outs = {}
    for engine in ("ray", "duckdb"):
        done = subprocess.run([sys.executable, "-m", "xpuprof", "analyze", str(eight_ranks), "kernels", "--engine",
                               engine, "--format", "json"], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs[engine] = done.stdout
    assert outs["ray"] == outs["duckdb"] and outs["ray"].startswith("[")


@pytest.mark.parametrize("loopback_env", [True, False], ids=["loopback-env-set", "ray-imported-first"])
def test_without_an_address_a_local_cluster_starts_and_stops(eight_ranks, tmp_path, loopback_env):
    """Loopback only either way: with Ray's cluster mode off in the environment, or with ray imported
    before the engine (it read the environment then; the engine turns the mode off for its nodes and
    for the driver)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and k not in RAY_ENV}
    if loopback_env:
        env.update(RAY_ENV)
    code = (
        "import sys, json, ray\n"
        "from xpuprof.analysis.engines import open_engine\n"
        "from xpuprof.analysis.cluster import run_analysis\n"
        f"with open_engine({str(eight_ranks)!r}, 'ray') as e:\n"
        "    r = run_analysis('temporal', e)\n"
        "    ips = {n['NodeManagerAddress'] for n in ray.nodes()}\n"
        "print(json.dumps({'rows': r.rows, 'ips': sorted(ips), 'after': ray.is_initialized()}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    got = json.loads(done.stdout.strip().splitlines()[-1])
    with open_engine(eight_ranks) as engine:
        assert got["rows"] == [dict(r) for r in run_analysis("temporal", engine).rows]
    assert got["ips"] == ["127.0.0.1"] and got["after"] is False


def test_stragglers_of_gloo_jobs_equal_duckdb(cluster, gloo_runs):
    """The straggler rule runs on the driver over the per-(rank, step) rows the tasks fetch: the rank
    groups on two nodes give the embedded engine's rows, notes and per-step details."""
    for name, slow in (("2-slow", 1), ("4-some", 1), ("4-balanced", None)):
        got, want = _both(gloo_runs[name][1], "stragglers")
        assert got.rows == want.rows and got.notes == want.notes and got.details == want.details, name
        assert [r["rank"] for r in got.rows if r["straggler"]] == ([] if slow is None else [slow])
        assert got.engine == "ray" and len(got.nodes) == 2  # one task per node: the ranks split in two groups
