/* pti_double_views.c: a PTI-ABI test double for the view API (what xpuprof's XPU backend calls).
 *
 * Records are produced by a scripted workload (xpd_workload) on a foreign thread that holds
 * xpd_lock while it calls the buffer callbacks; the calling thread takes xpd_lock too, so a
 * callback that needs the caller's GIL deadlocks, exactly like real PTI inside SYCL.
 * Record structs mirror intel/pti-gpu pti_view.h (the _v2 layouts PTI writes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pti_double.h"

/* ------------------------------------------------------------------ records (x86-64 layouts) */
typedef struct {
    uint32_t _view_kind; void *_queue_handle; void *_context_handle; const char *_name;
    const char *_source_file_name; uint64_t _source_line_number; uint64_t _kernel_id;
    uint32_t _correlation_id; uint32_t _thread_id; char _pci_address[16]; uint8_t _device_uuid[16];
    uint64_t _append_timestamp, _start_timestamp, _end_timestamp, _submit_timestamp;
    uint64_t _sycl_task_begin_timestamp, _sycl_enqk_begin_timestamp, _sycl_node_id, _sycl_queue_id;
    uint32_t _sycl_invocation_id; void *_device_handle; uint32_t _engine_ordinal, _engine_index;
} rec_kernel;

typedef struct {
    uint32_t _view_kind, _memcpy_type, _mem_src, _mem_dst; void *_queue_handle; void *_context_handle;
    const char *_name; char _pci_address[16]; uint8_t _device_uuid[16]; uint64_t _mem_op_id;
    uint32_t _correlation_id, _thread_id; uint64_t _append_timestamp, _start_timestamp, _end_timestamp,
    _submit_timestamp, _bytes, _sycl_queue_id; void *_device_handle; uint32_t _engine_ordinal, _engine_index;
} rec_memcpy;

typedef struct {
    uint32_t _view_kind, _memcpy_type, _mem_src, _mem_dst; void *_queue_handle; void *_context_handle;
    const char *_name; char _src_pci_address[16], _dst_pci_address[16]; uint8_t _src_uuid[16], _dst_uuid[16];
    uint64_t _mem_op_id; uint32_t _correlation_id, _thread_id; uint64_t _append_timestamp, _start_timestamp,
    _end_timestamp, _submit_timestamp, _bytes, _sycl_queue_id; void *_src_device_handle, *_dst_device_handle;
    uint32_t _engine_ordinal, _engine_index;
} rec_p2p;

typedef struct {
    uint32_t _view_kind, _mem_type; void *_queue_handle; void *_context_handle; const char *_name;
    char _pci_address[16]; uint8_t _device_uuid[16]; uint64_t _mem_op_id; uint32_t _correlation_id, _thread_id;
    uint64_t _append_timestamp, _start_timestamp, _end_timestamp, _submit_timestamp, _bytes, _value_for_set,
    _sycl_queue_id; void *_device_handle; uint32_t _engine_ordinal, _engine_index;
} rec_fill;

typedef struct {
    uint32_t _view_kind; uint64_t _start_timestamp, _end_timestamp; uint32_t _api_group, _api_id, _process_id,
    _thread_id, _correlation_id, _return_code;
} rec_api;

typedef struct { uint32_t _view_kind, _correlation_id; uint64_t _external_id; uint32_t _external_kind; } rec_ext;

typedef struct {
    uint32_t _view_kind, _synch_type; void *_context_handle, *_queue_handle, *_event_handle;
    uint64_t _start_timestamp, _end_timestamp; uint32_t _thread_id, _correlation_id, _number_wait_events,
    _return_code, _api_id, _api_group;
} rec_sync;

typedef struct {
    uint32_t _view_kind; uint64_t _overhead_start_timestamp_ns, _overhead_end_timestamp_ns;
    uint32_t _overhead_thread_id, _api_id; uint64_t _overhead_count, _overhead_duration_ns; uint32_t _overhead_kind;
} rec_overhead;

