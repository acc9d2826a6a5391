"""The XPU probe's states, each for real: the real intel-pti 1.2.0 wheel, the real Level Zero
loader + null driver in ../shared/level-zero (or $XPUPROF_LEVEL_ZERO_DIR). Every state runs in a fresh
process because the loader search path (LD_LIBRARY_PATH) is read once, at process start.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero") / "lib"
PREFIX_LIB = Path(sys.prefix) / "lib"

if not (LEVEL_ZERO / "libze_loader.so.1").is_file():
    pytest.skip(f"the Level Zero loader + null driver are not at {LEVEL_ZERO} (a checkout without ../shared; "
                "set XPUPROF_LEVEL_ZERO_DIR to the folder holding lib/)", allow_module_level=True)
if not (PREFIX_LIB / "libpti_view.so").exists():
    pytest.skip(f"intel-pti is not installed in this environment ({PREFIX_LIB}/libpti_view.so)",
                allow_module_level=True)

PROBE = """
import json
from xpuprof.backends.xpu import availability
r = availability.probe()
print(json.dumps({"available": r.available, "reason": r.reason, "stage": r.details.get("stage"),
                  "null_device": r.details.get("null_device")}))
"""

CORE = """
import json, sys
from xpuprof.backends.probe import run_probe
from xpuprof.backends.xpu import availability
from xpuprof.vendors import pti
wheel = pti.find_pti_library()
r = run_probe("xpuprof.backends.xpu.availability", "check_pti_core", [str(wheel)],
              env=pti.environment_with_library_path(wheel), on_crash=availability._explain_crash)
print(json.dumps({"available": r.available, "reason": r.reason}))
"""


# What each state sets for itself: an explicit PTI / loader path, the null or an alternate driver.
HIDDEN_ENV = ("XPUPROF_PTI_LIBRARY", "XPUPROF_ZE_LOADER", "ZE_ENABLE_NULL_DRIVER", "ZE_ENABLE_ALT_DRIVERS",
              "XPUPROF_DISABLE_BACKENDS", "XPUPROF_FULL_PROBE")
# The driver libraries the Level Zero loader (v1.32) looks up by name, besides the null driver.
GPU_DRIVERS = ("libze_intel_gpu.so.1", "libze_intel_gpu_legacy1.so.1", "libze_intel_npu.so.1", "libze_intel_vpu.so.1")

LOOKUP = f"""
import ctypes, json
from xpuprof.vendors import levelzero
drivers = []
for name in {GPU_DRIVERS!r}:
    try:
        ctypes.CDLL(name)
        drivers.append(name)
    except OSError:
        pass
print(json.dumps({{"loader": levelzero.find_loader(), "drivers": drivers}}))
"""


def _python(code: str, library_path: list[Path], **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN_ENV}
    env.update(extra, PYTHONPATH=str(REPO), LD_LIBRARY_PATH=os.pathsep.join(map(str, library_path)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"the parent process died (status {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _skip_unless_the_machine_lookup_is_hidden(library_path: list[Path], *, loader: bool = False,
                                              drivers: bool = False) -> None:
    """The test controls LD_LIBRARY_PATH and the environment, not the system library path (ldconfig)."""
    found = _python(LOOKUP, library_path)
    where = f"with LD_LIBRARY_PATH={os.pathsep.join(map(str, library_path))} and {', '.join(HIDDEN_ENV)} unset"
    if loader and found["loader"]:
        pytest.skip(f"this machine's own loader lookup (levelzero.find_loader) still finds a Level Zero loader "
                    f"({found['loader']}) {where}: a system-wide install (ldconfig) or LD_PRELOAD this test "
                    "cannot hide")
    if drivers and found["drivers"]:
        pytest.skip(f"a Level Zero driver is installed on this machine ({', '.join(found['drivers'])}, found {where}): "
                    "the loader would initialize it, so there is no loader-without-driver state to test here")


def test_no_loader(tmp_path):
    _skip_unless_the_machine_lookup_is_hidden([PREFIX_LIB], loader=True)
    r = _python(PROBE, [PREFIX_LIB])
    assert (r["available"], r["stage"]) == (False, "no_loader") and "no Level Zero loader" in r["reason"]


def test_loader_without_zesinit(tmp_path):
    """We have no real loader that lacks zesInit (Debian bookworm's libze1 1.8.12 is one, not installed
    here): the smallest honest stand-in, a libze_loader.so.1 exporting zeInit only, built in tmp_path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in loader without zesInit")
    (tmp_path / "old.c").write_text("int zeInit(int flags) { (void)flags; return 0; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libze_loader.so.1"), str(tmp_path / "old.c")],
                   check=True)
    # The child's checks, as on a machine with a GPU device node (this one has none: see below)
    r = _python(PROBE, [tmp_path, PREFIX_LIB], XPUPROF_FULL_PROBE="1")
    assert (r["available"], r["stage"]) == (False, "old_loader") and "does not export zesInit" in r["reason"]


