"""PyTorch's profiler tutorial under ``xpuprof.profile`` and under ``torch.profiler.profile``: what a torch
user pays for switching, as a whole script and per phase.

    python benchmarks/bench_torch_tutorial.py                 # 11 alternated pairs (the goal's protocol)
    python benchmarks/bench_torch_tutorial.py --pairs 3       # a short run that proves it works
    python benchmarks/bench_torch_tutorial.py --baseline 3    # plus unprofiled runs, for scale

The workload is the TensorBoard profiler tutorial's training loop (pytorch/tutorials,
intermediate_source/tensorboard_profiler_tutorial.py): a ResNet-18 (``tests/torch/resnet_like.py``: torchvision does
not import on CPU torch 2.13), cross-entropy, SGD with momentum, ``prof.step()`` at the top of each iteration, and the
tutorial's profiler arguments (``record_shapes``, ``profile_memory``, ``with_stack``, torch's ``schedule`` and
``tensorboard_trace_handler``), with ``repeat`` cycles so that each ``on_trace_ready`` cycle is timed more than
once. Only the profiler line differs: ``xpuprof.profile(`` for ``torch.profiler.profile(``, no backends
named. The data is fake (seeded): the tutorial's CIFAR-10 at ``--image`` pixels (the tutorial resizes to 224,
which takes seconds per step on one core; the ops, and so the events each cycle records, do not depend on
the image size, so a smaller image only makes the profiler's share larger).

Protocol: each run is a fresh process (``OMP_NUM_THREADS=1``, compiled bytecode in a private
``PYTHONPYCACHEPREFIX``, warmed by an untimed run of each mode); torch and xpuprof alternate in pairs whose
order flips each pair, so the machine's load falls on both. Figures are medians over the pairs:

- ``wall``: the whole process, interpreter start to exit (what the user waits for); also its CPU time;
- ``enter``: ``profile.__enter__`` (goal: xpuprof's <= torch's + 50 ms);
- ``prepare``: the ``step()`` that starts the first warmup (torch initializes its profiler there);
- ``cycle N``: the ``step()`` (or ``__exit__``) at the end of active cycle N: stop, build, ``on_trace_ready``
  writing the trace (goal: <= 1.15x torch's each);
- each phase also in CPU time (``time.process_time``: every thread of the process), the figure to read
  when the machine is loaded (a phase's wall time then counts its waits for a CPU);
- ``train``: the training steps themselves (profiled, so both record the same ops);
- ratios xpuprof / torch per pair, their median (goal for ``wall``: <= 1.05).

Each mode's first run is checked (the traces it wrote parse, and both hold the tutorial's ops) and the
event counts per trace are printed, so that the two are compared on the same work.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from anchor import anchor_line  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = REPO / "tests" / "torch"  # resnet_like.py: the ResNet-18 the torch tests profile too, defined once
WALL_GOAL, ENTER_GOAL_S, CYCLE_GOAL = 1.05, 0.050, 1.15

CHILD = r"""
import json, os, sys, time
T0 = time.perf_counter()
mode, out_dir, batch, image, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
MODEL_DIR = sys.argv[6]
import torch
import torch.nn as nn

torch.manual_seed(0)


sys.path.insert(0, MODEL_DIR)
from resnet_like import ResNet18  # torchvision.models.resnet18's layers (at width 64)

wait, warmup, active = 1, 1, 3
steps = (wait + warmup + active) * repeat
generator = torch.Generator().manual_seed(0)
train_loader = [(torch.randn(batch, 3, image, image, generator=generator),
                 torch.randint(0, 10, (batch,), generator=generator)) for _ in range(steps + 1)]
model = ResNet18(width=64)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
model.train()