typedef struct {
    uint32_t _view_kind; uint64_t _start_timestamp, _end_timestamp; uint32_t _process_id, _thread_id;
    uint64_t _send_size, _recv_size, _communicator_id; const char *_name;
} rec_comms;

/* A kind PTI might add later; xpuprof must skip it with a count. */
#define FUTURE_KIND 13
typedef struct { uint32_t _view_kind; uint32_t pad; uint64_t a, b, c; } rec_future;

static size_t record_size(uint32_t kind) {
    switch (kind) {
        case 1: case 2: return sizeof(rec_kernel);
        case 3: case 6: return sizeof(rec_api);
        case 5: return sizeof(rec_overhead);
        case 7: return sizeof(rec_ext);
        case 8: return sizeof(rec_memcpy);
        case 9: return sizeof(rec_fill);
        case 10: return sizeof(rec_p2p);
        case 11: return sizeof(rec_sync);
        case 12: return sizeof(rec_comms);
        case FUTURE_KIND: return sizeof(rec_future);
        default: return 0;
    }
}

/* Layout facts for the tests: sizeof each record as compiled by the system compiler. */
size_t xpd_record_size(uint32_t kind) { return record_size(kind); }

#define OFF(T, f) ((size_t)offsetof(T, f))
/* Field offsets of the fields xpuprof reads, by "struct.field" name; (size_t)-1 if unknown. */
size_t xpd_field_offset(const char *what) {
    static const struct { const char *n; size_t o; } table[] = {
#define F(T, f) {#T "." #f, OFF(T, f)}
        F(rec_kernel, _queue_handle), F(rec_kernel, _context_handle), F(rec_kernel, _name),
        F(rec_kernel, _source_file_name), F(rec_kernel, _source_line_number), F(rec_kernel, _kernel_id),
        F(rec_kernel, _correlation_id), F(rec_kernel, _thread_id), F(rec_kernel, _pci_address),
        F(rec_kernel, _device_uuid), F(rec_kernel, _append_timestamp), F(rec_kernel, _start_timestamp),
        F(rec_kernel, _end_timestamp), F(rec_kernel, _submit_timestamp), F(rec_kernel, _sycl_task_begin_timestamp),
        F(rec_kernel, _sycl_enqk_begin_timestamp), F(rec_kernel, _sycl_node_id), F(rec_kernel, _sycl_queue_id),
        F(rec_kernel, _sycl_invocation_id), F(rec_kernel, _device_handle), F(rec_kernel, _engine_ordinal),
        F(rec_kernel, _engine_index),
        F(rec_memcpy, _memcpy_type), F(rec_memcpy, _mem_src), F(rec_memcpy, _mem_dst), F(rec_memcpy, _queue_handle),
        F(rec_memcpy, _name), F(rec_memcpy, _device_uuid), F(rec_memcpy, _mem_op_id), F(rec_memcpy, _correlation_id),
        F(rec_memcpy, _start_timestamp), F(rec_memcpy, _end_timestamp), F(rec_memcpy, _bytes),
        F(rec_memcpy, _sycl_queue_id), F(rec_memcpy, _device_handle), F(rec_memcpy, _engine_index),
        F(rec_p2p, _src_pci_address), F(rec_p2p, _dst_pci_address), F(rec_p2p, _src_uuid), F(rec_p2p, _dst_uuid),
        F(rec_p2p, _mem_op_id), F(rec_p2p, _correlation_id), F(rec_p2p, _start_timestamp), F(rec_p2p, _bytes),
        F(rec_p2p, _sycl_queue_id), F(rec_p2p, _src_device_handle), F(rec_p2p, _dst_device_handle),
        F(rec_p2p, _engine_index),
        F(rec_fill, _mem_type), F(rec_fill, _queue_handle), F(rec_fill, _device_uuid), F(rec_fill, _mem_op_id),
        F(rec_fill, _correlation_id), F(rec_fill, _start_timestamp), F(rec_fill, _bytes), F(rec_fill, _value_for_set),
        F(rec_fill, _sycl_queue_id), F(rec_fill, _device_handle), F(rec_fill, _engine_index),
        F(rec_api, _start_timestamp), F(rec_api, _end_timestamp), F(rec_api, _api_group), F(rec_api, _api_id),
        F(rec_api, _process_id), F(rec_api, _thread_id), F(rec_api, _correlation_id), F(rec_api, _return_code),
        F(rec_ext, _correlation_id), F(rec_ext, _external_id), F(rec_ext, _external_kind),
        F(rec_sync, _synch_type), F(rec_sync, _context_handle), F(rec_sync, _queue_handle), F(rec_sync, _event_handle),
        F(rec_sync, _start_timestamp), F(rec_sync, _end_timestamp), F(rec_sync, _thread_id),
        F(rec_sync, _correlation_id), F(rec_sync, _number_wait_events), F(rec_sync, _return_code),
        F(rec_sync, _api_id), F(rec_sync, _api_group),
        F(rec_overhead, _overhead_start_timestamp_ns), F(rec_overhead, _overhead_end_timestamp_ns),
        F(rec_overhead, _overhead_thread_id), F(rec_overhead, _api_id), F(rec_overhead, _overhead_count),
        F(rec_overhead, _overhead_duration_ns), F(rec_overhead, _overhead_kind),
        F(rec_comms, _start_timestamp), F(rec_comms, _process_id), F(rec_comms, _thread_id),
        F(rec_comms, _send_size), F(rec_comms, _recv_size), F(rec_comms, _communicator_id), F(rec_comms, _name),
#undef F
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].n, what) == 0) return table[i].o;
    return (size_t)-1;
}

