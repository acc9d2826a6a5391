"""CUDA backend wiring that needs no GPU: CUPTI ownership errors, metric validation, probe, hardware skip."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends.base import BackendError
from xpuprof.backends.cuda.activity_api import CuptiActivityApi, CuptiBusyError
from xpuprof.backends.cuda.backend import CudaBackend
from xpuprof.backends.cuda.pm_sampling_api import emit_samples, validate_metrics
from xpuprof.backends.registry import get_backend_class
from xpuprof.clock import BASE_TIME_NS
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder import TraceBuilder
from xpuprof.trace.chrome import iter_event_chunks

cupti_mod = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")


class _HeldCupti:
    """cupti-python's module surface with another client already subscribed (what torch.profiler leaves)."""

    cuptiError = cupti_mod.cuptiError
    Result = cupti_mod.Result
    SUBSCRIBER_PARAMS_SIZE = cupti_mod.SUBSCRIBER_PARAMS_SIZE

    def __init__(self):
        self.params = None

    def SubscriberParams(self):
        # CUPTI fills old_subscriber_name on refusal; a plain object stands in for the C struct.
        self.params = type("Params", (), {"ptr": 1, "old_subscriber_name": ""})()
        return self.params

    def subscribe_v2(self, cb, userdata, ptr):
        self.params.old_subscriber_name = "kineto"
        raise cupti_mod.cuptiError(int(cupti_mod.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED))


def test_registry_path_resolves():
    assert get_backend_class("cuda") is CudaBackend
    assert CudaBackend.name == "cuda" and CudaBackend.vendor == "cuda"


def test_another_cupti_client_is_a_clear_error():
    session = CuptiActivityApi({ActivityType.CONCURRENT_KERNEL}, ProfilerConfig(), cupti_module=_HeldCupti())
    with pytest.raises(CuptiBusyError, match=r"CUPTI is already in use by 'kineto'.*one client per process"):
        session.start()


def test_without_gpu_cupti_calls_fail_clearly():
    # The real cupti-python on a machine without a driver: the claim itself must say why.
    session = CuptiActivityApi({ActivityType.CONCURRENT_KERNEL}, ProfilerConfig())
    with pytest.raises((BackendError, cupti_mod.cuptiError), match="CUPTI|CUDA|driver"):
        session.start()


def test_probe_reports_missing_gpu():
    res = CudaBackend.probe()
    if res.available:
        pytest.skip("an NVIDIA GPU is present")
    assert not res and ("CUPTI" in res.reason or "GPU" in res.reason or "cupti-python" in res.reason)


def test_configure_picks_pm_sampling_only_with_metrics():
    from xpuprof.backends.cuda.pm_sampling_api import CuptiPmSamplingApi

    b = CudaBackend()
    plain = b.configure({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_PM_COUNTER}, ProfilerConfig())
    assert type(plain) is CuptiActivityApi
    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["sm__cycles_elapsed.sum"]))
    assert isinstance(b.configure({ActivityType.GPU_PM_COUNTER}, cfg), CuptiPmSamplingApi)
    assert b.configure({ActivityType.CPU_OP}, ProfilerConfig()) is None


def test_metric_validation_names_every_bad_metric():
    base = ["sm__cycles_elapsed", "gr__cycles_elapsed", "dram__bytes_read"]
    subs = {"sm__cycles_elapsed": [".sum", ".max"], "gr__cycles_elapsed": ["max"], "dram__bytes_read": []}
    ok = validate_metrics(["sm__cycles_elapsed.sum", "gr__cycles_elapsed.max", "dram__bytes_read"], base,
                          subs.__getitem__, chip="GH100")
    assert ok == ["sm__cycles_elapsed.sum", "gr__cycles_elapsed.max", "dram__bytes_read"]
    with pytest.raises(BackendError, match=r"GH100: 'sm__cycle_elapsed.sum' \(did you mean sm__cycles_elapsed.*"
                                           r"'sm__cycles_elapsed.avg'"):
        validate_metrics(["sm__cycle_elapsed.sum", "sm__cycles_elapsed.avg"], base, subs.__getitem__, chip="GH100")
    with pytest.raises(BackendError, match="at least one metric"):
        validate_metrics([], base, subs.__getitem__, chip="GH100")


def test_pm_samples_become_per_device_counter_tracks():
    b = TraceBuilder(pid=1)
    ts = BASE_TIME_NS + np.array([1000, 2000, 3000])
    emit_samples(b, 1, ["sm__cycles_elapsed.sum", "dram__bytes_read.sum"], ts,
                 np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]))
    cs = [e for chunk in iter_event_chunks(b) for e in chunk if e["ph"] == "C"]
    assert len(cs) == 6
    assert {e["pid"] for e in cs} == {"GPU 1 Counters"}
    assert {e["cat"] for e in cs} == {"gpu_pm_counter"}
    dram = [e["args"][""] for e in cs if e["name"] == "dram__bytes_read.sum"]
    assert dram == [10.0, 20.0, 30.0]


@pytest.mark.cuda
def test_hardware_trace_has_kernels():
    res = CudaBackend.probe()
    if not res:
        pytest.skip(res.reason)
    from cuda.bindings import driver

    session = CudaBackend().configure({ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME}, ProfilerConfig())
    session.start()
    driver.cuInit(0)
    session.stop()
    assert not session.errors()


def test_pm_collector_failure_releases_cupti(monkeypatch):
    # pm_sampling.Collector.enable raises RuntimeError when nvperf cannot load or sampling is already
    # on, and cuptiError on internal errors: the activity session started first must be released.
    from xpuprof.backends.cuda.pm_sampling_api import CuptiPmSamplingApi

    calls = []
    monkeypatch.setattr(CuptiActivityApi, "start", lambda self: calls.append("start"))
    monkeypatch.setattr(CuptiActivityApi, "stop", lambda self: calls.append("stop"))

    class Collector:
        def __init__(self, device):
            pass

        def enable(self):
            raise RuntimeError("PM sampling is already enabled on the device")

    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["sm__cycles_elapsed.sum"]))
    api = CuptiPmSamplingApi({ActivityType.GPU_PM_COUNTER}, cfg,
                             pm_sampling_module=type("pm", (), {"Collector": Collector}))
    monkeypatch.setattr(api, "validated_metrics", lambda: ["sm__cycles_elapsed.sum"])
    with pytest.raises(BackendError, match="already enabled"):
        api.start()
    assert calls == ["start", "stop"]
