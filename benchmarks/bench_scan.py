"""The report's JSON scan against memcpy, same run (issue 41: >= 1 GB/s on a 1 M-event trace).

    python benchmarks/bench_scan.py                   # 1 M host ranges and 1 M XPU records, 3 runs
    python benchmarks/bench_scan.py --n 200000 --runs 3 --kinds host

Two traces are written once per invocation by xpuprof itself (``bench_report.py``'s makers: 1 M
``record_function`` ranges, 137 B an event; the XPU backend over the PTI double, ~230 B an event with
kernels' ~20 args). Each measurement is a fresh process, alternated trace by trace, run by run; in it:

- ``C scan``: the one C scanner (``tracescan.events``) over the file's bytes in the reader's 16 MiB
  windows, the document already in memory: the structural scan alone, GB/s of the document per CPU
  second of the thread (and per wall second).
- ``reader``: what ``xpuprof report`` runs for it, ``KinetoStream(path).chunks()`` from the file on
  disk (read, decompress where gzip, scan, columns and the names decoded per chunk).
- ``memcpy``: the same bytes copied in the same 16 MiB windows into one reused buffer (numpy
  ``copyto``), in the same process: the machine's copy bandwidth, the physical floor.
- per level (``--levels``): the scan with each SIMD level pinned (``tracescan.simd``), so the fast paths
  and the scalar fallback are measured side by side.

Each figure is the median of ``--runs`` processes, each process's best of 5 passes. The machine's 1-minute
load and its CPU count are printed with the figures.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WINDOW = 16 << 20


def _child(path: str, levels: list[str]) -> dict:
    import numpy as np

    from xpuprof._native import tracescan
    from xpuprof.trace.read.kineto_stream import KinetoStream

    data = Path(path).read_bytes()
    view = memoryview(data)
    status, start, _ = tracescan.header(data, True)
    assert status == 1
    out: dict = {"bytes": len(data)}

    def c_scan() -> tuple[float, float, int]:
        pos, state, events = start, 0, 0
        cpu, wall = time.thread_time(), time.perf_counter()
        while True:  # the reader's windows: up to 16 MiB past where the last complete event ended
            end = min(len(data), pos + WINDOW)
            window = view[pos:end]  # no copy: the reader hands the scanner its buffer as it is
            final = end == len(data)
            r = tracescan.events(window, 0, state, final)
            events += r[0]
            consumed, state, st = r[12], r[13], r[14]
            if st != 0:
                break
            pos += consumed
        return time.thread_time() - cpu, time.perf_counter() - wall, events

    if not hasattr(tracescan, "simd"):  # a checkout from before the SIMD levels: its one scanner
        levels = ["baseline"]
    for level in levels:
        if level != "baseline":
            tracescan.simd(level)
        best = min(c_scan() for _ in range(5))
        out[f"scan_{level}_GB_s_cpu"] = len(data) / best[0] / 1e9
        out[f"scan_{level}_GB_s_wall"] = len(data) / best[1] / 1e9
        out["events"] = best[2]
    out["level"] = tracescan.simd("best") if hasattr(tracescan, "simd") else "baseline"

    def reader() -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in KinetoStream(path).chunks():
            pass
        return time.process_time() - cpu, time.perf_counter() - wall

    best = min(reader() for _ in range(5))
    out["reader_GB_s_cpu"], out["reader_GB_s_wall"] = len(data) / best[0] / 1e9, len(data) / best[1] / 1e9

    src = np.frombuffer(data, np.uint8)
    dst = np.empty(WINDOW, np.uint8)

    def memcpy() -> tuple[float, float]:
        cpu, wall = time.thread_time(), time.perf_counter()
        for lo in range(0, len(src), WINDOW):
            piece = src[lo:lo + WINDOW]
            np.copyto(dst[:len(piece)], piece)
        return time.thread_time() - cpu, time.perf_counter() - wall

    best = min(memcpy() for _ in range(5))
    out["memcpy_GB_s_cpu"], out["memcpy_GB_s_wall"] = len(data) / best[0] / 1e9, len(data) / best[1] / 1e9
    return out


def _spawn(path: Path, levels: list[str], root: Path = REPO) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, __file__, "--child", str(path), "--levels", ",".join(levels)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed on {path}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _make(kind: str, n: int, path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, str(HERE / "bench_report.py"), "--make", kind, "--n", str(n), "--path", str(path)],
                   check=True, env=env)


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="host ranges / device records per trace")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="host,device")
    ap.add_argument("--levels", default=None, help="SIMD levels to pin, comma-separated (default: every level "
                                                   "this processor runs)")
    ap.add_argument("--baseline", type=Path, help="another checkout (built), e.g. the code before a change: its C "
                                                   "scan in the same alternation")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child(a.child, a.levels.split(","))))
        return 0
    sys.path.insert(0, str(REPO))
    from xpuprof._native import tracescan

    best = tracescan.simd("best")
    levels = a.levels.split(",") if a.levels else ["scalar", "sse2", "avx2"][:["scalar", "sse2", "avx2"].index(best) + 1]
    measured = levels if best in levels else [*levels, best]  # the main table's figure is the best level's
    kinds = a.kinds.split(",")
    with tempfile.TemporaryDirectory(prefix="xpuprof-bench-scan-") as tmp:
        paths = {k: Path(tmp) / f"{k}.json" for k in kinds}
        for k, p in paths.items():
            _make(k, a.n, p)
        load0 = os.getloadavg()[0]
        results: dict[str, list[dict]] = {k: [] for k in kinds}
        base: dict[str, list[dict]] = {k: [] for k in kinds}
        for _ in range(a.runs):
            for k in kinds:
                results[k].append(_spawn(paths[k], measured))
                if a.baseline:  # its scanner at the level it chooses itself, whatever levels it has
                    base[k].append(_spawn(paths[k], ["baseline"], a.baseline))
        load1 = os.getloadavg()[0]
    print(f"# the report's JSON scan vs memcpy, median (min-max) of {a.runs} fresh processes, each the best of 5 "
          f"passes; 1-min load {load0:.2f} -> {load1:.2f} on {os.cpu_count()} CPUs; level in use: {best}")
    print("| trace | events | MB | C scan GB/s (CPU) | C scan GB/s (wall) | reader GB/s (CPU) | memcpy GB/s (CPU) | "
          "C scan / memcpy | goal >= 1 GB/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in kinds:
        rs = results[k]
        scan = [r[f"scan_{best}_GB_s_cpu"] for r in rs]
        ratio = [r[f"scan_{best}_GB_s_cpu"] / r["memcpy_GB_s_cpu"] for r in rs]
        print(f"| {k} | {rs[0]['events']:,} | {rs[0]['bytes'] / 1e6:.0f} | {_med(scan)} | "
              f"{_med([r[f'scan_{best}_GB_s_wall'] for r in rs])} | {_med([r['reader_GB_s_cpu'] for r in rs])} | "
              f"{_med([r['memcpy_GB_s_cpu'] for r in rs])} | {_med(ratio)} | "
              f"{'met' if statistics.median(scan) >= 1.0 else 'not met'} |")
    if a.baseline:
        for k in kinds:
            scan = [r["scan_baseline_GB_s_cpu"] for r in base[k]]
            ratio = [r["scan_baseline_GB_s_cpu"] / r["memcpy_GB_s_cpu"] for r in base[k]]
            print(f"| {k}, baseline ({a.baseline}) | {base[k][0]['events']:,} | {base[k][0]['bytes'] / 1e6:.0f} | "
                  f"{_med(scan)} | {_med([r['scan_baseline_GB_s_wall'] for r in base[k]])} | "
                  f"{_med([r['reader_GB_s_cpu'] for r in base[k]])} | {_med([r['memcpy_GB_s_cpu'] for r in base[k]])} | "
                  f"{_med(ratio)} | |")
    print()
    print("| trace | " + " | ".join(f"{lv} GB/s (CPU)" for lv in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for k in kinds:
        print(f"| {k} | " + " | ".join(_med([r[f"scan_{lv}_GB_s_cpu"] for r in results[k]]) for lv in levels) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
