"""Emit a C program printing sizeof/offsetof of the rocprofiler-sdk records xpuprof mirrors.

The typedef'd records are cut verbatim out of the real headers (fwd.h is included as is) and the
HIP argument structs out of hip/api_args.h (their HIP handle types stubbed as pointers, dim3 as
three u32), so no HIP install is needed. How rocprofiler_sdk_layouts.json was made:

    git -C rocm-systems archive <commit> projects/rocprofiler-sdk/source/include | tar -x
    I=projects/rocprofiler-sdk/source/include; cp $I/rocprofiler-sdk/version.h.in $I/rocprofiler-sdk/version.h
    python print_layouts.py $I > p.c && gcc -I$I p.c -o p && ./p
"""
import re, sys
inc = sys.argv[1] + "/rocprofiler-sdk/"
def typedef(path, name):
    if path is None:  # declared in fwd.h, which the program includes
        return ""
    try:
        src = open(inc + path).read()
    except FileNotFoundError:
        return None
    end = re.search(r"\}\s*%s;" % name, src)
    start = src.rfind("typedef struct", 0, end.start())
    return src[start:end.end()]
def member(name):
    src = open(inc + "hip/api_args.h").read()
    # the anonymous struct ending in "} name;" at union-member indentation
    m = re.search(r"\n    struct\n    \{\n((?:(?!\n    struct\n).)*?)\n    \} %s;" % re.escape(name), src, re.S)
    return m.group(1) if m else None
structs = [(None, "rocprofiler_callback_tracing_record_t"),
           ("buffer_tracing.h", "rocprofiler_buffer_tracing_hip_api_record_t"),
           ("buffer_tracing.h", "rocprofiler_buffer_tracing_kernel_dispatch_record_t"),
           ("buffer_tracing.h", "rocprofiler_buffer_tracing_memory_copy_record_t"),
           ("callback_tracing.h", "rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t"),
           ("dispatch_counting_service.h", "rocprofiler_dispatch_counting_service_data_t"),
           ("dispatch_counting_service.h", "rocprofiler_dispatch_counting_service_record_t"),
           ]
fields = {
 "rocprofiler_callback_tracing_record_t": ["correlation_id", "kind", "operation", "phase", "payload"],
 "rocprofiler_buffer_tracing_hip_api_record_t": ["correlation_id", "start_timestamp", "end_timestamp", "thread_id"],
 "rocprofiler_buffer_tracing_kernel_dispatch_record_t": ["correlation_id", "thread_id", "start_timestamp", "end_timestamp", "dispatch_info"],
 "rocprofiler_buffer_tracing_memory_copy_record_t": ["correlation_id", "thread_id", "start_timestamp", "end_timestamp", "dst_agent_id", "src_agent_id", "bytes"],
 "rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t": ["kernel_id", "kernel_name"],
 "rocprofiler_dispatch_counting_service_data_t": ["correlation_id", "start_timestamp", "end_timestamp", "dispatch_info"],
 "rocprofiler_dispatch_counting_service_record_t": ["num_records", "correlation_id", "dispatch_info"],
}
hip = {"hipEventRecord": ["event", "stream"], "hipEventRecordWithFlags": ["event", "stream"],
       "hipEventRecord_spt": ["event", "stream"], "hipStreamWaitEvent": ["stream", "event"],
       "hipStreamWaitEvent_spt": ["stream", "event"], "hipEventSynchronize": ["event"],
       "hipStreamSynchronize": ["stream"], "hipLaunchKernel": ["stream"], "hipLaunchKernel_spt": ["stream"],
       "hipModuleLaunchKernel": ["stream"], "hipExtModuleLaunchKernel": ["stream"], "hipExtLaunchKernel": ["stream"],
       "hipLaunchCooperativeKernel": ["stream"], "hipGraphLaunch": ["stream"], "hipMemcpyWithStream": ["stream"],
       "hipMemsetAsync": ["stream"], "hipMemcpyAsync": ["stream"], "hipMemcpyAsync_spt": ["stream"],
       "hipMemsetAsync_spt": ["stream"], "hipModuleLaunchCooperativeKernel": ["stream"],
       "hipExtLaunchMultiKernelMultiDevice": [], "hipLaunchKernelExC": [], "hipDrvLaunchKernelEx": [],
       "hipMemcpy2DAsync": ["stream"], "hipMemcpyHtoDAsync": ["stream"], "hipMemcpyDtoHAsync": ["stream"],
       "hipMemcpyDtoDAsync": ["stream"], "hipGraphLaunch_spt": ["stream"], "hipLaunchCooperativeKernel_spt": ["stream"],
       "hipStreamSynchronize_spt": ["stream"]}
out = ['#include <rocprofiler-sdk/fwd.h>', '#include <stdio.h>', '#include <stddef.h>',
       'typedef void* hipStream_t; typedef void* hipEvent_t; typedef void* hipFunction_t; typedef void* hipGraphExec_t;',
       'typedef struct { uint32_t x, y, z; } dim3; typedef int hipMemcpyKind; typedef void* hipLaunchConfig_t;',
       'typedef void* hipLaunchParams; typedef void* HIP_LAUNCH_CONFIG; typedef void* hipDeviceptr_t;']
body = []
for path, name in structs:
    got = typedef(path, name)
    if got is None:
        body.append('printf("%s absent\\n");' % name); continue
    out.append(got)
    body.append('printf("%s size %%zu\\n", sizeof(%s));' % (name, name))
    for f in fields[name]:
        body.append('printf("  %s @%%zu size %%zu\\n", offsetof(%s, %s), sizeof(((%s*)0)->%s));' % (f, name, f, name, f))
for fn, fs in hip.items():
    b = member(fn)
    if b is None:
        body.append('printf("hip %s absent\\n");' % fn); continue
    out.append("struct args_%s {\n%s\n};" % (fn, b))
    parts = " ".join('%s@%%zu' % f for f in fs)
    vals = "".join(', offsetof(struct args_%s, %s)' % (fn, f) for f in fs)
    body.append('printf("hip %s %s\\n"%s);' % (fn, parts, vals))
out.append("int main(void){\n" + "\n".join(body) + "\nreturn 0;}")
print("\n".join(out))
