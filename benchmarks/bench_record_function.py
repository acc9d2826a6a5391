"""record_function cost per enter+exit, against an empty loop in the same process.

    python benchmarks/bench_record_function.py [--n 200000] [--repeat 5]

Prints ns per iteration (best of --repeat) for: an empty loop, ``with nullcontext()``,
``with record_function(...)`` with no profiler, while profiling host ranges only (also with a small
dict arg, ``{"i": i, "phase": "fwd"}`` built per range; goal: <= 2.5x a range without), and while
profiling with the sim backend (correlation ids pushed to a device session), and while profiling
with the xpu backend over the PTI test double (ids pushed through PTI's C entry points, as with the
real library; skipped without a C compiler), and with the rocm backend over the rocprofiler-sdk
test double (ids pushed through the SDK's C entry points; and through the Python methods, the path
before, for comparison); the pure-Python fallback (used when the C extension
is not built) is measured too. The overhead is the difference to the empty loop; the target is
<= 500 ns while profiling.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import xpuprof
from xpuprof.host import recorder

TARGET_NS = 500.0
ARGS_RATIO_GOAL = 2.5


def _time(body, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        body(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def empty(n):
    for _ in range(n):
        pass


def nullctx(n):
    null = contextlib.nullcontext
    for _ in range(n):
        with null():
            pass


def ranges(n, rf=None):
    rf = rf or xpuprof.record_function
    for _ in range(n):
        with rf("op"):
            pass


def py_ranges(n):
    ranges(n, recorder.PurePythonRecordFunction)


def args_ranges(n, rf=None):
    """A small dict arg, built per range as a user's code does (its construction is in the cost)."""
    rf = rf or xpuprof.record_function
    for i in range(n):
        with rf("op", {"i": i, "phase": "fwd"}):
            pass


def py_args_ranges(n):
    args_ranges(n, recorder.PurePythonRecordFunction)


def _pti_double() -> str | None:
    """The tests' PTI double, built once into the temp dir (None without a C compiler)."""
    if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "xpu"))
    from conftest import build_double

    cache = Path(tempfile.gettempdir()) / "xpuprof-bench-double"
    cache.mkdir(exist_ok=True)
    return str(build_double(cache))


def _rocprofiler_double() -> str | None:
    """The tests' rocprofiler-sdk double (tests/rocm/fake_rocprofiler.c), compiled into the temp dir."""
    import subprocess

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    out = Path(tempfile.gettempdir()) / "xpuprof-bench-rocprofiler" / "librocprofiler-sdk.so"
    out.parent.mkdir(exist_ok=True)
    src = Path(__file__).resolve().parent.parent / "tests" / "rocm" / "fake_rocprofiler.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src), "-lpthread"], check=True)
    return str(out)


class _PythonPushes:
    """The rocm session without its C hooks: the Python push/pop per range (the path before)."""

    def __enter__(self):
        from xpuprof.backends.rocm.activity_api import RocprofActivityApi

        self._cls, self._saved = RocprofActivityApi, RocprofActivityApi.correlation_hooks
        RocprofActivityApi.correlation_hooks = None
        return self

    def __exit__(self, *exc):
        self._cls.correlation_hooks = self._saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n, r = args.n, args.repeat
    gc.collect()
    results = {"empty loop": _time(empty, n, r), "nullcontext()": _time(nullctx, n, r),
               "record_function, not profiling": _time(ranges, n, r)}
    results["pure-Python fallback, not profiling"] = _time(py_ranges, n, r)
    cases = [("record_function, profiling (host)", ranges, dict(activities=["cpu"])),
             ("record_function, profiling (host), dict arg", args_ranges, dict(activities=["cpu"])),
             ("pure-Python fallback, profiling (host)", py_ranges, dict(activities=["cpu"])),
             ("pure-Python fallback, profiling (host), dict arg", py_args_ranges, dict(activities=["cpu"])),
             ("record_function, profiling (sim)", ranges, dict(backends=["sim"]))]
    double = _pti_double()
    if double is not None:
        from xpuprof.vendors import pti

        os.environ[pti.PTI_LIBRARY_ENV] = double
        cases.append(("record_function, profiling (xpu, PTI double)", ranges,
                      dict(backends=["xpu"], activities=["cpu", "xpu"])))
    else:
        print("no C compiler: the xpu case (PTI double) is skipped")
    rocm = _rocprofiler_double()
    if rocm is not None:
        os.environ["ROCPROFILER_SDK_LIBRARY"] = rocm
        rocm_kwargs = dict(backends=["rocm"], activities=["cpu", "kernel", "runtime", "external_correlation"])
        cases.append(("record_function, profiling (rocm, SDK double)", ranges, rocm_kwargs))
        cases.append(("  same, Python push/pop per range (before)", ranges, dict(rocm_kwargs, python_pushes=True)))
    else:
        print("no C compiler: the rocm cases (rocprofiler-sdk double) are skipped")
    for label, body, kwargs in cases:
        best = float("inf")
        kwargs = dict(kwargs)
        pushes = _PythonPushes() if kwargs.pop("python_pushes", False) else contextlib.nullcontext()
        for _ in range(r):  # a fresh profile per repeat: the buffer starts empty each time
            with pushes, xpuprof.profile(**kwargs):
                t0 = time.perf_counter_ns()
                body(n)
                best = min(best, (time.perf_counter_ns() - t0) / n)
        results[label] = best
    base = results["empty loop"]
    print(f"C fast path: {'yes' if recorder.FAST_PATH else 'no (pure Python)'}")
    print(f"{'case':46s} {'ns/iter':>9s} {'overhead ns':>12s}")
    for label, ns in results.items():
        print(f"{label:46s} {ns:9.1f} {ns - base:12.1f}")
    host = results["record_function, profiling (host)"] - base
    print(f"profiling overhead / target ({TARGET_NS:.0f} ns): {host / TARGET_NS:.2f}"
          f" ({'meets' if host <= TARGET_NS else 'misses'} the target)")
    with_args = results["record_function, profiling (host), dict arg"] - base
    print(f"a range with a small dict arg / one without (overheads): {with_args / host:.2f} "
          f"(goal <= {ARGS_RATIO_GOAL}; {'meets' if with_args / host <= ARGS_RATIO_GOAL else 'misses'} it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
