"""On-demand tracing, what the job pays, beside torch 2.13's own Kineto client on the same real dynolog.

    python benchmarks/bench_ondemand.py [idle|job|latency|spike|all] [--runs 3] [--idle-seconds 30] [--nice N]

idle     CPU of a process that only polls (Kineto's default 5 s interval, a real daemon answering), over
         ``--idle-seconds`` once it settled (40 s after registering: start-up and the one backend probe
         done): xpuprof (``import xpuprof`` with KINETO_USE_DAEMON=1) minus the same process without
         xpuprof, and torch's Kineto client (``import torch`` with the variable) minus ``import torch``
         alone. Goal: < 0.1 % of a core.
job      what a running job pays while nobody asks for a trace: the median ~10 ms torch step over
         ``--idle-seconds`` once settled, for the loop without xpuprof (baseline), with xpuprof polling
         (``import xpuprof``, KINETO_USE_DAEMON=1, default 5 s poll) and with torch's Kineto polling;
         ratios to the baseline.
latency  trigger (the RPC ``dyno gputrace`` sends, default config: start time 0, 500 ms, Kineto's default
         5 s warm-up) to the first event in the trace and to the trace on disk (its file complete), at the
         default 5 s poll, to a process running for 30 s (a job: xpuprof has probed its backends), the
         trigger at a seeded random phase of the poll; split into the poll wait (trigger -> the daemon
         hands the config over, from its log) and the rest.
spike    a 10 ms-step torch loop; a 500 ms capture is requested mid-run; the slowest step that overlaps the
         capture's start, and the slowest around its stop and write, against the median step outside it.
         Goal: <= 2x. xpuprof with its default activities (torch's ops recorded: torch's profiler switched on
         from the main thread, off from the capture thread), xpuprof without cpu_op, torch's Kineto, and the same loop with nothing requested
         (the same windows: what the machine's own noise gives).

Each measurement runs in a fresh process (a fresh daemon per run); medians of ``--runs``; ratios printed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DYNOLOG = Path(os.environ.get("XPUPROF_DYNOLOG_DIR") or REPO.parent / "shared" / "dynolog")
SETTLE_S = 40.0  # past start-up and xpuprof's one backend probe (30 s after registering)

IDLE = r"""
import os, sys, time
if sys.argv[1] == "xpuprof":
    import xpuprof
elif sys.argv[1] == "kineto":
    import torch
print("ready", flush=True)
time.sleep(3600)
"""

LOOP = r"""
import json, os, sys, time
who, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
if who.startswith("xpuprof"):
    import xpuprof
import torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
def work(reps):
    x = a
    for _ in range(reps):
        x = torch.tanh(x @ a) * 0.5
    return x
for _ in range(20):               # warm: the first calls allocate and pick kernels
    work(1)
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
while len(sys.argv) <= 4:         # calibrate: about 10 ms of torch work per step (unless given: the same work)
    t0 = time.perf_counter(); work(reps); dt = time.perf_counter() - t0
    if dt >= 0.05 or reps > 65536:
        reps = max(1, round(reps * 0.01 / dt))
        break
    reps *= 2
print("ready", reps, flush=True)
steps = []
while not os.path.exists(stop):
    t0 = time.time_ns()
    work(reps)
    steps.append((t0, time.time_ns()))
with open(out, "w") as f:
    json.dump({"reps": reps, "steps": steps}, f)
