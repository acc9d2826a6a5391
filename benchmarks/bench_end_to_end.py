"""What the user pays, end to end: ``profile()`` start to the trace file on disk, host ranges.

    python benchmarks/bench_end_to_end.py                 # the README table (1 M ranges, 3 runs)
    python benchmarks/bench_end_to_end.py --n 200000 --runs 3 --only xpuprof-json,rf-sim

Every run is a fresh process (``--child``), so no run reuses memory another one freed. Each
figure is the median of ``--runs`` runs, with the range (min-max). Rows:

- ``xpuprof-json`` / ``xpuprof-gz``: ``--n`` ``record_function`` ranges (64 distinct names) inside
  ``xpuprof.profile(activities=["cpu"])``; timed: ``stop()`` (copy the C records into columns, build
  the trace) + ``export_chrome_trace()`` (format, compress for ``.gz``, write, rename). Events/s =
  n / that time (the first write). Same run, same bytes: ``.json``: writer bandwidth / raw write
  bandwidth, best of 3 alternating writes each (the page cache swings both); ``.gz``: isal level 1
  alone over the uncompressed bytes against the writer, alternated, in time and CPU time, and the
  sizes (``isal_floor.py``).
- peak RSS growth per event (ru_maxrss minus the value after warm-up, / n) after recording,
  after ``stop()`` and after the write.
- ``torch`` / ``viztracer``: the same workload through the peers when installed, timed the same
  way (stop + export of the same number of host events).
- ``rf-sim``: ns per ``record_function`` enter+exit while a sim device session links every range
  (correlation marks), minus an empty loop, best of 5; host-only recording too.
- ``args-mem``: bytes of peak RSS per stored range whose args are a small dict, after recording,
  after ``stop()`` and after the write.
- ``args-export``: stop + export of ``--n`` ranges that all carry a small dict arg against the same
  ranges without args, alternated fresh processes (goal: >= 0.6x the events/s).
- ``crash-safe``: what ``xpuprof exec``'s crash-safe recording (host/spill.py: the recorder's logs in mapped
  files of a private directory under /dev/shm or the temp dir) adds: ``--n`` ranges recorded, stopped and
  written with the copy on / off, alternated fresh processes; the ratio of the medians of record + stop +
  write (goal: <= 1.03), and of recording alone.
- ``under-load``: how much stop + export slows while ``--hogs`` CPU-bound processes (a Python busy
  loop each) run beside it, for xpuprof (``.json``) and viztracer (stop + save, ``.json``): each run
  is a fresh process timed quiet, then the same with the hogs, the tools alternated; slowdown = median
  loaded time / median quiet time, per tool (goal: xpuprof's <= viztracer's). The hogs are children
  of the benchmark, so they share its scheduling group, as a user's second job would.

Device rows (XPU over the PTI double, CUDA/ROCm decoders) come from ``bench_device_end_to_end.py``
and the ``xpuprof report`` row from ``bench_report.py`` when those modules exist next to this one;
their tables are printed after this one.
"""
from __future__ import annotations

import argparse
import gzip
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
NAMES = [f"op{i}" for i in range(64)]
CASES = ("xpuprof-json", "xpuprof-gz", "torch", "viztracer", "rf-sim", "args-mem", "under-load", "args-export",
         "crash-safe")
