/* pti_double_pcsampling.c: the PC sampling (EU stall sampling) part of the PTI-ABI test double.
 *
 * Structs mirror intel/pti-gpu sdk/include/pti/pti_pc_sampling.h at fdc44f65 (intel-pti 1.2.0); the
 * state machine and result codes follow that header (enable -> configure -> start -> stop -> queries
 * -> disable; 250-258 on misuse; PTI_ERROR_BAD_ARGUMENT for a _struct_size that is too small).
 *
 * Data: at stop, one "kernel handle" per distinct kernel name the view double's last workload emitted
 * (xpd_kernel_at), or the script of pcs_double_script. Instruction i of kernel k has samples
 * sample_value(k, i, r) for stall reason r; two of every three instructions carry source info (two
 * instructions per source line), the third none (PTI leaves _source_info NULL where it has none).
 *
 * Test controls: pcs_double_set_mode (supported, unsupported: 257 with PTI's stderr text, a future
 * _struct_size written back, dropped samples), pcs_double_script, pcs_double_period, layout facts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pti_double.h"

typedef struct { size_t _struct_size; const char *_name; const char *_description; } reason_info_t;
typedef struct { const char *_file_path; uint64_t _file_line; } source_info_t;
typedef struct { uint64_t _instruction_offset; source_info_t *_source_info; } instruction_t;
typedef struct {
    size_t _struct_size; void *_device; uint64_t _kernel_handle; const char *_kernel_name; size_t _reason_count;
    size_t _instructions_with_samples_count; uint64_t *_aggregated_samples;
} kernel_info_t;
typedef struct {
    size_t _struct_size; void *_device; uint32_t _samples_dropped; uint64_t _total_sample_count; uint64_t _total_pc_count;
} device_status_t;

extern size_t xpd_kernel_count(void) __attribute__((weak));
extern const xpd_kernel_info *xpd_kernel_at(size_t index) __attribute__((weak));

enum { MODE_SUPPORTED = 0, MODE_UNSUPPORTED = 1, MODE_FUTURE_SIZE = 2, MODE_DROPPED = 3 };
enum { S_NONE, S_ENABLED, S_CONFIGURED, S_STARTED, S_STOPPED };
#define DEVICE_HANDLE ((void *)(uintptr_t)0x1000)
#define HANDLE ((void *)(uintptr_t)0xBEEF)

static const char *kReasons[][2] = {
    {"Active", "Percentage of time the EU was active"},
    {"ControlStall", "Stalled on control flow (branch, jump)"},
    {"PipeStall", "Stalled on the ALU pipeline"},
    {"SendStall", "Stalled on a send (memory) message"},
    {"DistStall", "Stalled on the distance dependency"},
    {"SbidStall", "Stalled waiting on a software scoreboard id (memory result)"},
    {"SyncStall", "Stalled on a barrier or fence"},
    {"InstrFetchStall", "Stalled fetching instructions"},
    {"OtherStall", "Stalled for another reason"},
};
enum { R = sizeof kReasons / sizeof kReasons[0] };
static const char *kFiles[] = {"/src/kernels/gemm.cpp", "/src/kernels/relu.cpp"};

typedef struct {
    char *name;
    size_t ninstr;
    instruction_t *instr;
    source_info_t *sources;
    uint64_t *samples; /* ninstr x R */
    uint64_t aggregated[R];
} kernel_t;

static int g_mode, g_state;
static uint32_t g_period;
static size_t g_default_instr = 6, g_script_kernels, g_script_instr;
static kernel_t *g_kernels;
static size_t g_nkernels;

/* ------------------------------------------------------------------ test controls */
void pcs_double_set_mode(int mode) { g_mode = mode; }
void pcs_double_set_instructions(size_t n) { g_default_instr = n; }
void pcs_double_script(size_t kernels, size_t instructions) { g_script_kernels = kernels; g_script_instr = instructions; }
uint32_t pcs_double_period(void) { return g_period; }
int pcs_double_state(void) { return g_state; }
uint64_t pcs_double_sample(size_t k, size_t i, size_t r);

size_t pcs_double_sizeof(const char *what) {
    if (!strcmp(what, "stall_reason_info")) return sizeof(reason_info_t);
    if (!strcmp(what, "source_info")) return sizeof(source_info_t);
    if (!strcmp(what, "instruction")) return sizeof(instruction_t);
    if (!strcmp(what, "kernel_info")) return sizeof(kernel_info_t);
    if (!strcmp(what, "device_status")) return sizeof(device_status_t);
    return 0;
}

#define OFF(T, f) ((size_t)offsetof(T, f))
size_t pcs_double_offset(const char *what) {
    static const struct { const char *n; size_t o; } table[] = {
#define F(T, f) {#T "." #f, OFF(T, f)}
        F(reason_info_t, _name), F(reason_info_t, _description), F(source_info_t, _file_line),
        F(instruction_t, _source_info), F(kernel_info_t, _device), F(kernel_info_t, _kernel_handle),
        F(kernel_info_t, _kernel_name), F(kernel_info_t, _reason_count),
        F(kernel_info_t, _instructions_with_samples_count), F(kernel_info_t, _aggregated_samples),
        F(device_status_t, _device), F(device_status_t, _samples_dropped), F(device_status_t, _total_sample_count),
        F(device_status_t, _total_pc_count),
#undef F
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].n, what)) return table[i].o;
    return (size_t)-1;
}