/* ------------------------------------------------------------------ state */
pthread_mutex_t xpd_lock = PTHREAD_MUTEX_INITIALIZER;

typedef void (*req_fn)(unsigned char **, size_t *);
typedef void (*cmp_fn)(unsigned char *, size_t, size_t);
static req_fn on_request;
static cmp_fn on_complete;
static int enabled[16];
static unsigned char *cur_buf;
static size_t cur_size, cur_used;
static uint64_t lost_records;
static uint32_t next_correlation = 1;
static uint64_t next_kernel_id = 1, next_mem_op = 1;
static uint64_t ext_stack[8][64];
static int ext_depth[8];
static xpd_kernel_info *kernels;
static size_t kernel_count;
#define CLOCK_SHIFT_NS 100000000000000000ULL /* the double's clock domain: monotonic + 1e17 */

uint64_t xpd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + CLOCK_SHIFT_NS;
}
uint64_t xpd_clock_shift(void) { return CLOCK_SHIFT_NS; }
int xpd_view_enabled(uint32_t kind) { return kind < 16 && enabled[kind]; }
uint64_t xpd_lost_records(void) { return lost_records; }
size_t xpd_kernel_count(void) { return kernel_count; }
const xpd_kernel_info *xpd_kernel_at(size_t i) { return i < kernel_count ? &kernels[i] : NULL; }

static void complete_current_locked(void) {
    if (cur_buf && on_complete) on_complete(cur_buf, cur_size, cur_used);
    cur_buf = NULL;
    cur_size = cur_used = 0;
}

int xpd_emit_locked(const void *record, size_t size) {
    if (!on_request || !on_complete) { lost_records++; return -1; }
    if (!cur_buf || cur_size - cur_used < size) {
        complete_current_locked();
        on_request(&cur_buf, &cur_size);
        cur_used = 0;
        if (!cur_buf || cur_size < size) { cur_buf = NULL; cur_size = 0; lost_records++; return -1; }
    }
    memcpy(cur_buf + cur_used, record, size);
    cur_used += size;
    return 0;
}

