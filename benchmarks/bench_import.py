"""What ``import xpuprof`` adds to ``import numpy`` in a fresh process.

    python benchmarks/bench_import.py                 # 15 alternated pairs of fresh processes
    python benchmarks/bench_import.py --runs 31 --peer viztracer

Each run is a fresh interpreter (``python -c``), with no vendor package imported, and with compiled
bytecode at hand (cached in a private ``PYTHONPYCACHEPREFIX`` by a first, untimed run of each case). Timed in the child:
``import numpy`` (the baseline every xpuprof user pays already), then ``import xpuprof`` right after
it (the figure the goal is about: <= 50 ms), with ``time.perf_counter`` (wall) and ``time.process_time``
(the process's CPU time: on a quiet machine the two agree, since an import waits for nothing; on a
loaded one the wall time also counts the time spent waiting for a CPU, the CPU time does not). Alongside, the whole
process's wall time of ``python -c "import numpy"`` against ``python -c "import numpy, xpuprof"``
(start-up and teardown included), the two alternated so that the machine's load falls on both. The
child also lists the modules ``import xpuprof`` brought in, and fails when one of them is a vendor or
heavy package (torch, intel-pti's bindings, cupti, dpctl, duckdb, pyarrow, ray, ...).

Median (min-max) of ``--runs``; the VM's speed varies 2-3x from day to day, so the ratio to
``import numpy`` in the same runs is printed too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_MS = 50.0
HEAVY = ("torch", "dpctl", "dpnp", "cupti", "cuda", "pyzes", "pynvml", "amdsmi", "duckdb", "pyarrow", "ray",
         "pandas", "yaml", "rich", "isal", "psutil")

CHILD = r"""
import json, sys, time
c0, t0 = time.process_time(), time.perf_counter()
import numpy
c1, t1 = time.process_time(), time.perf_counter()
before = set(sys.modules)
{imp}
c2, t2 = time.process_time(), time.perf_counter()
new = sorted(set(sys.modules) - before)
print(json.dumps({{"numpy_s": t1 - t0, "import_s": t2 - t1, "numpy_cpu_s": c1 - c0, "import_cpu_s": c2 - c1,
                  "modules": new}}))
"""


def _child(module: str | None, env: dict) -> dict:
    code = CHILD.format(imp=f"import {module}" if module else "pass")
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"import {module} failed:\n{proc.stderr[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["wall_s"] = wall
    return res


def _fmt(vals: list[float], scale: float = 1e3, digits: int = 1) -> str:
    vals = [v * scale for v in vals]
    return f"{statistics.median(vals):.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="fresh processes per case (median; >= 3)")
    ap.add_argument("--peer", action="append", default=[], help="also time `import PEER` after numpy (e.g. viztracer)")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"# import cost, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {load:.1f}; median (min-max) of {a.runs} fresh processes, alternated")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from anchor import anchor_line

    print(f"# {anchor_line()}", flush=True)
    cases = [None, "xpuprof", *a.peer]
    results: dict = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="xpuprof-import-") as cache:
        # Compiled bytecode, as an installed package has it (pip compiles at install): cached in a private
        # directory, so PYTHONDONTWRITEBYTECODE or a read-only checkout does not time the compiler instead.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for c in cases:
            _child(c, env)  # fills the cache
        for _ in range(a.runs):  # alternated: the load at each moment falls on every case
            for c in cases:
                results[c].append(_child(c, env))
    heavy = sorted({m for r in results["xpuprof"] for m in r["modules"] if m.split(".")[0] in HEAVY})
    base = results[None]
    numpy_ms = statistics.median(r["numpy_s"] for r in base) * 1e3
    rows = [("import numpy, ms", _fmt([r["numpy_s"] for r in base])),
            ("  CPU time of the import (user + sys), ms", _fmt([r["numpy_cpu_s"] for r in base]))]
    for c in cases[1:]:
        rs = results[c]
        rows.append((f"import {c} after numpy, ms" + (f" (goal <= {GOAL_MS:.0f})" if c == "xpuprof" else ""),
                     _fmt([r["import_s"] for r in rs])))
        med = statistics.median(r["import_s"] for r in rs) * 1e3
        rows.append((f"  / import numpy (medians)", f"{med / numpy_ms:.2f}"))
        rows.append((f"  CPU time of the import (user + sys), ms", _fmt([r["import_cpu_s"] for r in rs])))
        extra = [r["wall_s"] - b["wall_s"] for r, b in zip(rs, base)]
        rows.append((f"  process wall time, `numpy, {c}` minus `numpy` alone, ms", _fmt(extra)))
        rows.append((f"  modules {c} brings in", f"{statistics.median(len(r['modules']) for r in rs):.0f}"))
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if heavy:
        print(f"FAIL: import xpuprof imported heavy/vendor modules: {', '.join(heavy)}")
        return 1
    med = statistics.median(r["import_s"] for r in results["xpuprof"]) * 1e3
    print(f"import xpuprof: {med:.1f} ms after numpy, {'meets' if med <= GOAL_MS else 'misses'} the goal "
          f"(<= {GOAL_MS:.0f} ms); no vendor or heavy module imported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
