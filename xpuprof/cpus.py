"""How many CPUs this process may use, and how many of them are free now.

*May use*: the CPUs in its affinity mask (``taskset``, a cpuset cgroup, Slurm's binding), capped by a
CPU quota of its cgroup (a container's ``--cpus``, a Kubernetes limit: the quota's CPUs' worth of time
per period, whatever the number of CPUs it sees). *Free*: those, less the other tasks ready to run
right now (the kernel's count of runnable tasks in ``/proc/loadavg``, less this thread), taken in
proportion to the share of the machine's CPUs the process may use. The instantaneous count, not the
1-minute load average: a job that started seconds ago is busy now, and one that ended is not.

Threads beyond the free CPUs do no work in parallel: they queue behind the busy ones, and a Python
thread holding the GIL that loses its CPU stalls every other thread of the process until it is back.
"""
from __future__ import annotations

import math
import os

WRITER_THREADS_ENV = "XPUPROF_WRITER_THREADS"  # a fixed thread count for the trace writer


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by its cgroup's CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def cgroup_cpu_quota(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The tightest CPU quota (in CPUs) on this process's cgroup and its ancestors, or None when unlimited.

    cgroup v2: ``cpu.max`` (``"<quota> <period>"`` or ``"max <period>"``); v1: ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us`` under the cpu controller's mount."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            limits += _quotas([root], path, _v2_quota)
        elif "cpu" in controllers.split(","):
            mounts = [os.path.join(root, name) for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu")]
            limits += _quotas(mounts, path, _v1_quota)
    return min(limits) if limits else None


def _quotas(mounts: list[str], path: str, read) -> list[float]:
    """The quota at each level from ``path`` up to the hierarchy's root, under the first mount there."""
    out = []
    for mount in mounts:
        if not os.path.isdir(mount):
            continue
        level = path.rstrip("/") or "/"
        while True:
            quota = read(os.path.join(mount, level.lstrip("/")))
            if quota is not None:
                out.append(quota)
            if level in ("/", ""):
                break
            level = os.path.dirname(level)
        break
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _v2_quota(directory: str) -> float | None:
    text = _read(os.path.join(directory, "cpu.max"))
    if not text:
        return None
    quota, _, period = text.partition(" ")
    try:
        return None if quota == "max" else int(quota) / int(period or 100000)
    except ValueError:
        return None


def _v1_quota(directory: str) -> float | None:
    quota, period = _read(os.path.join(directory, "cpu.cfs_quota_us")), _read(os.path.join(directory, "cpu.cfs_period_us"))
    try:
        q, p = int(quota or -1), int(period or 0)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def busy_elsewhere(loadavg_path: str = "/proc/loadavg", reads: int = 3) -> int:
    """Tasks ready to run right now besides the calling thread (the kernel's count, machine wide): the least of
    ``reads`` reads in a row. One read is a snapshot that catches kernel threads waking for microseconds: on
    the idle 2-CPU VM, 24 % of single reads counted another runnable task (so the trace writer took one thread
    a quarter of the time), none of 1,000 triples did. A task that keeps a CPU busy counts in every read."""
    least = None
    for _ in range(max(1, reads)):
        text = _read(loadavg_path)
        try:
            running = int(text.split()[3].split("/")[0])  # "0.52 0.58 0.59 3/612 12345": runnable/total
        except (AttributeError, IndexError, ValueError):
            return 0
        least = running if least is None else min(least, running)
        if least <= 1:
            break  # nothing runnable but the caller: no read can say less
    return max(0, least - 1)


def free_cpus() -> int:
    """The CPUs this process may use that no other runnable task is waiting for now (at least 1).

    The kernel counts runnable tasks machine wide; those on this process's CPUs are taken in proportion
    to the share of the machine's CPUs its affinity mask holds."""
    try:
        share = len(os.sched_getaffinity(0)) / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        share = 1.0
    return max(1, usable_cpus() - round(busy_elsewhere() * min(share, 1.0)))
