"""The machine probe: a few fixed, short microbenchmarks of the host, timed in a run's own process around
its workload, so the gate can tell "this machine ran slower" from "this code ran slower".

A shared host (a VM, a CI runner) moves between speed regimes that last seconds to minutes: on our CI VM
the numpy elementwise loop runs at ~47 or ~65-69 us per call by the regime, pinned or not, in fresh
processes too. A history built in one regime and a run in the other differ by ~45 % in every host range,
and one range alone cannot say whether the code or the machine changed. The probe's parts measure the
machine itself with code that never changes:

- ``vector``: a numpy ufunc loop (``sin``, multiply, add) over a float32 array that stays in the L2
  cache - the shape of numpy elementwise work;
- ``python``: a loop of Python bytecode (integer arithmetic, a list append) - the interpreter's speed;
- ``memory``: a copy between two buffers that together exceed the last-level cache, timed per chunk -
  the memory bandwidth a streaming workload gets.

A probe is *taken* right before and right after the workload's measured calls (the runner's
``probe`` hook: inside the profiled window, around the iterations; outside it when Python functions are
traced, so that the probe never shows in a trace): before, ``CALLS`` calls of the python and vector parts
(a small footprint: the workload's first call still finds its caches warm); after, the vector and python
parts again and one pass of the copy in 1 MiB chunks. Each part's calls are summarized like a kernel's
(``samples.SampleStats``). Adjacent takes matter: under load this VM switches regimes within a second,
and takes a few hundred ms away (before the profiler starts, after the trace is written) disagreed with
the workload's regime. Not between the iterations: interleaved, the probe's work slowed the measured loop
by ~2 % (caches, branch predictors), more than the effects the gate looks for.

The gate (``gate_probe``) tests each part against the history's probe values with the run factor's t rule
and explains host-range verdicts by it. Cost: ~15-20 ms of CPU per run on our 2-CPU VM (20-45 ms of wall
time under load; the first probe of a process maps the copy's buffers: 5-20 ms more, up to ~130 ms when
the kernel compacts memory for huge pages); each probe records its own (``cost_ms``, ``cpu_ms``).
"""
from __future__ import annotations

import math
import mmap
import os
import time
from dataclasses import dataclass

import numpy as np

from .samples import SampleStats

PROBE_VERSION = 1
PARTS = ("vector", "python", "memory")
PART_LABELS = {"vector": "numpy ufunc loop over a 256 KiB float32 array (L2-resident)",
               "python": "Python bytecode loop",
               "memory": "copy larger than the last-level cache (per 1 MiB chunk)"}
CALLS = 16  # per part per take; two takes (before and after the workload) give 32 calls
VECTOR_SIZE = 65536  # float32: 256 KiB in, 256 KiB out - within a 1 MiB L2
PYTHON_ITERATIONS = 500  # ~50 us per call on our VM
MEMORY_CHUNK = 1 << 20
MEMORY_MIN_BYTES = 16 << 20  # per buffer, whatever the cache reports
MEMORY_MAX_BYTES = 160 << 20  # per buffer: a server's 300 MiB LLC is not copied whole (bounded cost)
MEMORY_KEEP_BYTES = 64 << 20  # per buffer: copy buffers up to this size stay mapped for the process's next probe
_COPY_BUFFERS: tuple | None = None  # (src, dst) mappings kept between probes (their own mappings: not malloc's)
_DEFAULT_LLC = 32 << 20