def train(data):
    inputs, labels = data
    outputs = model(inputs)
    loss = criterion(outputs, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


timings = {"enter": 0.0, "steps": [], "cycles": [], "train": 0.0, "enter_cpu": 0.0, "steps_cpu": [], "cycles_cpu": []}
cpu = time.process_time  # every thread of the process: a loader thread's work counts where it runs
if mode == "none":
    t = time.perf_counter()
    for step, batch_data in enumerate(train_loader):
        if step >= steps:
            break
        train(batch_data)
    timings["train"] = time.perf_counter() - t
else:
    import torch.profiler
    kwargs = dict(schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
                  on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir),
                  record_shapes=True, profile_memory=True, with_stack=True)
    if mode == "torch":
        prof_cm = torch.profiler.profile(**kwargs)
    else:
        import xpuprof
        prof_cm = xpuprof.profile(**kwargs)

    def written():
        return len(os.listdir(out_dir))

    t, c = time.perf_counter(), cpu()
    prof = prof_cm.__enter__()
    timings["enter"], timings["enter_cpu"] = time.perf_counter() - t, cpu() - c
    for step, batch_data in enumerate(train_loader):
        before, t, c = written(), time.perf_counter(), cpu()
        prof.step()
        took, took_cpu = time.perf_counter() - t, cpu() - c
        timings["steps"].append(took)
        timings["steps_cpu"].append(took_cpu)
        if written() > before:
            timings["cycles"].append(took)
            timings["cycles_cpu"].append(took_cpu)
        if step >= steps:
            break
        t = time.perf_counter()
        train(batch_data)
        timings["train"] += time.perf_counter() - t
    before, t, c = written(), time.perf_counter(), cpu()
    prof_cm.__exit__(None, None, None)
    took, took_cpu = time.perf_counter() - t, cpu() - c
    if written() > before:
        timings["cycles"].append(took)
        timings["cycles_cpu"].append(took_cpu)
    timings["exit"] = took
timings["script"] = time.perf_counter() - T0
print("@@RESULT" + json.dumps(timings))
"""


def _env(pycache: str, checkout: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's installed package has its bytecode compiled
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPYCACHEPREFIX=pycache,
               PYTHONPATH=os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH", "")) if p))
    return env


def run_once(mode: str, args, env: dict, keep: Path | None = None) -> dict:
    out_dir = tempfile.mkdtemp(prefix=f"xpuprof-tutorial-{mode}-")
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, mode, out_dir, str(args.batch), str(args.image),
                               str(args.repeat), str(MODEL_DIR)], capture_output=True, text=True, env=env, timeout=1800,
                              cwd=out_dir)  # not the repository: python -c puts the working directory first
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} run failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
        line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("@@RESULT"))
        res = json.loads(line[len("@@RESULT"):])
        res.update(wall=wall, cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                   traces=sorted(os.listdir(out_dir)))
        if keep is not None:
            shutil.copytree(out_dir, keep, dirs_exist_ok=True)
        return res
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def check_traces(mode: str, where: Path, repeat: int) -> str:
    """The traces a mode wrote parse and hold the tutorial's ops: one line of event counts per trace."""
    files = sorted(where.iterdir())
    if len(files) != repeat:
        raise SystemExit(f"{mode}: {len(files)} trace file(s) written, expected {repeat} (one per cycle)")
    counts = []
    for f in files:
        doc = json.loads(f.read_text())
        events = doc["traceEvents"]
        ops = sum(1 for e in events if e.get("cat") == "cpu_op")
        if not any(e.get("name") == "aten::convolution" for e in events):
            raise SystemExit(f"{mode}: {f.name} holds no aten::convolution op: not the tutorial's trace")
        counts.append(f"{len(events)} events ({ops} cpu_op, {f.stat().st_size / 1e6:.1f} MB)")
    return f"{mode:8s} traces: " + "; ".join(counts)


def _med(values) -> float:
    return statistics.median(values)


