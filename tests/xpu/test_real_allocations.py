"""profile_memory=True without torch: Level Zero allocations through the loader's real tracing layer
(../shared/level-zero: loader 1.32 + libze_tracing_layer + the null driver, whose zeMemAlloc*/zeMemFree
succeed), as [memory] events. Each case runs in a fresh process (Level Zero initializes once per process)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LEVEL_ZERO = Path(os.environ.get("XPUPROF_LEVEL_ZERO_DIR") or REPO.parent / "shared" / "level-zero") / "lib"
PREFIX_LIB = Path(sys.prefix) / "lib"
HERE = Path(__file__).parent

needs_level_zero = pytest.mark.skipif(
    not (LEVEL_ZERO / "libze_tracing_layer.so.1").is_file(),
    reason=f"the Level Zero loader + tracing layer + null driver are not at {LEVEL_ZERO} (set XPUPROF_LEVEL_ZERO_DIR)")

# Level Zero calls a program makes (as SYCL's USM allocations do), on the null driver's device.
ZE_CALLS = textwrap.dedent("""
    import ctypes
    ze = ctypes.CDLL("libze_loader.so.1")
    assert ze.zeInit(0) == 0
    n = ctypes.c_uint32(0); ze.zeDriverGet(ctypes.byref(n), None)
    drv = (ctypes.c_void_p * n.value)(); ze.zeDriverGet(ctypes.byref(n), drv)
    n = ctypes.c_uint32(0); ze.zeDeviceGet(ctypes.c_void_p(drv[0]), ctypes.byref(n), None)
    devs = (ctypes.c_void_p * n.value)(); ze.zeDeviceGet(ctypes.c_void_p(drv[0]), ctypes.byref(n), devs)
    class Desc(ctypes.Structure):
        _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                    ("ordinal", ctypes.c_uint32)]
    ctx = ctypes.c_void_p()
    assert ze.zeContextCreate(ctypes.c_void_p(drv[0]), ctypes.byref(Desc(0x0d, None, 0, 0)), ctypes.byref(ctx)) == 0
    def device_alloc(size):
        p = ctypes.c_void_p()
        assert ze.zeMemAllocDevice(ctx, ctypes.byref(Desc(0x15, None, 0, 0)), ctypes.c_size_t(size),
                                   ctypes.c_size_t(64), ctypes.c_void_p(devs[0]), ctypes.byref(p)) == 0
        return p
    def host_alloc(size):
        p = ctypes.c_void_p()
        assert ze.zeMemAllocHost(ctx, ctypes.byref(Desc(0x16, None, 0, 0)), ctypes.c_size_t(size),
                                 ctypes.c_size_t(64), ctypes.byref(p)) == 0
        return p
    def shared_alloc(size):
        p = ctypes.c_void_p()
        assert ze.zeMemAllocShared(ctx, ctypes.byref(Desc(0x15, None, 0, 0)), ctypes.byref(Desc(0x16, None, 0, 0)),
                                   ctypes.c_size_t(size), ctypes.c_size_t(64), ctypes.c_void_p(devs[0]),
                                   ctypes.byref(p)) == 0
        return p
    def free(p):
        assert ze.zeMemFree(ctx, p) == 0
""")


def _run(body: str, tmp_path: Path, *, with_pti: bool = False) -> dict:
    env = dict(os.environ, ZE_ENABLE_NULL_DRIVER="1", PYTHONPATH=str(REPO),
               LD_LIBRARY_PATH=os.pathsep.join([str(LEVEL_ZERO)] + ([str(PREFIX_LIB)] if with_pti else [])))
    for k in ("XPUPROF_PTI_LIBRARY", "XPUPROF_EARLY_PTI", "XPUPROF_DISABLE_BACKENDS", "ZE_ENABLE_TRACING_LAYER"):
        env.pop(k, None)
    script = tmp_path / "prog.py"
    script.write_text(body)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=180)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_level_zero
def test_the_tracing_layer_reports_allocations_and_frees_with_their_sizes(tmp_path):
    out = _run(ZE_CALLS + textwrap.dedent("""
        import json
        from xpuprof.backends.xpu.allocations import LevelZeroAllocations
        from xpuprof.trace.builder.builder import TraceBuilder
        early = device_alloc(64)                      # allocated before the tracer starts
        tracer = LevelZeroAllocations("libze_loader.so.1")
        tracer.start()
        d1, d2, h, s = device_alloc(4096), device_alloc(8192), host_alloc(1000), shared_alloc(333)
        for p in (d1, h, s, early, d2):
            free(p)
        tracer.stop()
        cols = {k: v.tolist() for k, v in tracer.columns().items() if k not in ("ts", "tid")}
        print(json.dumps({"cols": cols, "stats": tracer.stats}))
    """), tmp_path)
    cols = out["cols"]
    assert cols["Bytes"] == [4096, 8192, 1000, 333, -4096, -1000, -333, -8192]
    assert cols["Device Type"] == [12, 12, 0, 12, 12, 0, 12, 12]  # XPU; host memory is CPU as torch writes it
    assert cols["Device Id"] == [0, 0, -1, 0, 0, -1, 0, 0]
    assert cols["Total Allocated"] == [4096, 12288, 1000, 12621, 8525, 0, 8192, 0]
    assert cols["Total Reserved"] == [4096, 12288, 0, 12621, 8525, 0, 8192, 0]
    assert out["stats"]["unknown_frees"] == 1  # the early block's free: counted, not written


@pytest.mark.slow
@needs_level_zero
@pytest.mark.skipif(not (PREFIX_LIB / "libpti_view.so").exists(), reason="intel-pti is not installed here")
def test_profile_memory_without_torch_writes_level_zero_allocations(tmp_path):
    out = _run(textwrap.dedent("""
        import json, sys
        import xpuprof
    """) + ZE_CALLS + textwrap.dedent("""
        with xpuprof.profile(activities=["cpu", "xpu"], profile_memory=True) as prof:
            with xpuprof.record_function("alloc"):
                a, b = device_alloc(1 << 20), host_alloc(4096)
                free(a)
                free(b)
        path = prof.export_chrome_trace(sys.argv[1] + "/t.json")
        data = json.loads(open(path).read())
        mem = [e for e in data["traceEvents"] if e.get("name") == "[memory]"]
        print(json.dumps({"mem": mem, "meta": data.get("levelzero_memory_events"), "backends": data["backends"],
                          "torch": "torch" in sys.modules}))
    """), tmp_path, with_pti=True)
    assert out["backends"] == ["xpu"] and not out["torch"]
    mem = out["mem"]
    assert [(e["args"]["Device Type"], e["args"]["Bytes"]) for e in mem] == [(12, 1 << 20), (0, 4096), (12, -(1 << 20)),
                                                                             (0, -4096)]
    assert all(e["cat"] == "cpu_instant_event" and e["s"] == "t" for e in mem)
    assert set(mem[0]["args"]) == {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"}
    assert out["meta"]["events"] == 4 and out["meta"]["source"] == "Level Zero tracing layer"


def test_a_loader_without_the_tracing_api_is_one_clear_error(tmp_path):
    pytest.importorskip("xpuprof._native.zemem", reason="xpuprof._native.zemem is not built")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake loader")
    lib = tmp_path / "libze_loader_fake.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(HERE / "fake_ze" / "fake_ze_loader.c")], check=True)
    from xpuprof.backends.xpu.allocations import AllocationTracerError, LevelZeroAllocations

    with pytest.raises(AllocationTracerError) as info:
        LevelZeroAllocations(str(lib)).start()
    assert "zelTracerCreate" in str(info.value) and str(lib) in str(info.value)
