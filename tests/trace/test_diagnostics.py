"""xpuprof.diagnostics: said-once keys by namespace, the fault memory, and reset()."""
from __future__ import annotations

import logging

import pytest

from xpuprof import diagnostics


@pytest.fixture(autouse=True)
def clean():
    diagnostics.reset()
    yield
    diagnostics.reset()


def test_first_is_true_once_per_key_and_forget_drops_one_namespace():
    assert diagnostics.first("a", 1) and not diagnostics.first("a", 1)
    assert diagnostics.first("a", 2) and diagnostics.first("b", 1)
    assert diagnostics.said("a", 1) and not diagnostics.said("a", 3)
    diagnostics.forget("a")
    assert not diagnostics.said("a", 1) and not diagnostics.said("a", 2) and diagnostics.said("b", 1)
    assert diagnostics.first("a", 1)


def test_warn_once_logs_the_first_time_only(caplog):
    logger = logging.getLogger("xpuprof.test_diagnostics")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        assert diagnostics.warn_once(logger, ("k", "x"), "said %s", "x")
        assert not diagnostics.warn_once(logger, ("k", "x"), "said %s", "x")
    assert [r.getMessage() for r in caplog.records] == ["said x"]


def test_faults_are_kept_once_per_origin_and_stage_and_reset_forgets_them():
    fault, first = diagnostics.record_fault("plugin p", "probe", "boom")
    again, second = diagnostics.record_fault("plugin p", "probe", "other")
    assert first and not second and str(fault) == "plugin p: probe failed: boom"
    assert diagnostics.faults() == [fault] and diagnostics.faults("plugin q") == []
    assert diagnostics.said(diagnostics.FAULT_SAID, str(fault)) and not diagnostics.said(diagnostics.FAULT_SAID, str(again))
    diagnostics.abandon("plugin p", fault)
    diagnostics.abandon("plugin p", again)
    assert diagnostics.abandoned("plugin p") == str(fault) and diagnostics.abandoned(None) is None
    diagnostics.first("kept", 1)
    diagnostics.forget_faults()
    assert diagnostics.faults() == [] and diagnostics.abandoned("plugin p") is None
    assert not diagnostics.said(diagnostics.FAULT_SAID, str(fault)) and diagnostics.said("kept", 1)
    diagnostics.reset()
    assert not diagnostics.said("kept", 1)