# Children run by the under-load case (not cases of their own): stop + export once, nothing else.
LOAD_CHILDREN = ("xpuprof-stop-export", "viztracer")


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ----------------------------------------------------------------------------- children
def _child_xpuprof(n: int, out: Path, gz: bool) -> dict:
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as warm:  # load every module the real run touches
        with xpuprof.record_function("warm"):
            pass
    warm.export_chrome_trace(out / ("warm.json.gz" if gz else "warm.json"))
    names = NAMES
    rf = xpuprof.record_function
    base = _rss()
    prof = xpuprof.profile(activities=["cpu"])
    prof.start()
    t_rec = time.perf_counter()
    for i in range(n):
        with rf(names[i & 63]):
            pass
    t_rec = time.perf_counter() - t_rec
    rss_rec = _rss()
    t0, c0 = time.perf_counter(), time.process_time()
    prof.stop()
    t_stop, c_stop = time.perf_counter() - t0, time.process_time() - c0
    rss_stop = _rss()
    path = out / ("trace.json.gz" if gz else "trace.json")
    t1, c1 = time.perf_counter(), time.process_time()
    prof.export_chrome_trace(path)
    t_write, c_write = time.perf_counter() - t1, time.process_time() - c1
    cpu_write = c_write
    rss_write = _rss()
    res = {"events_per_s": n / (t_stop + t_write), "stop_s": t_stop, "write_s": t_write,
           "stop_cpu_s": c_stop, "write_cpu_s": c_write,  # CPU seconds (all threads) beside wall
           "record_ns_per_range": t_rec / n * 1e9, "bytes": path.stat().st_size,
           "rss_record_B_per_ev": (rss_rec - base) / n, "rss_stop_B_per_ev": (rss_stop - base) / n,
           "rss_write_B_per_ev": (rss_write - base) / n}
    if gz:  # isal level 1 alone over the same uncompressed bytes, alternated with the writer
        sys.path.insert(0, str(HERE))
        from isal_floor import compare

        res.update(compare(prof.export_chrome_trace, path, t_write, cpu_write))
    else:  # raw write of the same bytes to the same file system, alternating with the writer
        # The page cache's state (dirty pages of other jobs, writeback) swings both by 2-5x from
        # one second to the next here: best of 3 alternations each, same bytes, same directory.
        data = path.read_bytes()
        view = memoryview(data)
        step = 8 << 20
        raw_times, writer_times = [], [t_write]
        for k in range(3):
            raw = out / f"raw{k}.bin"
            t2 = time.perf_counter()
            with open(raw, "wb", buffering=0) as f:
                for i in range(0, len(data), step):
                    f.write(view[i:i + step])
            raw_times.append(time.perf_counter() - t2)
            raw.unlink()
            if k < 2:
                again = out / f"again{k}.json"
                t3 = time.perf_counter()
                prof.export_chrome_trace(again)
                writer_times.append(time.perf_counter() - t3)
                again.unlink()
        res["writer_vs_raw_write"] = min(raw_times) / min(writer_times)
        res["raw_write_GB_s"] = len(data) / min(raw_times) / 1e9
        res["writer_GB_s"] = len(data) / min(writer_times) / 1e9
    return res


def _child_stop_export(n: int, out: Path, args: bool = False) -> dict:
    """stop() + export_chrome_trace() once (the under-load and args-export cases' timed step); with
    ``args`` every range carries a small dict."""
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as warm:
        with xpuprof.record_function("warm", {"i": 0, "phase": "fwd"} if args else None):
            pass
    warm.export_chrome_trace(out / "warm.json")
    names, rf = NAMES, xpuprof.record_function
    prof = xpuprof.profile(activities=["cpu"])
    prof.start()
    if args:
        for i in range(n):
            with rf(names[i & 63], {"i": i, "phase": "fwd"}):
                pass
    else:
        for i in range(n):
            with rf(names[i & 63]):
                pass
    c0, t0 = _cpu(), time.perf_counter()
    prof.stop()
    path = prof.export_chrome_trace(out / "trace.json")
    t, c = time.perf_counter() - t0, _cpu() - c0
    return {"events_per_s": n / t, "stop_write_s": t, "events_per_cpu_s": n / c, "bytes": path.stat().st_size}


def _child_torch(n: int, out: Path) -> dict:
    import torch  # noqa: F401
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as warm:
        with record_function("warm"):
            pass
    warm.export_chrome_trace(str(out / "warm.json"))
    names = NAMES
    base = _rss()
    prof = profile(activities=[ProfilerActivity.CPU])
    prof.start()
    for i in range(n):
        with record_function(names[i & 63]):
            pass
    t0 = time.perf_counter()
    prof.stop()
    path = out / "torch.json"
    prof.export_chrome_trace(str(path))
    t = time.perf_counter() - t0
    return {"events_per_s": n / t, "stop_write_s": t, "bytes": path.stat().st_size,
            "rss_write_B_per_ev": (_rss() - base) / n}


def _child_viztracer(n: int, out: Path) -> dict:
    from viztracer import VizTracer

    def op():
        pass

    base = _rss()
    tracer = VizTracer(tracer_entries=n + 100_000, verbose=0)
    tracer.start()
    for _ in range(n):  # one function entry+exit = one complete event, as a host range
        op()
    t0 = time.perf_counter()
    tracer.stop()
    path = out / "viz.json"
    tracer.save(str(path))
    t = time.perf_counter() - t0
    return {"events_per_s": n / t, "stop_write_s": t, "bytes": path.stat().st_size,
            "rss_write_B_per_ev": (_rss() - base) / n}


