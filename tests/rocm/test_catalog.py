"""metrics/rocm catalogs: they load, derived formulas evaluate, typos get close matches."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.catalogs import MetricSelectionError, find_catalog, load_catalogs, validate_against_catalog


def test_rocm_catalogs_load_with_sources():
    cats = {c.family: c for c in load_catalogs("rocm")}
    assert set(cats) == {"mi200", "mi300"}
    for c in cats.values():
        assert any("rocm.docs.amd.com" in u for u in c.sources.values())
        assert {"GRBM_COUNT", "GRBM_GUI_ACTIVE", "SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU",
                "SQ_WAVE_CYCLES", "SQ_BUSY_CYCLES"} <= set(c.all_metric_names())
        assert {"GPUBusy", "Wavefronts", "VALUUtilization"} <= set(c.derived)
    assert cats["mi200"].groups["GRBM"].complete and not cats["mi200"].groups["SQ"].complete


def test_agent_names_find_families():
    assert find_catalog("gfx942", "rocm").family == "mi300"
    assert find_catalog("AMD Instinct MI250X", "rocm").family == "mi200"


def test_derived_formulas_evaluate():
    mi300 = find_catalog("mi300", "rocm")
    busy = mi300.derived["GPUBusy"].evaluate({"GRBM_GUI_ACTIVE": np.array([50.0, 0.0]), "GRBM_COUNT": np.array([200.0, 10.0])})
    np.testing.assert_allclose(busy, [25.0, 0.0])
    util = mi300.derived["VALUUtilization"].evaluate({"SQ_THREAD_CYCLES_VALU": 3200.0, "SQ_ACTIVE_INST_VALU": 100.0})
    assert float(util) == pytest.approx(50.0)


def test_misspelled_counter_gets_close_match():
    mi200 = find_catalog("mi200", "rocm")
    with pytest.raises(MetricSelectionError, match=r"'GRBM_GUI_ACTIV'.*did you mean GRBM_GUI_ACTIVE \(group GRBM\)"):
        validate_against_catalog(["GRBM_GUI_ACTIV"], mi200)
    assert validate_against_catalog(["SQ_WAVES", "SQ_INSTS_VALU"], mi200) == ("SQ", ["SQ_WAVES", "SQ_INSTS_VALU"])
