"""Kernel resources (unitrace -d) from the Level Zero tracing layer, over a loader double whose structs
mirror ze_api.h / zel_tracing_api.h, joined to the PTI double's kernel slices: SIMD width, SLM,
private and spill memory, register file size, JIT/AOT, and every way they can be missing."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu import kernel_resources
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.clock import now_ns
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.vendors import levelzero_tracing as zt

from .conftest import ALL, UUID0

SOURCE = Path(__file__).parent / "fake_ze" / "ze_tracing_double.c"


def _build(out: Path, *defines: str) -> Path:
    lib = out / f"libze_tracing_double{''.join(d.lower() for d in defines)}.so"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter",
           *[f"-D{d}" for d in defines], "-o", str(lib), str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return lib


@pytest.fixture(scope="module")
def ze_paths(tmp_path_factory):
    out = tmp_path_factory.mktemp("ze_tracing")
    return _build(out), _build(out, "NO_TRACER")


@pytest.fixture
def ze(ze_paths):
    lib = ctypes.CDLL(str(ze_paths[0]))
    lib.zed_reset()
    lib.zed_sizeof.restype = lib.zed_offset.restype = ctypes.c_size_t
    lib.zed_sizeof.argtypes = lib.zed_offset.argtypes = [ctypes.c_char_p]
    from xpuprof._native import zekernels

    zekernels.reset()
    yield lib
    zekernels.uninstall()
    zekernels.reset()
    kernel_resources._Tracer.installed_ns = None


def create_kernel(ze, name: bytes, fmt: int) -> int:
    ctx, module, kernel = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    ze.zeContextCreate(None, None, ctypes.byref(ctx))
    md = zt.ze_module_desc_t(stype=zt.ZE_STRUCTURE_TYPE_MODULE_DESC, format=fmt)
    assert ze.zeModuleCreate(ctx, ctypes.c_void_p(0x20), ctypes.byref(md), ctypes.byref(module), None) == 0
    kd = zt.ze_kernel_desc_t(stype=zt.ZE_STRUCTURE_TYPE_KERNEL_DESC, pKernelName=name)
    assert ze.zeKernelCreate(module, ctypes.byref(kd), ctypes.byref(kernel)) == 0
    return module.value


def session_trace(pti_double, ze, tmp_path, make_kernels=None, loader=None):
    api = XpuptiActivityApi(ALL, None, library=pti_double.lib, device_uuids=[UUID0],
                            ze_loader=ze if loader is None else loader)
    if make_kernels:
        make_kernels()
    api.start()
    pti_double.workload_holding_gil(4)
    api.stop()
    b = TraceBuilder()
    api.process(b, ProcessWindow(api.start_ns - 1_000_000, now_ns()))
    return api, load(write_chrome_trace(b, tmp_path / "trace.json"))


def kernels(trace, name):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] == name]


def test_the_mirrors_match_the_header_layouts_compiled_by_the_c_compiler(ze):
    assert ctypes.sizeof(zt.ze_kernel_properties_t) == 92 + 4 == ze.zed_sizeof(b"kernel_properties")
    assert ctypes.sizeof(zt.zex_kernel_register_file_size_exp_t) == 24 == ze.zed_sizeof(b"register_file_size")
    for struct, c_name, fields in [
        (zt.ze_kernel_properties_t, "kernel_properties_t", ("numKernelArgs", "requiredGroupSizeX",
                                                            "requiredSubgroupSize", "maxSubgroupSize", "maxNumSubgroups",
                                                            "localMemSize", "privateMemSize", "spillMemSize", "uuid")),
        (zt.zex_kernel_register_file_size_exp_t, "register_file_size_t", ("registerFileSize",)),
        (zt.ze_module_desc_t, "module_desc_t", ("format", "inputSize")),
        (zt.ze_kernel_desc_t, "kernel_desc_t", ("pKernelName",)),
    ]:
        for f in fields:
            assert getattr(struct, f).offset == ze.zed_offset(f"{c_name}.{f}".encode()), (c_name, f)
    from xpuprof._native import zekernels

    assert zekernels.row_size() == kernel_resources.ROW_DTYPE.itemsize


def test_resources_reach_the_kernel_slices_and_the_metadata(pti_double, ze, tmp_path):
    values = (ctypes.c_uint32 * 12)(5, 0, 0, 0, 0, 0, 32, 16, 65536, 512, 1024, 0)

    def make():
        create_kernel(ze, b"gemm_kernel<float>", zt.ZE_MODULE_FORMAT_NATIVE)
        ze.zed_set_properties(values, 128)
        create_kernel(ze, b"relu_kernel", zt.ZE_MODULE_FORMAT_IL_SPIRV)

    api, trace = session_trace(pti_double, ze, tmp_path, make)
    gemm, relu = kernels(trace, "gemm_kernel<float>"), kernels(trace, "relu_kernel")
    assert len(gemm) == len(relu) == 2
    a = gemm[0]["args"]
    assert (a["simd width"], a["SLM per work-group (bytes)"], a["private memory per thread (bytes)"],
            a["spill memory per thread (bytes)"], a["register file size"], a["kernel args count"],
            a["compiled"]) == (16, 4096, 256, 128, 256, 3, "AOT")
    r = relu[1]["args"]
    assert (r["simd width"], r["SLM per work-group (bytes)"], r["private memory per thread (bytes)"],
            r["spill memory per thread (bytes)"], r["register file size"], r["compiled"]) == (32, 65536, 512, 1024, 128,
                                                                                               "JIT")
    md = trace["xpu_kernel_resources"]
    by = {k["name"]: k for k in md["kernels"]}
    assert by["relu_kernel"]["spill_bytes"] == 1024 and by["relu_kernel"]["compiled"] == "JIT"
    assert by["gemm_kernel<float>"]["launches_in_trace"] == 2 and by["gemm_kernel<float>"]["register_file_size"] == 256
    assert "kernels_without_resources" not in md and "not_reported_by_driver" not in md


def test_what_the_driver_does_not_report_is_left_out_not_written_as_zero(pti_double, ze, tmp_path):
    ze.zed_set_silent(1)  # success without filling anything: Level Zero's null driver
    api, trace = session_trace(pti_double, ze, tmp_path, lambda: create_kernel(ze, b"gemm_kernel<float>", 1))
    a = kernels(trace, "gemm_kernel<float>")[0]["args"]
    assert "simd width" not in a and "spill memory per thread (bytes)" not in a and "register file size" not in a
    assert a["compiled"] == "AOT"  # the module's format is known all the same
    md = trace["xpu_kernel_resources"]
    assert md["not_reported_by_driver"] == 1
    assert md["kernels"][0]["simd_width"] is None and md["kernels"][0]["spill_bytes"] is None


def test_a_failing_property_call_is_not_reported_either(pti_double, ze, tmp_path):
    ze.zed_set_result(0x78000001)
    api, trace = session_trace(pti_double, ze, tmp_path, lambda: create_kernel(ze, b"relu_kernel", 0))
    entry = trace["xpu_kernel_resources"]["kernels"][0]
    assert entry["properties_result"] == 0x78000001 and entry["slm_bytes"] is None
    assert "SLM per work-group (bytes)" not in kernels(trace, "relu_kernel")[0]["args"]


def test_kernels_created_before_the_tracer_are_counted_by_name(pti_double, ze, tmp_path):
    create_kernel(ze, b"relu_kernel", 1)  # no tracer yet: nobody sees this creation
    api, trace = session_trace(pti_double, ze, tmp_path, lambda: create_kernel(ze, b"gemm_kernel<float>", 1))
    md = trace["xpu_kernel_resources"]
    assert md["kernels_without_resources"]["names"] == ["relu_kernel"]
    assert md["kernels_without_resources"]["launches"] == 2
    assert "zeKernelCreate" in md["kernels_without_resources"]["why"]
    assert "simd width" not in kernels(trace, "relu_kernel")[0]["args"]
    assert kernels(trace, "gemm_kernel<float>")[0]["args"]["simd width"] == 16


def test_a_loader_without_the_tracing_api_is_said_once_and_in_the_trace(pti_double, ze, ze_paths, tmp_path, caplog):
    old = ctypes.CDLL(str(ze_paths[1]))
    api, trace = session_trace(pti_double, ze, tmp_path, loader=old)
    why = trace["xpu_kernel_resources"]["unavailable"]
    assert "zelTracerCreate" in why and "tracing layer" in why
    assert "simd width" not in kernels(trace, "relu_kernel")[0]["args"]
    assert sum("kernel resources" in r.getMessage() for r in caplog.records) <= 1


def test_mangled_creation_names_join_the_demangled_slices():
    rows = kernel_resources.ROW_DTYPE
    import numpy as np

    table = np.zeros(1, rows)
    table["format"] = 1
    table["max_subgroup_size"] = 16
    join = kernel_resources.ResourceJoin(table, ["_Z10saxpy_implv"])
    names = {7: "saxpy_impl()"}
    args = join.kernel_args(np.array([7, 7], np.int32), names.__getitem__)
    assert args["simd width"].values.tolist() == [16, 16]
    assert join.metadata()["kernels"][0] == {**join.metadata()["kernels"][0], "name": "saxpy_impl()",
                                             "mangled": "_Z10saxpy_implv", "launches_in_trace": 2}