def _child_rf_sim(n: int, out: Path) -> dict:
    import xpuprof

    rf = xpuprof.record_function

    def empty(k):
        for _ in range(k):
            pass

    def ranges(k):
        for _ in range(k):
            with rf("op"):
                pass

    def best(body, k):
        vals = []
        for _ in range(5):
            t0 = time.perf_counter_ns()
            body(k)
            vals.append((time.perf_counter_ns() - t0) / k)
        return min(vals)

    k = min(n, 200_000)
    res = {"empty_ns": best(empty, k)}
    for label, kw in (("host_ns", {"activities": ["cpu"]}), ("sim_ns", {"backends": ["sim"]})):
        with xpuprof.profile(**kw):
            res[label] = best(ranges, k) - res["empty_ns"]
    return res


def _child_args_mem(n: int, out: Path) -> dict:
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as warm:
        with xpuprof.record_function("warm", {"i": 0}):
            pass
    warm.export_chrome_trace(out / "warm.json")
    rf = xpuprof.record_function
    base = _rss()
    prof = xpuprof.profile(activities=["cpu"])
    prof.start()
    for i in range(n):
        with rf("step", {"i": i, "phase": "fwd"}):
            pass
    rss_rec = _rss()
    prof.stop()
    rss_stop = _rss()
    prof.export_chrome_trace(out / "args.json")
    return {"rss_record_B_per_range": (rss_rec - base) / n, "rss_stop_B_per_range": (rss_stop - base) / n,
            "rss_write_B_per_range": (_rss() - base) / n}


def _child_crash_safe(n: int, out: Path, on: bool) -> dict:
    """record + stop + export of ``n`` ranges, with the crash-safe copy (as under ``xpuprof exec``) or not."""
    import shutil

    import xpuprof
    from xpuprof.host import spill

    root = None
    if on:
        from xpuprof.ondemand.crashsafe import make_root

        root = make_root()
        os.environ[spill.SPILL_ENV] = root
        spill.start_from_environment()
    try:
        with xpuprof.profile(activities=["cpu"]) as warm:
            with xpuprof.record_function("warm"):
                pass
        warm.export_chrome_trace(out / "warm.json")
        names, rf = NAMES, xpuprof.record_function
        t0, c0 = time.perf_counter(), _cpu()
        prof = xpuprof.profile(activities=["cpu"])
        prof.start()
        for i in range(n):
            with rf(names[i & 63]):
                pass
        t_rec = time.perf_counter() - t0
        prof.stop()
        prof.export_chrome_trace(out / "trace.json")
        return {"total_s": time.perf_counter() - t0, "record_s": t_rec, "total_cpu_s": _cpu() - c0}
    finally:
        if root is not None:
            spill._at_exit()
            shutil.rmtree(root, ignore_errors=True)


def _run_child(case: str, n: int, out: Path) -> dict:
    if case == "xpuprof-json":
        return _child_xpuprof(n, out, gz=False)
    if case == "xpuprof-gz":
        return _child_xpuprof(n, out, gz=True)
    if case == "torch":
        return _child_torch(n, out)
    if case == "viztracer":
        return _child_viztracer(n, out)
    if case == "rf-sim":
        return _child_rf_sim(n, out)
    if case == "args-mem":
        return _child_args_mem(n, out)
    if case == "xpuprof-stop-export":
        return _child_stop_export(n, out)
    if case == "xpuprof-args-stop-export":
        return _child_stop_export(n, out, args=True)
    if case in ("crash-safe-on", "crash-safe-off"):
        return _child_crash_safe(n, out, case.endswith("-on"))
    raise SystemExit(f"unknown case {case!r}; valid: {', '.join(CASES)}")


# ----------------------------------------------------------------------------- parent
def _available(case: str) -> str | None:
    """None when the case can run here, else why not."""
    mod = {"torch": "torch", "viztracer": "viztracer", "under-load": "viztracer"}.get(case)
    if mod is None:
        return None
    import importlib.util

    return None if importlib.util.find_spec(mod) else f"{mod} is not installed"


