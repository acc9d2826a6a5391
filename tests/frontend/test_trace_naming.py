import gzip
import json
import os
import re
from pathlib import Path

import pytest

import xpuprof
from xpuprof.profiler import trace_file_name

NAME = re.compile(r"^(?P<worker>[^/]+)\.(?P<pid>\d+)(\.rank(?P<rank>\d+))?\.(?P<ts>\d+)\.pt\.trace\.json(\.gz)?$")


def test_trace_file_name_shape():
    assert trace_file_name("w", pid=12, ts_ns=99) == "w.12.99.pt.trace.json"
    assert trace_file_name("w", pid=12, ts_ns=99, rank=3, use_gzip=True) == "w.12.rank3.99.pt.trace.json.gz"
    assert trace_file_name("a/b", pid=1, ts_ns=2) == "a_b.1.2.pt.trace.json"


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
    assert m and m["worker"] == "trainer" and int(m["pid"]) == os.getpid() and m["rank"] is None
    assert prof.last_trace_path == tmp_path / files[0]
    data = load_trace(tmp_path / files[0])
    assert any(e.get("name") == "named" for e in data["traceEvents"])


def test_trace_handler_gzip_and_default_worker(tmp_path):
    _run(tmp_path, use_gzip=True)
    (name,) = os.listdir(tmp_path)
    assert name.endswith(".pt.trace.json.gz") and NAME.match(name)
    with gzip.open(tmp_path / name) as f:
        assert json.load(f)["traceEvents"]


def test_rank_comes_from_distributed_info(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    prof = xpuprof.profile(activities=["cpu"], on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w"))
    prof.add_metadata("distributedInfo", {"rank": 5, "world_size": 8})
    with prof:
        pass
    (name,) = os.listdir(tmp_path)
    assert NAME.match(name)["rank"] == "5"


def test_rank_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    _run(tmp_path, worker_name="w")
    (name,) = os.listdir(tmp_path)
    assert NAME.match(name)["rank"] == "2"


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
