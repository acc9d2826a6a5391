"""What recording PyTorch ops costs per op: xpuprof.profile() against torch.profiler's own CPU-only
profiler on the same workload, and a Python dispatch-mode recorder
(the alternative mechanism, measured to justify the choice).

    python benchmarks/bench_torch_ops.py [--runs 3] [--sizes 50,200]

Workload: ``size`` steps of a small MLP forward + backward + SGD step on CPU (small tensors, so the
per-op cost of recording dominates). Each size runs in a fresh process; inside it every mode runs
``--runs`` times, interleaved, and the medians are printed. Per-op overhead = (median wall time of
the profiled loop - median unprofiled) / ops recorded (torch.profiler's count). "stop" is the time
from leaving the profiled block to the trace in memory (torch: its result; xpuprof: the trace built,
ops merged and linked); "export" writes the file.
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
from torch.utils._python_dispatch import TorchDispatchMode
import xpuprof

steps, runs = int(sys.argv[1]), int(sys.argv[2])
""" + MLP_TRAINING + r"""
class DispatchRecorder(TorchDispatchMode):  # the alternative: one Python call per op
    def __init__(self):
        super().__init__()
        self.rows = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        t0 = time.perf_counter_ns()
        out = func(*args, **(kwargs or {}))
        self.rows.append((func, t0, time.perf_counter_ns()))
        return out

tmp = tempfile.mkdtemp()
def none():
    t0 = time.perf_counter(); work(); return time.perf_counter() - t0, 0.0, 0.0, 0

def torch_cpu():
    p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    p.__enter__()
    t0 = time.perf_counter(); work(); t1 = time.perf_counter()
    p.__exit__(None, None, None)
    t2 = time.perf_counter()
    n = sum(1 for e in p.events() if e.device_type.name == "CPU")
    t3 = time.perf_counter()
    p.export_chrome_trace(os.path.join(tmp, "t.json"))
    return t1 - t0, t2 - t1, time.perf_counter() - t3, n

def ours():
    p = xpuprof.profile(activities=["cpu"])
    p.__enter__()
    t0 = time.perf_counter(); work(); t1 = time.perf_counter()
    p.__exit__(None, None, None)
    t2 = time.perf_counter()
    n = p.builder.metadata["torch_ops"]["ops"]
    p.export_chrome_trace(os.path.join(tmp, "x.json"))
    return t1 - t0, t2 - t1, time.perf_counter() - t2, n

def dispatch():
    m = DispatchRecorder()
    t0 = time.perf_counter()
    with m:
        work()
    return time.perf_counter() - t0, 0.0, 0.0, len(m.rows)

modes = {"none": none, "torch.profiler CPU": torch_cpu, "xpuprof.profile": ours, "dispatch mode": dispatch}
work()  # warm up (first-step allocations, lazy init)
res = {k: [] for k in modes}
for _ in range(runs):
    for k, f in modes.items():
        res[k].append(f())
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="50,200")
    a = ap.parse_args()
    if a.runs < 3:
        ap.error("--runs must be >= 3 (medians of at least 3 runs)")
    print(f"{'steps':>6} {'ops':>7} {'mode':<20} {'loop ms':>9} {'per op us':>10} {'ratio':>6} {'stop ms':>8} "
          f"{'export ms':>9}")
    for size in [int(s) for s in a.sizes.split(",")]:
        out = subprocess.run([sys.executable, "-c", CHILD, str(size), str(a.runs)], capture_output=True, text=True,
                             check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        med = {k: [statistics.median(r[i] for r in rows) for i in range(4)] for k, rows in res.items()}
        base = med["none"][0]
        n_ops = med["torch.profiler CPU"][3]
        per_op = {k: (v[0] - base) / n_ops * 1e6 for k, v in med.items()}
        ref = per_op["torch.profiler CPU"]
        for k, v in med.items():
            ratio = "" if k == "none" else f"{per_op[k] / ref:6.2f}"
            print(f"{size:>6} {int(n_ops):>7} {k:<20} {v[0] * 1e3:9.1f} {per_op[k]:10.2f} {ratio:>6} "
                  f"{v[1] * 1e3:8.1f} {v[2] * 1e3:9.1f}")
        print(f"ratio xpuprof/torch.profiler per-op overhead ({size} steps): "
              f"{per_op['xpuprof.profile'] / ref:.2f} (bound 1.5)")


if __name__ == "__main__":
    main()