"""


class Daemon:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
        env = dict(os.environ, KINETO_IPC_SOCKET_DIR=str(self.dir),
                   LD_LIBRARY_PATH=f"{DYNOLOG / 'lib'}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}")
        self.proc = subprocess.Popen([str(DYNOLOG / "bin" / "dynolog-ondemand"), "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = int(self.wait(r"Listening to connections on port (\d+)").group(1))

    def _read(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()

    def wait(self, pattern: str, timeout: float = 60.0):
        rx, deadline, i = re.compile(pattern), time.monotonic() + timeout, 0
        with self._cond:
            while True:
                for line in self.lines[i:]:
                    m = rx.search(line)
                    if m:
                        return m
                i = len(self.lines)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"dynolog: no {pattern!r} in {timeout} s")
                self._cond.wait(1.0)

    def handed_over_ns(self, pid: int) -> int:
        """When the daemon handed the config to ``pid`` (its glog line's local time)."""
        m = self.wait(rf"I(\d{{8}} \d\d:\d\d:\d\d\.\d+) .*Returning activity profiler config for process \({pid},")
        return int(datetime.strptime(m.group(1), "%Y%m%d %H:%M:%S.%f").timestamp() * 1e9)

    def request(self, config: str, pid: int) -> dict:
        sys.path.insert(0, str(REPO))
        from xpuprof.ondemand import trigger

        return trigger.rpc("127.0.0.1", self.port, {"fn": "setKinetOnDemandRequest", "config": config, "job_id": 0,
                                                    "pids": [pid], "process_limit": 3})

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def worker_env(daemon: Daemon, *, opt_in: bool, fast_poll: bool) -> dict:
    env = dict(os.environ, KINETO_IPC_SOCKET_DIR=str(daemon.dir), KINETO_ONDEMAND_TRACE_DIR=str(daemon.dir),
               PYTHONPATH=str(REPO))
    for key in ("KINETO_USE_DAEMON", "XPUPROF_KINETO_USE_DAEMON", "KINETO_CONFIG", "XPUPROF_EXEC"):
        env.pop(key, None)
    if opt_in:
        env["KINETO_USE_DAEMON"] = "1"
    if fast_poll:
        conf = daemon.dir / "libkineto.conf"
        conf.write_text("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        env["KINETO_CONFIG"] = str(conf)
    return env


NICE = 0  # --nice: the measured process's CPU priority (all its threads), against other processes' noise


def start(code: str, args: list[str], env: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, text=True, preexec_fn=(lambda: os.nice(NICE)) if NICE else None)
    return proc, proc.stdout.readline().strip()


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` (schedstat: nanoseconds, where /proc/<pid>/stat counts 10 ms ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            pass
    return total / 1e9


def children_cpu_seconds(pid: int) -> float:
    """CPU of the children ``pid`` waited for (its backend probes), from /proc/<pid>/stat (10 ms ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def wait_file(path: Path, timeout: float = 60.0) -> Path:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.02)
    return path


# ----------------------------------------------------------------------------- idle
def idle(runs: int, seconds: float) -> dict:
    out: dict[str, list[float]] = {}
    for _ in range(runs):
        for who in ("xpuprof", "kineto"):
            for opt_in in (True, False):
                daemon = Daemon()
                try:
                    # the baseline is the same process without the opt-in, and for xpuprof without xpuprof at all
                    program = who if opt_in or who == "kineto" else "none"
                    proc, _ = start(IDLE, [program], worker_env(daemon, opt_in=opt_in, fast_poll=False))
                    if opt_in:
                        daemon.wait(rf"Registered process \({proc.pid}[,)]")
                    c_reg = cpu_seconds(proc.pid)
                    time.sleep(SETTLE_S)  # past start-up and the backend probe at registration: steady state
                    c0, t0 = cpu_seconds(proc.pid), time.monotonic()
                    children = children_cpu_seconds(proc.pid)
                    time.sleep(seconds)  # the measured window (no synchronization: the process only idles)
                    c1, t1 = cpu_seconds(proc.pid), time.monotonic()
                    proc.kill()
                    proc.wait()
                finally:
                    daemon.close()
                out.setdefault(f"{who}/{'polling' if opt_in else 'baseline'}", []).append((c1 - c0) / (t1 - t0))
                out.setdefault(f"{who}/{'polling' if opt_in else 'baseline'}/settling", []).append(
                    c0 - c_reg + children)
    print(f"\nidle: CPU over {seconds:g} s at the default 5 s poll ({runs} runs, fresh process and daemon each)")
    result = {}
    for who in ("xpuprof", "kineto"):
        polling = statistics.median(out[f"{who}/polling"])
        base = statistics.median(out[f"{who}/baseline"])
        result[who] = (polling - base) * 100
        once = statistics.median(out[f"{who}/polling/settling"]) - statistics.median(out[f"{who}/baseline/settling"])
        print(f"  {who:8s} polling {polling * 100:.4f} %  baseline ({'no xpuprof' if who == 'xpuprof' else 'torch, no opt-in'}) "
              f"{base * 100:.4f} %  -> poll cost "
              f"{result[who]:.4f} % of a core (goal < 0.1 %); the {SETTLE_S:g} s after registering: "
              f"{once * 1e3:.0f} ms of CPU (its backend probes included) more than the baseline (one-time)")
    return result


# ----------------------------------------------------------------------------- job
def job(runs: int, seconds: float) -> dict:
    variants = {"no xpuprof": ("plain", False), "xpuprof polling": ("xpuprof", True),
                "kineto polling": ("kineto", True)}
    out: dict[str, list[float]] = {}
    reps = ""  # calibrated by the first process; every process then does the same work per step
    order = list(variants)
    for run in range(runs):
        for label in order[run % len(order):] + order[:run % len(order)]:  # rotated: no variant always first
            who, opt_in = variants[label]
            daemon = Daemon()
            try:
                stop, steps_file = daemon.dir / "stop", daemon.dir / "steps.json"
                proc, ready = start(LOOP, [who, str(stop), str(steps_file), *([reps] if reps else [])],
                                    worker_env(daemon, opt_in=opt_in, fast_poll=False))
                reps = reps or ready.split()[1]
                if opt_in:
                    daemon.wait(rf"Registered process \({proc.pid}[,)]")
                time.sleep(SETTLE_S)  # past start-up and xpuprof's one backend probe (measured, not synchronizing)
                t0 = time.time_ns()
                time.sleep(seconds)  # the measured window: the loop runs, nobody asks for a trace
                t1 = time.time_ns()
                stop.touch()
                proc.wait(60)
                steps = json.loads(wait_file(steps_file).read_text())["steps"]
            finally:
                daemon.close()
            inside = [b - a for a, b in steps if a >= t0 and b <= t1]
            out.setdefault(label, []).append(statistics.median(inside) / 1e6)
    print(f"\njob: median torch step ({reps} matmul+tanh per step, ~10 ms) over {seconds:g} s while polling at the default 5 s, nothing requested "
          f"({runs} runs, fresh process and daemon each)")
    base = statistics.median(out["no xpuprof"])
    result = {}
    for label, rows in out.items():
        med = statistics.median(rows)
        result[label] = med / base
        print(f"  {label:16s} {med:.3f} ms  {med / base:.3f}x the loop without xpuprof   each run: "
              + ", ".join(f"{r:.3f}" for r in rows))
    return result


# ----------------------------------------------------------------------------- latency
def first_event_ns(trace: dict) -> int:
    base = trace["baseTimeNanoseconds"]
    ts = [e["ts"] for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    return base + int(min(ts) * 1000)


LATENCY_LOOP = r"""
import sys, time
if sys.argv[1] == "xpuprof":
    import xpuprof
import torch
x = torch.ones(64)
print("ready", flush=True)
while True:
    x = x * 1.0001
    time.sleep(0.001)
"""


def latency(runs: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    out: dict[str, list[tuple[float, float]]] = {}
    for i in range(runs):
        for who in ("xpuprof", "kineto"):
            daemon = Daemon()
            try:
                proc, _ = start(LATENCY_LOOP, [who], worker_env(daemon, opt_in=True, fast_poll=False))
                daemon.wait(rf"Registered process \({proc.pid}[,)]")
                # a running job (past xpuprof's one backend probe, 30 s in), at a random phase of the 5 s poll
                time.sleep(31.0 + rng.uniform(0, 5))
                log_file = daemon.dir / "lat.json"
                config = (f"ACTIVITIES_LOG_FILE={log_file}\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=500\n"
                          "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_WITH_STACK=false\nPROFILE_WITH_FLOPS=false\n"
                          "PROFILE_WITH_MODULES=false")
                sent = time.time_ns()
                daemon.request(config, proc.pid)
                trace_path = wait_file(daemon.dir / f"lat_{proc.pid}.json", 60)
                trace = json.loads(trace_path.read_text())  # both write elsewhere and rename: complete when seen
                on_disk = trace_path.stat().st_mtime_ns  # its last byte written
                handed = daemon.handed_over_ns(proc.pid)
                first = first_event_ns(trace)
                out.setdefault(who, []).append(((handed - sent) / 1e9, (first - handed) / 1e9, (on_disk - sent) / 1e9))
                proc.kill()
                proc.wait()
            finally:
                daemon.close()
    print(f"\nlatency: trigger -> first event and -> trace on disk, 500 ms request, default 5 s poll and warm-up "
          f"({runs} runs, seeded random phase)")
    result = {}
    for who, rows in out.items():
        poll = statistics.median(r[0] for r in rows)
        rest = statistics.median(r[1] for r in rows)
        total = statistics.median(r[0] + r[1] for r in rows)
        disk = statistics.median(r[2] for r in rows)
        result[who] = (total, disk)
        print(f"  {who:8s} first event {total:.2f} s (poll wait {poll:.2f} s, then {rest:.2f} s); trace on disk "
              f"{disk:.2f} s; each run (first event/on disk): {', '.join(f'{a + b:.2f}/{c:.2f}' for a, b, c in rows)}")
    print(f"  ratio xpuprof / kineto: first event {result['xpuprof'][0] / result['kineto'][0]:.2f}x, trace on disk "
          f"{result['xpuprof'][1] / result['kineto'][1]:.2f}x")
    return result


# ----------------------------------------------------------------------------- spike
def spike(runs: int) -> dict:
    variants = {"no capture (noise)": None, "xpuprof": "", "xpuprof-no-cpu_op":
                "ACTIVITY_TYPES=user_annotation,cpu_instant_event\n", "kineto": ""}
    out: dict[str, list[tuple[float, float]]] = {}
    for _ in range(runs):
        for who, extra in variants.items():
            daemon = Daemon()
            try:
                stop, steps_file = daemon.dir / "stop", daemon.dir / "steps.json"
                proc, ready = start(LOOP, [who, str(stop), str(steps_file)],
                                    worker_env(daemon, opt_in=True, fast_poll=True))
                daemon.wait(rf"Registered process \({proc.pid}[,)]")
                time.sleep(SETTLE_S)  # a running job: past xpuprof's one backend probe (measured, not synchronizing)
                sent = time.time_ns()
                if extra is None:  # the same loop and windows, nothing requested: what the machine's noise gives
                    time.sleep(2.0)
                    window = (sent + 300_000_000, sent + 800_000_000, sent + 900_000_000)
                else:
                    log_file = daemon.dir / "spike.json"
                    daemon.request(f"ACTIVITIES_LOG_FILE={log_file}\nPROFILE_START_TIME=0\n"
                                   f"ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_WARMUP_PERIOD_SECS=0\n{extra}", proc.pid)
                    trace_path = wait_file(daemon.dir / f"spike_{proc.pid}.json", 60)
                    time.sleep(1.0)  # steady steps after the write (measured)
                    window = (*_trace_window(json.loads(trace_path.read_text())), trace_path.stat().st_mtime_ns)
                stop.touch()
                proc.wait(60)
                steps = json.loads(wait_file(steps_file).read_text())["steps"]
            finally:
                daemon.close()
            out.setdefault(who, []).append(_spike_ratios(steps, *window))
    print(f"\nspike: slowest step around capture start / stop+write vs the median step, ~10 ms torch steps, 500 ms "
          f"capture ({runs} runs; goal <= 2x)")
    result = {}
    for who, rows in out.items():
        s, e = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        result[who] = (s, e)
        print(f"  {who:20s} start {s:.2f}x  stop+write {e:.2f}x   each run: "
              + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in rows))
    return result


def _trace_window(trace: dict) -> tuple[int, int]:
    base = trace["baseTimeNanoseconds"]
    xs = [e for e in trace["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    return base + int(min(e["ts"] for e in xs) * 1000), base + int(max(e["ts"] + e.get("dur", 0) for e in xs) * 1000)


def _spike_ratios(steps: list, start: int, end: int, written_ns: int) -> tuple[float, float]:
    margin = 20_000_000
    durs = [(t0, t1, t1 - t0) for t0, t1 in steps]
    outside = [d for t0, t1, d in durs if t1 < start - 500_000_000 or t0 > written_ns + 200_000_000]
    median = statistics.median(outside)
    at_start = max(d for t0, t1, d in durs if t1 >= start - margin and t0 <= start + margin)
    at_stop = max(d for t0, t1, d in durs if t1 >= end - margin and t0 <= written_ns + margin)
    return at_start / median, at_stop / median


def main() -> None:
    global NICE, SETTLE_S
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["idle", "job", "latency", "spike", "all"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--nice", type=int, default=0, help="niceness of the measured processes (root may give a "
                    "negative one: on a shared machine the other processes' load then disturbs the steps less)")
    ap.add_argument("--settle-seconds", type=float, default=SETTLE_S,
                    help=f"wait after registering before measuring (default {SETTLE_S:g}: past the backend probe)")
    args = ap.parse_args()
    NICE, SETTLE_S = args.nice, args.settle_seconds
    if not (DYNOLOG / "bin" / "dynolog-ondemand").is_file():
        sys.exit(f"bench_ondemand: the dynolog daemon is not at {DYNOLOG} (set XPUPROF_DYNOLOG_DIR)")
    print(f"bench_ondemand: {datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} CPUs, "
          f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}, measured processes at nice {NICE}")
    if args.what in ("idle", "all"):
        idle(args.runs, args.idle_seconds)
    if args.what in ("job", "all"):
        job(args.runs, args.idle_seconds)
    if args.what in ("latency", "all"):
        latency(args.runs)
    if args.what in ("spike", "all"):
        spike(args.runs)


if __name__ == "__main__":
    main()
