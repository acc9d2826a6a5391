"""How long the command line takes before it does anything: ``xpuprof --help`` and ``xpuprof COMMAND --help``
against ``python -c "import xpuprof"`` (the goal: --help <= 2x) and ``python -c pass``.

    python benchmarks/bench_cli_startup.py              # 15 alternated rounds of fresh processes
    python benchmarks/bench_cli_startup.py --runs 31 --commands report,diff,run

Each run is a fresh interpreter with compiled bytecode at hand (a private ``PYTHONPYCACHEPREFIX``, filled
by an untimed first round); the cases of one round run back to back and the order rotates from round to
round, so the machine's load falls on all of them. ``xpuprof`` runs as ``python -m xpuprof`` from this
checkout. Printed: the median (min-max) wall time of each case, its CPU time (children's rusage), and
its median ratio to ``import xpuprof`` within the same rounds; the modules the help imported come from
tests/commands/test_cli_startup.py, which fails when one is numpy or an analysis module.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from anchor import anchor_line  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GOAL = 2.0


def _cases(commands: list[str]) -> dict[str, list[str]]:
    py = sys.executable
    cases = {"python -c pass": [py, "-c", "pass"], "import xpuprof": [py, "-c", "import xpuprof"],
             "xpuprof --help": [py, "-m", "xpuprof", "--help"]}
    for name in commands:
        cases[f"xpuprof {name} --help"] = [py, "-m", "xpuprof", name, "--help"]
    return cases


def _run(cmd: list[str], env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    from xpuprof import commands as xpuprof_commands

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--commands", default=",".join(xpuprof_commands.names()),
                    help="the commands whose --help is timed too (default: every one)")
    args = ap.parse_args()
    if args.runs < 3:
        ap.error("--runs must be >= 3 (medians of at least 3 fresh processes)")
    print(anchor_line())
    cases = _cases([c for c in args.commands.split(",") if c])
    with tempfile.TemporaryDirectory(prefix="xpuprof-pyc-") as pycache:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(PYTHONPYCACHEPREFIX=pycache,
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p))
        for cmd in cases.values():  # untimed: compiles the bytecode
            _run(cmd, env)
        walls: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        names = list(cases)
        for r in range(args.runs):
            for name in names[r % len(names):] + names[:r % len(names)]:
                wall, cpu = _run(cases[name], env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    base = walls["import xpuprof"]
    print(f"load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs; "
          f"median (min-max) of {args.runs} alternated rounds")
    print(f"{'case':32s} {'wall ms':>22s} {'CPU ms':>10s} {'/ import xpuprof':>17s}")
    for name in cases:
        w = walls[name]
        ratio = statistics.median(a / b for a, b in zip(w, base))
        print(f"{name:32s} {statistics.median(w) * 1e3:8.1f} ({min(w) * 1e3:.1f}-{max(w) * 1e3:.1f}) "
              f"{statistics.median(cpus[name]) * 1e3:10.1f} {ratio:17.2f}")
    helps = {k: statistics.median(a / b for a, b in zip(walls[k], base)) for k in cases if k.endswith("--help")}
    top = helps["xpuprof --help"]
    print(f"goal: xpuprof --help {top:.2f}x import xpuprof (<= {GOAL}: {'met' if top <= GOAL else 'MISSED'}); "
          f"slowest command help: {max(helps, key=helps.get)} {max(helps.values()):.2f}x")


if __name__ == "__main__":
    main()