def last_level_cache_bytes() -> int:
    """The largest CPU cache the OS reports (Linux sysfs), else 32 MiB."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return _DEFAULT_LLC
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/size", encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if unit != 1 else text
        if digits.isdigit():
            best = max(best, int(digits) * unit)
    return best or _DEFAULT_LLC


def _python_loop(n: int) -> int:
    """Fixed interpreter work: integer arithmetic, a comparison, a list append."""
    acc, out = 0, []
    for i in range(n):
        acc = (acc * 31 + i) % 1000003
        if acc & 1:
            out.append(acc)
    return len(out)


BEFORE_WORKLOAD = ("python", "vector")  # small footprint: the workload's first call finds its caches warm
AFTER_WORKLOAD = ("vector", "python", "memory")  # the copy (it flushes the caches) only after the workload


class MachineProbe:
    """The probe's buffers and its takes: ``take(BEFORE_WORKLOAD)`` right before the workload's measured
    calls, ``take(AFTER_WORKLOAD)`` right after them, then ``result()``; ``close()`` frees the buffers."""

    def __init__(self, *, calls: int = CALLS) -> None:
        self.calls = calls
        self.durations: dict[str, list[int]] = {p: [] for p in PARTS}
        self.cost_ns = 0  # wall time of the takes and the buffers' set-up (what the run pays)
        self.cpu_ns = 0  # this thread's CPU time in them (the cost without the machine's other tenants)
        self.takes = 0
        self._vector_buffers: tuple | None = None
        self._maps: list[mmap.mmap] = []

    def take(self, parts=PARTS) -> None:
        """Time each of ``parts``, in that order: ``calls`` calls of the vector and python parts (one
        warm-up call each, not kept), one pass of the memory copy."""
        start, cpu = time.perf_counter_ns(), time.thread_time_ns()
        for part in parts:
            {"vector": self._vector, "python": self._python, "memory": self._memory}[part]()
        self.takes += 1
        self.cost_ns += time.perf_counter_ns() - start
        self.cpu_ns += time.thread_time_ns() - cpu

    def _vector(self) -> None:
        if self._vector_buffers is None:
            rng = np.random.default_rng(0)
            x, y, out = (self._mapped(VECTOR_SIZE * 4).view(np.float32) for _ in range(3))
            rng.standard_normal(dtype=np.float32, out=x)  # drawn in place: no temporary array either
            rng.standard_normal(dtype=np.float32, out=y)
            self._vector_buffers = (x, y, out)
        x, y, out = self._vector_buffers
        clock, got, alpha = time.perf_counter_ns, self.durations["vector"], np.float32(2.0)
        for i in range(self.calls + 1):
            t0 = clock()
            np.sin(x, out=out)
            np.multiply(out, alpha, out=out)
            np.add(out, y, out=out)
            t1 = clock()
            if i:
                got.append(t1 - t0)

    def _python(self) -> None:
        clock, got = time.perf_counter_ns, self.durations["python"]
        for i in range(self.calls + 1):
            t0 = clock()
            _python_loop(PYTHON_ITERATIONS)
            t1 = clock()
            if i:
                got.append(t1 - t0)

    def _memory(self) -> None:
        # two buffers that together are 1.5x the last-level cache: each chunk streams from memory; both
        # written before the pass (no page faults while timed)
        size = min(max(3 * last_level_cache_bytes() // 4, MEMORY_MIN_BYTES), MEMORY_MAX_BYTES)
        size -= size % MEMORY_CHUNK
        global _COPY_BUFFERS
        kept = _COPY_BUFFERS if _COPY_BUFFERS is not None and len(_COPY_BUFFERS[0]) == size else None
        if kept is None:
            maps = [mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) for _ in range(2)]
            for m in maps:
                if hasattr(mmap, "MADV_HUGEPAGE"):
                    m.madvise(mmap.MADV_HUGEPAGE)  # as numpy does for large arrays: 512x fewer page faults
            np.frombuffer(maps[0], np.uint8).fill(1)
            np.frombuffer(maps[1], np.uint8).fill(2)
            kept = (maps[0], maps[1])
            if size <= MEMORY_KEEP_BYTES:
                # kept for this process's later probes (a sweep's points, a pytest session's gated tests):
                # touching 2 x 24 MiB costs 5-20 ms, and up to ~130 ms when the kernel compacts memory for
                # its huge pages - paid once
                _COPY_BUFFERS = kept
        src, dst = np.frombuffer(kept[0], np.uint8), np.frombuffer(kept[1], np.uint8)
        clock, got = time.perf_counter_ns, self.durations["memory"]
        for lo in range(0, size, MEMORY_CHUNK):  # the whole buffer, each chunk a call
            t0 = clock()
            np.copyto(dst[lo:lo + MEMORY_CHUNK], src[lo:lo + MEMORY_CHUNK])
            t1 = clock()
            got.append(t1 - t0)
        del src, dst
        if kept is not _COPY_BUFFERS:  # larger than kept (a server's LLC): unmapped now
            for m in kept:
                m.close()

    def _mapped(self, size: int) -> np.ndarray:
        """A zeroed buffer of its own anonymous mapping, unmapped by ``close``. Not from malloc: freeing
        large malloc blocks moves glibc's mmap threshold and heap top, so the workload's next arrays (a
        run after this one, in one process) would land elsewhere - and where a numpy loop's arrays land
        changes its speed by up to ~45 % (4 KiB aliasing): the probe would perturb what it measures."""
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._maps.append(m)
        return np.frombuffer(m, np.uint8)

    def close(self) -> None:
        self._vector_buffers = None
        maps, self._maps = self._maps, []
        for m in maps:
            try:
                m.close()
            except BufferError:  # an array still views it: the mapping goes with the array
                pass

    def result(self) -> "ProbeResult | None":
        """The parts' summaries (None before any take)."""
        if not self.takes:
            return None
        parts = {p: SampleStats.of(d) for p, d in self.durations.items() if d}
        return ProbeResult(parts, takes=self.takes, cost_ms=self.cost_ns / 1e6, cpu_ms=self.cpu_ns / 1e6)


