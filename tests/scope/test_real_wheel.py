"""The real intel-pti wheel: the scope functions resolve, and the probe explains what is missing."""
import ctypes

import pytest

from xpuprof.backends.xpu import metrics_scope as ms

pti = pytest.importorskip("xpuprof.backends.xpu.pti")


def _wheel():
    try:
        return pti.find_pti_library()
    except pti.PtiNotFound as exc:
        pytest.skip(f"intel-pti wheel not installed: {exc}")


def test_scope_symbols_resolve_in_the_wheel():
    lib = ctypes.CDLL(str(_wheel()))
    fns = ms.bind_scope_functions(lib)
    for name in ms.SCOPE_REQUIRED:
        assert fns[name] is not None, name
    assert ctypes.cast(fns["ptiMetricsScopeEnable"], ctypes.c_void_p).value


def test_probe_explains_metrics_need_a_level_zero_gpu_driver():
    ok, reason = ms.probe_metrics(_wheel())
    if ok:
        pytest.skip(f"this machine has a metrics-capable GPU: {reason}")
    assert "Level Zero" in reason and "driver" in reason


def test_missing_scope_api_is_a_clear_error(tmp_path):
    libc = ctypes.CDLL(None)
    with pytest.raises(ms.MetricsScopeError, match="lacks the PTI metrics-scope API"):
        ms.bind_scope_functions(libc)


@pytest.mark.xpu
def test_gputime_matches_kernel_duration_on_hardware():
    ok, reason = ms.probe_metrics(_wheel())
    if not ok:
        pytest.skip(reason)
    torch = pytest.importorskip("torch")
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("torch.xpu is not available")
    from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
    from xpuprof import profile  # the public profiler front end

    exp = ExperimentalConfig(profiler_metrics=["GpuTime"], profiler_measure_per_kernel=True)
    cfg = ProfilerConfig(activities=["kernel", "xpu_scope_profiler"], experimental=exp)
    x = torch.randn(4096, 4096, device="xpu")
    with profile(config=cfg) as prof:
        (x @ x).sum().item()
    builder = prof.builder
    kernels = builder.slice_table("kernel")
    ok_rows = 0
    for b in builder.slices:
        col = b.args.get("GpuTime::ns")
        if col is None or not len(b):
            continue
        present = col.present if col.present is not None else [True] * len(b)
        for gpu_time, dur, has in zip(col.values, b.dur, present):
            if has and dur > 0 and not str(builder.strings.strings[b.name[0]]).startswith("metrics:"):
                assert abs(gpu_time - dur) <= 0.2 * dur
                ok_rows += 1
    assert ok_rows > 0 and len(kernels["ts"]) > 0
