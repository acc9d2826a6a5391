"""The one naming rule of every trace file written for a worker (``trace_file_name``): torch's
tensorboard_trace_handler's ``<worker>.<ts ns>.pt.trace.json[.gz]``, the worker ``<host>_<pid>`` by default,
the rank inside the trace (``distributedInfo``), so TensorBoard reads node and process from the name."""
import gzip
import json
import os
import re
import socket
from pathlib import Path

import pytest

import xpuprof
from xpuprof.profiler import trace_file_name

NAME = re.compile(r"^(?P<worker>[^/]+)\.(?P<ts>\d+)\.pt\.trace\.json(\.gz)?$")


def test_trace_file_name_shape():
    assert trace_file_name("w", ts_ns=99) == "w.99.pt.trace.json"
    assert trace_file_name("w", ts_ns=99, use_gzip=True) == "w.99.pt.trace.json.gz"
    assert trace_file_name("a/b", ts_ns=2) == "a_b.2.pt.trace.json"
    assert trace_file_name(ts_ns=5, host="node7", pid=42) == "node7_42.5.pt.trace.json"
    assert trace_file_name(ts_ns=5).startswith(f"{socket.gethostname()}_{os.getpid()}.5.")


def test_tensorboard_reads_node_and_process_from_the_default_name():
    consts = pytest.importorskip("torch_tb_profiler.consts", reason="torch-tb-profiler is not installed")

    name = trace_file_name(host="node7", pid=42, ts_ns=1619499959628000000)
    worker = consts.WORKER_PATTERN.match(name).group(1)
    node = consts.NODE_PROCESS_PATTERN.match(worker)
    assert worker == "node7_42" and node.group(1) == "node7" and node.group(2) == "42"


def _run(tmp_path, **handler_kwargs):
    with xpuprof.profile(activities=["cpu"], on_trace_ready=xpuprof.trace_handler(tmp_path, **handler_kwargs)) as prof:
        with xpuprof.record_function("named"):
            pass
    return prof


def test_trace_handler_writes_tensorboard_names(tmp_path, load_trace):
    prof = _run(tmp_path, worker_name="trainer")
    files = os.listdir(tmp_path)
    assert len(files) == 1
    m = NAME.match(files[0])
    assert m and m["worker"] == "trainer"
    assert prof.last_trace_path == tmp_path / files[0]
    data = load_trace(tmp_path / files[0])
    assert any(e.get("name") == "named" for e in data["traceEvents"])


def test_trace_handler_gzip_and_default_worker(tmp_path):
    _run(tmp_path, use_gzip=True)
    (name,) = os.listdir(tmp_path)
    assert name.endswith(".pt.trace.json.gz") and NAME.match(name)
    assert NAME.match(name)["worker"] == f"{socket.gethostname()}_{os.getpid()}"
    with gzip.open(tmp_path / name) as f:
        assert json.load(f)["traceEvents"]


def test_rank_is_in_the_trace_not_the_name(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    prof = xpuprof.profile(activities=["cpu"], on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w"))
    prof.add_metadata("distributedInfo", {"rank": 5, "world_size": 8})
    with prof:
        pass
    (name,) = os.listdir(tmp_path)
    assert NAME.match(name)["worker"] == "w"
    assert json.loads((tmp_path / name).read_text())["distributedInfo"]["rank"] == 5


def test_each_cycle_gets_its_own_file(tmp_path):
    prof = xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=0, warmup=0, active=1, repeat=3),
                           on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w"))
    with prof:
        for _ in range(5):
            prof.step()
    assert len(os.listdir(tmp_path)) == 3


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_trace_handler_checks_its_directory_before_the_workload(tmp_path, where):
    if where == "under_a_file":
        (tmp_path / "a_file").write_text("x")
        bad = tmp_path / "a_file" / "traces"
    else:
        bad = Path("/proc/no/such/dir")  # not creatable, even by root
    ran = []
    with pytest.raises(ValueError) as info:
        handler = xpuprof.trace_handler(bad)
        with xpuprof.profile(activities=["cpu"], on_trace_ready=handler):
            ran.append("workload")
    assert ran == []  # one clear error before the loop, not after it
    message = str(info.value)
    assert str(bad) in message and "\n" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no chained tracebacks
