"""What kernel name filters add to the XPU device decode: ``process()`` (decode + emit of every record) with
and without ``include_kernels``/``exclude_kernels``, over the same workload.

    python benchmarks/bench_kernel_filter.py                         # 1 M records, 5 runs
    python benchmarks/bench_kernel_filter.py --records 2000000 --runs 3

Workload: the PTI-ABI double (tests/xpu/double) with kernels named from 3,000 distinct templated names
(a skewed mix), copies, fills, syncs, runtime and driver calls, external correlations: 11 records per
launch. Each run is a fresh process; the modes alternate within a run so the machine's load reaches all:

- ``none``: no filter (the baseline).
- ``keep-all``: 6 exclude patterns that match no kernel: the filter's whole cost, nothing dropped.
- ``drop-half``: an include pattern keeping about half of the kernels (less to write, so this one can
  be faster than the baseline; shown for what a user sees).
Printed: median ``process()`` wall and CPU seconds (range) per mode and mode / none (goal for keep-all <= 1.05).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODES = {
    "none": {},
    "keep-all": {"exclude_kernels": ["^debug_", "test_kernel", r"\bnaive\b", "reference_impl", "OpNever",
                                     "kernel_[0-9]+<double"]},
    "drop-half": {"include_kernels": [r"kernel_[0-9]*[02468]<"]},
}
RECORDS_PER_ITERATION = 8  # with these activity types: 2 external correlations, runtime x3, driver, kernel, copy, fill... as decoded


def child(mode: str, records: int) -> dict:
    sys.path.insert(0, str(REPO / "tests" / "xpu"))
    from conftest import Double, build_double  # the tests' own build of the double

    from xpuprof._native import ptibuf
    from xpuprof.activity import ActivityType
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
    from xpuprof.clock import now_ns
    from xpuprof.config.options import ProfilerConfig
    from xpuprof.trace.builder.builder import TraceBuilder

    cache = Path(tempfile.gettempdir()) / "xpuprof-bench-double"
    cache.mkdir(exist_ok=True)
    double = Double(build_double(cache))
    types = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET,
                       ActivityType.RUNTIME, ActivityType.DRIVER, ActivityType.EXTERNAL_CORRELATION,
                       ActivityType.XPU_SYNC})
    config = ProfilerConfig(**MODES[mode])
    out = {}
    for label, iterations in (("warm", 50), ("timed", max(1, records // RECORDS_PER_ITERATION))):
        double.reset()
        ptibuf.reset()
        api = XpuptiActivityApi(types, config, library=double.lib, device_uuids=[bytes(range(0xA0, 0xAF)) + b"\0"])
        api.start()
        if double.c.xpd_workload(iterations, double.MANY_NAMES, 600_000) != 0:
            raise RuntimeError("the PTI double's workload failed")
        api.stop()
        b = TraceBuilder()
        window = ProcessWindow(api.start_ns - (iterations + 2) * 10_000, now_ns())
        t, c = time.perf_counter(), time.process_time()
        api.process(b, window)
        out[f"{label}_s"], out[f"{label}_cpu_s"] = time.perf_counter() - t, time.process_time() - c
        out["kernels"] = int(b.metadata.get("xpu_kernel_filter", {}).get("kernels_kept", len(b.slice_table("kernel")["ts"])))
        out["records"] = sum(api.counts_decoded.values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return
    got: dict[str, list[dict]] = {m: [] for m in MODES}
    for _ in range(args.runs):
        for mode in MODES:  # alternated: each run meets the machine as the others do
            out = subprocess.run([sys.executable, __file__, "--child", mode, str(args.records)], capture_output=True,
                                 text=True, check=True, cwd=REPO)
            got[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = {k: statistics.median(r[k] for r in got["none"]) for k in ("timed_s", "timed_cpu_s")}
    print(f"XPU process() (decode + emit), {got['none'][0]['records']:,} records, median of {args.runs} fresh "
          "processes (min-max); CPU seconds beside wall (this VM's wall time swings with other jobs)")
    print(f"{'mode':>10} {'kernels kept':>13} {'wall s':>22} {'/ none':>7} {'CPU s':>22} {'/ none':>7}")
    for mode, runs in got.items():
        cells = []
        for key in ("timed_s", "timed_cpu_s"):
            vals = [r[key] for r in runs]
            med = statistics.median(vals)
            cells.append(f"{med:>9.3f} ({min(vals):.3f}-{max(vals):.3f}) {med / base[key]:>7.3f}")
        print(f"{mode:>10} {runs[0]['kernels']:>13,} " + " ".join(cells))


if __name__ == "__main__":
    main()
