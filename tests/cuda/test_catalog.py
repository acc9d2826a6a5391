"""metrics/cuda catalogs: they load, typos get close matches, and PM sampling falls back to them offline."""
from __future__ import annotations

import pytest

from xpuprof.backends.base import BackendError
from xpuprof.backends.cuda.pm_sampling_api import CuptiPmSamplingApi, validate_offline
from xpuprof.activity import ActivityType
from xpuprof.catalogs import MetricSelectionError, find_catalog, load_catalogs, validate_against_catalog
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig


def test_cuda_catalogs_load_with_sources():
    cats = load_catalogs("cuda")
    assert [c.family for c in cats] == ["hopper"]
    hopper = cats[0]
    assert hopper.sources and all(u.startswith("https://docs.nvidia.com/") for u in hopper.sources.values())
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in hopper.groups["SpeedOfLight"].metrics
    assert not hopper.complete  # a partial transcription says so


def test_chip_and_marketing_names_find_hopper():
    assert find_catalog("GH100", "cuda").family == "hopper"
    assert find_catalog("NVIDIA H200", "cuda").family == "hopper"


def test_misspelled_metric_gets_close_match():
    hopper = find_catalog("hopper", "cuda")
    with pytest.raises(MetricSelectionError, match=r"dram__throughput\.avg\.pct_of_peak_sustained_elapsed"):
        validate_against_catalog(["dram__throughput.avg.pct_of_peak_sustained_elapsd"], hopper)


def test_offline_fallback_accepts_known_and_rejects_typos():
    ok = ["sm__cycles_active.avg", "gpc__cycles_elapsed.max"]
    assert validate_offline(ok, "GH100") == ok
    with pytest.raises(BackendError, match=r"'sm__cycles_activ\.avg' \(did you mean sm__cycles_active\.avg\?\)"):
        validate_offline(["sm__cycles_activ.avg"], "GH100")
    # A partial catalog cannot prove an unrelated name absent: the device decides at start.
    assert validate_offline(["smsp__inst_executed.sum"], "GH100") == ["smsp__inst_executed.sum"]
    with pytest.raises(BackendError, match="at least one metric"):
        validate_offline([" "], "GH100")


class _NoChipCupti:
    """CUPTI without a driver: naming the chip fails, as on this CPU box."""

    class cuptiError(Exception):
        pass

    DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE = 0

    def DeviceGetChipNameParams(self):
        return type("P", (), {"ptr": 0})()

    def device_get_chip_name(self, ptr):
        raise RuntimeError("CUDA driver is not found")


def _session(metrics):
    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=metrics))
    return CuptiPmSamplingApi({ActivityType.GPU_PM_COUNTER}, cfg, cupti_module=_NoChipCupti())


def test_pm_sampling_session_validates_through_catalogs_without_cupti_list():
    assert _session(["dram__throughput.avg.pct_of_peak_sustained_elapsed"]).validated_metrics() == [
        "dram__throughput.avg.pct_of_peak_sustained_elapsed"]
    with pytest.raises(BackendError, match="offline check against metrics/cuda.*did you mean gpc__cycles_elapsed.max"):
        _session(["gpc__cycles_elapsed.maxx"]).validated_metrics()
