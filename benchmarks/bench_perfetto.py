"""Perfetto protobuf (``.pftrace``) against Kineto JSON, same run (issue 38): bytes per event and encoding speed.

    python benchmarks/bench_perfetto.py                              # 200k + 50k kernels, 3 runs
    python benchmarks/bench_perfetto.py --kernels 20000 --xpu-kernels 20000   # a short check

Each case is a fresh process per run, the cases alternated run by run; figures are medians over the runs
(with min-max). In each process the profile is made and frozen to a TraceTable once, then:

- ``device``: ``--kernels`` device kernels (200,000: the issue's figure) on 4 queues of one device (3,000 templated names, 3/4 of the
  launches among 64 of them; realistic gaps and durations), each with its ``correlation`` and its queue's
  constants (device, context, SYCL and Level Zero queue, stream), launched by a runtime call on one host
  thread with an ``ac2g`` flow launch -> kernel. Bytes per device slice for name, ts, dur, correlation and
  flow = (trace with the kernels - the same trace without them) / kernels: the kernel's slice and its flow's
  end, nothing of the launch side. Goal: <= 60 B (.pftrace). The same difference in JSON beside it.
- ``xpu``: the XPU backend over the PTI double, ``--xpu-kernels`` iterations (50,000: 700k events, 160 MB of
  JSON; ``bench_device_end_to_end``'s workload: kernels, copies,
  fills, syncs, runtime and driver calls, external correlations; every row with all its args), processed
  into a builder. Sizes: .pftrace bytes / JSON bytes of the whole trace (goal <= 0.4). Speed, alternated 3
  times in the process, best of each: ``encode_perfetto`` (to memory, one thread: the C encoder runs on the
  caller's thread) against the JSON writer rendering the same table to memory on one thread (its columnar
  renderer, every chunk copied into one buffer: ``write_chrome_trace`` with ``threads=1`` without the file).
  Events per second over the table's rows (slices, instants, counters, flows: the same events in both files,
  one for one). Goal: .pftrace events/s >= 2x JSON's.

The 1-minute load and the CPU count are printed with the figures: on a loaded machine the speed ratio is a
first figure, not a verdict (both sides are one thread in one process, alternated, so the load reaches both).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CASES = ("device", "xpu")
DISTINCT_NAMES = 3000
QUEUES = 4
HOST_PID, HOST_TID, DEVICE_PID = 4242, 4243, 0
GOALS = {"pftrace_bytes_per_device_slice": 60.0, "xpu_size_ratio": 0.4, "speed_ratio": 2.0}


# ----------------------------------------------------------------------------- profiles
def _device_builder(kernels: int, with_kernels: bool):
    """Launch calls on one host thread and (``with_kernels``) their kernels on 4 queues, flows between them."""
    import numpy as np

    from xpuprof.clock import now_ns
    from xpuprof.trace.builder.builder import TraceBuilder

    rng = np.random.default_rng(38)
    names = [f"at::native::xpu::kernel_{k}<float, {k % 7}, at::native::Op{k % 13}>" for k in range(DISTINCT_NAMES)]
    hot = rng.random(kernels) < 0.75
    pick = np.where(hot, rng.integers(0, 64, kernels), rng.integers(0, DISTINCT_NAMES, kernels))
    launch_ts = now_ns() + np.cumsum(rng.integers(4_000, 12_000, kernels))  # a launch every 4-12 us
    launch_dur = rng.integers(800, 3_000, kernels)
    queue = rng.integers(0, QUEUES, kernels)
    kernel_dur = rng.integers(1_000, 200_000, kernels)
    start = launch_ts + rng.integers(5_000, 40_000, kernels)
    for q in range(QUEUES):  # a queue runs one kernel at a time: each starts after the one before it ends
        on = np.flatnonzero(queue == q)
        s, d = start[on], kernel_dur[on]
        for k in range(1, len(on)):
            s[k] = max(s[k], s[k - 1] + d[k - 1] + 500)
        start[on] = s
    correlation = np.arange(1, kernels + 1, dtype=np.int64)
    b = TraceBuilder()
    b.set_process_name(HOST_PID, "python")
    b.set_thread_name(HOST_PID, HOST_TID, "python")
    b.add_slices(names=["urEnqueueKernelLaunch"] * kernels, ts=launch_ts, dur=launch_dur, pid=HOST_PID,
                 tid=HOST_TID, cat="xpu_runtime", args={"correlation": correlation})
    b.add_flows(flow_ids=correlation, ts=launch_ts, pid=HOST_PID, tid=HOST_TID, start=True)
    if with_kernels:
        b.set_process_name(DEVICE_PID, "XPU 0")
        name_ids = b.strings.intern_many(names)
        for q in range(QUEUES):
            on = np.flatnonzero(queue == q)
            tid = 7 + q
            b.set_thread_name(DEVICE_PID, tid, f"stream {tid}")
            b.add_slices(names=None, name_ids=np.asarray(name_ids, np.int32)[pick[on]], ts=start[on],
                         dur=kernel_dur[on], pid=DEVICE_PID, tid=tid, cat="kernel",
                         args={"correlation": correlation[on], "device": np.zeros(len(on), np.int64),
                               "context": ["0x00000000000000c0"] * len(on),
                               "sycl queue": np.full(len(on), tid, np.int64),
                               "l0 queue": [f"0x{0x1000 + q:016x}"] * len(on),
                               "stream": np.full(len(on), tid, np.int64)})
            b.add_flows(flow_ids=correlation[on], ts=start[on], pid=DEVICE_PID, tid=tid, start=False)
    b.set_window(int(launch_ts[0]), int(start.max() + kernel_dur.max()))
    return b


def _xpu_builder(kernels: int):
    sys.path.insert(0, str(HERE))
    import bench_writer

    import bench_device_end_to_end as dev

    return bench_writer._xpu_builder(kernels * dev.XPU_RECORDS_PER_ITERATION)


# ----------------------------------------------------------------------------- the two encoders
def json_to_memory(table) -> bytearray:
    """The JSON writer's rendering of a builder's table on one thread into one buffer (write_chrome_trace's
    layout pass and ``_write`` with ``threads=1``, the chunks copied into memory instead of written to a file:
    the same bytes)."""
    import numpy as np
    import orjson

    from xpuprof.trace.table.builder_view import header_bytes
    from xpuprof.trace.table.rowtext import PooledChunk
    from xpuprof.trace.layout.layout import json_times, lay_out
    from xpuprof.trace.write.chrome import _event_bodies, micros_bytes, rel_ns

    table = json_times(lay_out(table))  # as write_chrome_trace does (encode_perfetto lays out too)
    builder = table.builder
    out = bytearray(header_bytes(builder))
    for body in _event_bodies(table, True, defer=False):
        if isinstance(body, PooledChunk):
            out += body.view()
            body.release()
        elif isinstance(body, np.ndarray):
            out += memoryview(body).cast("B")
        else:
            out += body
    end_ns = builder.window_end_ns or builder.window_start_ns
    closing = {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "",
               "ts": orjson.Fragment(micros_bytes(rel_ns([end_ns])[0]))}
    out += orjson.dumps(closing) + b'\n], "traceName": "bench"}\n'
    return out


def pftrace_to_memory(table) -> list[bytes]:
    """``encode_perfetto``: the file's bytes in memory, as the parts ``write_perfetto`` writes one after another."""
    from xpuprof.trace.write.perfetto import encode_perfetto

    return encode_perfetto(table, trace_name="bench")