/* ------------------------------------------------------------------ the PTI view API */
static const char *double_version = "0.99.0-xpuprof-double";
const char *ptiVersionString(void) { return double_version; }
/* A test can make the double claim a real release (NULL: back to the double's own version). */
/* Copied: the caller's string (a Python bytes object through ctypes) may be freed right after the call. */
void xpd_set_version(const char *version) {
    static char copy[64];
    if (!version) {
        double_version = "0.99.0-xpuprof-double";
        return;
    }
    snprintf(copy, sizeof copy, "%s", version);
    double_version = copy;
}

/* PTI 1.2.0's wording for memory types (older releases said MEMORY/HOST/DEVICE/SHARED): the
 * backend must take these names from the library, as Kineto does, not from its own table. */
const char *ptiViewMemoryTypeToString(uint32_t type) {
    static const char *names[] = {"Host (User Allocated)", "Host (Driver Allocated)", "Device", "Shared"};
    return type < 4 ? names[type] : "Unknown";
}

const char *ptiResultTypeToString(pti_result r) {
    switch (r) {
        case 0: return "PTI_SUCCESS";
        case 1: return "PTI_STATUS_END_OF_BUFFER";
        case 2: return "PTI_ERROR_NOT_IMPLEMENTED";
        case 3: return "PTI_ERROR_BAD_ARGUMENT";
        case 4: return "PTI_ERROR_NO_CALLBACKS_SET";
        case 5: return "PTI_ERROR_EXTERNAL_ID_QUEUE_EMPTY";
        case 7: return "PTI_ERROR_BAD_API_ID";
        case 200: return "PTI_ERROR_INTERNAL";
        case 250: return "PTI_ERROR_PC_SAMPLING_ALREADY_ENABLED";
        case 252: return "PTI_ERROR_PC_SAMPLING_ALREADY_CONFIGURED";
        case 253: return "PTI_ERROR_PC_SAMPLING_ALREADY_STARTED";
        case 254: return "PTI_ERROR_PC_SAMPLING_NOT_STARTED";
        case 255: return "PTI_ERROR_PC_SAMPLING_ALREADY_STOPPED";
        case 256: return "PTI_ERROR_PC_SAMPLING_NOT_STOPPED";
        case 257: return "PTI_ERROR_PC_SAMPLING_UNSUPPORTED";
        case 258: return "PTI_ERROR_PC_SAMPLING_CONFIGURATION_FAIL";
        default: return "PTI_ERROR_UNKNOWN_RESULT";
    }
}

pti_result ptiViewSetCallbacks(req_fn request, cmp_fn complete) {
    if (!request || !complete) return 3;
    pthread_mutex_lock(&xpd_lock);
    on_request = request;
    on_complete = complete;
    pthread_mutex_unlock(&xpd_lock);
    return 0;
}

pti_result ptiViewEnable(uint32_t kind) {
    if (!on_request) return 4;
    if (kind == 0 || kind == 2 || kind == 4 || kind > 12) return kind == 2 ? 2 : 3;
    enabled[kind] = 1;
    return 0;
}

pti_result ptiViewDisable(uint32_t kind) {
    if (kind == 0 || kind > 12) return 3;
    enabled[kind] = 0;
    return 0;
}

pti_result ptiViewGPULocalAvailable(void) { return 0; }
pti_result ptiViewEnableRuntimeApiClass(uint32_t on, uint32_t cls, uint32_t group) { return cls == 0 ? 3 : 0; }
pti_result ptiViewEnableDriverApiClass(uint32_t on, uint32_t cls, uint32_t group) { return cls == 0 ? 3 : 0; }
uint64_t ptiViewGetTimestamp(void) { return xpd_now(); }

