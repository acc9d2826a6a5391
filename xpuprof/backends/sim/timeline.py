"""The simulated device's physics: when each host call is made and when its device work runs.

Every launch (``launches``: which host activity launches what) makes runtime calls on the host thread
inside its interval (a launch; in range mode every 4th a host-to-device copy first, every 8th a stream
synchronize after) and a kernel on the compute queue, or on the communication queue for a collective.
Kernel durations follow each launch's work with a seeded jitter, so the same host activity always gives
the same timeline. The rules that keep it physically plausible are in the package docstring
(``xpuprof.backends.sim``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEVICE_ID = 0
COPY_EVERY = 4
SYNC_EVERY = 8

# Host calls, as long as real ones (a cudaLaunchKernel takes a few µs); a range too short for them
# shares its time equally between its calls, each at least MIN_CALL_NS (else the copy, then the sync
# is left out): HTA rounds a call's start up and its end down to whole µs, so a shorter call can
# become 0 µs there, and HTA leaves its kernel off the critical-path graph.
COPY_CALL_NS = 5_000
LAUNCH_CALL_NS = 4_000
SYNC_CALL_NS = 2_000  # a synchronize on a queue that is already empty
MIN_CALL_NS = 2_000
# Calls lie strictly inside their range, CALL_EDGE_NS from each end (a 16th of a shorter range, at
# least 1 ns): a call with its range's own bounds is drawn above the range by Perfetto, whose
# launch arrows then start at the range (viewers cannot tell parent from child at equal bounds).
CALL_EDGE_NS = 100
MIN_RANGE_NS = 2  # the shortest range a call fits strictly inside (a 0 ns call 1 ns from each end)
# Device side: an item may start LAUNCH_LATENCY_NS after its call returns (an idle device), with a
# small idle gap before each item, as on real queues; a sync call returns SYNC_RETURN_NS after the
# last item it waits for ends. Compression keeps items at least MIN_ITEM_NS long.
LAUNCH_LATENCY_NS = 2_000
QUEUE_GAP_NS = 800
SYNC_RETURN_NS = 400
SYNC_ROW_INSET_NS = 100  # the device-side sync row lies this far inside its call at both ends
MIN_ITEM_NS = 1
_NEVER = np.iinfo(np.int64).min // 4  # "no work yet": far before any timestamp, safe to add to

# The metrics this device can count, with units (ExperimentalConfig.profiler_metrics picks some).
METRICS: dict[str, str] = {
    "GpuTime": "ns",
    "GpuCoreClocks": "cycles",
    "AvgGpuCoreFrequencyMHz": "MHz",
    "XVE_ACTIVE": "percent",
    "XVE_STALL": "percent",
    "GPU_MEMORY_BYTE_READ": "bytes",
    "GPU_MEMORY_BYTE_WRITE": "bytes",
}


# ---------------------------------------------------------------------------------- the model
@dataclass
class HostCalls:
    """Per range: which calls it makes and when (epoch ns). ``sync_return`` is the earliest the sync
    call may return (its own length on an empty queue); the queue may keep it longer."""

    has_copy: np.ndarray
    has_sync: np.ndarray
    copy_ts: np.ndarray
    copy_dur: np.ndarray
    launch_ts: np.ndarray
    launch_dur: np.ndarray
    sync_ts: np.ndarray
    sync_return: np.ndarray


def call_bounds(enter: np.ndarray, exit_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each range's calls may lie: strictly inside it, ``CALL_EDGE_NS`` from each end (a 16th
    of a shorter range, at least 1 ns; a range under ``MIN_RANGE_NS`` has no such room)."""
    enter, exit_ = np.asarray(enter, np.int64), np.asarray(exit_, np.int64)
    edge = np.clip(np.maximum(exit_ - enter, 0) // 16, 1, CALL_EDGE_NS)
    return enter + edge, np.maximum(exit_ - edge, enter + edge)


def plan_host_calls(enter: np.ndarray, exit_: np.ndarray, want_copy: np.ndarray, want_sync: np.ndarray) -> HostCalls:
    """Calls inside each range (``call_bounds``: strictly inside), one after the other: copy, launch,
    sync. A range long enough for their real lengths spreads its spare time around them (an eighth
    before the first call, an eighth between copy and launch, a quarter before the sync, the rest
    after); a shorter one splits its time equally between them, back to back."""
    enter, exit_ = call_bounds(enter, exit_)
    span = np.maximum(exit_ - enter, 0)
    has_copy = want_copy & (span >= MIN_CALL_NS * (2 + want_sync))  # left out first: the copy, then the sync
    has_sync = want_sync & (span >= MIN_CALL_NS * (2 + has_copy))
    calls = 1 + has_copy + has_sync
    nominal = LAUNCH_CALL_NS + COPY_CALL_NS * has_copy + SYNC_CALL_NS * has_sync
    roomy = span >= nominal
    spare = np.where(roomy, span - nominal, 0)
    share = span // calls
    copy_dur = np.where(roomy, COPY_CALL_NS, share) * has_copy
    launch_dur = np.where(roomy, LAUNCH_CALL_NS, share)
    sync_dur = np.where(roomy, SYNC_CALL_NS, share) * has_sync
    copy_ts = enter + spare // 8
    launch_ts = copy_ts + copy_dur + (spare // 8) * has_copy
    sync_ts = launch_ts + launch_dur + (spare // 4) * has_sync
    return HostCalls(has_copy, has_sync, copy_ts, copy_dur, launch_ts, launch_dur, sync_ts,
                     sync_ts + sync_dur)


def _in_order(submit, latency, dur, gap, free_at: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of items on an in-order queue: start_j = max(submit_j + latency_j,
    end_{j-1}) + gap_j, the first not before ``free_at``. ``scale`` shrinks latency, duration and gap."""
    if scale != 1.0:
        latency = (latency * scale).astype(np.int64)
        dur = np.maximum((dur * scale).astype(np.int64), MIN_ITEM_NS)
        gap = (gap * scale).astype(np.int64)
    work = gap + dur
    done = np.cumsum(work)
    end = done + np.maximum(free_at, np.maximum.accumulate(submit + latency - (done - work)))
    return end - dur, end


def run_queue(submit, latency, dur, gap, sync_ts, sync_deadline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items (sorted by submission) on one in-order queue, each sync waiting for everything submitted
    at or before its call (``sync_ts`` sorted). Returns (start, end, drained): ``drained[s]`` is when
    the last item sync ``s`` waits for ends (``_NEVER``: none), at most ``sync_deadline[s]`` when the
    queue can be compressed that far (see the module docstring)."""
    waits_for = np.searchsorted(submit, sync_ts, side="right")  # items submitted at or before each sync
    # A later sync (another thread's) with an earlier deadline bounds this one too, leaving its own
    # items room to run: deadline_s = min over s' >= s of (deadline_s' - MIN_ITEM_NS * items between).
    key = sync_deadline - MIN_ITEM_NS * waits_for
    deadline = np.minimum.accumulate(key[::-1])[::-1] + MIN_ITEM_NS * waits_for
    start, end = _in_order(submit, latency, dur, gap, _NEVER)
    last = np.maximum(waits_for - 1, 0)
    if len(end) and ((waits_for > 0) & (end[last] > deadline)).any():
        start, end = _compressed(submit, latency, dur, gap, waits_for, deadline)
    drained = np.where(waits_for > 0, end[last] if len(end) else _NEVER, _NEVER)
    return start, end, drained


def _compressed(submit, latency, dur, gap, waits_for, deadline) -> tuple[np.ndarray, np.ndarray]:
    """The queue segment by segment (the items each sync waits for beyond the previous one's), each
    scaled as little as needed (bisection on the scale) to end by its sync's deadline."""
    start, end = np.empty_like(submit), np.empty_like(submit)
    free, pos = _NEVER, 0
    for stop, limit in zip(waits_for.tolist() + [len(submit)], deadline.tolist() + [None]):
        if stop <= pos:
            continue
        seg = slice(pos, stop)
        args = (submit[seg], latency[seg], dur[seg], gap[seg], free)
        st, en = _in_order(*args)
        if limit is not None and en[-1] > limit:
            lo, hi = 0.0, 1.0
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _in_order(*args, mid)[1][-1] <= limit else (lo, mid)
            st, en = _in_order(*args, lo)
        start[seg], end[seg] = st, en
        free, pos = int(en[-1]), stop
    return start, end


@dataclass
class Timeline:
    """Everything the writers need, one row per launch (epoch ns)."""

    ext: np.ndarray
    tid: np.ndarray
    names: list
    comm: np.ndarray  # bool: a communication kernel, on the communication stream
    grid_x: np.ndarray
    work_bytes: np.ndarray
    has_copy: np.ndarray
    has_sync: np.ndarray
    copy_ts: np.ndarray
    copy_dur: np.ndarray
    launch_ts: np.ndarray
    launch_dur: np.ndarray
    sync_ts: np.ndarray
    sync_end: np.ndarray
    copy_start: np.ndarray
    copy_end: np.ndarray
    copy_bytes: np.ndarray
    k_start: np.ndarray
    k_end: np.ndarray

    def __len__(self) -> int:
        return len(self.ext)

    @property
    def corr_launch(self) -> np.ndarray:  # the simulated runtime's ids: consecutive per launch
        return 1 + 3 * np.arange(len(self.ext))

    @property
    def kernel_names(self) -> list[str]:
        return list(self.names)


SYNC_OPS = ("sim__local_scalar_dense",)  # .item(): a device-to-host read waits for the queue


def simulate(launches, rng) -> Timeline:
    """The timeline of ``launches`` (``launches.Launches``, sorted by host start): each launch's calls,
    the compute queue's copies and kernels, the communication queue's kernels (each after the compute
    work submitted before it, as a collective waits for its input), and when each sync returns."""
    n = len(launches)
    idx = np.arange(n)
    enter, exit_ = launches.enter, launches.exit_
    comm = np.asarray(launches.comm, bool)
    k_dur = np.maximum((launches.work_ns * rng.uniform(1 - 0.05, 1 + 0.05, n)).astype(np.int64), MIN_ITEM_NS)
    if launches.synthetic_copies:
        want_copy = (idx % COPY_EVERY == 0) & ~comm
        want_sync = (idx % SYNC_EVERY == SYNC_EVERY - 1) & ~comm
    else:
        want_copy = np.zeros(n, bool)
        want_sync = np.isin(np.array(launches.names, dtype=object), SYNC_OPS) if n else np.zeros(0, bool)
    host = plan_host_calls(enter, exit_, want_copy, want_sync)
    copy_bytes = (launches.bytes // 4) * host.has_copy
    copy_dur = np.where(host.has_copy, 2_000 + copy_bytes // 20, 0)  # ~20 GB/s

    # The compute queue: copies and compute kernels in the order their calls were made (any thread).
    c_rows = np.flatnonzero(host.has_copy)
    k_rows = np.flatnonzero(~comm)
    submit = np.concatenate([host.copy_ts[c_rows], host.launch_ts[k_rows]])
    latency = np.concatenate([host.copy_dur[c_rows], host.launch_dur[k_rows]]) + LAUNCH_LATENCY_NS
    dur = np.concatenate([copy_dur[c_rows], k_dur[k_rows]])
    order = np.lexsort((np.arange(len(submit)), submit))
    s_rows = np.flatnonzero(host.has_sync)
    s_order = s_rows[np.lexsort((s_rows, host.sync_ts[s_rows]))]
    last_return = call_bounds(enter, exit_)[1]  # a sync call returns strictly inside its range too
    start, end, drained = run_queue(submit[order], latency[order], dur[order], np.full(len(order), QUEUE_GAP_NS),
                                    host.sync_ts[s_order], last_return[s_order] - SYNC_RETURN_NS)
    item_start, item_end = np.empty_like(start), np.empty_like(end)
    item_start[order], item_end[order] = start, end
    nc = len(c_rows)
    c_start = np.zeros(n, np.int64)
    c_end = np.zeros(n, np.int64)
    c_start[c_rows], c_end[c_rows] = item_start[:nc], item_end[:nc]
    k_start, k_end = np.zeros(n, np.int64), np.zeros(n, np.int64)
    k_start[k_rows], k_end[k_rows] = item_start[nc:], item_end[nc:]
    m_rows = np.flatnonzero(comm)
    if len(m_rows):
        k_start[m_rows], k_end[m_rows] = _comm_queue(host.launch_ts[m_rows], host.launch_dur[m_rows] + LAUNCH_LATENCY_NS,
                                                     k_dur[m_rows], submit[order], end)
    sync_end = host.sync_return.copy()
    sync_end[s_order] = np.maximum(host.sync_return[s_order], drained + SYNC_RETURN_NS)

    return Timeline(ext=launches.ext, tid=launches.tid, names=list(launches.names), comm=comm,
                    grid_x=launches.grid_x, work_bytes=launches.bytes, has_copy=host.has_copy,
                    has_sync=host.has_sync, copy_ts=host.copy_ts, copy_dur=host.copy_dur, launch_ts=host.launch_ts,
                    launch_dur=host.launch_dur, sync_ts=host.sync_ts, sync_end=sync_end, copy_start=c_start,
                    copy_end=c_end, copy_bytes=copy_bytes, k_start=k_start, k_end=k_end)


def _comm_queue(submit, latency, dur, compute_submit, compute_end) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of collectives on their in-order queue: each after its call and after the compute items
    submitted before it have ended (sorted ``compute_submit``; ``compute_end`` in that order)."""
    order = np.lexsort((np.arange(len(submit)), submit))
    before = np.searchsorted(compute_submit, submit[order], side="right")
    done = np.maximum.accumulate(compute_end) if len(compute_end) else np.zeros(0, np.int64)
    ready = np.where(before > 0, done[np.maximum(before - 1, 0)] if len(done) else _NEVER, _NEVER)
    effective = np.maximum(submit[order] + latency[order], ready) - latency[order]
    st, en = _in_order(effective, latency[order], dur[order], np.full(len(order), QUEUE_GAP_NS), _NEVER)
    start, end = np.empty_like(st), np.empty_like(en)
    start[order], end[order] = st, en
    return start, end


def metric_values(metrics: list[str], work_bytes: np.ndarray, comm: np.ndarray, dur: np.ndarray,
                  rng) -> dict[str, np.ndarray]:
    """Per-kernel values of ``metrics`` (names of METRICS) for kernels moving ``work_bytes`` in ``dur`` ns."""
    n = len(dur)
    freq = 1600.0 * rng.uniform(0.95, 1.0, n)
    active = np.clip(np.where(comm, 20.0, 70.0) + rng.normal(0, 3, n), 0, 100)
    read = np.asarray(work_bytes, np.float64)
    values = {
        "GpuTime": dur.astype(np.float64),
        "GpuCoreClocks": np.round(dur * freq / 1000.0),
        "AvgGpuCoreFrequencyMHz": np.round(freq, 1),
        "XVE_ACTIVE": np.round(active, 2),
        "XVE_STALL": np.round(np.clip(100.0 - active - rng.uniform(5, 15, n), 0, 100), 2),
        "GPU_MEMORY_BYTE_READ": read,
        "GPU_MEMORY_BYTE_WRITE": np.round(read * 0.5),
    }
    return {m: values[m] for m in metrics}
