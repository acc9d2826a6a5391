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
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

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
    assert {e["cat"] for e in cs} == {"hardware_counters"}  # Kineto main's name for CUDA PM counters
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


class _Sample:
    __slots__ = ("start_timestamp", "end_timestamp", "metric_values")

    def __init__(self, start, end, values):
        self.start_timestamp, self.end_timestamp, self.metric_values = start, end, values


class _CounterData(list):
    num_total_samples = 0


class _HardwareBuffer:
    """pm_sampling.Collector's behaviour over a filled hardware buffer: ``decode(max_samples)`` hands
    back at most ``max_samples`` completed samples per call (a full image means more are waiting),
    ``fail_on`` makes one decode call raise, ``overflow_on`` one raise MemoryError (cupti-python's
    ERROR_OUT_OF_MEMORY = hardware buffer overflow)."""

    def __init__(self, n, interval_ns=1_000_000, t0=10**12, holes=(), fail_on=None, overflow_on=None):
        self.interval = interval_ns
        keep = np.setdiff1d(np.arange(n), np.asarray(holes, int))
        self.pending = [(t0 + i * interval_ns, t0 + (i + 1) * interval_ns, [float(i), 2.0 * i]) for i in keep]
        self.t0, self.end_ns = t0, t0 + n * interval_ns
        self.fail_on, self.overflow_on = fail_on, overflow_on
        self.calls = []

    def Collector(self, device):
        return self

    def enable(self):
        self.calls.append("enable")

    def configure(self, metrics, sampling_interval):
        self.calls.append(("configure", sampling_interval))

    def start(self):
        self.calls.append("start")

    def stop(self):
        self.calls.append("stop")

    def disable(self):
        self.calls.append("disable")

    def decode(self, max_samples=10000):
        k = sum(c == "decode" for c in self.calls)
        self.calls.append("decode")
        if k == self.fail_on:
            raise RuntimeError("CUPTI_ERROR_UNKNOWN while decoding")
        if k == self.overflow_on or self.overflow_on == "always":
            raise MemoryError("Record overflow in the hardware buffer")
        out = _CounterData(_Sample(*x) for x in self.pending[:max_samples])
        out.num_total_samples = max_samples
        del self.pending[:max_samples]
        return out


def _pm_session(monkeypatch, hw, calls):
    from xpuprof.backends.cuda.pm_sampling_api import CuptiPmSamplingApi

    monkeypatch.setattr(CuptiActivityApi, "start", lambda self: (calls.append("activity start"), self.reset()))
    monkeypatch.setattr(CuptiActivityApi, "stop", lambda self: calls.append("activity stop"))
    monkeypatch.setattr(CuptiActivityApi, "process", lambda self, b, w: None)
    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["sm__cycles_elapsed.sum", "x.sum"],
                                                         pm_sampling_interval_us=1000))
    ticks = iter([hw.t0])  # CUPTI's clock: the first read when sampling starts, then the session end

    clock = type("clock", (), {"get_timestamp": staticmethod(lambda: next(ticks, hw.end_ns))})
    api = CuptiPmSamplingApi({ActivityType.GPU_PM_COUNTER}, cfg, pm_sampling_module=hw, cupti_module=clock)
    monkeypatch.setattr(api, "validated_metrics", lambda: ["sm__cycles_elapsed.sum", "x.sum"])
    return api


def _pm_counters(api):
    b = TraceBuilder(pid=1)
    api.process(b, None)
    return [e for chunk in iter_event_chunks(b) for e in chunk if e["ph"] == "C"]


def test_pm_sampling_long_session_keeps_every_sample(monkeypatch):
    # 25 s at 1 ms: 25,000 samples, more than one decode image (10,000) holds.
    hw, calls = _HardwareBuffer(25_000), []
    api = _pm_session(monkeypatch, hw, calls)
    api.start()
    api.stop()
    assert len(api._samples[0]) == 25_000 and api.dropped_records() == {}
    assert api.metadata()["CUPTI_PM_SAMPLING_SAMPLES"] == 25_000
    assert api.metadata()["CUPTI_PM_SAMPLING_SAMPLES_LOST"] == 0
    assert hw.calls.count("decode") >= 3 and hw.calls[-1] == "disable" and calls == ["activity start", "activity stop"]
    assert len(_pm_counters(api)) == 2 * 25_000


def test_pm_sampling_holes_are_counted_as_lost(monkeypatch):
    hw, calls = _HardwareBuffer(1_000, holes=range(500, 505)), []
    api = _pm_session(monkeypatch, hw, calls)
    api.start()
    api.stop()
    assert len(api._samples[0]) == 995
    assert api.dropped_records() == {"cuda PM samples lost": 5}
    assert api.metadata()["CUPTI_PM_SAMPLING_SAMPLES_LOST"] == 5


def test_pm_sampling_decode_failure_releases_cupti_and_reports_the_loss(monkeypatch):
    hw, calls = _HardwareBuffer(25_000, fail_on=1), []
    api = _pm_session(monkeypatch, hw, calls)
    api.start()
    api.stop()  # must not raise: what was collected is kept, the failure is reported
    assert calls == ["activity start", "activity stop"]  # CUPTI flushed and released
    assert hw.calls[-1] == "disable"
    assert len(api._samples[0]) == 10_000  # the first image
    assert api.dropped_records() == {"cuda PM samples lost": 15_000}  # the uncovered rest of the session
    assert any("decode failed" in e and "CUPTI_ERROR_UNKNOWN" in e for e in api.errors())
    # The next session on the same object starts and finishes normally.
    hw2 = _HardwareBuffer(100)
    api._pm = hw2
    api.start()
    api.stop()
    assert calls == ["activity start", "activity stop"] * 2 and len(api._samples[0]) == 100
    assert api.dropped_records() == {} and api.errors() == []  # nothing of the failed session leaks


