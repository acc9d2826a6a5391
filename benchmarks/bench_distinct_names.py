"""Ranges with distinct names against ranges with one repeated name: peak memory and time of each
stage a user pays for - recording, ``stop()``, ``export_chrome_trace()`` to a file on disk.

    python benchmarks/bench_distinct_names.py [--sizes 100000,300000,1000000] [--repeat 3]

Every (size, naming) runs in a fresh process, ``--repeat`` times; the median is printed. Namings:
  repeated   ``record_function("step")`` - one name object (the baseline)
  formatted  ``record_function(f"step {i % 64}")`` - a new name object per range, 64 distinct texts
  distinct   ``record_function(f"step {i}")`` - every range its own name
Memory is each stage's own peak above the resident size before recording (Linux: the peak RSS,
VmHWM, is reset through /proc/self/clear_refs before each stage), per range. Time is the process's
CPU time per range (all its threads; on a shared machine wall time mostly measures the wait for a
CPU) with the wall time beside it. The target: distinct within 2x of repeated at every stage, memory
and time (the recording loop's time includes formatting the name, which ``formatted`` pays too: its
ratio is printed as well).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("record", "stop", "export")
NAMINGS = ("repeated", "formatted", "distinct")

CHILD = r"""
import json, sys, time
import xpuprof
n, path, naming = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

with xpuprof.profile(activities=["cpu"]) as warm:  # every module the measured run touches is loaded
    with xpuprof.record_function("warm"):
        pass
warm.export_chrome_trace(path)
del warm
rf = xpuprof.record_function
base = status("VmRSS")
prof = xpuprof.profile(activities=["cpu"])
out = {}
reset_peak()
t0, c0 = time.perf_counter(), time.process_time()
prof.start()
if naming == "repeated":
    for i in range(n):
        with rf("step"):
            pass
elif naming == "formatted":
    for i in range(n):
        with rf(f"step {i % 64}"):
            pass
else:
    for i in range(n):
        with rf(f"step {i}"):
            pass
t1, c1 = time.perf_counter(), time.process_time()
out["record"] = (status("VmHWM") - base, c1 - c0, t1 - t0)
reset_peak()
prof.stop()
t2, c2 = time.perf_counter(), time.process_time()
out["stop"] = (status("VmHWM") - base, c2 - c1, t2 - t1)
reset_peak()
prof.export_chrome_trace(path)
t3, c3 = time.perf_counter(), time.process_time()
out["export"] = (status("VmHWM") - base, c3 - c2, t3 - t2)
size = len(open(path, "rb").read())
print(json.dumps({"stages": out, "file_bytes": size}))
"""


def run_once(n: int, naming: str, tmp: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(n), str(tmp / f"{naming}.json"), naming],
                          capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{naming} n={n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists("/proc/self/clear_refs"):
        raise SystemExit("needs Linux (/proc/self/clear_refs resets the peak RSS per stage)")
    sizes = [int(s) for s in args.sizes.split(",")]
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in sizes:
            med: dict[str, dict[str, tuple[float, float, float]]] = {}
            for naming in NAMINGS:
                runs = [run_once(n, naming, tmp)["stages"] for _ in range(args.repeat)]
                med[naming] = {s: (statistics.median(r[s][0] for r in runs) / n,
                                   statistics.median(r[s][1] for r in runs) / n * 1e9,
                                   statistics.median(r[s][2] for r in runs) / n * 1e9) for s in STAGES}
            print(f"\n{n:,} ranges (median of {args.repeat} fresh processes)")
            print(f"{'stage':<8} {'naming':<10} {'B/range':>9} {'CPU ns':>8} {'wall ns':>8}  {'mem x':>6}"
                  f" {'CPU x':>6}  {'CPU x formatted':>15}")
            for s in STAGES:
                base_mem, base_ns, _ = med["repeated"][s]
                fmt_ns = med["formatted"][s][1]
                for naming in NAMINGS:
                    mem, ns, wall = med[naming][s]
                    mx, tx = mem / base_mem if base_mem else float("nan"), ns / base_ns
                    txf = ns / fmt_ns
                    print(f"{s:<8} {naming:<10} {mem:>9.1f} {ns:>8.0f} {wall:>8.0f}  {mx:>6.2f} {tx:>6.2f}"
                          f"  {txf:>15.2f}")
                    if naming == "distinct":
                        worst = max(worst, mx, txf)
    print(f"\nworst distinct/baseline ratio (memory vs repeated, CPU time vs formatted): {worst:.2f} (target <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
