"""Dropped records are counted once, through one structured call (source, reason, count): the trace's
``dropped_records`` shows each loss once, and only a loss whose reason is not "out of window" is
logged as a warning."""
from __future__ import annotations

import json
import logging

import pytest

import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.backends import registry
from xpuprof.backends.base import Backend, ProbeResult, Session
from xpuprof.backends.common import OUT_OF_WINDOW, SessionDrops, count_dropped
from xpuprof.trace.builder.builder import TraceBuilder


class _WritesItsOwnLosses(Session):
    """As the vendor sessions do: process() writes the session's losses into the trace, and
    dropped_records() reports the same losses under the same labels."""

    def __init__(self) -> None:
        self.lost = SessionDrops("selfcount")

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.lost.set("buffer full", 7)

    def process(self, builder, window) -> None:
        builder.add_slice("k", window.start_ns + 1, 10, 0, 1, cat=ActivityType.CONCURRENT_KERNEL)
        count_dropped(builder, "selfcount", OUT_OF_WINDOW, 3, kind="kernel")
        self.lost.write(builder)

    def dropped_records(self) -> dict[str, int]:
        return self.lost.labels()


class _ReportsOnly(Session):
    """A plugin-style session: it only reports its losses; the profiler writes them."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def process(self, builder, window) -> None:
        builder.add_slice("k2", window.start_ns + 1, 10, 0, 2, cat=ActivityType.CONCURRENT_KERNEL)

    def dropped_records(self) -> dict[str, int]:
        return {"ring buffer wrapped": 5, OUT_OF_WINDOW: 2}


def _backend(name: str, session_cls):
    class _B(Backend):
        @classmethod
        def probe(cls):
            return ProbeResult.ok("a test backend")

        @classmethod
        def supported_activities(cls):
            return frozenset({ActivityType.CONCURRENT_KERNEL})

        def configure(self, activity_types, config):
            return session_cls()

    _B.name = name
    return _B


@pytest.fixture
def backends():
    names = []
    for name, cls in (("selfcount", _WritesItsOwnLosses), ("reportonly", _ReportsOnly)):
        registry.register(_backend(name, cls), replace=True)
        names.append(name)
    yield names
    for name in names:
        registry.unregister(name)


def test_each_loss_is_in_the_trace_once(backends, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="xpuprof")
    with xpuprof.profile(activities=["cpu", "cuda"], backends=backends) as prof:
        pass
    prof.export_chrome_trace(tmp_path / "t.json")
    dropped = json.loads((tmp_path / "t.json").read_text())["dropped_records"]
    assert dropped == {"selfcount kernel out of window": 3, "selfcount: buffer full": 7,
                       "reportonly: ring buffer wrapped": 5, "reportonly: out of window": 2}
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "dropped" in r.getMessage()]
    assert len(warned) == 1 and "selfcount: buffer full=7" in warned[0]


def test_only_out_of_window_losses_are_expected():
    b = TraceBuilder()
    count_dropped(b, "xpu", OUT_OF_WINDOW, 4)
    count_dropped(b, "cuda", OUT_OF_WINDOW, 1, kind="memcpy")
    count_dropped(b, "cuda", "full", 2, kind="CUPTI buffer")
    b.count_dropped("plugin p: rows before the window were out of window", 6)  # a label, not a reason
    assert b.dropped == {"xpu: out of window": 4, "cuda memcpy out of window": 1, "cuda CUPTI buffer full": 2,
                         "plugin p: rows before the window were out of window": 6}
    assert b.dropped.unexpected() == {"cuda CUPTI buffer full": 2,
                                      "plugin p: rows before the window were out of window": 6}


class _LabelledLoss(Session):
    """A session writing its loss under a plain label and reporting it under the same label."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def process(self, builder, window) -> None:
        builder.count_dropped("labelled: buffer full", 7)

    def dropped_records(self) -> dict[str, int]:
        return {"labelled: buffer full": 7}


def test_a_loss_the_session_wrote_itself_is_not_counted_again(tmp_path):
    registry.register(_backend("labelled", _LabelledLoss), replace=True)
    try:
        with xpuprof.profile(activities=["cpu", "cuda"], backends=["labelled"]) as prof:
            pass
    finally:
        registry.unregister("labelled")
    prof.export_chrome_trace(tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["dropped_records"] == {"labelled: buffer full": 7}
