"""A corpus of synchronous data-parallel gloo jobs on CPU, profiled with the sim backend: one trace per
rank per run. Each rank's step computes a little, sleeps ``BASE_S`` and all-reduces a gradient; the slow
rank of a run sleeps ``DELAY_S`` more in its slow steps, so the others wait that long for it in the
all-reduce. Two jobs (2 and 4 processes, one after the other) each run their scenarios one after the
other in the same process group: starting Python with torch is paid once per rank. The times are long
against what a loaded two-core machine adds to a step now and then (tens of ms on one rank).

Ranks meet through a file store (no port to pick) and gloo talks over the loopback interface.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

STEPS = 11  # active steps: 1..10 are compared, the 11th (the profiler's stop) is left out as HTA does
BASE_S = 0.15
DELAY_S = 0.25
SOME_STEPS = (3, 6, 9)  # the steps "some" runs are slow in (ProfilerStep#N)
# name -> (world size, slow rank (-1: none), its slow steps)
SCENARIOS = {
    "2-balanced": (2, -1, ()), "2-slow": (2, 1, tuple(range(1, STEPS + 1))),
    "4-balanced": (4, -1, ()), "4-slow": (4, 2, tuple(range(1, STEPS + 1))), "4-some": (4, 1, SOME_STEPS),
}
# The sim's flavour: CUDA's (NCCL's kernel names, which HTA's straggler analysis reads) but for one run
# XPU's (oneCCL's kernel names, as on an Intel GPU)
XPU_RUNS = ("4-some",)

WORKER = textwrap.dedent("""
    import json, sys, time
    import torch, torch.distributed as dist, torch.profiler as P
    import xpuprof

    store_file, rank, world, out, scenarios = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \\
        json.loads(sys.argv[5])
    torch.set_num_threads(1)  # four ranks on two cores: no intra-op threads competing with gloo's
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world)
    torch.manual_seed(rank)
    a = torch.randn(64, 64)
    grad = torch.ones(1024)
    for sc in scenarios:
        dist.barrier()
        device = P.ProfilerActivity.XPU if sc["vendor"] == "xpu" else P.ProfilerActivity.CUDA
        prof = xpuprof.profile(backends=["sim"], activities=[P.ProfilerActivity.CPU, device],
                               config=xpuprof.ProfilerConfig(custom={"sim_vendor": sc["vendor"]}),
                               schedule=P.schedule(wait=0, warmup=1, active=sc["steps"], repeat=1),
                               on_trace_ready=P.tensorboard_trace_handler(f"{out}/{sc['name']}"))
        with prof:
            for step in range(sc["steps"] + 1):  # step 0 warms up; ProfilerStep#N is loop step N
                a @ a
                time.sleep(sc["base_s"])
                if rank == sc["slow_rank"] and step in sc["slow_steps"]:
                    time.sleep(sc["delay_s"])
                dist.all_reduce(grad)
                prof.step()
    dist.destroy_process_group()
""")


def generate(out: Path, timeout: float = 600) -> dict[str, Path]:
    """Runs both jobs; the directory of each scenario's traces."""
    out.mkdir(parents=True, exist_ok=True)
    worker = out / "gloo_worker.py"
    worker.write_text(WORKER)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    for world in (2, 4):  # one job after the other: on two cores, the fewer ranks compete, the less noise
        runs = [{"name": name, "steps": STEPS, "base_s": BASE_S, "delay_s": DELAY_S, "slow_rank": slow,
                 "slow_steps": list(steps), "vendor": "xpu" if name in XPU_RUNS else "cuda"}
                for name, (w, slow, steps) in SCENARIOS.items() if w == world]
        store = Path(tempfile.mkdtemp(prefix="gloo-", dir=out)) / "store"
        procs = [subprocess.Popen([sys.executable, str(worker), str(store), str(rank), str(world), str(out),
                                   json.dumps(runs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for rank in range(world)]
        try:
            for p in procs:
                _, err = p.communicate(timeout=timeout)
                if p.returncode != 0:
                    raise RuntimeError(f"a gloo rank failed (exit {p.returncode}):\n{err[-3000:]}")
        finally:
            for p in procs:  # a failed rank leaves the others waiting in a collective
                if p.poll() is None:
                    p.kill()
                    p.communicate()
    dirs = {name: out / name for name in SCENARIOS}
    for name, d in dirs.items():
        files = sorted(d.glob("*.pt.trace.json"))
        if len(files) != SCENARIOS[name][0]:
            raise RuntimeError(f"{name}: {len(files)} traces for {SCENARIOS[name][0]} ranks: {files}")
    return dirs
