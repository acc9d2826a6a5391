"""torch-op tests: each module skips itself with the reason when torch is absent.

``launcher``: a test backend whose launches are real calls on the calling thread (``launch(name)``
records a runtime call while it runs, with the id of the range around it, and a kernel after it),
as a CUDA/XPU op calls its runtime. The sim backend launches only inside our own ranges.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends import registry
from xpuprof.backends.base import Backend, ProbeResult, Session
from xpuprof.clock import now_ns
from xpuprof.host import recorder

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make resnet_like importable

_active: "LaunchSession | None" = None


def launch(name: str) -> None:
    """A runtime call: recorded on the calling thread, while it runs, with the id of the range around it."""
    if _active is not None:
        t0 = now_ns()
        _active.calls.append((name, threading.get_native_id(), t0, now_ns() - t0 + 1,
                              recorder.current_correlation_id()))


class LaunchSession(Session):
    def __init__(self) -> None:
        self.calls: list = []

    @property
    def wants_correlation(self) -> bool:  # our ranges push their ids to it, as to CUPTI/PTI
        return True

    def start(self) -> None:
        global _active
        _active = self

    def stop(self) -> None:
        global _active
        _active = None

    def process(self, builder, window) -> None:
        if not self.calls:
            return
        names, tid, ts, dur, ext = zip(*self.calls)
        n = len(names)
        corr = np.arange(1, n + 1)
        ts = np.array(ts, np.int64)
        builder.add_slices(names=["cudaLaunchKernel"] * n, ts=ts, dur=np.array(dur), pid=builder.pid,
                           tid=np.array(tid), cat=ActivityType.RUNTIME, vendor="cuda", external_id=np.array(ext),
                           args={"correlation": corr})
        builder.add_flows(flow_ids=corr, ts=ts, pid=builder.pid, tid=np.array(tid), start=True)
        k_ts = ts + 10_000
        builder.add_slices(names=list(names), ts=k_ts, dur=5_000, pid=0, tid=7, cat=ActivityType.CONCURRENT_KERNEL,
                           vendor="cuda", external_id=np.array(ext),
                           args={"correlation": corr, "device": np.zeros(n, np.int64), "stream": np.full(n, 7)})
        builder.add_flows(flow_ids=corr, ts=k_ts, pid=0, tid=7, start=False)


class LaunchBackend(Backend):
    name = "launchtest"
    vendor = "cuda"

    @classmethod
    def probe(cls):
        return ProbeResult.ok("test backend")

    @classmethod
    def supported_activities(cls):
        return frozenset({ActivityType.RUNTIME, ActivityType.CONCURRENT_KERNEL})

    def configure(self, activity_types, config):
        return LaunchSession()


@pytest.fixture
def launcher():
    registry.register(LaunchBackend, replace=True)
    yield launch
    registry.unregister(LaunchBackend.name)