def _range(values, scale=1.0, fmt="{:.3f}") -> str:
    return f"{fmt.format(_med(values) * scale)} ({fmt.format(min(values) * scale)}-{fmt.format(max(values) * scale)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=11, help="alternated torch/xpuprof pairs (the goal: >= 11)")
    ap.add_argument("--baseline", type=int, default=0, help="unprofiled runs, for scale")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=64, help="image side in pixels (the tutorial: 224)")
    ap.add_argument("--repeat", type=int, default=2, help="recording cycles (on_trace_ready calls) per run")
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--checkout", type=Path, default=REPO,
                    help="the xpuprof checkout to measure (default: this one; e.g. main's, for a before figure)")
    args = ap.parse_args()
    if args.pairs < 3:
        ap.error("--pairs must be >= 3 (medians of at least 3 pairs; the goal's protocol is 11)")
    print(anchor_line())
    with tempfile.TemporaryDirectory(prefix="xpuprof-pyc-") as pycache, \
            tempfile.TemporaryDirectory(prefix="xpuprof-tutorial-check-") as check:
        env = _env(pycache, args.checkout.resolve())
        for mode in ("torch", "xpuprof"):  # untimed: compiles bytecode, checks the traces
            run_once(mode, args, env, keep=Path(check) / mode)
            print(check_traces(mode, Path(check) / mode, args.repeat))
        runs: dict[str, list[dict]] = {"torch": [], "xpuprof": [], "none": []}
        for i in range(args.pairs):
            for mode in (("torch", "xpuprof") if i % 2 == 0 else ("xpuprof", "torch")):
                runs[mode].append(run_once(mode, args, env))
            if i < args.baseline:
                runs["none"].append(run_once("none", args, env))
        for i in range(args.pairs, args.baseline):
            runs["none"].append(run_once("none", args, env))
    print(f"load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs; "
          f"batch {args.batch}, image {args.image}, {args.repeat} cycle(s); medians (min-max) of {args.pairs} pairs")
    t, x = runs["torch"], runs["xpuprof"]
    ratio = lambda key: [b[key] / a[key] for a, b in zip(t, x)]  # noqa: E731 (per pair)
    print(f"{'':28s} {'torch.profiler':>22s} {'xpuprof.profile':>22s} {'xpuprof/torch':>22s}")
    rows = [("wall s (whole process)", "wall"), ("CPU s (whole process)", "cpu"), ("train s (profiled steps)", "train")]
    for label, key in rows:
        print(f"{label:28s} {_range([r[key] for r in t]):>22s} {_range([r[key] for r in x]):>22s} "
              f"{_range(ratio(key)):>22s}")
    for suffix, what in (("", "wall"), ("_cpu", "CPU")):
        print(f"{f'enter ms, {what}':28s} {_range([r['enter' + suffix] for r in t], 1e3, '{:.1f}'):>22s} "
              f"{_range([r['enter' + suffix] for r in x], 1e3, '{:.1f}'):>22s} "
              f"{'+' + _range([b['enter' + suffix] - a['enter' + suffix] for a, b in zip(t, x)], 1e3, '{:.1f}'):>22s}")
        print(f"{f'prepare ms, {what}':28s} {_range([r['steps' + suffix][0] for r in t], 1e3, '{:.1f}'):>22s} "
              f"{_range([r['steps' + suffix][0] for r in x], 1e3, '{:.1f}'):>22s}")
        for c in range(args.repeat):
            a, b = [r["cycles" + suffix][c] for r in t], [r["cycles" + suffix][c] for r in x]
            print(f"{f'cycle {c + 1} ms, {what}':28s} {_range(a, 1e3, '{:.1f}'):>22s} "
                  f"{_range(b, 1e3, '{:.1f}'):>22s} {_range([q / p for p, q in zip(a, b)]):>22s}")
    if runs["none"]:
        print(f"{'unprofiled wall s':28s} {_range([r['wall'] for r in runs['none']]):>22s}")
    verdict = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    for suffix, what, whole in (("", "wall", "wall"), ("_cpu", "CPU", "cpu")):
        total = _med(ratio(whole))
        enter = _med([b["enter" + suffix] - a["enter" + suffix] for a, b in zip(t, x)])
        cycles = [_med([q["cycles" + suffix][c] / p["cycles" + suffix][c] for p, q in zip(t, x)])
                  for c in range(args.repeat)]
        print(f"goals, {what} time: whole {total:.3f}x torch's (<= {WALL_GOAL}: {verdict(total <= WALL_GOAL)}); "
              f"enter +{enter * 1e3:.1f} ms (<= {ENTER_GOAL_S * 1e3:.0f} ms: {verdict(enter <= ENTER_GOAL_S)}); "
              + "; ".join(f"cycle {i + 1} {c:.2f}x (<= {CYCLE_GOAL}: {verdict(c <= CYCLE_GOAL)})"
                          for i, c in enumerate(cycles)))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