def _spawn(case: str, n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="xpuprof-e2e-") as tmp:
        env = dict(os.environ)
        proc = subprocess.run([sys.executable, __file__, "--child", case, "--n", str(n), "--out", tmp],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{case} (n={n}) failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _under_load(n: int, runs: int, hogs: int, peer_n: int | None = None) -> dict[str, dict[str, list[float]]]:
    """Seconds of stop + export per child kind, quiet and beside ``hogs`` busy processes, alternated."""
    out: dict[str, dict[str, list[float]]] = {c: {"quiet": [], "loaded": []} for c in LOAD_CHILDREN}
    for _ in range(runs):
        for child in LOAD_CHILDREN:
            size = n if child != "viztracer" or peer_n is None else peer_n
            out[child]["quiet"].append(_spawn(child, size)["stop_write_s"])
            procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
            try:
                out[child]["loaded"].append(_spawn(child, size)["stop_write_s"])
            finally:
                for p in procs:
                    p.kill()
                for p in procs:
                    p.wait()
    return out


def _fmt(vals: list[float], scale: float = 1.0, digits: int = 2) -> str:
    vals = [v * scale for v in vals]
    return f"{statistics.median(vals):.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="host ranges per run (default 1,000,000)")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per case (median and range; >= 3)")
    ap.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases: {', '.join(CASES)}")
    ap.add_argument("--args-n", type=int, default=200_000, help="ranges with args in args-mem (default 200,000)")
    ap.add_argument("--hogs", type=int, default=1, help="CPU-bound processes beside the under-load case (default 1)")
    ap.add_argument("--peer-n", type=int, help="events for viztracer in the under-load case (default --n)")
    ap.add_argument("--no-device", action="store_true", help="skip bench_device_end_to_end.py")
    ap.add_argument("--no-report", action="store_true", help="skip bench_report.py")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_run_child(a.child, a.n, Path(a.out))))
        return 0
    sys.path.insert(0, str(HERE))
    from anchor import chosen_cases, print_header

    cases = chosen_cases(ap, a.only, CASES)
    print_header("end to end", a.runs)
    results: dict[str, list[dict]] = {}
    for case in cases:
        why = _available(case)
        if why:
            print(f"{case}: skipped ({why})")
            continue
        n = a.args_n if case == "args-mem" else a.n
        if case == "under-load":
            load = _under_load(n, a.runs, a.hogs, a.peer_n)
            continue
        if case == "args-export":  # alternated: every range with a small dict arg / none
            pairs = [(_spawn("xpuprof-args-stop-export", a.n), _spawn("xpuprof-stop-export", a.n)) for _ in range(a.runs)]
            results[case] = [{"args": x["events_per_s"], "plain": y["events_per_s"], "args_cpu": x["events_per_cpu_s"],
                              "plain_cpu": y["events_per_cpu_s"]} for x, y in pairs]
            continue
        if case == "crash-safe":  # alternated: the crash-safe copy on / off
            pairs = [(_spawn("crash-safe-on", a.n), _spawn("crash-safe-off", a.n)) for _ in range(a.runs)]
            results[case] = [{"on": x["total_s"], "off": y["total_s"], "rec_on": x["record_s"], "rec_off": y["record_s"],
                              "cpu_on": x["total_cpu_s"], "cpu_off": y["total_cpu_s"]} for x, y in pairs]
            continue
        results[case] = [_spawn(case, n) for _ in range(a.runs)]

    def col(case, key):
        return [r[key] for r in results[case]]

    rows = []
    for case in ("xpuprof-json", "xpuprof-gz"):
        if case in results:
            rows.append((f"{case}: stop + process + write, M events/s (goal >= 3.0 json, >= 2.5 gz)",
                         _fmt(col(case, "events_per_s"), 1e-6)))
            rows.append((f"{case}: stop s / write s", f"{_fmt(col(case, 'stop_s'))} / {_fmt(col(case, 'write_s'))}"))
            rows.append((f"{case}: record_function while recording, ns/range", _fmt(col(case, "record_ns_per_range"), 1, 0)))
            for stage in ("record", "stop", "write"):
                rows.append((f"{case}: peak RSS growth after {stage}, B/event (goal <= 150)",
                             _fmt(col(case, f"rss_{stage}_B_per_ev"), 1, 1)))
    if "xpuprof-json" in results:
        rows.append(("writer bandwidth / raw write of the same bytes (goal >= 0.50)",
                     _fmt(col("xpuprof-json", "writer_vs_raw_write"))))
        rows.append(("  writer GB/s | raw write GB/s", f"{_fmt(col('xpuprof-json', 'writer_GB_s'))} | "
                                                      f"{_fmt(col('xpuprof-json', 'raw_write_GB_s'))}"))
    if "xpuprof-gz" in results:
        rows.append((".json.gz: isal level 1 alone / writer, time, best of 3 alternated (goal >= 0.85)",
                     _fmt(col("xpuprof-gz", "isal_vs_writer"))))
        rows.append(("  same, CPU time (user + sys; the time ratio on a machine with no free CPU)",
                     _fmt(col("xpuprof-gz", "isal_vs_writer_cpu"))))
        rows.append(("  .json.gz size / isal level 1's (goal <= 1.10)", _fmt(col("xpuprof-gz", "size_vs_isal"), 1, 3)))
    for peer in ("torch", "viztracer"):
        if peer in results:
            rows.append((f"{peer}: stop + export, M events/s", _fmt(col(peer, "events_per_s"), 1e-6)))
            rows.append((f"{peer}: peak RSS growth after export, B/event", _fmt(col(peer, "rss_write_B_per_ev"), 1, 1)))
            if "xpuprof-json" in results:
                ratio = statistics.median(col("xpuprof-json", "events_per_s")) / statistics.median(col(peer, "events_per_s"))
                rows.append((f"  xpuprof .json / {peer} (events/s, medians)", f"{ratio:.2f}x"))
    if "rf-sim" in results:
        rows.append(("record_function enter+exit, sim session linking ranges, ns (goal <= 500)",
                     _fmt(col("rf-sim", "sim_ns"), 1, 0)))
        rows.append(("record_function enter+exit, host only, ns", _fmt(col("rf-sim", "host_ns"), 1, 0)))
    if "args-export" in results:
        rows.append(("stop + export, every range with a small dict arg, M events/s", _fmt(col("args-export", "args"), 1e-6)))
        rows.append(("  the same ranges without args, M events/s", _fmt(col("args-export", "plain"), 1e-6)))
        rows.append(("  with args / without (medians; goal >= 0.60)",
                     f"{statistics.median(col('args-export', 'args')) / statistics.median(col('args-export', 'plain')):.2f}"))
        rows.append(("  same, events per CPU second (user + sys)",
                     f"{statistics.median(col('args-export', 'args_cpu')) / statistics.median(col('args-export', 'plain_cpu')):.2f}"))
    if "crash-safe" in results:
        on, off = col("crash-safe", "on"), col("crash-safe", "off")
        rows.append(("record + stop + write, crash-safe copy on | off, s", f"{_fmt(on)} | {_fmt(off)}"))
        rows.append(("  on / off (medians; goal <= 1.03)", f"{statistics.median(on) / statistics.median(off):.3f}"))
        rows.append(("  same, CPU time (user + sys; what the process pays on a busy machine)",
                     f"{statistics.median(col('crash-safe', 'cpu_on')) / statistics.median(col('crash-safe', 'cpu_off')):.3f}"))
        rows.append(("  recording alone, on / off (medians)",
                     f"{statistics.median(col('crash-safe', 'rec_on')) / statistics.median(col('crash-safe', 'rec_off')):.3f}"))
    if "args-mem" in results:
        for stage in ("record", "stop", "write"):
            rows.append((f"ranges with small args: peak RSS growth after {stage}, B/range (goal <= 250)",
                         _fmt(col("args-mem", f"rss_{stage}_B_per_range"), 1, 0)))
    if "under-load" in cases and _available("under-load") is None:
        slow = {}
        for child, label in zip(LOAD_CHILDREN, ("xpuprof .json", "viztracer")):
            q, l = load[child]["quiet"], load[child]["loaded"]
            slow[child] = statistics.median(l) / statistics.median(q)
            rows.append((f"{label}: stop + export s, quiet | beside {a.hogs} busy process(es)",
                         f"{_fmt(q)} | {_fmt(l)}"))
            rows.append((f"  slowdown (median loaded / median quiet)", f"{slow[child]:.2f}x"))
        rows.append(("xpuprof slowdown / viztracer slowdown under load (goal <= 1.00)",
                     f"{slow[LOAD_CHILDREN[0]] / slow[LOAD_CHILDREN[1]]:.2f}"))
    width = max((len(r[0]) for r in rows), default=10)
    print(f"# host ranges per run: {a.n:,} (args-mem: {a.args_n:,})")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    rc = 0
    device = HERE / "bench_device_end_to_end.py"
    if not a.no_device and device.exists():
        print("\n# device rows (bench_device_end_to_end.py)", flush=True)
        rc = subprocess.call([sys.executable, str(device)])
    report = HERE / "bench_report.py"
    if not a.no_report and report.exists():
        print("\n# xpuprof report row (bench_report.py)", flush=True)
        rc = subprocess.call([sys.executable, str(report)]) or rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