def test_loader_without_driver_is_said_before_pti_runs():
    _skip_unless_the_machine_lookup_is_hidden([LEVEL_ZERO, PREFIX_LIB], drivers=True)
    r = _python(PROBE, [LEVEL_ZERO, PREFIX_LIB], XPUPROF_FULL_PROBE="1")  # as where a device node is
    assert (r["available"], r["stage"]) == (False, "no_driver")
    assert "no driver initialized" in r["reason"] and "PTI would abort" in r["reason"]


def test_loader_without_driver_pti_core_aborts_inside_the_probe_child_only():
    """PTI's real abort (SIGABRT on its first core call without a driver), contained by the probe."""
    _skip_unless_the_machine_lookup_is_hidden([LEVEL_ZERO, PREFIX_LIB], drivers=True)
    r = _python(CORE, [LEVEL_ZERO, PREFIX_LIB])
    assert r["available"] is False and "PTI aborted the probe process (SIGABRT)" in r["reason"], r


def test_loader_with_the_null_driver_is_usable_and_said_to_be_a_test_device():
    r = _python(PROBE, [LEVEL_ZERO, PREFIX_LIB], ZE_ENABLE_NULL_DRIVER="1")
    assert (r["available"], r["stage"], r["null_device"]) == (True, "ok", True)
    assert "Null Device" in r["reason"] and "a test device, not a GPU" in r["reason"]


NO_CHILD = """
import json, time
from xpuprof.backends.xpu import availability
def refuse(*args, **kwargs):
    raise AssertionError("a probe child was started")
availability.run_probe = refuse
t = time.perf_counter()
r = availability.probe()
print(json.dumps({"available": r.available, "reason": r.reason, "stage": r.details.get("stage"),
                  "decided": r.details.get("decided"), "seconds": time.perf_counter() - t}))
"""


def test_a_loader_without_a_gpu_device_node_is_ruled_out_in_process():
    """The real loader is found, but no Intel GPU device node exists and no null driver is asked for: no GPU
    driver could open a device, so no child interpreter is started (it cost 0.3-0.7 s, seconds under load)."""
    import glob

    if glob.glob("/dev/dri/renderD*") or os.path.exists("/dev/dxg"):
        pytest.skip("this machine has a GPU device node (/dev/dri/renderD* or /dev/dxg): the child must check it")
    r = _python(NO_CHILD, [LEVEL_ZERO, PREFIX_LIB])
    assert (r["available"], r["stage"], r["decided"]) == (False, "no_device_node", "in-process"), r
    assert "/dev/dri/renderD*" in r["reason"] and "no Level Zero GPU driver can open a device" in r["reason"]
    # the null driver needs no device node: then the child runs (and the GPU-less device is usable)
    r = _python(PROBE, [LEVEL_ZERO, PREFIX_LIB], ZE_ENABLE_NULL_DRIVER="1")
    assert (r["available"], r["stage"]) == (True, "ok")


def test_no_loader_is_ruled_out_in_process():
    _skip_unless_the_machine_lookup_is_hidden([PREFIX_LIB], loader=True)
    r = _python(NO_CHILD, [PREFIX_LIB])
    assert (r["available"], r["stage"], r["decided"]) == (False, "no_loader", "in-process"), r
    assert "no Level Zero loader (libze_loader.so.1) found" in r["reason"]