@dataclass
class ProbeResult:
    """A run's probe: each part's calls summarized, how many takes, what it cost."""

    parts: dict[str, SampleStats]
    takes: int = 2
    cost_ms: float = 0.0  # wall time (set-up included)
    cpu_ms: float = 0.0
    version: int = PROBE_VERSION

    def to_dict(self) -> dict:
        return {"version": self.version, "takes": self.takes, "cost_ms": round(self.cost_ms, 3),
                "cpu_ms": round(self.cpu_ms, 3), "parts": {p: s.to_dict() for p, s in self.parts.items()}}

    @classmethod
    def from_dict(cls, d) -> "ProbeResult":
        """A probe block as ``to_dict`` wrote it; ``ValueError`` naming what is wrong. Unknown parts (a
        newer xpuprof's) are kept: the gate compares the parts both runs hold."""
        if not isinstance(d, dict) or not isinstance(d.get("parts"), dict):
            raise ValueError("machine_probe must be an object with parts")
        version = d.get("version")
        if type(version) is not int or version < 1:
            raise ValueError(f"machine_probe version must be a positive integer, not {version!r}"[:120])
        parts = {}
        for name, s in d["parts"].items():
            try:
                parts[str(name)[:40]] = SampleStats.from_dict(s)
            except ValueError as exc:
                raise ValueError(f"machine_probe part {str(name)[:40]!r}: {exc}") from None
        def ms(key):
            v = d.get(key, 0.0)
            return float(v) if type(v) in (int, float) and math.isfinite(v) else 0.0

        takes = d.get("takes", 0)
        return cls(parts, takes if type(takes) is int else 0, ms("cost_ms"), ms("cpu_ms"), version)


class GuardedProbe:
    """A ``MachineProbe`` for a run's point or a gated test: ``before()`` right before the workload's
    measured calls, ``after()`` right after them; recorded as ``record()`` (the point's ``machine_probe``).
    A probe that fails (no memory for its buffers) records its error instead: the probe is a measure beside
    the run and never fails it."""

    def __init__(self, *, calls: int = CALLS) -> None:
        self._probe = MachineProbe(calls=calls)
        self.error: str | None = None
        self.traced = False  # Python calls are traced by the profiler: the caller takes it outside the window

    def before(self) -> None:
        self.take(BEFORE_WORKLOAD)

    def after(self) -> None:
        self.take(AFTER_WORKLOAD)

    def take(self, parts=PARTS) -> None:
        if self.error is not None:
            return
        try:
            self._probe.take(parts)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"[:300]
            self._probe.close()

    def result(self) -> "ProbeResult | None":
        """The probe's summary, None when it failed or was never taken."""
        self._probe.close()
        return None if self.error is not None else self._probe.result()

    def record(self) -> dict | None:
        """The point record's ``machine_probe`` block: the summary, ``{"error": ...}``, or None."""
        got = self.result()
        if self.error is not None:
            return {"error": self.error}
        return None if got is None else got.to_dict()
