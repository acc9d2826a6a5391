"""``xpuprof report`` of a big trace vs ``json.load`` of the same file: time and peak RSS.

    python benchmarks/bench_report.py                  # 1 M-event traces, 3 runs
    python benchmarks/bench_report.py --n 200000 --runs 3

Two traces are written once per invocation (in a temporary directory) by xpuprof itself:
- ``host``: ``--n`` ``record_function`` ranges (64 distinct names) from ``xpuprof.profile``; the report
  summarizes them as host ranges.
- ``device``: the XPU backend over the PTI double with ``--n`` device records (kernels with 3,000
  distinct names, copies, fills, syncs, runtime/driver calls; bench_device_end_to_end's workload).
Each measurement is a fresh process, alternated mode by mode, run by run:
- ``xpuprof report``: what the user pays, ``xpuprof report TRACE -o FILE`` (``cli.main`` in the child,
  timed from before ``import xpuprof`` to the table on disk: import, read, aggregate, render, write);
- ``build_report``: the API alone (``xpuprof.analysis.report.build_report``), for where the time goes;
- ``json.load``: the same file parsed by the standard library (the baseline the issue names);
  ``orjson`` is shown too.
- ``--baseline DIR``: ``xpuprof report`` of another checkout too (e.g. the code before a change), in
  the same alternation, as ``xpuprof report (baseline)``.
Median (min-max) of ``--runs``; peak RSS is the child's ru_maxrss (the whole process: the goal,
<= 400 MB, is read on it). The ratio lines divide medians of the same run (goal: report <= 1/3 of
json.load).

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
MODES = ("xpuprof report", "build_report", "json.load", "orjson")


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _child(mode: str, path: str) -> dict:
    t = time.perf_counter()
    if mode == "xpuprof report":
        import tempfile as _tempfile

        from xpuprof.cli import main

        with _tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.txt"
            import contextlib
            import io

            with contextlib.redirect_stderr(io.StringIO()):  # "wrote FILE"
                if main(["report", path, "-o", str(out)]) != 0:
                    raise RuntimeError("xpuprof report failed")
            elapsed = time.perf_counter() - t
            rows = sum(1 for line in out.read_text().splitlines() if line.startswith("│"))
    elif mode == "build_report":
        from xpuprof.analysis.report import build_report

        rows = len(build_report([path]).table)
        elapsed = time.perf_counter() - t
    elif mode == "json.load":
        with open(path, "rb") as f:
            rows = len(json.load(f)["traceEvents"])
        elapsed = time.perf_counter() - t
    else:
        import orjson

        with open(path, "rb") as f:
            rows = len(orjson.loads(f.read())["traceEvents"])
        elapsed = time.perf_counter() - t
    return {"s": elapsed, "rss_total_MB": _rss() / 1e6, "rows": rows}


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
    from xpuprof.trace.builder.builder import TraceBuilder
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


def _run(args: list[str], root: Path = REPO) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def _fmt(vals: list[float], digits: int = 2) -> str:
    return f"{statistics.median(vals):.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"


def rows(n: int = 1_000_000, runs: int = 3, kinds=("host", "device"), baseline: Path | None = None
         ) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    modes = MODES + (("xpuprof report (baseline)",) if baseline else ())
    with tempfile.TemporaryDirectory(prefix="xpuprof-bench-report-") as tmp:
        for kind in kinds:
            path = Path(tmp) / f"{kind}.json"
            _run(["--make", kind, "--n", str(n), "--path", str(path)])
            res: dict[str, list[dict]] = {m: [] for m in modes}
            for _ in range(runs):  # alternated: a slower moment of the machine hits every mode alike
                for m in modes:
                    if m == "xpuprof report (baseline)":
                        res[m].append(_run(["--child", "xpuprof report", "--path", str(path)], baseline))
                    else:
                        res[m].append(_run(["--child", m, "--path", str(path)]))
            events = res["json.load"][0]["rows"]
            tag = f"{kind} trace ({events / 1e6:.2f} M events, {path.stat().st_size / 1e6:.0f} MB)"
            for m in modes:
                out.append((f"{tag}: {m} s | peak RSS MB",
                            f"{_fmt([r['s'] for r in res[m]])} | {_fmt([r['rss_total_MB'] for r in res[m]], 0)}"))
            med = {m: statistics.median(r["s"] for r in res[m]) for m in modes}
            for m in ("xpuprof report",) + (("xpuprof report (baseline)",) if baseline else ()):
                out.append((f"{tag}: {m} time / json.load time (goal <= 0.33)", f"{med[m] / med['json.load']:.2f}"))
            out.append((f"{tag}: xpuprof report peak RSS (goal <= 400 MB)",
                        f"{statistics.median(r['rss_total_MB'] for r in res['xpuprof report']):.0f} MB"))
            path.unlink()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="host ranges / device records per trace")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="host,device", help="which traces: host, device or both (comma-separated)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                    help="a checkout whose xpuprof report is timed too, in the same alternation")
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
    table = rows(a.n, a.runs, [k for k in a.kinds.split(",") if k], a.baseline)
    width = max(len(label) for label, _ in table)
    for label, value in table:
        print(f"{label:<{width}}  {value}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
