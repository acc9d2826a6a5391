"""The real intel-pti wheel: the scope functions resolve, and the probe explains what is missing."""
import ctypes

import pytest

from xpuprof.backends.xpu import metrics_scope as ms
from xpuprof.vendors.pti_metrics import probe_metrics

pti = pytest.importorskip("xpuprof.vendors.pti")


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
    ok, reason = probe_metrics(_wheel())
    if ok:
        pytest.skip(f"this machine has a metrics-capable GPU: {reason}")
    assert "Level Zero" in reason and "driver" in reason


def test_missing_scope_api_is_a_clear_error(tmp_path):
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c"))  # not CDLL(None): a double loaded RTLD_GLOBAL would answer
    with pytest.raises(ms.MetricsScopeError, match="lacks the PTI metrics-scope API"):
        ms.bind_scope_functions(libc)


# Runs in a child so ZET_ENABLE_METRICS=1 is in place before torch initializes Level Zero.
_HW_SCRIPT = r"""
import json, sys
import torch
import xpuprof
from xpuprof.config.options import ExperimentalConfig
from xpuprof.trace.read.load import load

x = torch.randn(4096, 4096, device="xpu")
torch.xpu.synchronize()
exp = ExperimentalConfig(profiler_metrics=["GpuTime"], profiler_measure_per_kernel=True)
with xpuprof.profile(activities=["kernel", "xpu_scope_profiler"], experimental_config=exp, backends=["xpu"]) as prof:
    for _ in range(3):
        y = x @ x
    torch.xpu.synchronize()
trace = load(prof.export_chrome_trace(sys.argv[1]))
rows = [(e["name"], e["dur"] * 1000.0, e["args"].get("GpuTime::ns")) for e in trace["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel" and not e["name"].startswith("metrics: ")]
print(json.dumps(rows))
"""


@pytest.mark.xpu
def test_gputime_matches_kernel_duration_on_hardware(tmp_path):
    """GpuTime of a real kernel is within 20 % of its duration from the kernel view."""
    import json
    import os
    import subprocess
    import sys

    ok, reason = probe_metrics(_wheel())
    if not ok:
        pytest.skip(reason)
    env = pti.environment_with_library_path(_wheel(), dict(os.environ, ZET_ENABLE_METRICS="1"))
    check = subprocess.run([sys.executable, "-c", "import torch; print(hasattr(torch, 'xpu') and torch.xpu.is_available())"],
                           capture_output=True, text=True, env=env)
    if check.stdout.strip() != "True":
        pytest.skip(f"torch with XPU support is not available: {check.stdout.strip() or check.stderr.strip()[-300:]}")
    proc = subprocess.run([sys.executable, "-c", _HW_SCRIPT, str(tmp_path / "hw.json")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    measured = [(name, dur, gpu) for name, dur, gpu in rows if gpu is not None and dur >= 50_000]
    assert measured, f"no kernel of at least 50 us carried GpuTime: {rows[:10]}"
    for name, dur, gpu in measured:
        assert abs(gpu - dur) <= 0.2 * dur, (name, dur, gpu)