def _size(out) -> int:
    return len(out) if isinstance(out, (bytes, bytearray)) else sum(map(len, out))


def _events(table) -> int:
    return sum(len(s) for s in table.segments if s.kind in ("slices", "instants", "counters", "flows"))


# ----------------------------------------------------------------------------- children
def child(case: str, kernels: int) -> dict:
    import gc

    if case == "device":
        sizes = {}
        for with_kernels in (False, True):
            table = _device_builder(kernels, with_kernels).freeze()
            sizes[with_kernels] = (_size(json_to_memory(table)), _size(pftrace_to_memory(table)))
        return {"case": case, "kernels": kernels,
                "json_bytes_per_device_slice": (sizes[True][0] - sizes[False][0]) / kernels,
                "pftrace_bytes_per_device_slice": (sizes[True][1] - sizes[False][1]) / kernels,
                "json_bytes": sizes[True][0], "pftrace_bytes": sizes[True][1]}
    builder = _xpu_builder(kernels)
    table = builder.freeze()
    events = _events(table)
    json_s, pf_s, size = [], [], {}
    gc.collect()
    for _ in range(3):  # alternated, best of each: the load reaches both; one output held at a time
        t = time.perf_counter()
        out = json_to_memory(table)
        json_s.append(time.perf_counter() - t)
        size["json"] = _size(out)
        del out
        t = time.perf_counter()
        out = pftrace_to_memory(table)
        pf_s.append(time.perf_counter() - t)
        size["pftrace"] = _size(out)
        del out
    return {"case": case, "kernels": kernels, "events": events, "json_bytes": size["json"],
            "pftrace_bytes": size["pftrace"], "xpu_size_ratio": size["pftrace"] / size["json"], "json_s": min(json_s), "pftrace_s": min(pf_s),
            "json_events_per_s": events / min(json_s), "pftrace_events_per_s": events / min(pf_s),
            "speed_ratio": min(json_s) / min(pf_s)}