pti_result ptiViewGetNextRecord(uint8_t *buffer, size_t valid_bytes, void **record) {
    if (!buffer || !record) return 3;
    uint8_t *next;
    if (!*record) {
        next = buffer;
    } else {
        uint32_t kind;
        memcpy(&kind, *record, sizeof kind);
        size_t sz = record_size(kind);
        if (!sz) return 3;
        next = (uint8_t *)*record + sz;
    }
    if (next >= buffer + valid_bytes) return 1;
    uint32_t kind;
    memcpy(&kind, next, sizeof kind);
    size_t sz = record_size(kind);
    if (!sz || next + sz > buffer + valid_bytes) return 3;
    *record = next;
    return 0;
}

pti_result ptiViewPushExternalCorrelationId(uint32_t kind, uint64_t id) {
    if (kind < 1 || kind > 5) return 3;
    pthread_mutex_lock(&xpd_lock);
    pti_result r = 0;
    if (ext_depth[kind] == 64) r = 200; else ext_stack[kind][ext_depth[kind]++] = id;
    pthread_mutex_unlock(&xpd_lock);
    return r;
}

pti_result ptiViewPopExternalCorrelationId(uint32_t kind, uint64_t *id) {
    if (kind < 1 || kind > 5) return 3;
    pthread_mutex_lock(&xpd_lock);
    pti_result r = 0;
    if (ext_depth[kind] == 0) r = 5;
    else {
        uint64_t v = ext_stack[kind][--ext_depth[kind]];
        if (id) *id = v;
    }
    pthread_mutex_unlock(&xpd_lock);
    return r;
}

static const struct { uint32_t group, id; const char *name; } api_names[] = {
    {3, 1, "urEnqueueKernelLaunch"}, {3, 2, "urEnqueueUSMMemcpy"}, {3, 3, "urEnqueueUSMFill"},
    {3, 4, "urQueueFinish"}, {1, 1, "zeCommandListAppendLaunchKernel"}, {1, 2, "zeCommandListAppendMemoryCopy"},
    {1, 3, "zeCommandListAppendMemoryFill"}, {1, 4, "zeCommandQueueSynchronize"}, {1, 5, "zeEventHostSynchronize"},
};

pti_result ptiViewGetApiIdName(uint32_t group, uint32_t id, const char **name) {
    if (!name) return 3;
    for (size_t i = 0; i < sizeof api_names / sizeof api_names[0]; i++)
        if (api_names[i].group == group && api_names[i].id == id) { *name = api_names[i].name; return 0; }
    return 7;
}

static void *flush_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&xpd_lock);
    complete_current_locked();
    pthread_mutex_unlock(&xpd_lock);
    return NULL;
}

/* Completes the current buffer from a foreign thread, like PTI's flush. */
pti_result ptiFlushAllViews(void) {
    if (!on_request) return 4;
    pthread_t t;
    if (pthread_create(&t, NULL, flush_thread, NULL) != 0) return 200;
    pthread_join(t, NULL);
    return 0;
}

/* ------------------------------------------------------------------ the scripted workload */
/* XPD_RUNTIME_TID0: runtime (ur*) records carry _thread_id 0, as intel-pti 1.2.0 writes them (its
 * Level Zero driver records carry the real thread). */
enum { XPD_FUTURE_RECORD = 1, XPD_P2P = 2, XPD_COMMS = 4, XPD_MANY_NAMES = 8, XPD_RUNTIME_TID0 = 16 };

typedef struct {
    uint32_t iterations, flags;
    uint32_t pid, tid; /* of the launching (calling) thread */
    pthread_mutex_t m;
    pthread_cond_t c;
    int holding;
} workload;

static const char *kernel_names[] = {"gemm_kernel<float>", "relu_kernel"};
static const char source_file[] = "gemm.cpp";
static const char l0_copy[] = "zeCommandListAppendMemoryCopy";
static const char l0_fill[] = "zeCommandListAppendMemoryFill";
static const char comm_name[] = "allreduce";

/* XPD_MANY_NAMES: kernels named from a table of distinct, realistically long names (templated
 * kernels of a real model), each a pointer the backend must resolve: what performance runs use. */
