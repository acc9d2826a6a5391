"""8 threads x 10,000 ranges at once: every range kept, each on its own
thread's row, that row named after its thread, ranges on one row in order and properly nested."""
from __future__ import annotations

import collections
import threading

import orjson

import xpuprof
import pytest

pytestmark = pytest.mark.slow

THREADS, RANGES = 8, 10_000


def test_eight_threads_ten_thousand_ranges_each(tmp_path):
    start = threading.Barrier(THREADS)

    def work(i: int) -> None:
        start.wait()  # all threads record at the same time
        for k in range(RANGES // 2):
            with xpuprof.record_function(f"w{i}.outer"):
                with xpuprof.record_function(f"w{i}.inner", {"k": k}):
                    pass

    threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(THREADS)]
    with xpuprof.profile(activities=["user_annotation"]) as prof:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    data = orjson.loads(prof.export_chrome_trace(tmp_path / "threads.json").read_bytes())
    events = data["traceEvents"]
    ranges = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    assert len(ranges) == THREADS * RANGES  # all kept
    by_tid = collections.defaultdict(list)
    for e in ranges:
        by_tid[e["tid"]].append(e)
    assert len(by_tid) == THREADS
    row_names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    seen_workers = set()
    for tid, rows in by_tid.items():
        workers = {e["name"].split(".")[0] for e in rows}
        assert len(workers) == 1, (tid, workers)  # one thread's ranges only
        (worker,) = workers
        i = int(worker[1:])
        seen_workers.add(i)
        assert f"(worker-{i})" in row_names[tid]
        assert collections.Counter(e["name"] for e in rows) == {f"w{i}.outer": RANGES // 2, f"w{i}.inner": RANGES // 2}
        inner = sorted((e for e in rows if e["name"].endswith("inner")), key=lambda e: e["ts"])
        assert [e["args"]["k"] for e in inner] == list(range(RANGES // 2))  # in order
        outer = sorted((e for e in rows if e["name"].endswith("outer")), key=lambda e: e["ts"])
        for o, n in zip(outer, inner):  # each inner range inside its outer one (µs, 3 decimals)
            assert o["ts"] <= n["ts"] and n["ts"] + n["dur"] <= o["ts"] + o["dur"] + 0.002
    assert seen_workers == set(range(THREADS))
