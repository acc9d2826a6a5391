"""What the layout pass (``xpuprof.trace.layout.lay_out``) costs the trace writer, per shape of trace.

Each case builds a TraceBuilder the way its producer does and times, in a fresh process per size (median
of --repeats), the layout pass alone and the Chrome writer to memory-backed /dev/null without and with it,
printing the pass's share of the write:

- ``device``: kernels on 4 streams in start order, launch calls and ac2g flows, per-kernel metric slices
  1 ns wider than their kernel with a gap between kernels (nothing to move: the common case);
- ``device_back_to_back``: the same with kernels back to back (every metric slice overlaps the next one:
  metrics move to lanes of their own);
- ``host``: nested record_function ranges on 4 threads, in the order the recorder gives them (by end);
- ``asyncio``: ranges of 64 interleaving tasks on one thread (most move to lanes).

    python benchmarks/bench_layout.py                 # 1M slices
    python benchmarks/bench_layout.py --quick         # 100k slices
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = ("device", "device_back_to_back", "host", "asyncio")


def build(case: str, n: int):
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace import TraceBuilder

    rng = np.random.default_rng(0)
    tb = TraceBuilder(pid=100)
    t0 = BASE_TIME_NS + 10**9
    if case.startswith("device"):
        k = n // 3  # a kernel, its metric slice and its launch call per launch
        gap = 0 if case == "device_back_to_back" else 800
        dur = rng.integers(2_000, 20_000, k)
        stream = np.arange(k) % 4
        launch = t0 + np.arange(k, dtype=np.int64) * 2_500  # one host thread's calls, one after another
        start = np.empty(k, np.int64)
        free = [0, 0, 0, 0]
        for i, (s, d, at) in enumerate(zip(stream.tolist(), dur.tolist(), launch.tolist())):
            start[i] = max(at + 3_000, free[s] + gap)
            free[s] = int(start[i]) + d
        corr = np.arange(1, k + 1, dtype=np.int64)
        names = [f"kernel_{i}" for i in range(50)]
        name_ids = np.array([tb.strings.intern(x) for x in names], np.int32)[rng.integers(0, 50, k)]
        for lo in range(0, k, 100_000):
            sl = slice(lo, min(lo + 100_000, k))
            tb.add_slices(names=None, name_ids=np.full(sl.stop - sl.start, tb.strings.intern("urEnqueueKernelLaunch"),
                                                       np.int32), ts=launch[sl], dur=np.full(sl.stop - sl.start, 2_000),
                          pid=100, tid=101, cat="runtime", vendor="xpu", args={"correlation": corr[sl]})
            tb.add_slices(names=None, name_ids=name_ids[sl], ts=start[sl], dur=dur[sl], pid=0, tid=stream[sl] + 1,
                          cat="kernel", vendor="xpu", args={"correlation": corr[sl], "stream": stream[sl] + 1})
            tb.add_per_kernel_metrics(kernel_names=[names[0]] * (sl.stop - sl.start), start_ns=start[sl],
                                      end_ns=start[sl] + dur[sl], pid=0, tid=stream[sl] + 1,
                                      metrics={"GpuTime": dur[sl].astype(float)})
            tb.add_flows(flow_ids=corr[sl], ts=launch[sl], pid=100, tid=101, start=True)
            tb.add_flows(flow_ids=corr[sl], ts=start[sl], pid=0, tid=stream[sl] + 1, start=False)
        return tb
    if case == "host":  # an outer range holding two inner ones, 4 threads, given in exit order
        m = n // 3
        outer = t0 + np.arange(m, dtype=np.int64) * 10_000
        rows = []
        for off, d in ((1_000, 3_000), (5_000, 3_000)):
            rows.append((outer + off, np.full(m, d)))
        rows.append((outer, np.full(m, 9_000)))
        ts = np.stack([r[0] for r in rows], 1).ravel()
        du = np.stack([r[1] for r in rows], 1).ravel()
        tid = np.repeat(np.arange(m) % 4 + 1000, 3)
        ids = np.full(len(ts), tb.strings.intern("range"), np.int32)
        for lo in range(0, len(ts), 65_536):
            sl = slice(lo, min(lo + 65_536, len(ts)))
            tb.add_slices(names=None, name_ids=ids[sl], ts=ts[sl], dur=du[sl], pid=100, tid=tid[sl],
                          cat="user_annotation")
        return tb
    if case == "asyncio":  # 64 tasks, each range held across awaits: ranges of different tasks interleave
        tasks = 64
        m = n // 2
        task = np.arange(m) % tasks
        start = t0 + np.arange(m, dtype=np.int64) * 1_000
        dur = 1_000 * tasks + task * 10  # each task's range spans the next ranges of the others
        ids = np.full(m, tb.strings.intern("task range"), np.int32)
        tb.add_slices(names=None, name_ids=ids, ts=start, dur=dur, pid=100, tid=100, cat="user_annotation")
        tb.add_slices(names=None, name_ids=ids, ts=start + 100, dur=dur - 200, pid=100, tid=100, cat="user_annotation")
        return tb
    raise ValueError(case)


def one(case: str, n: int) -> dict:
    from xpuprof.trace.layout import lay_out
    from xpuprof.trace.write.chrome import write_chrome_trace

    tb = build(case, n)
    slices = sum(len(b) for b in tb.slices)
    t = time.perf_counter()
    table = lay_out(tb.freeze())
    layout_s = time.perf_counter() - t
    moved = table.layout.moved
    t = time.perf_counter()
    write_chrome_trace(tb, "/dev/null", threads=1)  # lays out again, as every export does
    write_s = time.perf_counter() - t
    return {"case": case, "slices": slices, "moved": moved, "layout_s": layout_s, "write_s": write_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--case", choices=CASES, action="append")
    ap.add_argument("--one", nargs=2, metavar=("CASE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))))
        return 0
    n = 100_000 if args.quick else 1_000_000
    print(f"load {os.getloadavg()[0]:.1f}; {n:,} slices per case; median of {args.repeats} fresh processes")
    print(f"{'case':22} {'slices':>9} {'moved':>9} {'layout s':>9} {'write s':>9} {'layout/write':>12}")
    for case in args.case or CASES:
        runs = []
        for _ in range(args.repeats):
            done = subprocess.run([sys.executable, __file__, "--one", case, str(n)], capture_output=True, text=True,
                                  check=True)
            runs.append(json.loads(done.stdout))
        lay = statistics.median(r["layout_s"] for r in runs)
        wr = statistics.median(r["write_s"] for r in runs)
        print(f"{case:22} {runs[0]['slices']:>9,} {runs[0]['moved']:>9,} {lay:>9.3f} {wr:>9.3f} {lay / wr:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