#define XPD_MANY_NAME_COUNT 3000
static char many_name_text[XPD_MANY_NAME_COUNT][96];

static const char *many_name(uint32_t i) {
    static int ready;
    if (!ready) {
        for (uint32_t k = 0; k < XPD_MANY_NAME_COUNT; k++)
            snprintf(many_name_text[k], sizeof many_name_text[k],
                     "at::native::xpu::kernel_%u<float, %u, at::native::Op%u>", k, k % 7, k % 13);
        ready = 1;
    }
    /* a skewed mix: a few hot kernels, a long tail of rare ones */
    uint32_t h = i * 2654435761u;
    return many_name_text[(h >> 8) % ((h & 3) ? 64 : XPD_MANY_NAME_COUNT)];
}
size_t xpd_many_name_count(void) { return XPD_MANY_NAME_COUNT; }

static void set_uuid(uint8_t *u, uint32_t dev) {
    for (int i = 0; i < 16; i++) u[i] = (uint8_t)(0xA0 + i);
    u[15] = (uint8_t)dev;
}

static void emit_api(uint32_t view, uint32_t group, uint32_t id, uint64_t s, uint64_t e, uint32_t corr,
                     const workload *w) {
    if (!xpd_view_enabled(view)) return;
    rec_api r = {0};
    r._view_kind = view; r._start_timestamp = s; r._end_timestamp = e; r._api_group = group; r._api_id = id;
    r._process_id = w->pid; r._correlation_id = corr;
    r._thread_id = (view == 6 && (w->flags & XPD_RUNTIME_TID0)) ? 0 : w->tid;
    xpd_emit_locked(&r, sizeof r);
}

static void emit_external(uint32_t corr) {
    if (!xpd_view_enabled(7)) return;
    for (uint32_t kind = 2; kind <= 3; kind++) { /* CUSTOM_0, CUSTOM_1 */
        if (!ext_depth[kind]) continue;
        rec_ext r = {0};
        r._view_kind = 7; r._correlation_id = corr; r._external_id = ext_stack[kind][ext_depth[kind] - 1];
        r._external_kind = kind;
        xpd_emit_locked(&r, sizeof r);
    }
}

