"""The real intel-pti wheel (``pip install --no-deps intel-pti intel-cmplr-lib-rt``), and Intel GPU hardware."""
from __future__ import annotations

import importlib.metadata
import os

import pytest

from slice_tables import slice_table
from xpuprof.activity import ActivityType
from xpuprof.backends.probe import run_probe
from xpuprof.backends.xpu import availability
from xpuprof.vendors import pti
from xpuprof.backends.xpu.backend import XpuBackend

pytestmark = pytest.mark.slow


def _wheel_path():
    try:
        importlib.metadata.distribution("intel-pti")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        return pti.find_pti_library()
    except pti.PtiNotFound:
        return None


WHEEL = _wheel_path()
needs_wheel = pytest.mark.skipif(WHEEL is None, reason="intel-pti is not installed "
                                 "(pip install --no-deps intel-pti intel-cmplr-lib-rt)")


@needs_wheel
def test_wheel_version_and_result_names(monkeypatch):
    monkeypatch.delenv(pti.PTI_LIBRARY_ENV, raising=False)
    version = pti.version_string(WHEEL)
    assert version.count(".") == 2 and version.split(".")[0].isdigit()
    lib = pti.PtiLibrary.load(WHEEL)
    assert lib.version() == version
    assert lib.result_name(2) == "PTI_ERROR_NOT_IMPLEMENTED" and lib.result_name(0) == "PTI_SUCCESS"
    assert pti.required_library_dir(WHEEL) == WHEEL.resolve().parent


@needs_wheel
def test_wheel_probe_reports_the_missing_level_zero_cleanly(monkeypatch):
    monkeypatch.delenv(pti.PTI_LIBRARY_ENV, raising=False)
    result = availability.probe()
    if result.available:
        pytest.skip(f"nothing is missing to report: the XPU probe succeeds in this environment "
                    f"({_what_the_probe_found(result)})")
    assert result.details["stage"] in {"no_loader", "old_loader", "no_driver", "no_gpu"}, result
    assert "Level Zero" in result.reason


def _what_the_probe_found(result) -> str:
    if result.details.get("null_device"):
        return (f"on the Level Zero null driver's test device: ZE_ENABLE_NULL_DRIVER="
                f"{os.environ.get('ZE_ENABLE_NULL_DRIVER', '')!r}, loader {result.details.get('loader')}")
    return f"an Intel GPU stack: {result.reason}"


def _loader_without_driver_here() -> bool:
    """True when this process can find a Level Zero loader whose zeInit fails (PTI aborts there)."""
    res = availability.check_level_zero()
    return res["details"]["stage"] in {"no_driver"}


@needs_wheel
def test_wheel_core_without_level_zero_is_not_implemented_not_a_crash():
    env = pti.environment_with_library_path(WHEEL)
    res = run_probe("xpuprof.backends.xpu.availability", "check_pti_core", [str(WHEEL)], env=env,
                    on_crash=availability._explain_crash)
    if res.available:
        l0 = availability.check_level_zero()
        on_null = bool(l0["available"]) and all(d["name"] == availability.NULL_DEVICE_NAME
                                                for d in l0["details"].get("devices", []))
        pytest.skip("PTI's core initialized, so there is no failure to check: "
                    + ("the Level Zero null driver is enabled (ZE_ENABLE_NULL_DRIVER=1)" if on_null
                       else f"a Level Zero driver is present ({l0['reason']})"))
    if _loader_without_driver_here():
        # A loader but no driver: PTI's real abort, contained in the probe's child process.
        assert "PTI aborted the probe process (SIGABRT)" in res.reason, res
        return
    assert res.details["stage"] == "pti_core", res
    assert "ptiViewEnable returned PTI_ERROR_NOT_IMPLEMENTED" in res.reason


def _gpu_probe():
    if WHEEL is None:
        return "intel-pti is not installed"
    r = XpuBackend.probe()
    if r.available and r.details.get("null_device"):
        return "the only XPU is the Level Zero null driver's test device (kernels on it abort PTI)"
    return None if r.available else r.reason


GPU_MISSING = _gpu_probe()


@pytest.mark.xpu
@pytest.mark.skipif(GPU_MISSING is not None, reason=f"no usable Intel GPU: {GPU_MISSING}")
def test_real_kernel_links_to_its_host_call(tmp_path):
    torch = pytest.importorskip("torch")
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("torch has no XPU device")
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.clock import now_ns
    from xpuprof.trace.builder.builder import TraceBuilder

    types = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME, ActivityType.EXTERNAL_CORRELATION})
    session = XpuBackend().configure(types, None)
    session.start()
    session.push_correlation_id(777)
    x = torch.ones(1 << 20, device="xpu")
    (x * 2).sum().item()
    torch.xpu.synchronize()
    session.pop_correlation_id()
    session.stop()
    b = TraceBuilder()
    session.process(b, ProcessWindow(session.start_ns, now_ns()))
    k = slice_table(b, "kernel")
    assert len(k["ts"]) >= 1
    assert len(session.kernels) >= 1
    flows = [f for batch in b.flows for f in batch.flow_id.tolist()]
    assert flows, "no ac2g flow linked a runtime call to a kernel"


def test_the_null_driver_device_is_usable_but_said_to_be_a_test_device(monkeypatch):
    """The real loader + null driver in ../shared/level-zero."""
    from pathlib import Path

    import os

    lib = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR")
               or Path(__file__).resolve().parents[2].parent / "shared" / "level-zero") / "lib"
    if WHEEL is None or not (lib / "libze_null.so.1").is_file():
        pytest.skip(f"needs intel-pti and the Level Zero null driver at {lib}")
    monkeypatch.delenv(pti.PTI_LIBRARY_ENV, raising=False)
    monkeypatch.setenv("ZE_ENABLE_NULL_DRIVER", "1")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{lib}:{WHEEL.resolve().parent}")
    r = availability.probe()
    assert r.available, r.reason
    assert r.details["null_device"] is True and "a test device, not a GPU" in r.reason
