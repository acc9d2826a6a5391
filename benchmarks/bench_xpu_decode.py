"""PTI buffer decode throughput: xpuprof's vectorized decoder vs ctypes per-record decoding.

Target: >= 10 M records/s on a 2-core box. Buffers are 4 MiB (Kineto's size) filled with a
realistic mix (per kernel launch: external correlation, runtime call, driver call, kernel; plus
copies and syncs). The baseline walks the same buffers in Python and reads each record through
its ctypes struct (``from_buffer_copy``), the obvious ctypes approach, in this same process.

    python benchmarks/bench_xpu_decode.py [--records N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from xpuprof.backends.xpu import records as decode
from xpuprof.vendors import pti

BUFFER_BYTES = 4 << 20
PATTERN = [pti.ViewKind.EXTERNAL_CORRELATION, pti.ViewKind.RUNTIME_API, pti.ViewKind.DRIVER_API,
           pti.ViewKind.DEVICE_GPU_KERNEL, pti.ViewKind.EXTERNAL_CORRELATION, pti.ViewKind.RUNTIME_API,
           pti.ViewKind.DEVICE_GPU_MEM_COPY, pti.ViewKind.DEVICE_SYNCHRONIZATION]


def make_buffers(n_records: int) -> list[bytes]:
    templates = {}
    for k in set(PATTERN):
        rec = np.zeros(1, pti.record_dtype(k))
        rec["_view_kind"] = k
        templates[k] = rec
    buffers, cur, used, corr = [], [], 0, 0
    for i in range(n_records):
        k = PATTERN[i % len(PATTERN)]
        rec = templates[k]
        corr += 1
        if "_correlation_id" in rec.dtype.names:
            rec["_correlation_id"] = corr
        raw = rec.tobytes()
        if used + len(raw) > BUFFER_BYTES:
            buffers.append(b"".join(cur))
            cur, used = [], 0
        cur.append(raw)
        used += len(raw)
    if cur:
        buffers.append(b"".join(cur))
    return buffers


def ctypes_decode(buffers: list[bytes], limit: int) -> int:
    """Baseline: per record, read the kind, copy the ctypes struct, pull its fields into lists."""
    sizes = pti.record_sizes()
    columns: dict[int, list] = {}
    n = 0
    for buf in buffers:
        off = 0
        while off < len(buf) and n < limit:
            kind = int.from_bytes(buf[off:off + 4], "little")
            struct = pti.RECORD_STRUCTS[kind]
            rec = struct.from_buffer_copy(buf, off)
            columns.setdefault(kind, []).append(tuple(getattr(rec, f) for f, _ in struct._fields_))
            off += sizes[kind]
            n += 1
        if n >= limit:
            break
    return n


def best_rate(fn, count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return count / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--baseline-records", type=int, default=100_000)
    args = ap.parse_args()
    buffers = make_buffers(args.records)
    walker = decode.LayoutWalker()
    native = decode._native() is not None
    decoded = decode.decode_buffers(buffers, walker)
    assert decoded.record_count == args.records
    fast = best_rate(lambda: decode.decode_buffers(buffers, walker), args.records, 5)
    base = best_rate(lambda: ctypes_decode(buffers, args.baseline_records), args.baseline_records, 2)
    print(f"records: {args.records:,} in {len(buffers)} x 4 MiB buffers (C helpers: {'yes' if native else 'no'})")
    print(f"vectorized decode: {fast / 1e6:8.2f} M records/s  (target >= 10 M/s: {'met' if fast >= 10e6 else 'MISSED'})")
    print(f"ctypes per-record: {base / 1e6:8.2f} M records/s")
    print(f"ratio: {fast / base:.1f}x")


if __name__ == "__main__":
    main()
