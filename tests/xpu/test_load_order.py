"""Issue 11 item 1: PTI's view library must be loaded before the SYCL runtime starts.

``import xpuprof`` loads it (the view library only); when SYCL was already in the process, the XPU
session warns once, naming the cause and the fix, and every trace's metadata says runtime calls are
missing. Each order runs in a fresh process (load order is per process), against the PTI-ABI double;
a stand-in ``libsycl.so.8`` plays the SYCL runtime being mapped.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import ctypes, json, logging, sys
    order, fake_sycl, out = sys.argv[1:4]
    if order == "sycl_first":
        ctypes.CDLL(fake_sycl)          # e.g. `import dpnp` before `import xpuprof`
    import xpuprof
    from xpuprof.backends.xpu import early_load
    status = early_load.status()
    if order == "profiler_first":
        ctypes.CDLL(fake_sycl)
    seen = []
    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    logging.getLogger("xpuprof").addHandler(Collect())
    metas = []
    for cycle in range(2):
        with xpuprof.profile(activities=["cpu", "xpu"], backends=["xpu"]) as prof:
            with xpuprof.record_function("step"):
                pass
        path = prof.export_chrome_trace(f"{out}.{cycle}.json")
        metas.append(json.load(open(path)).get("xpu_runtime_calls_missing"))
    print(json.dumps({"status": status, "warnings": [m for m in seen if "cannot be captured" in m],
                      "metadata": metas}))
""")


@pytest.fixture(scope="module")
def fake_sycl(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in SYCL library")
    d = tmp_path_factory.mktemp("fake_sycl")
    (d / "s.c").write_text("int fake_sycl_marker(void) { return 1; }\n")
    lib = d / "libsycl.so.8"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(d / "s.c")], check=True)
    return lib


def _run(order, fake_sycl, pti_double_path, tmp_path):
    env = dict(os.environ, XPUPROF_PTI_LIBRARY=str(pti_double_path))
    env.pop("XPUPROF_EARLY_PTI", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, order, str(fake_sycl), str(tmp_path / "t")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sycl_first_is_said_once_and_recorded_in_every_trace(fake_sycl, pti_double_path, tmp_path):
    out = _run("sycl_first", fake_sycl, pti_double_path, tmp_path)
    assert out["status"].startswith("not loaded early: the SYCL runtime was already loaded")
    assert len(out["warnings"]) == 1, out["warnings"]
    w = out["warnings"][0]
    assert "libsycl.so.8" in w and "import xpuprof` before importing dpnp" in w and "LD_PRELOAD" in w
    assert all(m and "cannot be captured" in m for m in out["metadata"]), out["metadata"]


def test_profiler_first_loads_pti_at_import_and_traces_say_nothing_is_missing(fake_sycl, pti_double_path, tmp_path):
    out = _run("profiler_first", fake_sycl, pti_double_path, tmp_path)
    assert out["status"].startswith("loaded at import:"), out["status"]
    assert out["warnings"] == [] and out["metadata"] == [None, None]


def test_mapped_libraries_reads_the_maps_format(tmp_path):
    from xpuprof.backends.xpu import early_load

    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 fd:00 1 /opt/v/lib/libsycl.so.8.0.0\n"
                    "7f01-7f02 r-xp 00000000 fd:00 2 /usr/lib/libc.so.6\n"
                    "7f02-7f03 r--p 00000000 00:00 0 [heap]\n")
    assert early_load.mapped_libraries(early_load.SYCL_RUNTIME_LIBRARIES, str(maps)) == ["/opt/v/lib/libsycl.so.8.0.0"]
    assert early_load.mapped_libraries(("libsycl.so",), str(tmp_path / "absent")) == []