/* Samples of instruction i of kernel k for reason r: a skewed, deterministic mix (some zero). */
uint64_t pcs_double_sample(size_t k, size_t i, size_t r) {
    uint64_t h = (uint64_t)(k + 1) * 2654435761u ^ (uint64_t)(i + 1) * 40503u ^ (uint64_t)(r + 1) * 9176u;
    uint64_t v = (h >> 5) % 23;
    if (r == 5) v += 3 * (i % 4); /* SbidStall dominates some instructions */
    return v < 4 ? 0 : v;
}

static void free_kernels(void) {
    for (size_t k = 0; k < g_nkernels; k++) {
        free(g_kernels[k].name);
        free(g_kernels[k].instr);
        free(g_kernels[k].sources);
        free(g_kernels[k].samples);
    }
    free(g_kernels);
    g_kernels = NULL;
    g_nkernels = 0;
}

static int add_kernel(const char *name, size_t ninstr) {
    kernel_t *grown = realloc(g_kernels, (g_nkernels + 1) * sizeof *g_kernels);
    if (!grown) return -1;
    g_kernels = grown;
    size_t k = g_nkernels++;
    kernel_t *kn = &g_kernels[k];
    memset(kn, 0, sizeof *kn);
    kn->name = strdup(name);
    kn->ninstr = ninstr;
    kn->instr = calloc(ninstr ? ninstr : 1, sizeof *kn->instr);
    kn->sources = calloc(ninstr ? ninstr : 1, sizeof *kn->sources);
    kn->samples = calloc(ninstr * R + 1, sizeof *kn->samples);
    if (!kn->name || !kn->instr || !kn->sources || !kn->samples) return -1;
    for (size_t i = 0; i < ninstr; i++) {
        kn->instr[i]._instruction_offset = 0x100 + 0x10 * i;
        if (i % 3 != 2) {
            kn->sources[i]._file_path = kFiles[k % 2];
            kn->sources[i]._file_line = 10 + i / 2;
            kn->instr[i]._source_info = &kn->sources[i];
        }
        for (size_t r = 0; r < R; r++) {
            uint64_t v = pcs_double_sample(k, i, r);
            kn->samples[i * R + r] = v;
            kn->aggregated[r] += v;
        }
    }
    return 0;
}

static void snapshot(void) {
    free_kernels();
    if (g_script_kernels) {
        char name[64];
        for (size_t k = 0; k < g_script_kernels; k++) {
            snprintf(name, sizeof name, "scripted_kernel_%zu", k);
            add_kernel(name, g_script_instr);
        }
        return;
    }
    size_t n = (xpd_kernel_count && xpd_kernel_at) ? xpd_kernel_count() : 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = xpd_kernel_at(i)->name;
        int seen = 0;
        for (size_t k = 0; k < g_nkernels && !seen; k++) seen = !strcmp(g_kernels[k].name, name);
        if (!seen) add_kernel(name, g_default_instr);
    }
}

static kernel_t *find(uint64_t handle) {
    size_t k = (size_t)(handle - 0xC0DE0000u);
    return handle >= 0xC0DE0000u && k < g_nkernels ? &g_kernels[k] : NULL;
}

/* Hidden: the view double's xpd_reset calls this one, never another double's loaded with RTLD_GLOBAL. */
__attribute__((visibility("hidden"))) void pcs_double_reset_local(void) {
    free_kernels();
    g_mode = 0; g_state = S_NONE; g_period = 0; g_default_instr = 6; g_script_kernels = g_script_instr = 0;
}
void pcs_double_reset(void) { pcs_double_reset_local(); }

/* ------------------------------------------------------------------ the PC sampling API */
pti_result ptiPcSamplingEnable(void **handle) {
    if (!handle) return 3;
    if (g_mode == MODE_UNSUPPORTED) {
        fprintf(stderr, "[warning] [pti_pc_sampling_l0.h:180] FindEUStallMetricGroupHandle: EuStallSampling metric "
                        "group not found for device, cannot support PC sampling for the device: 0x1000\n"
                        "[error] [pti_pc_sampling_internal.h:544] Create: no devices supporting PC Sampling found.\n"
                        "Set the applicable Intel GPU driver paranoid mode to 0:\n"
                        "  i915: /proc/sys/dev/i915/perf_stream_paranoid\n"
                        "  xe:   /proc/sys/dev/xe/observation_paranoid\n");
        *handle = NULL;
        return 257;
    }
    if (g_state != S_NONE) return 250;
    g_state = S_ENABLED;
    *handle = HANDLE;
    return 0;
}