static void run_locked(workload *w) {
    /* Scripted times end before "now", so every record lies in the past when it is read. */
    uint64_t base = xpd_now() - ((uint64_t)w->iterations + 1) * 10000;
    free(kernels);
    kernels = calloc(w->iterations ? w->iterations : 1, sizeof *kernels);
    kernel_count = 0;
    for (uint32_t i = 0; i < w->iterations; i++) {
        uint64_t t0 = base + (uint64_t)i * 10000;
        uint32_t dev = i % 2;
        /* kernel launch */
        uint32_t corr = next_correlation++;
        emit_external(corr);
        emit_api(6, 3, 1, t0, t0 + 3000, corr, w);
        emit_api(3, 1, 1, t0 + 500, t0 + 2500, corr, w);
        if (xpd_view_enabled(1)) {
            rec_kernel k = {0};
            k._view_kind = 1; k._queue_handle = (void *)(uintptr_t)(0x1000 + dev);
            k._context_handle = (void *)(uintptr_t)0xC0;
            k._name = (w->flags & XPD_MANY_NAMES) ? many_name(i) : kernel_names[i % 2];
            k._source_file_name = (i % 2) ? NULL : source_file; k._source_line_number = (i % 2) ? 0 : 42;
            k._kernel_id = next_kernel_id++; k._correlation_id = corr; k._thread_id = w->tid;
            memcpy(k._pci_address, "0000:3a:00.0", 13); set_uuid(k._device_uuid, dev);
            k._append_timestamp = t0 + 1000; k._submit_timestamp = t0 + 2000; k._start_timestamp = t0 + 4000;
            k._end_timestamp = t0 + 6000; k._sycl_task_begin_timestamp = t0 + 100;
            k._sycl_enqk_begin_timestamp = t0 + 200; k._sycl_node_id = 500 + i; k._sycl_queue_id = 7 + dev;
            k._sycl_invocation_id = i; k._device_handle = (void *)(uintptr_t)(0xD0 + dev);
            if (xpd_emit_locked(&k, sizeof k) == 0)
                kernels[kernel_count++] = (xpd_kernel_info){k._kernel_id, k._start_timestamp, k._end_timestamp,
                                                             k._sycl_queue_id, dev, k._name};
        }
        /* host -> device copy */
        corr = next_correlation++;
        emit_external(corr);
        emit_api(6, 3, 2, t0 + 6100, t0 + 6400, corr, w);
        if (xpd_view_enabled(8)) {
            rec_memcpy m = {0};
            m._view_kind = 8; m._memcpy_type = 6; m._mem_src = 1; m._mem_dst = 2;
            m._queue_handle = (void *)(uintptr_t)0x1000; m._context_handle = (void *)(uintptr_t)0xC0; m._name = l0_copy;
            set_uuid(m._device_uuid, 0); m._mem_op_id = next_mem_op++; m._correlation_id = corr; m._thread_id = w->tid;
            m._append_timestamp = t0 + 6200; m._submit_timestamp = t0 + 6300; m._start_timestamp = t0 + 6500;
            m._end_timestamp = t0 + 7500; m._bytes = 1 << 20; m._sycl_queue_id = 7;
            xpd_emit_locked(&m, sizeof m);
        }
        /* fill */
        corr = next_correlation++;
        emit_external(corr);
        emit_api(6, 3, 3, t0 + 7510, t0 + 7590, corr, w);
        if (xpd_view_enabled(9)) {
            rec_fill f = {0};
            f._view_kind = 9; f._mem_type = 2; f._queue_handle = (void *)(uintptr_t)0x1000;
            f._context_handle = (void *)(uintptr_t)0xC0; f._name = l0_fill; set_uuid(f._device_uuid, 0);
            f._mem_op_id = next_mem_op++; f._correlation_id = corr; f._thread_id = w->tid;
            f._start_timestamp = t0 + 7600; f._end_timestamp = t0 + 7800; f._bytes = 4096; f._value_for_set = 0;
            f._sycl_queue_id = 7;
            xpd_emit_locked(&f, sizeof f);
        }
        /* host waits for the queue */
        corr = next_correlation++;
        if (xpd_view_enabled(11)) {
            rec_sync s = {0};
            s._view_kind = 11; s._synch_type = 6; s._context_handle = (void *)(uintptr_t)0xC0;
            s._queue_handle = (void *)(uintptr_t)0x1000; s._event_handle = (void *)(uintptr_t)(0xE000 + i);
            s._start_timestamp = t0 + 8000; s._end_timestamp = t0 + 9000; s._thread_id = w->tid;
            s._correlation_id = corr; s._number_wait_events = 1; s._return_code = 0; s._api_id = 4; s._api_group = 1;
            xpd_emit_locked(&s, sizeof s);
        }
    }
    uint64_t end = base + (uint64_t)w->iterations * 10000;
    if (xpd_view_enabled(5)) {
        rec_overhead o = {0};
        o._view_kind = 5; o._overhead_start_timestamp_ns = base; o._overhead_end_timestamp_ns = end + 1000;
        o._overhead_thread_id = w->tid; o._overhead_count = 3; o._overhead_duration_ns = 250; o._overhead_kind = 3;
        xpd_emit_locked(&o, sizeof o);
    }
    if ((w->flags & XPD_P2P) && xpd_view_enabled(10)) {
        rec_p2p p = {0};
        uint32_t corr = next_correlation++;
        p._view_kind = 10; p._memcpy_type = 10; p._mem_src = 2; p._mem_dst = 2;
        p._queue_handle = (void *)(uintptr_t)0x1000; p._name = l0_copy; set_uuid(p._src_uuid, 0); set_uuid(p._dst_uuid, 1);
        p._mem_op_id = next_mem_op++; p._correlation_id = corr; p._thread_id = w->tid;
        p._start_timestamp = end + 100; p._end_timestamp = end + 900; p._bytes = 8192; p._sycl_queue_id = 7;
        xpd_emit_locked(&p, sizeof p);
    }
    if ((w->flags & XPD_COMMS) && xpd_view_enabled(12)) {
        rec_comms c = {0};
        c._view_kind = 12; c._start_timestamp = end + 1000; c._end_timestamp = end + 2000; c._process_id = w->pid;
        c._thread_id = w->tid; c._send_size = 64; c._recv_size = 64; c._communicator_id = 77; c._name = comm_name;
        xpd_emit_locked(&c, sizeof c);
    }
    if (w->flags & XPD_FUTURE_RECORD) {
        rec_future f = {FUTURE_KIND, 0, 1, 2, 3};
        xpd_emit_locked(&f, sizeof f);
    }
}

