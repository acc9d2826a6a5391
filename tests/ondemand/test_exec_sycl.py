"""A SYCL-first program under `xpuprof exec`, on the real tier: intel-pti + ../shared/level-zero's loader and
null driver + dpctl on the OpenCL CPU device (the environment tests/xpu/test_real_sycl.py uses).

The program initializes SYCL at its first line and never imports xpuprof: its runtime calls are recorded.
And where xpuprof cannot start before the program (a Python without site, `-S`), PTI's view library preloaded
by exec still has SYCL's hooks in place: a profile the program starts after its SYCL work records them."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from odhelpers import PYTHON, REPO, events, load_trace
from test_exec import XPUPROF, traces

LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero") / "lib"
PREFIX_LIB = Path(sys.prefix) / "lib"


def _missing() -> str | None:
    if not (LEVEL_ZERO / "libze_loader.so.1").is_file():
        return f"the Level Zero loader + null driver are not at {LEVEL_ZERO} (set XPUPROF_LEVEL_ZERO_DIR)"
    if not (PREFIX_LIB / "libpti_view.so").exists():
        return f"intel-pti is not installed in this environment ({PREFIX_LIB}/libpti_view.so)"
    if importlib.util.find_spec("dpctl") is None:
        return "dpctl is not installed (.ci/run installs the pinned SYCL-on-CPU stack)"
    if not (PREFIX_LIB / "libintelocl.so").exists():
        return f"the OpenCL CPU runtime (intel-opencl-rt) is not at {PREFIX_LIB}/libintelocl.so"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=f"real SYCL tier: {_missing()}")]

SYCL_FIRST = textwrap.dedent("""
    import dpctl, dpctl.memory
    import numpy as np
    q = dpctl.SyclQueue("opencl:cpu")          # SYCL initializes here, first thing the program does
    for _ in range(3):
        m = dpctl.memory.MemoryUSMDevice(1 << 20, queue=q)
        m.copy_from_host(np.ones(1 << 18, dtype=np.float32).view(np.uint8))
        q.wait()
    print("copied", flush=True)
""")


def stack_env() -> dict:
    env = dict(os.environ, ZE_ENABLE_NULL_DRIVER="1", OCL_ICD_FILENAMES=str(PREFIX_LIB / "libintelocl.so"),
               LD_LIBRARY_PATH=f"{LEVEL_ZERO}{os.pathsep}{PREFIX_LIB}", PYTHONPATH=str(REPO),
               XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    for key in ("XPUPROF_PTI_LIBRARY", "XPUPROF_EARLY_PTI", "XPUPROF_EXEC", "XPUPROF_HELPER", "KINETO_USE_DAEMON",
                "XPUPROF_KINETO_USE_DAEMON", "LD_PRELOAD", *PTI_SET):
        env.pop(key, None)
    return env


# What PTI's view library sets in its process's environment once loaded (a pytest-xdist worker that imported
# xpuprof has them): inherited, they switch XPTI on in the child before anything of the test ran.
PTI_SET = ("XPTI_TRACE_ENABLE", "XPTI_FRAMEWORK_DISPATCHER", "XPTI_SUBSCRIBERS", "UR_ENABLE_LAYERS",
           "INTEL_LIBITTNOTIFY64")


def runtime_calls(trace) -> list[dict]:
    return [e for e in events(trace) if e["name"].startswith("ur")]


def test_an_unmodified_sycl_first_program_records_its_runtime_calls(tmp_path):
    script = tmp_path / "sycl_first.py"
    script.write_text(SYCL_FIRST)
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", PYTHON, str(script)],
                          capture_output=True, text=True, env=stack_env(), timeout=300)
    assert proc.returncode == 0 and "copied" in proc.stdout, proc.stderr[-3000:]
    (trace,) = traces(tmp_path / "t")
    assert trace["backends"] == ["xpu"] and "xpu_runtime_calls_missing" not in trace
    assert {e["name"] for e in runtime_calls(trace)} >= {"urEnqueueUSMMemcpy"}
    assert [e for e in events(trace) if e["name"].startswith("ze")]  # the driver calls under them


PROFILES_AFTER_SYCL = textwrap.dedent("""
    import sys
    sys.path[:0] = sys.argv[2].split(":")     # -S: no site, no sitecustomize; the program finds its packages
    exec(open(sys.argv[1]).read())           # SYCL initializes, works
    import json, xpuprof                     # only then xpuprof, and a profile of more SYCL work
    import dpctl, dpctl.memory, numpy as np
    q = dpctl.SyclQueue("opencl:cpu")
    with xpuprof.profile(activities=["cpu", "xpu"]) as prof:
        m = dpctl.memory.MemoryUSMDevice(1 << 16, queue=q)
        m.copy_from_host(np.ones(1 << 16, dtype=np.uint8))
        q.wait()
    print(prof.export_chrome_trace(sys.argv[3]))
""")


@pytest.mark.parametrize("under_exec", [True, False])
def test_the_preloaded_view_library_catches_a_program_xpuprof_could_not_start_before(under_exec, tmp_path):
    script = tmp_path / "sycl_first.py"
    script.write_text(SYCL_FIRST)
    paths = ":".join([str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    cmd = [PYTHON, "-S", "-c", PROFILES_AFTER_SYCL, str(script), paths, str(tmp_path / "late.json")]
    if under_exec:
        cmd = [*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=stack_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = load_trace(tmp_path / "late.json")
    if under_exec:
        assert "xpu_runtime_calls_missing" not in trace and runtime_calls(trace)
    else:  # the same program without exec: too late, and said so
        assert "cannot be captured" in trace["xpu_runtime_calls_missing"] and not runtime_calls(trace)
