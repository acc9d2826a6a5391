"""No slowdown from the trace-table refactor (issue 37): this checkout against another one, paired.

    python benchmarks/bench_refactor_pairs.py --baseline /work/wt/base93            # every case, 6 rounds
    python benchmarks/bench_refactor_pairs.py --baseline DIR --rounds 8 --only report,analyze-temporal
    python benchmarks/bench_refactor_pairs.py --baseline DIR --scale 0.2 --rounds 2  # a short proof run

``--baseline DIR`` is another checkout of xpuprof with its C extensions built in place (for issue 37:
``git worktree add /work/wt/base93 93da605`` and ``setup.py build_ext --inplace`` there). Every
measurement is a fresh process (``--child``) that imports ``xpuprof`` from one checkout (PYTHONPATH) and
times what the user pays, from before ``import xpuprof`` to the output written: the wall seconds and the
process's CPU seconds (user + system, every thread).

Cases (the inputs are generated once per invocation by this checkout, shaped like one rank of a training
job, ``bench_store.make_rank``: host ops, runtime launches, kernels on two streams, NCCL kernels, steps):
- ``report``: ``xpuprof report FILES --format json`` over ``--ranks`` Kineto JSON rank traces;
- ``report-ops``: ``xpuprof report FILE --by op --format json`` (the per-op table, key_averages' rows);
- ``convert``: ``xpuprof convert FILE -o STORE --replace`` of one rank's JSON trace;
- ``analyze-<name>``: ``xpuprof analyze STORE <name> --format json`` for each cluster analysis, over a
  store of the ``--ranks`` traces made by the baseline's own ``xpuprof convert`` (schema v1, which both read);
- ``diff``: ``xpuprof diff A B`` of two rank traces (the text to /dev/null);
- ``merge``: ``xpuprof merge FILES -o OUT.merged.json`` of the ``--ranks`` rank traces (``--align step``);
  ``--small-ranks``: every rank a small trace as torch.profiler writes one (12 slices) (``--ranks 1000 --only
  merge,report``: a 1,000-rank job's merge and ``report`` of its files);
- ``key_averages``: ``--n`` ``record_function`` ranges recorded in ``xpuprof.profile`` (not timed), then
  ``prof.key_averages().table()`` timed;
- ``end-to-end``: ``--n`` ranges recorded, then ``stop()`` + ``export_chrome_trace()`` timed.

Rounds alternate the order (this, baseline / baseline, this) so neither side always runs first; one
warm-up pair per case is not counted (bytecode written, page cache filled). A round's ratio is this
checkout's time over the baseline's in that round; the table prints the median of the round ratios (wall
and CPU) and the medians of the times. Issue 37's rule: a case counts as slower only if its paired median
wall ratio exceeds 1.05 in two separate runs of this script. The machine's load (``os.getloadavg``) is
printed before and after: on a shared machine the CPU-second ratios are the steadier figure.
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
ANALYSES = ("temporal", "kernels", "kernel-types", "idle", "overlap", "queue", "launch", "memory-bw", "stragglers")
CASES = ("report", "report-ops", "convert", *(f"analyze-{a}" for a in ANALYSES), "diff", "merge", "key_averages",
         "end-to-end")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ----------------------------------------------------------------------------- the child: one measurement
def _cli(argv: list[str], ok=(0,)) -> None:
    import contextlib
    import io

    from xpuprof.cli import main

    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):
        rc = main(argv)
    if rc not in ok:
        raise RuntimeError(f"xpuprof {' '.join(argv)} exited {rc}")


def _record(n: int):
    """``n`` record_function ranges (64 names) in a host-only profile; the profile is returned started."""
    import xpuprof

    prof = xpuprof.profile(activities=["cpu"])
    prof.start()
    names = [f"range_{i}" for i in range(64)]
    rf = xpuprof.record_function
    for i in range(n):
        with rf(names[i & 63]):
            pass
    return prof


def child(case: str, data: dict) -> dict:
    """Runs one case in this process (a fresh interpreter) and returns its wall and CPU seconds."""
    t, c = time.perf_counter(), _cpu_s()
    if case == "report":
        _cli(["report", *data["json"], "--format", "json", "-o", data["out"]])
    elif case == "report-ops":
        _cli(["report", data["json"][0], "--by", "op", "--format", "json", "-o", data["out"]])
    elif case == "convert":
        _cli(["convert", data["json"][0], "-o", data["out"], "--replace"])
    elif case.startswith("analyze-"):
        _cli(["analyze", data["store"], case[len("analyze-"):], "--format", "json", "-o", data["out"]])
    elif case == "diff":
        _cli(["diff", data["json"][0], data["json"][1]], ok=(0, 1))  # 1: slower kernels found
    elif case == "merge":
        _cli(["merge", *data["json"], "-o", data["out"], "--align", "step"])
    elif case in ("key_averages", "end-to-end"):
        prof = _record(data["n"])
        if case == "key_averages":
            prof.stop()
            t, c = time.perf_counter(), _cpu_s()
            text = prof.key_averages().table(sort_by="cpu_time_total", row_limit=20)
            assert "range_" in text
        else:
            t, c = time.perf_counter(), _cpu_s()
            prof.stop()
            prof.export_chrome_trace(data["out"])
    else:
        raise ValueError(case)
    import xpuprof

    return {"s": time.perf_counter() - t, "cpu_s": _cpu_s() - c, "xpuprof": str(Path(xpuprof.__file__).parent.parent)}


# ----------------------------------------------------------------------------- inputs
SMALL_RANK = """
import json
from pathlib import Path
out = Path({out!r}) / "json"
out.mkdir(parents=True, exist_ok=True)
for rank in range({ranks}):  # torch.profiler's shape: a host process, a device process, the Spans row
    ev = [{{"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {{"name": "python"}}}},
          {{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {{"name": "GPU 0"}}}},
          {{"ph": "M", "name": "process_sort_index", "pid": 0, "tid": 0, "args": {{"sort_index": 5000000}}}}]
    ev.append({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 4242, "tid": 4242,
               "ts": 5.0 + rank, "dur": 150.0}})
    for i in range(5):
        ev.append({{"ph": "X", "cat": "cpu_op", "name": f"op{{i}}", "pid": 4242, "tid": 4242, "ts": 10.0 + 20 * i + rank,
                   "dur": 8.0, "args": {{"External id": i + 1}}}})
        ev.append({{"ph": "X", "cat": "kernel", "name": f"k{{i}}", "pid": 0, "tid": 7, "ts": 14.0 + 20 * i + rank,
                   "dur": 5.0, "args": {{"External id": i + 1, "stream": 7, "device": 0, "correlation": i + 1}}}})
    ev.append({{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": 0.0, "dur": 200.0}})
    (out / f"w.rank{{rank}}.pt.trace.json").write_text(json.dumps({{
        "schemaVersion": 1, "distributedInfo": {{"rank": rank, "world_size": {ranks}}},
        "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": ev}}))
"""


def make_inputs(base: Path, ranks: int, events: int, out: Path, *, small: bool = False, store: bool = True) -> None:
    """Rank traces as Kineto JSON (``out/json``) written by this checkout, and a store (``out/store``) of
    them written by the baseline's own ``xpuprof convert`` (a store both sides read: schema v1; only when
    ``store``: an analyze case reads it). ``small``: each rank a small trace as torch.profiler writes one
    (12 slices and 3 metadata rows: what a 1,000-rank job's short captures look like), not ``events`` events."""
    if small:
        subprocess.run([sys.executable, "-c", SMALL_RANK.format(out=str(out), ranks=ranks)], check=True)
    else:
        _make_ranks(ranks, events, out)
    if store:
        subprocess.run([sys.executable, "-m", "xpuprof", "convert", str(out / "json"), "-o", str(out / "store")],
                       check=True, env=_env(base), stdout=subprocess.DEVNULL)


def _make_ranks(ranks: int, events: int, out: Path) -> None:
    code = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from pathlib import Path
from bench_store import make_rank
from xpuprof.trace.write.chrome import write_chrome_trace
out = Path({str(out)!r}) / "json"
out.mkdir(parents=True, exist_ok=True)
for rank in range({ranks}):
    write_chrome_trace(make_rank(rank, {events}), out / f"w.rank{{rank}}.pt.trace.json")
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(REPO))


def _env(checkout: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(checkout)  # this checkout wins over the venv's editable install
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # modules load from bytecode, as an installed package's do
    return env


def measure(checkout: Path, case: str, data: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", case, json.dumps(data)], capture_output=True,
                          text=True, env=_env(checkout))
    if proc.returncode != 0:
        raise RuntimeError(f"{case} in {checkout} failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(got["xpuprof"]).resolve() != checkout.resolve():
        raise RuntimeError(f"{case}: the child imported xpuprof from {got['xpuprof']}, not {checkout}")
    return got


# ----------------------------------------------------------------------------- the paired rounds
def run(a) -> list[dict]:
    base = Path(a.baseline).resolve()
    sides = {"this": REPO, "baseline": base}
    cases = [c for c in CASES if not a.only or c in a.only.split(",") or
             (c.startswith("analyze-") and "analyze" in a.only.split(","))]
    tmp = Path(a.tmp or a.tmp_made)
    ranks, events, n = max(2, a.ranks), int(a.events * a.scale), int(a.n * a.scale)
    make_inputs(base, ranks, events, tmp, small=a.small_ranks, store=any(c.startswith("analyze-") for c in cases))
    jsons = sorted(str(p) for p in (tmp / "json").iterdir())
    results = []
    for case in cases:
        data = {"json": jsons, "store": str(tmp / "store"), "n": n}
        times = {side: [] for side in sides}
        for r in range(a.rounds + 1):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for side in order:
                out = tmp / f"out-{side}"
                data["out"] = str(out) + (".json" if case in ("report", "report-ops", "end-to-end") or
                                          case.startswith("analyze-") else ".merged.json" if case == "merge" else "")
                got = measure(sides[side], case, data)
                if r:  # round 0 is the warm-up
                    times[side].append(got)
        ratios = [t["s"] / b["s"] for t, b in zip(times["this"], times["baseline"])]
        cpu_ratios = [t["cpu_s"] / b["cpu_s"] for t, b in zip(times["this"], times["baseline"])]
        row = {"case": case, "wall_ratio": statistics.median(ratios), "cpu_ratio": statistics.median(cpu_ratios),
               "ratios": ratios, "this_s": statistics.median(t["s"] for t in times["this"]),
               "base_s": statistics.median(t["s"] for t in times["baseline"]),
               "this_cpu_s": statistics.median(t["cpu_s"] for t in times["this"]),
               "base_cpu_s": statistics.median(t["cpu_s"] for t in times["baseline"])}
        results.append(row)
        print(_line(row), flush=True)
    return results


def _line(row: dict) -> str:
    flag = "  (over 1.05)" if row["wall_ratio"] > 1.05 else ""
    return (f"| {row['case']} | {row['this_s']:.3f} / {row['base_s']:.3f} | {row['this_cpu_s']:.3f} / "
            f"{row['base_cpu_s']:.3f} | **{row['wall_ratio']:.3f}**{flag} ({', '.join(f'{x:.2f}' for x in row['ratios'])})"
            f" | {row['cpu_ratio']:.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="another checkout (C extensions built in place)")
    ap.add_argument("--rounds", type=int, default=6, help="paired rounds per case after a warm-up pair (>= 5 for "
                    "the issue's rule; an even number runs each side first equally often)")
    ap.add_argument("--ranks", type=int, default=4, help="rank traces (report) and store ranks (analyze)")
    ap.add_argument("--events", type=int, default=200_000, help="events per rank")
    ap.add_argument("--n", type=int, default=300_000, help="record_function ranges (key_averages, end-to-end)")
    ap.add_argument("--small-ranks", action="store_true", help="each of the --ranks traces a small one as "
                    "torch.profiler writes (12 slices, 3 metadata rows): merge/report of many small ranks (e.g. --ranks 1000)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --events and --n (0.2: a short proof run)")
    ap.add_argument("--only", default=None, help=f"comma-separated cases ('analyze': every analysis): {', '.join(CASES)}")
    ap.add_argument("--tmp", default=None, help="where the inputs go (default: a new temporary directory)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], json.loads(a.child[1]))))
        return 0
    if not a.baseline:
        ap.error("--baseline DIR is required: the checkout to compare against (e.g. a worktree of 93da605)")
    if not (Path(a.baseline) / "xpuprof" / "__init__.py").is_file():
        ap.error(f"--baseline {a.baseline}: not an xpuprof checkout (no xpuprof/__init__.py there)")
    unknown = set((a.only or "").split(",")) - set(CASES) - {"analyze", ""}
    if unknown:
        ap.error(f"--only: unknown case(s) {', '.join(sorted(unknown))}; valid: analyze, {', '.join(CASES)}")
    a.tmp_made = None if a.tmp else tempfile.mkdtemp(prefix="xpuprof-pairs-")
    load = os.getloadavg()
    print(f"this: {REPO}  baseline: {Path(a.baseline).resolve()}  rounds: {a.rounds}  ranks: {a.ranks}  "
          f"events/rank: {int(a.events * a.scale)}  ranges: {int(a.n * a.scale)}  load: {load[0]:.1f} {load[1]:.1f}")
    print("| case | wall s, this / baseline (medians) | CPU s, this / baseline | paired wall ratio, median (rounds) "
          "| paired CPU ratio |")
    print("|---|---|---|---|---|")
    try:
        rows = run(a)
    finally:
        if not a.tmp:  # the generated inputs and outputs: gone with the run
            import shutil

            shutil.rmtree(a.tmp_made, ignore_errors=True)
    load = os.getloadavg()
    over = [r["case"] for r in rows if r["wall_ratio"] > 1.05]
    print(f"load after: {load[0]:.1f} {load[1]:.1f}; paired wall median over 1.05: {', '.join(over) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