static pthread_t collector;
static int collector_running;

static void *collector_main(void *arg) {
    workload *w = arg;
    pthread_mutex_lock(&xpd_lock);
    pthread_mutex_lock(&w->m);
    w->holding = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
    run_locked(w);           /* calls the buffer callbacks while holding xpd_lock */
    pthread_mutex_unlock(&xpd_lock);
    return NULL;
}

/* Runs the scripted workload. The records are produced by a foreign thread holding xpd_lock;
 * this (calling) thread then takes xpd_lock, as a SYCL call into PTI would. If the callbacks
 * cannot finish (they wait on something this thread holds, e.g. the GIL), the wait gives up
 * after timeout_ms and ETIMEDOUT is returned: a detected deadlock (call xpd_wait_idle later,
 * with the GIL released, to let the collector finish). */
int xpd_workload(uint32_t iterations, uint32_t flags, uint32_t timeout_ms) {
    static workload w;
    if (collector_running) return EBUSY;
    w.iterations = iterations; w.flags = flags;
    w.pid = (uint32_t)getpid(); w.tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    w.holding = 0;
    if (pthread_create(&collector, NULL, collector_main, &w) != 0) return EAGAIN;
    collector_running = 1;
    pthread_mutex_lock(&w.m);
    while (!w.holding) pthread_cond_wait(&w.c, &w.m);
    pthread_mutex_unlock(&w.m);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    int rc = pthread_mutex_timedlock(&xpd_lock, &deadline);
    if (rc != 0) return rc;  /* collector stuck in a callback: deadlock detected */
    pthread_mutex_unlock(&xpd_lock);
    pthread_join(collector, NULL);
    collector_running = 0;
    return 0;
}

/* Joins a collector left running by a timed-out xpd_workload. */
int xpd_wait_idle(void) {
    if (collector_running) {
        pthread_join(collector, NULL);
        collector_running = 0;
    }
    return 0;
}

/* pti_double_pcsampling.c, when linked in; hidden, so this library's own (never another double's) */
extern void pcs_double_reset_local(void) __attribute__((weak, visibility("hidden")));

/* Forget all state between tests. */
void xpd_reset(void) {
    xpd_wait_idle();
    if (pcs_double_reset_local) pcs_double_reset_local();
    double_version = "0.99.0-xpuprof-double"; /* not through xpd_set_version: another double could answer */
    pthread_mutex_lock(&xpd_lock);
    complete_current_locked();
    on_request = NULL;
    on_complete = NULL;
    memset(enabled, 0, sizeof enabled);
    memset(ext_depth, 0, sizeof ext_depth);
    lost_records = 0;
    next_correlation = 1;
    next_kernel_id = next_mem_op = 1;
    pthread_mutex_unlock(&xpd_lock);
}
