"""What profile_memory=True costs per op: xpuprof.profile against torch.profiler.profile, both with
profile_memory=True, on the same training loop (the bound: at most 1.5x torch's per-op overhead).

    python benchmarks/bench_torch_memory.py [--processes 3] [--steps 200]

Workload: ``steps`` steps of a small MLP forward + backward + SGD step on CPU (small tensors, so the per-op
cost of recording ops and allocations dominates). Each of ``--processes`` fresh processes runs the loop
unprofiled, under torch.profiler and under xpuprof (``--repeats`` times each, interleaved, order rotated per
process), each ending in the trace on disk; each process's medians, then the median over processes, are
printed. Per-op overhead = (loop time profiled - loop time
unprofiled) / ops recorded (torch's count). "stop + export" is what leaving the profiled block and writing
the trace file costs (torch: its result and export_chrome_trace; xpuprof: the trace built, ops, [memory]
events merged and linked, then written).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from torch_mlp import MLP_TRAINING  # the workload's text

CHILD = r"""
import json, os, sys, tempfile, time
import torch
import xpuprof

steps, order, repeats = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3])
""" + MLP_TRAINING + r"""
tmp = tempfile.mkdtemp()
def none():
    t0 = time.perf_counter(); work(); return {"loop": time.perf_counter() - t0, "stop_export": 0.0}

def torch_profiler():
    p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
    p.__enter__()
    t0 = time.perf_counter(); work(); t1 = time.perf_counter()
    p.__exit__(None, None, None)
    path = os.path.join(tmp, "t.json")
    p.export_chrome_trace(path)
    t2 = time.perf_counter()
    events = json.load(open(path))["traceEvents"]
    return {"loop": t1 - t0, "stop_export": t2 - t1, "ops": sum(e.get("cat") == "cpu_op" for e in events),
            "memory": sum(e.get("name") == "[memory]" for e in events)}

def xpuprof_profile():
    p = xpuprof.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
    p.__enter__()
    t0 = time.perf_counter(); work(); t1 = time.perf_counter()
    p.__exit__(None, None, None)
    p.export_chrome_trace(os.path.join(tmp, "x.json"))
    t2 = time.perf_counter()
    meta = p.builder.metadata
    return {"loop": t1 - t0, "stop_export": t2 - t1, "ops": meta["torch_ops"]["ops"],
            "memory": meta["memory_events"]["events"]}

modes = {"none": none, "torch.profiler": torch_profiler, "xpuprof.profile": xpuprof_profile}
work()  # warm up (first-step allocations, lazy init)
res = {name: [] for name in order}
for _ in range(repeats):  # interleaved, so drifts of the shared machine hit every mode alike
    for name in order:
        res[name].append(modes[name]())
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs of each mode inside each process")
    a = ap.parse_args()
    if a.processes < 3:
        ap.error("--processes must be >= 3 (medians of at least 3 fresh processes)")
    names = ["none", "torch.profiler", "xpuprof.profile"]
    runs = []
    for i in range(a.processes):
        order = names[i % 3:] + names[:i % 3]  # rotated: neither profiler always runs first
        out = subprocess.run([sys.executable, "-c", CHILD, str(a.steps), ",".join(order), str(a.repeats)],
                             capture_output=True, text=True, check=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append({n: {k: statistics.median(r[k] for r in got[n]) for k in got[n][0]} for n in names})
    med = {n: {k: statistics.median(r[n][k] for r in runs) for k in runs[0][n]} for n in names}
    ops = med["torch.profiler"]["ops"]
    base = med["none"]["loop"]
    per_op = {n: (med[n]["loop"] - base) / ops * 1e6 for n in names}
    print(f"{a.steps} steps, {int(ops)} ops, median of {a.processes} fresh processes ({a.repeats} interleaved "
          "runs of each mode inside each)")
    print(f"{'mode':<18} {'loop ms':>9} {'per-op us':>10} {'ratio':>6} {'[memory]':>9} {'stop+export ms':>15}")
    for n in names:
        ratio = "" if n == "none" else f"{per_op[n] / per_op['torch.profiler']:6.2f}"
        mem = "" if n == "none" else f"{int(med[n]['memory']):9d}"
        print(f"{n:<18} {med[n]['loop'] * 1e3:9.1f} {per_op[n]:10.2f} {ratio:>6} {mem:>9} "
              f"{med[n]['stop_export'] * 1e3:15.1f}")
    print(f"ratio xpuprof/torch.profiler per-op overhead with profile_memory=True: "
          f"{per_op['xpuprof.profile'] / per_op['torch.profiler']:.2f} (bound 1.5)")


if __name__ == "__main__":
    main()
