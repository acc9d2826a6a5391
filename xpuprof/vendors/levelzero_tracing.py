"""The Level Zero loader's tracing layer and the kernel facts it lets a tool read (oneapi-src/level-zero
v1.32.0: ``include/layers/zel_tracing_api.h``, ``zel_tracing_register_cb.h``, ``include/ze_api.h``).

A tracer (``zelTracerCreate``) registers callbacks around API calls; ``zelEnableTracingLayer`` turns
the layer on at run time (else only ``ZE_ENABLE_TRACING_LAYER=1`` at process start does). xpuprof's
C component (``xpuprof._native.zekernels``) registers epilogues for ``zeModuleCreate`` (the module's
format: SPIR-V is compiled just in time, native binaries ahead of time), ``zeModuleDestroy`` and
``zeKernelCreate``, where it reads ``zeKernelGetProperties`` with the Intel register-file-size
extension chained in (what unitrace's ``-d`` shows). Layouts (x86-64):

- ``ze_kernel_properties_t`` (96 bytes): stype u32 @0, pNext @8, numKernelArgs @16,
  requiredGroupSizeX/Y/Z @20/24/28, requiredNumSubGroups @32, requiredSubgroupSize @36,
  maxSubgroupSize @40, maxNumSubgroups @44, localMemSize @48, privateMemSize @52, spillMemSize @56,
  uuid {kid[16], mid[16]} @60.
- ``zex_kernel_register_file_size_exp_t`` (24 bytes): stype @0 (0x00030012), pNext @8, registerFileSize u32 @16.
- ``ze_module_desc_t``: stype @0, pNext @8, format u32 @16 (0 IL_SPIRV, 1 NATIVE), inputSize @24, ...
- ``ze_kernel_desc_t``: stype @0, pNext @8, flags u32 @16, pKernelName @24.
- params of the callbacks: ``ze_module_create_params_t`` {phContext, phDevice, pdesc, pphModule,
  pphBuildLog}, ``ze_kernel_create_params_t`` {phModule, pdesc, pphKernel}, ``ze_module_destroy_params_t``
  {phModule}; a callback is ``void (params*, ze_result_t, void* tracer user data, void** instance data)``.
"""
from __future__ import annotations

import ctypes

u8, u32 = ctypes.c_uint8, ctypes.c_uint32

ZE_STRUCTURE_TYPE_CONTEXT_DESC = 0xD
ZE_STRUCTURE_TYPE_MODULE_DESC = 0x1B
ZE_STRUCTURE_TYPE_KERNEL_DESC = 0x1D
ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES = 0x1E
ZEX_STRUCTURE_KERNEL_REGISTER_FILE_SIZE_EXP = 0x00030012
ZEL_STRUCTURE_TYPE_TRACER_DESC = 0x1
ZE_MODULE_FORMAT_IL_SPIRV = 0  # compiled by the driver at zeModuleCreate: JIT
ZE_MODULE_FORMAT_NATIVE = 1  # a device binary: AOT
MODULE_FORMATS = {ZE_MODULE_FORMAT_IL_SPIRV: "JIT", ZE_MODULE_FORMAT_NATIVE: "AOT"}
NOT_REPORTED = 0xFFFFFFFF  # what the C tracer leaves in a field the driver did not fill


class ze_kernel_uuid_t(ctypes.Structure):
    _fields_ = [("kid", u8 * 16), ("mid", u8 * 16)]


class ze_kernel_properties_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("numKernelArgs", u32), ("requiredGroupSizeX", u32),
                ("requiredGroupSizeY", u32), ("requiredGroupSizeZ", u32), ("requiredNumSubGroups", u32),
                ("requiredSubgroupSize", u32), ("maxSubgroupSize", u32), ("maxNumSubgroups", u32),
                ("localMemSize", u32), ("privateMemSize", u32), ("spillMemSize", u32), ("uuid", ze_kernel_uuid_t)]


class zex_kernel_register_file_size_exp_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("registerFileSize", u32)]


class ze_context_desc_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("flags", u32)]


class ze_module_desc_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("format", u32), ("inputSize", ctypes.c_size_t),
                ("pInputModule", ctypes.c_void_p), ("pBuildFlags", ctypes.c_char_p), ("pConstants", ctypes.c_void_p)]


class ze_kernel_desc_t(ctypes.Structure):
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("flags", u32), ("pKernelName", ctypes.c_char_p)]


# What xpuprof._native.zekernels needs from the loader, by name (all exported by loader v1.32; the
# register-callback API since loader 1.6). zelEnableTracingLayer is optional (ZE_ENABLE_TRACING_LAYER=1).
TRACER_FUNCTIONS = ("zelTracerCreate", "zelTracerDestroy", "zelTracerSetEnabled",
                    "zelTracerModuleCreateRegisterCallback", "zelTracerModuleDestroyRegisterCallback",
                    "zelTracerKernelCreateRegisterCallback", "zeKernelGetProperties")
OPTIONAL_FUNCTIONS = ("zelEnableTracingLayer",)


def function_addresses(loader: ctypes.CDLL) -> tuple[dict[str, int], list[str]]:
    """(name -> C address of each tracer function the loader exports, the required ones it lacks)."""
    found, missing = {}, []
    for name in TRACER_FUNCTIONS + OPTIONAL_FUNCTIONS:
        fn = getattr(loader, name, None)
        if fn is None:
            if name in TRACER_FUNCTIONS:
                missing.append(name)
            continue
        found[name] = ctypes.cast(fn, ctypes.c_void_p).value
    return found, missing
