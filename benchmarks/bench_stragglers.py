"""What the straggler view costs: ``xpuprof report DIR --by-rank`` (which reads each rank's JSON file a
second time for the per-rank view) against the same report without it, and ``xpuprof analyze STORE
stragglers`` on the store of the same ranks; ``json.load`` of every file is the floor.

    python benchmarks/bench_stragglers.py                   # 8 ranks x 250 k events, 3 runs
    python benchmarks/bench_stragglers.py --ranks 4 --n 50000 --runs 3

The ranks are written once per invocation by xpuprof's TraceBuilder (a temporary directory): per step
of 10 ms a ProfilerStep range, kernels launched by runtime calls (correlation ids) and one NCCL
all-reduce whose length is the rank's wait (rank 1 waits least: the others wait for it). Each
measurement is a fresh process, modes alternated run by run; median (min-max) of ``--runs``; the ratio
lines divide medians of the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODES = ("report", "report --by-rank", "analyze stragglers", "json.load")
KERNELS_PER_STEP = 48  # and as many runtime calls, a step range and a collective: ~ 98 events per step


def _make(rank: int, n: int, path: Path) -> None:
    import numpy as np

    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder
    from xpuprof.trace.write.chrome import write_chrome_trace

    steps = max(2, n // (2 * KERNELS_PER_STEP + 2))
    step_ns = 10_000_000
    b = TraceBuilder(pid=rank)
    t0 = BASE_TIME_NS + 10**9
    starts = t0 + np.arange(steps, dtype=np.int64) * step_ns
    b.add_slices(names=[f"ProfilerStep#{i}" for i in range(steps)], ts=starts, dur=np.full(steps, step_ns - 1000),
                 pid=rank, tid=1, cat="user_annotation")
    k = KERNELS_PER_STEP
    launch = np.repeat(starts, k) + np.tile(np.arange(k) * (step_ns // (k + 2)), steps)
    corr = np.arange(1, steps * k + 1)
    b.add_slices(names=["cudaLaunchKernel"] * len(corr), ts=launch, dur=np.full(len(corr), 3_000), pid=rank, tid=1,
                 cat="cuda_runtime", args={"correlation": corr})
    comm = (np.arange(len(corr)) % k) == k - 1
    wait = 500_000 if rank == 1 else 3_000_000
    names = np.where(comm, "ncclKernel_AllReduce_RING_LL_Sum_float", "gemm_kernel")
    dur = np.where(comm, wait, 50_000)
    b.add_slices(names=list(names), ts=launch + 10_000, dur=dur, pid=rank, tid=np.where(comm, 17, 7),
                 cat="kernel", args={"correlation": corr, "stream": np.where(comm, 17, 7)})
    b.set_distributed_info({"rank": rank, "world_size": 8})
    b.set_window(int(starts[0]) - 1000, int(starts[-1]) + step_ns)
    write_chrome_trace(b, path)


def _child(mode: str, where: str) -> dict:
    t = time.perf_counter()
    if mode == "json.load":
        events = 0
        for f in sorted(Path(where).glob("*.pt.trace.json")):
            with open(f, "rb") as fh:
                events += len(json.load(fh)["traceEvents"])
        return {"s": time.perf_counter() - t, "events": events}
    import contextlib
    import io

    from xpuprof.cli import main

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()):
        out = str(Path(tmp) / "out.txt")
        argv = {"report": ["report", where, "-o", out], "report --by-rank": ["report", where, "--by-rank", "-o", out],
                "analyze stragglers": ["analyze", where, "stragglers", "-o", out]}[mode]
        if main(argv) != 0:
            raise RuntimeError(f"{mode} failed")
        text = Path(out).read_text()
    if mode != "report" and "waits" not in text:
        raise RuntimeError(f"{mode}: no per-rank view in the output")
    return {"s": time.perf_counter() - t}


def _run(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def _fmt(vals: list[float]) -> str:
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"


def rows(ranks: int, n: int, runs: int) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory(prefix="xpuprof-bench-stragglers-") as tmp:
        traces, store = Path(tmp) / "traces", Path(tmp) / "store"
        traces.mkdir()
        for r in range(ranks):
            _run(["--make", str(r), "--n", str(n), "--path", str(traces / f"w.rank{r}.pt.trace.json")])
        subprocess.run([sys.executable, "-m", "xpuprof", "convert", str(traces), "-o", str(store)], check=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        res: dict[str, list[float]] = {m: [] for m in MODES}
        events = 0
        for _ in range(runs):
            for m in MODES:
                got = _run(["--child", m, "--path", str(store if m == "analyze stragglers" else traces)])
                res[m].append(got["s"])
                events = got.get("events", events)
    tag = f"{ranks} ranks, {events / 1e6:.2f} M events"
    out = [(f"{tag}: {m} s", _fmt(res[m])) for m in MODES]
    med = {m: statistics.median(v) for m, v in res.items()}
    out.append((f"{tag}: report --by-rank / report", f"{med['report --by-rank'] / med['report']:.2f}"))
    out.append((f"{tag}: report --by-rank / json.load", f"{med['report --by-rank'] / med['json.load']:.2f}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--n", type=int, default=250_000, help="events per rank (about)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--make", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.make is not None:
        _make(a.make, a.n, Path(a.path))
        return 0
    if a.child:
        print(json.dumps(_child(a.child, a.path)))
        return 0
    print(f"# stragglers, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median (min-max) of {a.runs} fresh "
          "processes")
    table = rows(a.ranks, a.n, a.runs)
    width = max(len(label) for label, _ in table)
    for label, value in table:
        print(f"{label:<{width}}  {value}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