pti_result ptiPcSamplingConfigure(void *handle, void *const *devices, size_t count, uint32_t period_ns) {
    if (handle != HANDLE) return 3;
    if (devices && count == 0) return 3;
    if (g_state != S_ENABLED) return 252;
    if (devices) {
        int any = 0;
        for (size_t i = 0; i < count; i++) any |= devices[i] == DEVICE_HANDLE;
        if (!any) return 258;
    }
    g_period = period_ns ? period_ns : 100000;
    g_state = S_CONFIGURED;
    return 0;
}

pti_result ptiPcSamplingQueryCollectionBufferSize(void *handle, size_t *size) { return 2; }
pti_result ptiPcSamplingSetCollectionBufferSize(void *handle, size_t size) { return 2; }

pti_result ptiPcSamplingStartCollection(void *handle) {
    if (handle != HANDLE) return 3;
    if (g_state == S_STARTED) return 253;
    if (g_state == S_STOPPED) return 255;
    if (g_state == S_ENABLED) g_period = 100000;
    g_state = S_STARTED;
    return 0;
}

pti_result ptiPcSamplingStopCollection(void *handle) {
    if (handle != HANDLE) return 3;
    if (g_state == S_STOPPED) return 255;
    if (g_state != S_STARTED) return 254;
    snapshot();
    g_state = S_STOPPED;
    return 0;
}

pti_result ptiPcSamplingGetStallReasons(void *handle, reason_info_t *reasons, size_t *count) {
    if (handle != HANDLE || !count) return 3;
    if (!reasons) { *count = R; return 0; }
    size_t n = *count < R ? *count : R;
    for (size_t i = 0; i < n; i++)
        if (reasons[i]._struct_size < sizeof(reason_info_t)) return 3;
    for (size_t i = 0; i < n; i++) {
        reasons[i]._name = kReasons[i][0];
        reasons[i]._description = kReasons[i][1];
    }
    *count = n;
    return 0;
}

pti_result ptiPcSamplingGetProfiledDevices(void *handle, void **devices, size_t *count) {
    if (handle != HANDLE || !count) return 3;
    if (g_state != S_STOPPED) return 256;
    if (devices && *count) devices[0] = DEVICE_HANDLE;
    *count = 1;
    return 0;
}

pti_result ptiPcSamplingGetObservedKernelHandles(void *handle, void *device, uint64_t *handles, size_t *count) {
    if (handle != HANDLE || !count || device != DEVICE_HANDLE) return 3;
    if (g_state != S_STOPPED) return 256;
    if (handles) {
        size_t n = *count < g_nkernels ? *count : g_nkernels;
        for (size_t k = 0; k < n; k++) handles[k] = 0xC0DE0000u + k;
        *count = n;
    } else {
        *count = g_nkernels;
    }
    return 0;
}

pti_result ptiPcSamplingGetObservedKernelInfo(void *handle, void *device, uint64_t kernel, kernel_info_t *info) {
    if (handle != HANDLE || device != DEVICE_HANDLE || !info || info->_struct_size < sizeof(kernel_info_t)) return 3;
    if (g_state != S_STOPPED) return 256;
    kernel_t *k = find(kernel);
    if (!k) return 3;
    info->_device = device;
    info->_kernel_handle = kernel;
    info->_kernel_name = k->name;
    info->_reason_count = R;
    info->_instructions_with_samples_count = k->ninstr;
    if (info->_aggregated_samples) memcpy(info->_aggregated_samples, k->aggregated, sizeof k->aggregated);
    if (g_mode == MODE_FUTURE_SIZE) info->_struct_size = 64; /* a release whose struct grew */
    return 0;
}

pti_result ptiPcSamplingGetSamplesPerInstruction(void *handle, void *device, uint64_t kernel, instruction_t *instr,
                                                  size_t ninstr, uint64_t *samples, size_t nsamples) {
    if (handle != HANDLE || device != DEVICE_HANDLE || !instr || !samples) return 3;
    if (g_state != S_STOPPED) return 256;
    kernel_t *k = find(kernel);
    if (!k) return 3;
    size_t n = ninstr < k->ninstr ? ninstr : k->ninstr;
    memcpy(instr, k->instr, n * sizeof *instr);
    size_t m = nsamples < n * R ? nsamples : n * R;
    memcpy(samples, k->samples, m * sizeof *samples);
    return 0;
}

pti_result ptiPcSamplingGetDeviceStatus(void *handle, void *device, device_status_t *status) {
    if (handle != HANDLE || device != DEVICE_HANDLE || !status || status->_struct_size < sizeof(device_status_t))
        return 3;
    if (g_state != S_STOPPED) return 256;
    uint64_t total = 0, pcs = 0;
    for (size_t k = 0; k < g_nkernels; k++) {
        pcs += g_kernels[k].ninstr;
        for (size_t r = 0; r < R; r++) total += g_kernels[k].aggregated[r];
    }
    status->_device = device;
    status->_samples_dropped = g_mode == MODE_DROPPED;
    status->_total_sample_count = total;
    status->_total_pc_count = pcs;
    return 0;
}

pti_result ptiPcSamplingDisable(void *handle) {
    if (handle != HANDLE) return 3;
    free_kernels();
    g_state = S_NONE;
    return 0;
}