def _run_child(case: str, kernels: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case, "--kernels", str(kernels)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{case} child failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(values: list[float], digits: int = 2) -> str:
    med = statistics.median(values)
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=200_000, help="device kernels of the bytes-per-slice case")
    ap.add_argument("--xpu-kernels", type=int, default=50_000, help="iterations of the XPU double's workload")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", choices=CASES)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.kernels)))
        return 0
    results: dict[str, list[dict]] = {c: [] for c in CASES}
    for _ in range(args.runs):
        for case in CASES:
            results[case].append(_run_child(case, args.kernels if case == "device" else args.xpu_kernels))
    load = os.getloadavg()[0]
    print(f"bench_perfetto: {args.kernels} device kernels, XPU double x {args.xpu_kernels}; {args.runs} fresh "
          f"processes per case; "
          f"load {load:.2f} on {os.cpu_count()} CPUs")
    dev, xpu = results["device"], results["xpu"]
    verdict = []
    rows = [
        ("device slice (name, ts, dur, correlation, flow), .pftrace B", [r["pftrace_bytes_per_device_slice"] for r in dev],
         "pftrace_bytes_per_device_slice", "<="),
        ("device slice, same fields, JSON B", [r["json_bytes_per_device_slice"] for r in dev], None, None),
        (f"XPU profile ({xpu[0]['events']} events) .pftrace / JSON bytes", [r["xpu_size_ratio"] for r in xpu],
         "xpu_size_ratio", "<="),
        ("XPU profile .pftrace B per event", [r["pftrace_bytes"] / r["events"] for r in xpu], None, None),
        ("XPU profile JSON B per event", [r["json_bytes"] / r["events"] for r in xpu], None, None),
        ("JSON render to memory, events/s (1 thread)", [r["json_events_per_s"] for r in xpu], None, None),
        (".pftrace encode to memory, events/s (1 thread)", [r["pftrace_events_per_s"] for r in xpu], None, None),
        (".pftrace events/s / JSON events/s", [r["speed_ratio"] for r in xpu], "speed_ratio", ">="),
    ]
    for label, values, goal_key, op in rows:
        digits = 0 if max(values) >= 1000 else 3 if max(values) < 10 else 1
        line = f"  {label:<62} {_fmt(values, digits)}"
        if goal_key:
            goal = GOALS[goal_key]
            med = statistics.median(values)
            ok = med <= goal if op == "<=" else med >= goal
            if goal_key == "speed_ratio" and load >= (os.cpu_count() or 1):
                line += f"   goal {op} {goal}: a first figure (load {load:.1f})"
            else:
                line += f"   goal {op} {goal}: {'met' if ok else 'NOT met'}"
                verdict.append(ok)
        print(line)
    return 0 if all(verdict) else 1


if __name__ == "__main__":
    sys.exit(main())
