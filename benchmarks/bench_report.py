"""``xpuprof report`` of a big trace vs ``json.load`` of the same file: time and peak RSS.

    python benchmarks/bench_report.py                  # README row: 1 M-event traces, 3 runs
    python benchmarks/bench_report.py --n 200000 --runs 3

Two traces are written once per invocation (in a temporary directory) by xpuprof itself:
- ``host``: ``--n`` ``record_function`` ranges (64 distinct names) from ``xpuprof.profile``; the report
  summarizes them as host annotations.
- ``device``: the XPU backend over the PTI double with ``--n`` device records (kernels with 3,000
  distinct names, copies, fills, syncs, runtime/driver calls; bench_device_end_to_end's workload).
Each measurement is a fresh process: ``report`` runs ``xpuprof.analysis.report.build_report`` (what
``xpuprof report`` computes before printing); ``json.load`` parses the same file with the standard
library (the baseline the issue names); ``orjson`` is shown too. Median (min-max) of ``--runs``;
the peak RSS is ru_maxrss of that process, also as growth over the interpreter with the modules
imported (the goal, <= 500 MB, is read on the whole process).

``rows(n, runs)`` returns the table as (label, value) pairs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODES = ("report", "json.load", "orjson")


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(mode: str, path: str) -> dict:
    import orjson

    from xpuprof.analysis.report import build_report

    base = _rss()
    t = time.perf_counter()
    if mode == "report":
        rep = build_report([path])
        rows = len(rep.table)
    elif mode == "json.load":
        with open(path, "rb") as f:
            rows = len(json.load(f)["traceEvents"])
    else:
        with open(path, "rb") as f:
            rows = len(orjson.loads(f.read())["traceEvents"])
    return {"s": time.perf_counter() - t, "rss_MB": (_rss() - base) / 1e6, "rss_total_MB": _rss() / 1e6, "rows": rows}


def _make_host(n: int, path: Path) -> None:
    import xpuprof

    names = [f"op{i}" for i in range(64)]
    rf = xpuprof.record_function
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(n):
            with rf(names[i & 63]):
                pass
    prof.export_chrome_trace(path)


def _make_device(n: int, path: Path) -> None:
    sys.path.insert(0, str(HERE))
    import bench_device_end_to_end as dev

    from xpuprof._native import ptibuf
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.clock import now_ns
    from xpuprof.trace.build.builder import TraceBuilder
    from xpuprof.trace.write.chrome import write_chrome_trace

    double = dev._xpu_double()
    double.reset()
    ptibuf.reset()
    iterations = max(1, n // dev.XPU_RECORDS_PER_ITERATION)
    api = dev._xpu_session(double, iterations)
    api.stop()
    b = TraceBuilder()
    api.process(b, ProcessWindow(api.start_ns - (iterations + 2) * 10_000, now_ns()))
    write_chrome_trace(b, path)


def _run(args: list[str]) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def _fmt(vals: list[float], digits: int = 2) -> str:
    return f"{statistics.median(vals):.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"


def rows(n: int = 1_000_000, runs: int = 3) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="xpuprof-bench-report-") as tmp:
        for kind in ("host", "device"):
            path = Path(tmp) / f"{kind}.json"
            _run(["--make", kind, "--n", str(n), "--path", str(path)])
            res = {m: [_run(["--child", m, "--path", str(path)]) for _ in range(runs)] for m in MODES}
            events = res["json.load"][0]["rows"]
            tag = f"report {kind} trace ({events / 1e6:.2f} M events, {path.stat().st_size / 1e6:.0f} MB)"
            for m in MODES:
                out.append((f"{tag}: {m} s | peak RSS growth MB | peak RSS MB", f"{_fmt([r['s'] for r in res[m]])} | "
                            f"{_fmt([r['rss_MB'] for r in res[m]], 0)} | {_fmt([r['rss_total_MB'] for r in res[m]], 0)}"))
            out.append((f"{tag}: json.load time / report time (goal > 1)",
                         f"{statistics.median(r['s'] for r in res['json.load']) / statistics.median(r['s'] for r in res['report']):.2f}x"))
            path.unlink()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="host ranges / device records per trace")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--make", choices=("host", "device"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.make:
        (_make_host if a.make == "host" else _make_device)(a.n, Path(a.path))
        return 0
    if a.child:
        print(json.dumps(_child(a.child, a.path)))
        return 0
    print(f"# report, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median (min-max) of {a.runs} fresh processes")
    table = rows(a.n, a.runs)
    width = max(len(label) for label, _ in table)
    for label, value in table:
        print(f"{label:<{width}}  {value}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
