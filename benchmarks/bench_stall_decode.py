"""EU stall sample decode: xpuprof's path (instruction arrays as numpy columns, the source info behind
them in one C call) against per-record ctypes decoding of the same PTI data, in the same process.

    python benchmarks/bench_stall_decode.py                         # 20k, 200k, 1M instructions, 3 runs
    python benchmarks/bench_stall_decode.py --sizes 200000 --runs 5

Data: the PTI double's PC sampling part (tests/xpu/double/pti_double_pcsampling.c, PTI 1.2.0's
layouts) scripted with 100 kernels and size/100 sampled instructions each, 9 stall reasons, source
info on two of every three instructions (PTI hands it per instruction, in its own memory).

Timed per run, each run a fresh process:
- ``xpuprof``: ``StallSampler.collect()`` (stall reasons, devices, per kernel its info and its
  instruction and sample arrays, the source info, the file strings) -> ``StallResults`` columns.
- ``metadata``: ``stall_metadata`` (what the trace carries: per kernel its mix, its hottest source lines
  and instructions), the rest of what a trace with stall samples costs.
Each child runs both once untimed first (modules loaded, libstdc++'s demangler bound), as a profile's
first cycle does.
- ``ctypes``: the obvious ctypes reading, as PTI's sample does it in C++: the same calls, then per
  instruction its offset, its source info (file string, line) and its samples into Python lists.
Printed: median instructions/s of each (range), and xpuprof / ctypes (goal >= 10).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KERNELS = 100


def _double():
    sys.path.insert(0, str(REPO / "tests" / "xpu"))
    from conftest import Double, build_double  # the tests' own build of the double

    cache = Path(tempfile.gettempdir()) / "xpuprof-bench-double"
    cache.mkdir(exist_ok=True)
    return Double(build_double(cache))


def ctypes_decode(fns, handle, layout) -> int:
    """Per-record ctypes decoding of everything ``collect`` reads; returns the instructions read."""
    from xpuprof.vendors import pti_pc_sampling as pcs

    n = ctypes.c_size_t(0)
    fns["ptiPcSamplingGetStallReasons"](handle, None, ctypes.byref(n))
    reasons = (pcs.StallReasonInfo * n.value)()
    for r in reasons:
        r._struct_size = layout["stall_reason_info"]
    fns["ptiPcSamplingGetStallReasons"](handle, reasons, ctypes.byref(n))
    names = [r._name.decode() for r in reasons]
    nd = ctypes.c_size_t(0)
    fns["ptiPcSamplingGetProfiledDevices"](handle, None, ctypes.byref(nd))
    devices = (ctypes.c_void_p * nd.value)()
    fns["ptiPcSamplingGetProfiledDevices"](handle, devices, ctypes.byref(nd))
    rows = 0
    out = []
    for dev in devices:
        nk = ctypes.c_size_t(0)
        fns["ptiPcSamplingGetObservedKernelHandles"](handle, ctypes.c_void_p(dev), None, ctypes.byref(nk))
        kernels = (ctypes.c_uint64 * nk.value)()
        fns["ptiPcSamplingGetObservedKernelHandles"](handle, ctypes.c_void_p(dev), kernels, ctypes.byref(nk))
        for kh in kernels:
            agg = (ctypes.c_uint64 * len(names))()
            info = pcs.KernelInfo(_struct_size=layout["kernel_info"], _aggregated_samples=agg)
            fns["ptiPcSamplingGetObservedKernelInfo"](handle, ctypes.c_void_p(dev), kh, ctypes.byref(info))
            ni = info._instructions_with_samples_count
            instr = (pcs.Instruction * ni)()
            samples = (ctypes.c_uint64 * (ni * len(names)))()
            fns["ptiPcSamplingGetSamplesPerInstruction"](handle, ctypes.c_void_p(dev), kh, ctypes.cast(instr, ctypes.c_void_p),
                                                         ni, ctypes.cast(samples, ctypes.c_void_p), ni * len(names))
            kernel_rows = []
            for i in range(ni):
                ins = instr[i]
                src = ins._source_info
                file, line = (src.contents._file_path.decode(), src.contents._file_line) if src else (None, 0)
                kernel_rows.append((ins._instruction_offset, file, line,
                                    [samples[i * len(names) + r] for r in range(len(names))]))
            out.append((info._kernel_name.decode(), list(agg), kernel_rows))
            rows += ni
    return rows


def child(instructions: int) -> dict:
    from xpuprof.backends.xpu.stall_emit import StallJoin, stall_metadata
    from xpuprof.backends.xpu.stall_sampling import StallSampler
    from xpuprof.vendors import pti_pc_sampling as pcs

    double = _double()
    double.reset()
    double.c.xpd_set_version.argtypes = [ctypes.c_char_p]
    double.c.xpd_set_version(b"1.2.0")
    double.c.pcs_double_script.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    per_kernel = max(1, instructions // KERNELS)
    double.c.pcs_double_script(KERNELS, per_kernel)
    fns = pcs.bind_functions(double.lib._lib)
    sampler = StallSampler(fns, version="1.2.0")
    sampler.enable()
    sampler.start()
    sampler.stop()
    stall_metadata(StallJoin(sampler.collect()))  # warm: every module loaded, the double's data in memory
    t = time.perf_counter()
    res = sampler.collect()
    ours = time.perf_counter() - t
    t = time.perf_counter()
    stall_metadata(StallJoin(res))
    meta = time.perf_counter() - t
    t = time.perf_counter()
    n = ctypes_decode(fns, sampler.handle, sampler.layout)
    base = time.perf_counter() - t
    assert n == len(res.instr_offset) == KERNELS * per_kernel
    sampler.disable()
    return {"instructions": n, "xpuprof_s": ours, "metadata_s": meta, "ctypes_s": base}


def _median(runs, key):
    vals = [r[key] for r in runs]
    return statistics.median(vals), min(vals), max(vals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000, 1_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    print(f"EU stall decode, {KERNELS} kernels, 9 reasons; median of {args.runs} fresh processes (min-max)")
    print(f"{'instructions':>12} {'xpuprof M instr/s':>22} {'+metadata M/s':>20} {'ctypes M instr/s':>22} "
          f"{'xpuprof/ctypes':>15}")
    for size in args.sizes:
        runs = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, __file__, "--child", str(size)], capture_output=True, text=True,
                                 check=True, cwd=REPO)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        n = runs[0]["instructions"]
        for r in runs:
            r["ours"], r["with_meta"], r["base"] = (n / r["xpuprof_s"] / 1e6, n / (r["xpuprof_s"] + r["metadata_s"]) / 1e6,
                                                    n / r["ctypes_s"] / 1e6)
            r["ratio"] = r["ctypes_s"] / r["xpuprof_s"]
        cells = [_median(runs, k) for k in ("ours", "with_meta", "base", "ratio")]
        print(f"{n:>12,} " + " ".join(f"{m:>9.2f} ({lo:.2f}-{hi:.2f})".rjust(w)
                                      for (m, lo, hi), w in zip(cells, (22, 20, 22, 15))))


if __name__ == "__main__":
    main()
