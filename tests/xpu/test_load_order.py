"""PTI's view library must be loaded before the SYCL runtime *initializes*.

``import xpuprof`` loads it (the view library only) whenever it is installed, even when SYCL is
already mapped (``import dpnp`` maps libsycl/libur_loader and initializes nothing). Only an
initialized SYCL (its Unified Runtime adapters mapped) at that moment means runtime calls are lost:
then the XPU session warns once, naming the cause and the fix, and every trace's metadata says so;
otherwise nothing is said, even for a cycle that records no runtime call. Each case runs in a fresh
process (load order is per process), against the PTI-ABI double; stand-in libraries with the real
file names play SYCL being mapped (libsycl.so.8, libur_loader.so.0) or initialized
(libur_adapter_opencl.so.0). The real stack: tests/xpu/test_real_sycl.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import ctypes, json, logging, sys
    out, before, after = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    for lib in before:                  # e.g. `import dpnp` (mapped) or a first dpnp array (initialized)
        ctypes.CDLL(lib)
    import xpuprof
    from xpuprof.backends.xpu import early_load
    status = early_load.status()
    for lib in after:                   # SYCL work between `import xpuprof` and the first cycle
        ctypes.CDLL(lib)
    seen = []
    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    logging.getLogger("xpuprof").addHandler(Collect())
    metas = []
    for cycle in range(2):              # the double records no runtime call: a cycle without SYCL work
        with xpuprof.profile(activities=["cpu", "xpu"], backends=["xpu"]) as prof:
            with xpuprof.record_function("step"):
                pass
        path = prof.export_chrome_trace(f"{out}.{cycle}.json")
        metas.append(json.load(open(path)).get("xpu_runtime_calls_missing"))
    print(json.dumps({"status": status, "warnings": [m for m in seen if "cannot be captured" in m],
                      "metadata": metas}))
""")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """Empty shared libraries under the SYCL stack's real file names."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in SYCL libraries")
    d = tmp_path_factory.mktemp("fake_sycl")
    (d / "s.c").write_text("int fake_sycl_marker(void) { return 1; }\n")
    libs = {}
    for key, name in (("sycl", "libsycl.so.8"), ("ur_loader", "libur_loader.so.0"),
                      ("adapter", "libur_adapter_opencl.so.0"), ("xptifw", "libxptifw.so"),
                      ("view", "libpti_view.so")):
        libs[key] = str(d / name)
        subprocess.run([cc, "-shared", "-fPIC", "-o", libs[key], str(d / "s.c")], check=True)
    return libs


def _run(tmp_path, pti_double_path, before=(), after=(), early=True):
    env = dict(os.environ, XPUPROF_PTI_LIBRARY=str(pti_double_path))
    env.pop("XPUPROF_EARLY_PTI", None)
    env.pop("XPUPROF_DISABLE_BACKENDS", None)
    if not early:
        env["XPUPROF_EARLY_PTI"] = "0"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t"), json.dumps(list(before)),
                           json.dumps(list(after))], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _said_nothing(out):
    assert out["warnings"] == [] and out["metadata"] == [None, None], out


def _said_once_and_in_every_trace(out):
    assert len(out["warnings"]) == 1, out["warnings"]
    w = out["warnings"][0]
    assert "libur_adapter_opencl.so.0" in w and "already initialized" in w
    assert "`import xpuprof` before the first SYCL work" in w and "LD_PRELOAD" in w
    assert all(m and "cannot be captured" in m for m in out["metadata"]), out["metadata"]


def test_sycl_mapped_but_not_initialized_still_loads_pti_at_import_and_says_nothing(stand_ins, pti_double_path,
                                                                                  tmp_path):
    """`import dpnp; import xpuprof`: SYCL is mapped, not initialized. Loading PTI then is in time, and
    a cycle without runtime calls is no reason for a warning."""
    out = _run(tmp_path, pti_double_path, before=[stand_ins["sycl"], stand_ins["ur_loader"]])
    assert out["status"].startswith("loaded at import:"), out["status"]
    _said_nothing(out)


def test_sycl_initialized_before_import_is_said_once_and_recorded_in_every_trace(stand_ins, pti_double_path,
                                                                                tmp_path):
    out = _run(tmp_path, pti_double_path, before=[stand_ins["sycl"], stand_ins["ur_loader"], stand_ins["adapter"]])
    assert out["status"].startswith("loaded at import, after the SYCL runtime had initialized"), out["status"]
    _said_once_and_in_every_trace(out)


def test_sycl_initialized_after_import_is_in_time(stand_ins, pti_double_path, tmp_path):
    out = _run(tmp_path, pti_double_path, before=[stand_ins["sycl"]], after=[stand_ins["adapter"]])
    assert out["status"].startswith("loaded at import:"), out["status"]
    _said_nothing(out)


@pytest.mark.parametrize("initialized", [False, True])
def test_without_the_early_load_the_first_session_judges_the_same_way(stand_ins, pti_double_path, tmp_path,
                                                                      initialized):
    after = [stand_ins["sycl"], stand_ins["ur_loader"]] + ([stand_ins["adapter"]] if initialized else [])
    out = _run(tmp_path, pti_double_path, after=after, early=False)
    assert out["status"] == "not loaded early: XPUPROF_EARLY_PTI=0"
    if initialized:
        _said_once_and_in_every_trace(out)
    else:
        _said_nothing(out)


@pytest.mark.parametrize("xpti_on", [True, False])
def test_a_view_library_someone_else_loaded_is_judged_by_whether_sycl_switched_xpti_on(
        stand_ins, pti_double_path, tmp_path, xpti_on):
    """LD_PRELOAD or the user's own ctypes load: with SYCL initialized, XPTI's framework is mapped only
    when SYCL saw PTI's hooks, i.e. the view library was there first."""
    before = [stand_ins["view"], stand_ins["sycl"], stand_ins["adapter"]] + ([stand_ins["xptifw"]] if xpti_on else [])
    out = _run(tmp_path, pti_double_path, before=before, early=False)
    if xpti_on:
        _said_nothing(out)
    else:
        _said_once_and_in_every_trace(out)


def test_mapped_libraries_reads_the_maps_format(tmp_path):
    from xpuprof.backends.xpu import early_load

    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 fd:00 1 /opt/v/lib/libsycl.so.8.0.0\n"
                    "7f01-7f02 r-xp 00000000 fd:00 2 /opt/v/lib/libur_adapter_level_zero.so.0\n"
                    "7f01-7f02 r-xp 00000000 fd:00 2 /usr/lib/libc.so.6\n"
                    "7f02-7f03 r--p 00000000 00:00 0 [heap]\n")
    assert early_load.mapped_libraries(("libsycl.so",), str(maps)) == ["/opt/v/lib/libsycl.so.8.0.0"]
    assert early_load.sycl_initialized(str(maps)) == ["/opt/v/lib/libur_adapter_level_zero.so.0"]
    assert early_load.mapped_libraries(("libsycl.so",), str(tmp_path / "absent")) == []
