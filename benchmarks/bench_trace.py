"""Trace build + write throughput and memory, against baselines run in the same process.

Mixed events: 60 % slices with args (External id, correlation, device, bytes, a hex context, a
string arg, grid [x, y, z]), 20 % counters (two metrics), 20 % flows. Each size is built through
the bulk TraceBuilder API in 100k-row batches (what a backend does per drained buffer), then
written as .json and as .json.gz. Baselines: orjson over a list of plain dicts (dicts built
under gc.disable, then one dumps + write) and torch.profiler's export when torch is installed.

    python benchmarks/bench_trace.py            # N = 1M and 5M
    python benchmarks/bench_trace.py --quick    # N = 200k
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder, hex_column, write_chrome_trace

BATCH = 100_000
PAGE = os.sysconf("SC_PAGE_SIZE")
NAMES = [f"void at::native::elementwise_kernel<{i}, at::native::Op{i % 13}>" for i in range(200)]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def batch_columns(i: int, n: int, rng: np.random.Generator) -> dict:
    ts = BASE_TIME_NS + 10**9 + i * 10**9 + np.cumsum(rng.integers(100, 2000, n))
    return {
        "ts": ts,
        "dur": rng.integers(1_000, 50_000, n),
        "name": rng.integers(0, len(NAMES), n).astype(np.int32),
        "tid": rng.integers(1, 8, n),
        "corr": np.arange(i * n, (i + 1) * n, dtype=np.int64) + 1,
        "bytes": rng.random(n) * 1e6,
        "ctx": rng.integers(0, 2**48, n).astype(np.uint64),
        "kind": rng.integers(0, 3, n),
        "grid": rng.integers(1, 1024, (n, 3)),
        "ctr": rng.random(n) * 100.0,
    }


def build(total: int, seed: int = 0) -> TraceBuilder:
    rng = np.random.default_rng(seed)
    tb = TraceBuilder(pid=1)
    name_ids = np.array([tb.strings.intern(s) for s in NAMES], dtype=np.int32)
    kinds = np.array([tb.strings.intern(s) for s in ("Dispatch Kernel", "HtoD", "DtoH")], dtype=np.int32)
    from xpuprof.trace import ArgColumn

    done = 0
    i = 0
    while done < total:
        n_ev = min(BATCH, total - done)
        n_sl, n_ct = int(n_ev * 0.6), int(n_ev * 0.2)
        n_fl = n_ev - n_sl - n_ct
        c = batch_columns(i, n_sl, rng)
        tb.add_slices(names=None, name_ids=name_ids[c["name"]], ts=c["ts"], dur=c["dur"], pid=0, tid=c["tid"],
                      cat="kernel", external_id=c["corr"] + 7, vendor="xpu",
                      args={"correlation": c["corr"], "device": np.zeros(n_sl, np.int8), "bytes": c["bytes"],
                            "context": hex_column(c["ctx"]), "kind": ArgColumn("str", kinds[c["kind"]]),
                            "grid": c["grid"]})
        tb.add_counters(name="xpu", ts=c["ts"][:n_ct], pid=0, tid=c["tid"][:n_ct], cat="xpu_scope_profiler",
                        values={"GpuTime": c["ctr"][:n_ct], "XVE_ACTIVE": c["bytes"][:n_ct]})
        tb.add_flows(flow_ids=c["corr"][:n_fl], ts=c["ts"][:n_fl], pid=0, tid=c["tid"][:n_fl],
                     start=(c["kind"][:n_fl] == 0))
        done += n_ev
        i += 1
    return tb


def baseline_dicts(total: int, seed: int = 0) -> list[dict]:
    """The same events as plain dicts (what a dict-per-event exporter holds before dumps)."""
    rng = np.random.default_rng(seed)
    out: list[dict] = []
    done = i = 0
    while done < total:
        n_ev = min(BATCH, total - done)
        n_sl, n_ct = int(n_ev * 0.6), int(n_ev * 0.2)
        n_fl = n_ev - n_sl - n_ct
        c = batch_columns(i, n_sl, rng)
        ts = ((c["ts"] - BASE_TIME_NS) / 1000.0).tolist()
        dur = (c["dur"] / 1000.0).tolist()
        names = [NAMES[k] for k in c["name"].tolist()]
        tid, corr, nbytes = c["tid"].tolist(), c["corr"].tolist(), c["bytes"].tolist()
        ctx = [f"0x{v:016x}" for v in c["ctx"].tolist()]
        kind = [("Dispatch Kernel", "HtoD", "DtoH")[k] for k in c["kind"].tolist()]
        grid = c["grid"].tolist()
        for j in range(n_sl):
            out.append({"ph": "X", "cat": "kernel", "name": names[j], "pid": 0, "tid": tid[j], "ts": ts[j],
                        "dur": dur[j], "args": {"External id": corr[j] + 7, "correlation": corr[j], "device": 0,
                                                "bytes": nbytes[j], "context": ctx[j], "kind": kind[j],
                                                "grid": grid[j]}})
        ctr = c["ctr"].tolist()
        for j in range(n_ct):
            out.append({"ph": "C", "cat": "xpu_scope_profiler", "name": "xpu", "pid": 0, "tid": tid[j], "ts": ts[j],
                        "args": {"GpuTime": ctr[j], "XVE_ACTIVE": nbytes[j]}})
        for j in range(n_fl):
            ev = {"ph": "s" if kind[j] == "Dispatch Kernel" else "f", "id": corr[j], "pid": 0, "tid": tid[j],
                  "ts": ts[j], "cat": "ac2g", "name": "ac2g"}
            if ev["ph"] == "f":
                ev["bp"] = "e"
            out.append(ev)
        done += n_ev
        i += 1
    return out


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def run_xpuprof(total: int, outdir: Path) -> dict:
    gc.collect()
    rss0 = rss_bytes()
    t_build, tb = timed(lambda: build(total))
    gc.collect()
    resident = (rss_bytes() - rss0) / total
    held = tb.nbytes() / total
    assert tb.event_count() == total
    t_json, path = timed(lambda: write_chrome_trace(tb, outdir / "xp.json"))
    size_json = path.stat().st_size
    t_gz, path_gz = timed(lambda: write_chrome_trace(tb, outdir / "xp.json.gz"))
    size_gz = path_gz.stat().st_size
    del tb
    gc.collect()
    return {"build": t_build, "json": t_json, "gz": t_gz, "resident": resident, "held": held,
            "size_json": size_json, "size_gz": size_gz}


def run_baseline(total: int, outdir: Path) -> dict:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        rss0 = rss_bytes()
        t_build, events = timed(lambda: baseline_dicts(total))
        resident = (rss_bytes() - rss0) / total
        t_dump, text = timed(lambda: orjson.dumps({"traceEvents": events}))
        t_write, _ = timed(lambda: (outdir / "base.json").write_bytes(text))
        try:
            from isal import igzip
            t_gz, _ = timed(lambda: (outdir / "base.json.gz").write_bytes(igzip.compress(text, 1)))
        except ImportError:
            import zlib
            t_gz, _ = timed(lambda: (outdir / "base.json.gz").write_bytes(zlib.compress(text, 1)))
    finally:
        if was:
            gc.enable()
    del events, text
    gc.collect()
    return {"json": t_build + t_dump + t_write, "gz": t_build + t_dump + t_gz, "resident": resident}


def run_torch(outdir: Path) -> dict | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    x = torch.ones(16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(100_000):
            torch.add(x, x)
    t, _ = timed(lambda: prof.export_chrome_trace(str(outdir / "torch.json")))
    return {"events": 100_000, "json": t}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 200k only")
    ap.add_argument("--sizes", type=int, nargs="*", help="event counts (default 1M 5M)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where trace files go (default: tmpfs, so the disk's speed is not what is measured)")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([200_000] if args.quick else [1_000_000, 5_000_000])
    rows = []
    with tempfile.TemporaryDirectory(prefix="xpuprof-bench-", dir=args.dir) as tmp:
        outdir = Path(tmp)
        for total in sizes:
            r = run_xpuprof(total, outdir)
            base = None if args.no_baseline else run_baseline(total, outdir)
            rows.append((total, r, base))
            for f in outdir.glob("*.json*"):
                f.unlink()
        # torch last: its import and run leave resident pages that would hide our memory growth.
        torch_res = None if args.no_baseline else run_torch(outdir)
    print(f"output directory: {args.dir or tempfile.gettempdir()}")
    print(f"{'N':>10} {'build+json M ev/s':>18} {'build+gz M ev/s':>16} {'B/ev resident':>14} {'B/ev columns':>13} "
          f"{'json B/ev':>10} {'gz B/ev':>8} | {'base json':>9} {'base gz':>8} {'base B/ev':>9} | "
          f"{'x json':>6} {'x gz':>6}")
    for total, r, base in rows:
        ej = total / (r["build"] + r["json"]) / 1e6
        eg = total / (r["build"] + r["gz"]) / 1e6
        line = (f"{total:>10,} {ej:>18.2f} {eg:>16.2f} {r['resident']:>14.1f} {r['held']:>13.1f} "
                f"{r['size_json'] / total:>10.1f} {r['size_gz'] / total:>8.1f} |")
        if base:
            bj, bg = total / base["json"] / 1e6, total / base["gz"] / 1e6
            line += f" {bj:>9.2f} {bg:>8.2f} {base['resident']:>9.0f} | {ej / bj:>6.1f} {eg / bg:>6.1f}"
        print(line)
        print(f"{'':>10}   (build {r['build']:.2f} s, write .json {r['json']:.2f} s, write .json.gz {r['gz']:.2f} s)")
    if torch_res:
        tj = torch_res["events"] / torch_res["json"] / 1e6
        ours = rows[0][0] / (rows[0][1]["build"] + rows[0][1]["json"]) / 1e6
        print(f"torch.profiler export_chrome_trace: {tj:.2f} M ev/s (xpuprof build+json at N={rows[0][0]:,}: "
              f"{ours / tj:.1f}x)")
    else:
        print("torch not installed: torch.profiler baseline skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
