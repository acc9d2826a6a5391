"""The ``.json.gz`` floor both end-to-end benchmarks compare the writer with: python-isal level 1
compressing the trace's own uncompressed bytes in one thread (8 MiB pieces, one gzip stream), timed
alternately with the writer on the same trace so that the machine's load falls on both.

Returned per trace (``compare``):
- ``isal_vs_writer``: best isal time / best writer time (goal >= 0.85: the writer takes at most
  1/0.85 of isal's time), and the same for the medians;
- ``isal_vs_writer_cpu``: the same with the process's CPU time (user + sys, all threads): what the two
  cost whatever the load; on a machine with no free CPU the time ratio tends to this one;
- ``size_vs_isal``: the writer's file size / isal's output size (goal <= 1.10).
"""
from __future__ import annotations

import gzip
import resource
import statistics
import time
from pathlib import Path
from typing import Callable


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def isal_l1(data: bytes) -> int:
    """isal level 1 over ``data`` as the writer feeds it (big pieces, one stream); the compressed size."""
    from isal import isal_zlib

    view, step = memoryview(data), 8 << 20
    comp = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    size = sum(len(comp.compress(view[i:i + step])) for i in range(0, len(data), step))
    return size + len(comp.flush())


def compare(write: Callable[[Path], object], path: Path, first_s: float, first_cpu_s: float,
            rounds: int = 3) -> dict:
    """``write(path)`` writes the trace (the first, timed write took ``first_s`` / ``first_cpu_s``);
    then ``rounds`` alternations of isal alone and the writer again."""
    data = gzip.decompress(path.read_bytes())
    written = path.stat().st_size
    writer, writer_cpu, isal, isal_cpu = [first_s], [first_cpu_s], [], []
    size = 0
    for k in range(rounds):
        c, t = _cpu(), time.perf_counter()
        size = isal_l1(data)
        isal.append(time.perf_counter() - t)
        isal_cpu.append(_cpu() - c)
        if k < rounds - 1:
            again = path.with_name(f"again{k}.json.gz")
            c, t = _cpu(), time.perf_counter()
            write(again)
            writer.append(time.perf_counter() - t)
            writer_cpu.append(_cpu() - c)
            again.unlink()
    return {"isal_vs_writer": min(isal) / min(writer),
            "isal_vs_writer_median": statistics.median(isal) / statistics.median(writer),
            "isal_vs_writer_cpu": min(isal_cpu) / min(writer_cpu),
            "size_vs_isal": written / size, "uncompressed_bytes": len(data)}
