"""What metric collectors cost the profiled program: a fixed CPU-bound Python workload profiled
with no collector (baseline), then with host telemetry sampled every 10 ms (the default) and
every 1 ms, timed from ``xpuprof.profile(...)`` to the trace file on disk.

    python benchmarks/bench_collectors.py [--runs 3] [--work 3000000]

Each case runs in a fresh process, --runs times; the median is printed. "per sample" is the
extra wall time over the baseline divided by the samples taken (it includes the GIL time the
sampling thread takes from the program, the reads, and writing the counters); "read" is the
mean time inside the collector's read() as the sampling thread saw it (GIL waits included);
the last rows time read() alone in a loop (no program competing for the GIL). A pure-Python
loop that holds the GIL starves the sampling thread: it gets far fewer samples than asked, and
the trace's collector_errors says so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, tempfile, time
import xpuprof
from xpuprof import ExperimentalConfig
metrics, interval_ms, work = sys.argv[1].split(",") if sys.argv[1] else [], float(sys.argv[2]), int(sys.argv[3])
out = os.path.join(tempfile.mkdtemp(), "t.json")
t0 = time.perf_counter()
with xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=metrics, metrics_interval_ms=interval_ms)) as prof:
    acc = 0
    for i in range(work):
        acc += i * i
prof.export_chrome_trace(out)
wall = time.perf_counter() - t0
meta = prof.builder.metadata.get("collectors", {}).get("host", {})
print(json.dumps({"wall_s": wall, "samples": meta.get("samples", 0), "read_us": meta.get("mean_read_us", 0.0)}))
"""

CASES = [("baseline (no collector)", "", 10.0),
         ("host cpu_utilization+process_rss @ 10 ms", "cpu_utilization,process_rss", 10.0),
         ("host, all 5 metrics @ 10 ms", "cpu_utilization,process_cpu_utilization,process_rss,memory_used,"
                                        "memory_utilization", 10.0),
         ("host cpu_utilization+process_rss @ 1 ms", "cpu_utilization,process_rss", 1.0)]


def run_case(metrics: str, interval_ms: float, work: int, runs: int) -> dict:
    rows = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CHILD, metrics, str(interval_ms), str(work)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


ISOLATED = r"""
import json, sys, time
from xpuprof.collectors.host import HostCollector
from xpuprof.collectors.sampler import CollectorRun
c = HostCollector(sys.argv[1].split(","), 0.01)
c.open()
n = 2000
t0 = time.perf_counter_ns()
for _ in range(n):
    c.read()
print(json.dumps({"read_us": (time.perf_counter_ns() - t0) / n / 1e3}))
"""


def isolated_read_us(metrics: str, runs: int) -> float:
    vals = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", ISOLATED, metrics], capture_output=True, text=True, check=True)
        vals.append(json.loads(out.stdout.strip().splitlines()[-1])["read_us"])
    return statistics.median(vals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=int, default=3_000_000)
    args = ap.parse_args()
    results = [(label, run_case(m, iv, args.work, args.runs)) for label, m, iv in CASES]
    base = results[0][1]["wall_s"]
    print(f"{'case':45s} {'wall s':>8s} {'x base':>7s} {'samples':>8s} {'per sample':>11s} {'read':>9s}")
    for label, r in results:
        extra = r["wall_s"] - base
        per = f"{extra / r['samples'] * 1e6:8.1f} us" if r["samples"] else "-"
        read = f"{r['read_us']:6.1f} us" if r["samples"] else "-"
        print(f"{label:45s} {r['wall_s']:8.3f} {r['wall_s'] / base:7.3f} {int(r['samples']):8d} {per:>11s} {read:>9s}")
    for label, metrics in (("host read(), 2 metrics, uncontended", CASES[1][1]),
                           ("host read(), 5 metrics, uncontended", CASES[2][1])):
        print(f"{label:45s} {isolated_read_us(metrics, args.runs):8.1f} us per sample (median of {args.runs} processes)")


if __name__ == "__main__":
    main()
