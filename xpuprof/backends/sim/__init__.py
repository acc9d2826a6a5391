"""A deterministic simulated accelerator, for demos and end-to-end pipeline tests.

Host activity "launches" device work (the rule is in ``launches``): every innermost computing
aten op when the cycle recorded torch ops, else every innermost range (``record_function``, ours or
torch's); collectives launch communication kernels on their own stream. Each launch makes runtime
calls on the host thread inside its interval (a launch; for ranges every 4th a host-to-device copy
first, every 8th a stream synchronize after) and a kernel (and the copy) on a simulated device with
an in-order compute queue and a communication queue. Kernel durations follow each launch's work
(FLOPs and bytes from torch's shapes or the range's args) with a seeded jitter, so the same host
activity always gives the same device activity. Traces say ``"backend": "sim"`` and ``"simulated":
true``; the registry never selects this backend unless it is named (``backends=["sim"]``).

The timeline is physically plausible, whatever the threads and range lengths:
- every call lies strictly inside the range it was made in (the ranges are the user's real
  timestamps), ``CALL_EDGE_NS`` from its ends (less in a short range, at least 1 ns), so no viewer
  takes a call for its range; calls last what real ones do (``LAUNCH_CALL_NS``, ...) where the
  range has room and share a shorter range equally; a range too short to give each call
  ``MIN_CALL_NS`` drops its copy, then its sync; the launch stays (a shorter range gets a shorter
  launch call; one under ``MIN_RANGE_NS`` launches nothing, counted in the trace);
- the queue runs work in the order the calls were made, across threads, and no item starts before
  the call that submitted it;
- a sync call returns after everything submitted before it (any thread's) has finished. When the
  queue could not drain before the sync's range ends, the device work since the previous sync is
  compressed (durations, gaps and launch latency scaled down together) until it does.

``sim_vendor`` picks which vendor's trace this is (``SIM_FLAVOURS``): the timeline becomes that
vendor's records (PTI's views, CUPTI's activity records, rocprofiler-sdk's buffer records) and our real
backend's emit stage for the vendor writes them, so call names, categories, rows and args are exactly
what a real profile of that vendor gives.

Modules: ``launches`` (what launches what, and how much work it is), ``timeline`` (the physics: host
calls, the queues, metric values), ``records`` (flavours, and the timeline through a vendor's emit
stage), ``xpu_records``/``cuda_records``/``hip_records`` (the timeline as each vendor's records),
``backend`` (SimBackend, SimSession).
"""
from __future__ import annotations

from .backend import SimBackend, SimSession
from .records import (BLOCK, CUDA_DEVICE_PROPERTIES, DEVICE_PROPERTIES, REGISTERS_PER_THREAD, SIM_FLAVOURS,
                      SimFlavour)
from .launches import KERNEL_CLASSES, Launches
from .timeline import (CALL_EDGE_NS, COPY_CALL_NS, COPY_EVERY, DEVICE_ID, LAUNCH_CALL_NS, LAUNCH_LATENCY_NS, METRICS,
                       MIN_CALL_NS, MIN_ITEM_NS, MIN_RANGE_NS, QUEUE_GAP_NS, SYNC_CALL_NS, SYNC_EVERY, SYNC_RETURN_NS,
                       SYNC_ROW_INSET_NS, HostCalls, Timeline, call_bounds, plan_host_calls, run_queue)

__all__ = ["BLOCK", "CALL_EDGE_NS", "COPY_CALL_NS", "COPY_EVERY", "CUDA_DEVICE_PROPERTIES", "DEVICE_ID", "DEVICE_PROPERTIES",
           "KERNEL_CLASSES", "LAUNCH_CALL_NS", "Launches", "LAUNCH_LATENCY_NS", "METRICS", "MIN_CALL_NS", "MIN_ITEM_NS", "MIN_RANGE_NS", "QUEUE_GAP_NS",
           "REGISTERS_PER_THREAD", "SIM_FLAVOURS", "SYNC_CALL_NS", "SYNC_EVERY", "SYNC_RETURN_NS", "SYNC_ROW_INSET_NS",
           "HostCalls", "SimBackend", "SimFlavour", "SimSession", "Timeline", "call_bounds", "plan_host_calls",
           "run_queue"]
