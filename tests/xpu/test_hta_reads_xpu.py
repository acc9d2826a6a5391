"""HTA (HolisticTraceAnalysis 0.5) on a trace our real XPU backend writes (over the PTI-ABI double):
its device analyses find device work only through a "stream" arg, which Kineto's XPU plugin does not
write. Ours carries it beside "sycl queue", so kernels, copies and fills count as device work."""
from __future__ import annotations

import pytest

pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (.ci/run installs it with pandas<3)")
pd = pytest.importorskip("pandas")
if int(pd.__version__.split(".")[0]) >= 3:
    pytest.skip(f"HTA 0.5 breaks on pandas {pd.__version__}; .ci/run pins pandas<3", allow_module_level=True)

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def test_hta_breakdowns_see_every_kernel_copy_and_fill_of_an_xpu_trace(pti_double, tmp_path, run_session):
    rc, _api, _builder, trace, _ = run_session(pti_double, tmp_path, iterations=8)
    assert rc == 0
    work = [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert work and all(e["args"]["stream"] == e["args"]["sycl queue"] == e["tid"] for e in work)
    ta = TraceAnalysis(trace_files={0: str(tmp_path / "trace.json")}, include_last_profiler_step=True)
    df = ta.t.get_trace(0)
    assert (df["stream"] >= 0).sum() == len(work)
    _, per_kernel = ta.get_gpu_kernel_breakdown(visualize=False)
    assert set(per_kernel["name"]) == {e["name"] for e in work}
    idle, _ = ta.get_idle_time_breakdown(visualize=False)
    assert set(idle["stream"]) == {e["tid"] for e in work}