def test_pm_sampling_hardware_buffer_overflow_is_reported(monkeypatch):
    hw, calls = _HardwareBuffer(300, overflow_on=0), []
    api = _pm_session(monkeypatch, hw, calls)
    api.start()
    api.stop()
    assert len(api._samples[0]) == 300
    assert any("overflowed 1 time" in e for e in api.errors())


def test_pm_sampling_persistent_overflow_fails_cleanly(monkeypatch):
    hw, calls = _HardwareBuffer(300, overflow_on="always"), []
    api = _pm_session(monkeypatch, hw, calls)
    api.start()
    api.stop()
    assert calls == ["activity start", "activity stop"] and hw.calls[-1] == "disable"
    assert any("overflowed on 50 drains in a row" in e for e in api.errors())
    assert api.dropped_records() == {"cuda PM samples lost": 300}  # the whole session


class _StartableCupti:
    """Enough of cupti-python's module for CuptiActivityApi.start/stop without a GPU; ``refuse``
    lists activity kinds activity_enable rejects (CUPTI_ERROR_NOT_COMPATIBLE)."""

    cuptiError = cupti_mod.cuptiError
    Result = cupti_mod.Result
    ActivityThreadIdType = cupti_mod.ActivityThreadIdType
    SUBSCRIBER_PARAMS_SIZE = cupti_mod.SUBSCRIBER_PARAMS_SIZE

    def __init__(self, refuse=()):
        self.refuse, self.enabled, self.released = set(refuse), [], []

    def SubscriberParams(self):
        return type("Params", (), {"ptr": 1, "old_subscriber_name": ""})()

    def subscribe_v2(self, cb, userdata, ptr):
        return "subscriber"

    def unsubscribe(self, s):
        self.released.append(s)

    def set_thread_id_type(self, t):
        pass

    def activity_register_callbacks(self, req, done):
        pass

    def activity_enable(self, kind):
        if kind in self.refuse:
            raise cupti_mod.cuptiError(int(cupti_mod.Result.ERROR_NOT_COMPATIBLE))
        self.enabled.append(kind)

    def activity_disable(self, kind):
        self.enabled.remove(kind)

    def activity_flush_all(self, flag):
        pass

    def activity_get_num_dropped_records(self, ctx, stream, ptr):
        pass

    def get_timestamp(self):
        return 10**12


def test_p2p_refused_by_cupti_is_reported_not_fatal():
    from xpuprof.backends.cuda import records

    fake = _StartableCupti(refuse={records.KIND_MEMCPY2})
    api = CuptiActivityApi({ActivityType.GPU_MEMCPY, ActivityType.CONCURRENT_KERNEL}, ProfilerConfig(),
                           cupti_module=fake)
    api.start()
    assert records.KIND_MEMCPY in fake.enabled and records.KIND_CONCURRENT_KERNEL in fake.enabled
    api.stop()
    assert fake.enabled == [] and fake.released == ["subscriber"]
    assert any("peer-to-peer copies" in e and "ERROR_NOT_COMPATIBLE" in e for e in api.errors())
    # a refused required kind still fails the session (and releases CUPTI)
    fake2 = _StartableCupti(refuse={records.KIND_MEMCPY})
    api2 = CuptiActivityApi({ActivityType.GPU_MEMCPY}, ProfilerConfig(), cupti_module=fake2)
    with pytest.raises(cupti_mod.cuptiError):
        api2.start()
    assert fake2.enabled == [] and fake2.released == ["subscriber"]


class _PushRefusingCupti(_StartableCupti):
    """cupti-python raises cuptiError when CUPTI refuses a push or pop (here: every one)."""

    ExternalCorrelationKind = cupti_mod.ExternalCorrelationKind

    def __init__(self):
        super().__init__()
        self.calls = []

    def activity_push_external_correlation_id(self, kind, cid):
        self.calls.append(("push", int(kind), cid))
        raise cupti_mod.cuptiError(int(cupti_mod.Result.ERROR_INVALID_PARAMETER))

    def activity_pop_external_correlation_id(self, kind):
        self.calls.append(("pop", int(kind)))
        raise cupti_mod.cuptiError(int(cupti_mod.Result.ERROR_INVALID_PARAMETER))


def test_a_refused_correlation_push_is_reported_never_raised_into_the_range():
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.trace.builder.builder import TraceBuilder

    fake = _PushRefusingCupti()
    api = CuptiActivityApi({ActivityType.CONCURRENT_KERNEL, ActivityType.EXTERNAL_CORRELATION}, ProfilerConfig(),
                           cupti_module=fake)
    api.start()
    api.push_correlation_id(7)  # what record_function calls on enter and exit
    api.pop_correlation_id()
    api.stop()
    custom0 = int(cupti_mod.ExternalCorrelationKind.CUSTOM0)
    assert fake.calls == [("push", custom0, 7), ("pop", custom0)]
    api.process(TraceBuilder(), ProcessWindow(0, 1 << 62))
    (err,) = [e for e in api.errors() if "external-correlation" in e]
    assert err.startswith("2 external-correlation push/pop call(s) failed") and "not linked" in err
