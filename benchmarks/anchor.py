"""A CPU anchor for dated figures: how fast this machine runs a fixed pure-Python loop and a fixed
``json.loads`` right now (best of 5, wall and CPU time). Benchmarks print it beside their figures so
that runs from different days (this VM's speed varies 2-3x) can be related.

    python benchmarks/anchor.py
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

DOC = json.dumps({"traceEvents": [{"ph": "X", "name": f"op{i % 64}", "ts": i * 1.5, "dur": 1.25, "pid": 1,
                                   "tid": i % 4, "args": {"External id": i}} for i in range(50_000)]})


def _loop() -> None:
    total = 0
    for i in range(2_000_000):
        total += i & 7


def _loads() -> None:
    json.loads(DOC)


def _best(fn) -> tuple[float, float]:
    wall, cpu = float("inf"), float("inf")
    for _ in range(5):
        c, t = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def anchor_line() -> str:
    (lw, lc), (jw, jc) = _best(_loop), _best(_loads)
    return (f"CPU anchor: 2 M-iteration Python loop {lw * 1e3:.0f} ms (CPU {lc * 1e3:.0f} ms), json.loads of "
            f"{len(DOC) / 1e6:.1f} MB {jw * 1e3:.0f} ms (CPU {jc * 1e3:.0f} ms); load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    print(anchor_line())


def chosen_cases(ap: argparse.ArgumentParser, only: str, cases) -> list[str]:
    """``--only``'s comma-separated cases, in its order; one not in ``cases`` is ``ap``'s usage error naming the
    valid ones."""
    chosen = [c.strip() for c in only.split(",") if c.strip()]
    bad = [c for c in chosen if c not in cases]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; valid: {', '.join(cases)}")
    return chosen


def print_header(title: str, runs: int) -> None:
    """A benchmark's first two lines: what runs, when, on what (Python, CPUs, load) and how many fresh processes
    per figure; then the CPU anchor."""
    print(f"# {title}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median (min-max) of {runs} fresh processes")
    print(f"# {anchor_line()}", flush=True)
