"""Kernel resources through the real Level Zero loader v1.32 and its tracing layer, with the null driver
(../shared/level-zero, or $XPUPROF_LEVEL_ZERO_DIR) under the real intel-pti 1.2.0: an XPU session installs
xpuprof's tracer, the program creates modules (SPIR-V and native) and kernels, and the trace's metadata
has each kernel with its JIT/AOT mode and, since the null driver fills no kernel property, the
properties marked as not reported (never as 0). In a fresh process: LD_LIBRARY_PATH is read at start."""
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

if not (LEVEL_ZERO / "libze_tracing_layer.so.1").is_file():
    pytest.skip(f"the Level Zero loader, tracing layer and null driver are not at {LEVEL_ZERO} (set "
                "XPUPROF_LEVEL_ZERO_DIR to the folder holding lib/)", allow_module_level=True)
if not (PREFIX_LIB / "libpti_view.so").exists():
    pytest.skip(f"intel-pti is not installed in this environment ({PREFIX_LIB}/libpti_view.so)",
                allow_module_level=True)

PROGRAM = """
import ctypes, json
from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu.backend import XpuBackend
from xpuprof.clock import now_ns
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.vendors import levelzero, levelzero_tracing as zt

created_before = []
ze = levelzero.load_loader()
session = XpuBackend().configure(frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME}), None)
n = ctypes.c_uint32(1); drv = ctypes.c_void_p(); dev = ctypes.c_void_p(); ctx = ctypes.c_void_p()
assert ze.zeDriverGet(ctypes.byref(n), ctypes.byref(drv)) == 0
assert ze.zeDeviceGet(drv, ctypes.byref(n), ctypes.byref(dev)) == 0
cd = zt.ze_context_desc_t(stype=zt.ZE_STRUCTURE_TYPE_CONTEXT_DESC)
assert ze.zeContextCreate(drv, ctypes.byref(cd), ctypes.byref(ctx)) == 0
binary = (ctypes.c_uint8 * 16)()
for fmt, name in ((zt.ZE_MODULE_FORMAT_NATIVE, b"aot_probe_kernel"), (zt.ZE_MODULE_FORMAT_IL_SPIRV, b"jit_probe_kernel")):
    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    md = zt.ze_module_desc_t(stype=zt.ZE_STRUCTURE_TYPE_MODULE_DESC, format=fmt, inputSize=16,
                             pInputModule=ctypes.cast(binary, ctypes.c_void_p), pBuildFlags=b"")
    assert ze.zeModuleCreate(ctx, dev, ctypes.byref(md), ctypes.byref(module), None) == 0
    kd = zt.ze_kernel_desc_t(stype=zt.ZE_STRUCTURE_TYPE_KERNEL_DESC, pKernelName=name)
    assert ze.zeKernelCreate(module, ctypes.byref(kd), ctypes.byref(kernel)) == 0
session.start()
session.stop()
b = TraceBuilder()
session.process(b, ProcessWindow(session.start_ns, now_ns()))
print(json.dumps(b.metadata.get("xpu_kernel_resources")))
"""


def test_the_real_tracing_layer_sees_each_kernel_created_with_its_compile_mode():
    env = {k: v for k, v in os.environ.items() if k not in ("XPUPROF_PTI_LIBRARY", "XPUPROF_ZE_LOADER",
                                                              "XPUPROF_DISABLE_BACKENDS", "ZE_ENABLE_TRACING_LAYER")}
    env.update(PYTHONPATH=str(REPO), ZE_ENABLE_NULL_DRIVER="1",
               LD_LIBRARY_PATH=os.pathsep.join([str(LEVEL_ZERO), str(PREFIX_LIB)]))
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = json.loads(proc.stdout.strip().splitlines()[-1])
    assert md is not None and "unavailable" not in md, md
    by = {k["name"]: k for k in md["kernels"]}
    assert by["aot_probe_kernel"]["compiled"] == "AOT" and by["jit_probe_kernel"]["compiled"] == "JIT"
    for k in by.values():  # the null driver fills no property: none is written as a value
        assert k["properties_result"] == 0
        assert k["simd_width"] is None and k["slm_bytes"] is None and k["spill_bytes"] is None
    assert md["not_reported_by_driver"] == 2
