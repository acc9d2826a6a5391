"""The Kineto output contract, checked on traces the Python API writes (sim backend, schedule, threads).

Covers what a Kineto consumer (Perfetto, TensorBoard, HTA) relies on: main CPU process rows,
``distributedInfo`` under a launcher, flow pairing and binding, and the closing rows.
"""
import gzip
import json
import os
import re
import threading

import pytest

import xpuprof

HTA_RANK = re.compile(r'"rank":\s+(\d+)')  # HolisticTraceAnalysis' rank regex (needs the space)
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "PMIX_SIZE", "MV2_COMM_WORLD_RANK",
                 "MV2_COMM_WORLD_SIZE", "PALS_RANKID", "PALS_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


@pytest.fixture
def no_launcher(monkeypatch):
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _loop(tmp_path):
    """Schedule with two cycles, nested ranges, worker threads, instants, and an exception in the block."""
    def worker(i):
        with xpuprof.record_function(f"thread_work_{i}", {"i": i}):
            with xpuprof.record_function("inner"):
                pass

    prof = xpuprof.profile(backends=["sim"], schedule=xpuprof.schedule(wait=1, warmup=1, active=2, repeat=2),
                           on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w", use_gzip=True))
    with pytest.raises(RuntimeError, match="kaboom"):
        with prof:
            for step in range(10):
                with xpuprof.record_function("outer", {"step": step}):
                    with xpuprof.record_function("inner"):
                        pass
                    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    xpuprof.instant("marker", {"step": step})
                if step == 7:
                    raise RuntimeError("kaboom")
                prof.step()
    return sorted(tmp_path.iterdir())


def _read(path):
    raw = gzip.decompress(path.read_bytes()).decode()
    return raw, json.loads(raw)


def test_main_cpu_process_rows_follow_kineto(tmp_path, no_launcher):
    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("work"):
            pass
    data = json.loads(prof.export_chrome_trace(tmp_path / "t.pt.trace.json").read_text())
    pid = os.getpid()
    rows = {e["name"]: e for e in data["traceEvents"] if e["ph"] == "M" and e["pid"] == pid and e["tid"] == 0}
    assert rows["process_labels"]["args"] == {"labels": "CPU"}
    assert rows["process_sort_index"]["args"] == {"sort_index": pid}
    assert set(rows["process_name"]["args"]) == {"name"}


def test_scheduled_sim_loop_keeps_the_contract(tmp_path, no_launcher):
    files = _loop(tmp_path)
    assert len(files) == 2  # one per active cycle; the second ends at the exception
    for path in files:
        raw, data = _read(path)
        keys = list(data)
        assert keys[:2] == ["schemaVersion", "deviceProperties"] and keys[-1] == "traceName"
        assert keys[-3:-1] == ["baseTimeNanoseconds", "traceEvents"] and "distributedInfo" not in data
        assert data["baseTimeNanoseconds"] % (7_889_238 * 10**9) == 0
        assert re.search(r'"(ts|dur)":-?\d+(,|})', raw) is None  # always 3 decimals
        ev = data["traceEvents"]
        assert all(e["ts"] >= 0 for e in ev) and all(e["dur"] >= 0 for e in ev if e["ph"] == "X")
        assert ev[-1] == {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": ev[-1]["ts"]}
        assert all("bp" not in e for e in ev if e["ph"] != "f")
        starts = {(e["pid"], e["tid"], e["ts"]) for e in ev if e["ph"] == "X"}
        flows = [e for e in ev if e["ph"] in "sf"]
        assert flows and all((e["pid"], e["tid"], e["ts"]) in starts for e in flows)
        s_ids = sorted(e["id"] for e in flows if e["ph"] == "s")
        assert s_ids == sorted(e["id"] for e in flows if e["ph"] == "f" and e["bp"] == "e")
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
        for e in ev:
            if e.get("cat") in ("user_annotation", "cpu_instant_event"):
                assert re.fullmatch(rf"thread {e['tid']} \(.+\)", names[(e["pid"], e["tid"])])
        host = {e["args"]["External id"] for e in ev if e.get("cat") == "user_annotation"}
        kernels = [e for e in ev if e.get("cat") == "kernel" and not e["name"].startswith("metrics: ")]
        # the default sim writes XPU's rows: the queue in "sycl queue", as our XPU backend and Kineto's XPU plugin
        assert kernels and all({"sycl queue", "correlation"} <= set(e["args"]) for e in kernels)
        assert all(e["args"]["External id"] in host for e in kernels)
        assert sum(e["name"].startswith("ProfilerStep#") for e in ev) == 2
        assert any(e["pid"] == "Spans" and e["ph"] == "X" for e in ev)
        assert any(e["pid"] == "Traces" and e["name"].startswith("Iteration Start: ") for e in ev)
    assert _read(files[1])[1]["profiled_block_exception"] == "RuntimeError: kaboom"


def test_launcher_rank_reaches_distributed_info_not_the_file_name(tmp_path, no_launcher):
    no_launcher.setenv("RANK", "1")
    no_launcher.setenv("WORLD_SIZE", "2")
    files = _loop(tmp_path)
    assert len(files) == 2
    for path in files:
        assert "rank" not in path.name  # the one naming rule: <worker>.<ts>.pt.trace.json, the rank inside
        raw, data = _read(path)
        assert data["distributedInfo"]["rank"] == 1 and data["distributedInfo"]["world_size"] == 2
        m = HTA_RANK.search(raw)
        assert m and m.group(1) == "1" and m.start() < raw.index('"traceEvents"')


def test_mpi_rank_without_torchrun_variables(tmp_path, no_launcher):
    no_launcher.setenv("OMPI_COMM_WORLD_RANK", "3")
    no_launcher.setenv("OMPI_COMM_WORLD_SIZE", "4")
    with xpuprof.profile(activities=["cpu"], on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w")):
        with xpuprof.record_function("work"):
            pass
    (path,) = tmp_path.iterdir()
    assert path.name.startswith("w.") and "rank" not in path.name
    assert json.loads(path.read_text())["distributedInfo"]["rank"] == 3


def test_explicit_distributed_info_wins_over_launcher(tmp_path, no_launcher):
    no_launcher.setenv("RANK", "1")
    no_launcher.setenv("WORLD_SIZE", "2")
    prof = xpuprof.profile(activities=["cpu"], on_trace_ready=xpuprof.trace_handler(tmp_path, worker_name="w"))
    prof.add_metadata("distributedInfo", {"rank": 0, "world_size": 2, "backend": "xccl"})
    with prof:
        pass
    (path,) = tmp_path.iterdir()
    assert json.loads(path.read_text())["distributedInfo"] == {"rank": 0, "world_size": 2, "backend": "xccl"}


def test_bad_launcher_variables_do_not_break_profiling(tmp_path, no_launcher, caplog):
    no_launcher.setenv("RANK", "5")
    no_launcher.setenv("WORLD_SIZE", "2")  # rank outside world size
    with xpuprof.profile(activities=["cpu"]) as prof:
        pass
    data = json.loads(prof.export_chrome_trace(tmp_path / "t.pt.trace.json").read_text())
    assert "distributedInfo" not in data
    assert "RANK" in caplog.text
