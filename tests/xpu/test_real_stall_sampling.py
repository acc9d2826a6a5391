"""EU stall sampling against the real intel-pti 1.2.0 and the real Level Zero loader + null driver
(../shared/level-zero, or $XPUPROF_LEVEL_ZERO_DIR): the refusal path, for real. The null driver's test
device has no EuStallSampling metric group, so PTI's ptiPcSamplingEnable answers 257; the profile must
fail with one clear error that names the device and what to do, never abort, and PTI's own reason
stays on the console. Each case runs in a fresh process (LD_LIBRARY_PATH is read at process start)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero") / "lib"
PREFIX_LIB = Path(sys.prefix) / "lib"

if not (LEVEL_ZERO / "libze_loader.so.1").is_file():
    pytest.skip(f"the Level Zero loader + null driver are not at {LEVEL_ZERO} (set XPUPROF_LEVEL_ZERO_DIR to the "
                "folder holding lib/)", allow_module_level=True)
if not (PREFIX_LIB / "libpti_view.so").exists():
    pytest.skip(f"intel-pti is not installed in this environment ({PREFIX_LIB}/libpti_view.so)",
                allow_module_level=True)

PROFILE = """
import json, sys
import xpuprof
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
how = sys.argv[1]
if how == "kineto":
    config = ProfilerConfig.from_kineto("ACTIVITIES_DURATION_MSECS=10\\nXPUPTI_STALL_SAMPLING=1", backends=["xpu"])
    kwargs = dict(config=config)
else:
    kwargs = dict(activities=["kernel", "xpu_runtime"], backends=["xpu"],
                  experimental_config=ExperimentalConfig(stall_sampling=True, stall_sampling_period_ns=50000))
try:
    with xpuprof.profile(**kwargs):
        pass
    out = {"raised": None}
except Exception as exc:
    out = {"raised": type(exc).__name__, "message": str(exc), "code": getattr(exc, "code", None)}
print(json.dumps(out))
"""

VERSION = """
import ctypes, json
from xpuprof.vendors import pti, pti_pc_sampling
lib = pti.PtiLibrary.load()
print(json.dumps({"version": lib.version(), "layout": pti_pc_sampling.layout_for(lib.version()),
                  "missing": pti_pc_sampling.missing_functions(lib._lib, list(pti_pc_sampling.SIGNATURES))}))
"""


def _run(code: str, *args: str, **extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("XPUPROF_PTI_LIBRARY", "XPUPROF_ZE_LOADER",
                                                              "XPUPROF_DISABLE_BACKENDS", "ZET_ENABLE_METRICS")}
    env.update(PYTHONPATH=str(REPO), ZE_ENABLE_NULL_DRIVER="1",
               LD_LIBRARY_PATH=os.pathsep.join([str(LEVEL_ZERO), str(PREFIX_LIB)]), **extra)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"the process died (status {proc.returncode}): {proc.stderr[-3000:]}"
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_wheels_pc_sampling_layout_is_the_one_mirrored():
    _, got = _run(VERSION)
    assert got["version"].startswith("1.2."), got
    assert got["layout"]["kernel_info"] == 56 and got["layout"]["stall_reason_info"] == 24
    assert got["missing"] == []  # 1.2.0 exports every ptiPcSampling* function the mirror binds


@pytest.mark.parametrize("how", ["api", "kineto"])
def test_stall_sampling_on_the_null_driver_is_one_clear_error_not_an_abort(how):
    proc, got = _run(PROFILE, how)
    assert got["raised"] == "StallSamplingError", got
    assert got["code"] == 257
    msg = got["message"]
    assert "PTI_ERROR_PC_SAMPLING_UNSUPPORTED (257)" in msg
    assert "null driver's test device" in msg and "run on an Intel GPU" in msg
    assert "/proc/sys/dev/xe/observation_paranoid" in msg  # what the GPU machine will need next
    # PTI printed its own reason (the missing EuStallSampling metric group, the paranoid settings)
    pti_said = proc.stdout + proc.stderr
    assert "EuStallSampling" in pti_said and "paranoid" in pti_said
