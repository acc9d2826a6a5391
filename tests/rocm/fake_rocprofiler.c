/* A rocprofiler-sdk ABI test double: exports the functions xpuprof's ctypes code calls, with the
 * header's struct layouts and calling conventions, and plays a scripted HIP program
 * (fake_run_scenario) through the registered callbacks. It speaks either SDK generation
 * (fake_set_sdk_version): 0.x records, or 1.x records whose rocprofiler_correlation_id_t carries
 * `ancestor` (fwd.h of ROCm/rocm-systems 1b1610fc, rocprofiler-sdk 1.0.0): HIP API buffer records
 * of 64 bytes, callback records of 64 bytes passed by value, memory-copy records of 96 bytes. Enum values are deliberately NOT the
 * header's, so the tests prove xpuprof looks them up by name. Buffered records are delivered
 * from a foreign pthread at flush, like rocprofiler's own callback thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { uint64_t internal, external; } corr_t;
typedef struct { uint32_t x, y, z; } dim3_t;
typedef struct {
    uint64_t size, agent_id, queue_id, kernel_id, dispatch_id;
    uint32_t private_segment_size, group_segment_size;
    dim3_t workgroup_size, grid_size;
    uint8_t reserved_padding[56];
} dispatch_info_t;
typedef struct { uint64_t internal, external, ancestor; } corr_v1_t;
typedef struct { uint64_t size; int32_t kind, operation; corr_t corr; uint64_t start, end, thread_id; } hip_rec_t;
typedef struct { uint64_t size; int32_t kind, operation; corr_v1_t corr; uint64_t start, end, thread_id; } hip_rec_v1_t;
typedef struct { uint64_t size; int32_t kind, operation; corr_t corr; uint64_t thread_id, start, end; dispatch_info_t info; } disp_rec_t;
typedef struct { uint64_t size; int32_t kind, operation; corr_t corr; uint64_t thread_id, start, end, dst, src, bytes; } copy_rec_t;
typedef struct { copy_rec_t v0; uint64_t dst_address, src_address; } copy_rec_v1_t;
typedef struct { uint64_t size, num_records; corr_t corr; uint64_t start, end; dispatch_info_t info; } count_hdr_t;
typedef struct { uint64_t id; double value; uint64_t dispatch_id, user_data, agent_id; } counter_rec_t;
typedef struct { uint64_t size; corr_t corr; uint64_t start, end; dispatch_info_t info; } counting_data_t;
typedef struct { uint32_t category, kind; void *payload; } header_t;
typedef struct { uint64_t context_id, thread_id; corr_t corr; int32_t kind, operation, phase; void *payload; } cb_record_t;
typedef struct { uint64_t context_id, thread_id; corr_v1_t corr; int32_t kind, operation, phase; void *payload; } cb_record_v1_t;
typedef struct { const char *name; uint32_t handle; } client_id_t;
typedef struct { size_t size; int (*initialize)(void *, void *); void (*finalize)(void *); void *tool_data; } configure_result_t;
typedef struct { uint64_t size, id; int32_t type; uint32_t cores; uint8_t rest[64]; } agent_t;
typedef struct { uint64_t id; const char *name, *description, *block, *expression; } counter_info_t;

typedef void (*buffer_cb_t)(uint64_t, uint64_t, header_t **, size_t, void *, uint64_t);
typedef void (*tracing_cb_t)(cb_record_t, uint64_t *, void *);
typedef void (*tracing_cb_v1_t)(cb_record_v1_t, uint64_t *, void *);
typedef void (*counting_cb_t)(counting_data_t, uint64_t *, uint64_t *, void *);
typedef configure_result_t *(*configure_fn_t)(uint32_t, const char *, uint32_t, client_id_t *);
typedef int (*kind_cb_t)(int, void *);
typedef int (*op_cb_t)(int, int, void *);

enum { OK = 0, ERR = 1, LOCKED = 7, NOT_FOUND = 9 };
/* Scrambled on purpose (the real header numbers these 5, 11, 10, ...). */
enum { BK_HIP = 23, BK_DISPATCH = 31, BK_COPY = 17, CK_HIP = 4, CK_CODE = 9 };
enum { OP_LAUNCH = 40, OP_RECORD = 101, OP_WAIT = 102, OP_SYNC = 103, OP_MEMCPY = 44, OP_GETDEV = 5, SYM_REG = 3,
       OP_MODLAUNCH = 60, OP_EXTMODLAUNCH = 61, OP_GRAPH = 62, OP_STREAMSYNC = 63, OP_DEVSYNC = 64 };
enum { CP_H2D = 7, CP_D2H = 8 };
#define GPU0 0x6A0ULL
#define CPU0 0xC00ULL
#define MAXREC 256

static int configured = 0, init_ok = 0, active = 0, locked_after = 0;
static buffer_cb_t buffer_cb;
static tracing_cb_t hip_cb, code_cb;
static counting_cb_t counting_cb;
static int hip_ops_enabled[256];
static int buf_kinds[64];
static uint64_t config_counters[4][8], config_n[4];
static int n_configs = 0;
static header_t pending[MAXREC];
static size_t n_pending = 0;
static uint64_t ext_stack[16];
static int ext_top = 0;
static int delivered_from_other_thread = 0;
static pthread_t main_thread;
static client_id_t fake_client = {NULL, 1};
static int use_client_v2 = 0;
static uint32_t sdk_major = 0, sdk_minor = 6, sdk_patch = 0;
static uint64_t hip_record_size = 0; /* 0: the generation's own size; else written into `size` as is */
void fake_set_sdk_version(uint32_t major, uint32_t minor, uint32_t patch) {
    sdk_major = major, sdk_minor = minor, sdk_patch = patch;
}
void fake_set_hip_record_size(uint64_t size) { hip_record_size = size; }
int rocprofiler_get_version(uint32_t *major, uint32_t *minor, uint32_t *patch) {
    if (major) *major = sdk_major;
    if (minor) *minor = sdk_minor;
    if (patch) *patch = sdk_patch;
    return 0;
}
/* Calls a tracing callback with the record laid out as this SDK generation lays it out. */
static void call_tracing(tracing_cb_t cb, int kind, int op, int phase, uint64_t corr, uint64_t ext, void *payload) {
    uint64_t ud = 0;
    if (sdk_major >= 1) {
        cb_record_v1_t r = {0xC7, 4242, {corr, ext, corr ? corr - 1 : 0}, kind, op, phase, payload};
        ((tracing_cb_v1_t)(void *)cb)(r, &ud, NULL);
    } else {
        cb_record_t r = {0xC7, 4242, {corr, ext}, kind, op, phase, payload};
        cb(r, &ud, NULL);
    }
}
/* Newer rocprofiler-sdk (registration.h since the struct became "experimental"):
 * {size_t size; const char* name; const uint32_t handle;}. Chosen with fake_use_client_v2(1). */
typedef struct { size_t size; const char *name; uint32_t handle; } client_id_v2_t;
static client_id_v2_t fake_client_v2 = {sizeof(client_id_v2_t), NULL, 1};
/* static + accessors: every test loads its own copy RTLD_GLOBAL, so exported data would interpose. */
const char *fake_client_name(void) { return use_client_v2 ? fake_client_v2.name : fake_client.name; }
size_t fake_client_v2_size(void) { return fake_client_v2.size; }
void fake_use_client_v2(int on) { use_client_v2 = on; }

static uint64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const char *bk_name(int k) {
    return k == BK_HIP ? "HIP_RUNTIME_API" : k == BK_DISPATCH ? "KERNEL_DISPATCH" : k == BK_COPY ? "MEMORY_COPY"
         : k == 2 ? "HSA_CORE_API" : NULL;
}
/* Every other launch/copy API xpuprof knows, as operations 200 + i (fake_launch_by_name). */
static const char *more_ops[] = {"hipLaunchKernel_spt", "hipLaunchCooperativeKernel", "hipLaunchCooperativeKernel_spt",
                                 "hipExtLaunchKernel", "hipModuleLaunchCooperativeKernel", "hipGraphLaunch_spt",
                                 "hipMemcpyAsync_spt", "hipMemcpyWithStream", "hipMemsetAsync", "hipMemsetAsync_spt",
                                 "hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipMemcpyDtoDAsync", "hipMemcpy2DAsync",
                                 "hipEventRecord_spt", "hipStreamWaitEvent_spt", "hipStreamSynchronize_spt"};
#define N_MORE ((int)(sizeof more_ops / sizeof more_ops[0]))
static const char *hip_op_name(int op) {
    if (op >= 200 && op < 200 + N_MORE) return more_ops[op - 200];
    return op == OP_LAUNCH ? "hipLaunchKernel" : op == OP_RECORD ? "hipEventRecord" : op == OP_WAIT ? "hipStreamWaitEvent"
         : op == OP_SYNC ? "hipEventSynchronize" : op == OP_MEMCPY ? "hipMemcpyAsync" : op == OP_GETDEV ? "hipGetDevice"
         : op == OP_MODLAUNCH ? "hipModuleLaunchKernel" : op == OP_EXTMODLAUNCH ? "hipExtModuleLaunchKernel"
         : op == OP_GRAPH ? "hipGraphLaunch" : op == OP_STREAMSYNC ? "hipStreamSynchronize"
         : op == OP_DEVSYNC ? "hipDeviceSynchronize" : NULL;
}
static const int hip_op_list[] = {OP_GETDEV, OP_LAUNCH, OP_MEMCPY, OP_RECORD, OP_WAIT, OP_SYNC,
                                  OP_MODLAUNCH, OP_EXTMODLAUNCH, OP_GRAPH, OP_STREAMSYNC, OP_DEVSYNC};
#define N_HIP_OPS ((int)(sizeof hip_op_list / sizeof hip_op_list[0]))

int rocprofiler_iterate_buffer_tracing_kinds(kind_cb_t cb, void *d) {
    int ks[] = {2, BK_COPY, BK_HIP, BK_DISPATCH};
    for (int i = 0; i < 4; i++) if (cb(ks[i], d)) break;
    return OK;
}
int rocprofiler_query_buffer_tracing_kind_name(int k, const char **n, uint64_t *len) {
    *n = bk_name(k);
    if (len) *len = *n ? strlen(*n) : 0;
    return *n ? OK : NOT_FOUND;
}
int rocprofiler_iterate_buffer_tracing_kind_operations(int k, op_cb_t cb, void *d) {
    if (k == BK_HIP) {
        for (int i = 0; i < N_HIP_OPS; i++) if (cb(k, hip_op_list[i], d)) return OK;
        for (int i = 0; i < N_MORE; i++) if (cb(k, 200 + i, d)) return OK;
    }
    if (k == BK_COPY) { cb(k, CP_H2D, d); cb(k, CP_D2H, d); }
    return OK;
}
int rocprofiler_query_buffer_tracing_kind_operation_name(int k, int op, const char **n, uint64_t *len) {
    *n = k == BK_HIP ? hip_op_name(op) : k == BK_COPY ? (op == CP_H2D ? "MEMORY_COPY_HOST_TO_DEVICE"
                     : op == CP_D2H ? "MEMORY_COPY_DEVICE_TO_HOST" : NULL) : NULL;
    if (len) *len = *n ? strlen(*n) : 0;
    return *n ? OK : NOT_FOUND;
}
int rocprofiler_iterate_callback_tracing_kinds(kind_cb_t cb, void *d) {
    if (!cb(CK_HIP, d)) cb(CK_CODE, d);
    return OK;
}
int rocprofiler_query_callback_tracing_kind_name(int k, const char **n, uint64_t *len) {
    *n = k == CK_HIP ? "HIP_RUNTIME_API" : k == CK_CODE ? "CODE_OBJECT" : NULL;
    if (len) *len = *n ? strlen(*n) : 0;
    return *n ? OK : NOT_FOUND;
}
int rocprofiler_iterate_callback_tracing_kind_operations(int k, op_cb_t cb, void *d) {
    if (k == CK_HIP) {
        for (int i = 0; i < N_HIP_OPS; i++) if (cb(k, hip_op_list[i], d)) return OK;
        for (int i = 0; i < N_MORE; i++) if (cb(k, 200 + i, d)) return OK;
    }
    if (k == CK_CODE) { cb(k, 1, d); cb(k, SYM_REG, d); }
    return OK;
}
int rocprofiler_query_callback_tracing_kind_operation_name(int k, int op, const char **n, uint64_t *len) {
    *n = k == CK_HIP ? hip_op_name(op) : k == CK_CODE ? (op == SYM_REG ? "CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER"
                     : op == 1 ? "CODE_OBJECT_LOAD" : NULL) : NULL;
    if (len) *len = *n ? strlen(*n) : 0;
    return *n ? OK : NOT_FOUND;
}
const char *rocprofiler_get_status_name(int s) {
    return s == OK ? "ROCPROFILER_STATUS_SUCCESS" : s == LOCKED ? "ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED"
         : "ROCPROFILER_STATUS_ERROR";
}
const char *rocprofiler_get_status_string(int s) { return s == OK ? "Success" : "fake failure"; }

int rocprofiler_force_configure(configure_fn_t fn) {
    if (configured || locked_after) return LOCKED;
    configured = 1;
    main_thread = pthread_self();
    configure_result_t *r = use_client_v2
        ? ((configure_result_t * (*)(uint32_t, const char *, uint32_t, void *)) fn)(
              sdk_major * 10000 + sdk_minor * 100 + sdk_patch, "fake rocprofiler-sdk", 0, &fake_client_v2)
        : fn(sdk_major * 10000 + sdk_minor * 100 + sdk_patch, "fake rocprofiler-sdk", 0, &fake_client);
    if (!r || r->size < sizeof(configure_result_t)) return ERR;
    init_ok = r->initialize(NULL, r->tool_data) == 0;
    return OK;
}
int rocprofiler_create_context(uint64_t *ctx) { *ctx = 0xC7; return OK; }
int rocprofiler_create_buffer(uint64_t ctx, size_t size, size_t wm, int policy, buffer_cb_t cb, void *d, uint64_t *id) {
    if (policy != 2 || wm > size) return ERR;
    buffer_cb = cb;
    *id = 0xB0;
    return OK;
}
int rocprofiler_configure_buffer_tracing_service(uint64_t ctx, int kind, int *ops, size_t n, uint64_t buf) {
    if (!bk_name(kind) || buf != 0xB0) return NOT_FOUND;
    buf_kinds[kind] = 1;
    return OK;
}
int rocprofiler_configure_callback_tracing_service(uint64_t ctx, int kind, int *ops, size_t n, tracing_cb_t cb, void *d) {
    if (kind == CK_HIP) {
        hip_cb = cb;
        for (size_t i = 0; i < n; i++) if (ops[i] >= 0 && ops[i] < 256) hip_ops_enabled[ops[i]] = 1;
    } else if (kind == CK_CODE) code_cb = cb;
    else return NOT_FOUND;
    return OK;
}
int rocprofiler_start_context(uint64_t ctx) { if (!init_ok || ctx != 0xC7) return ERR; active = 1; return OK; }
int rocprofiler_stop_context(uint64_t ctx) { active = 0; return OK; }
int rocprofiler_get_timestamp(uint64_t *ts) { *ts = now(); return OK; }
int rocprofiler_get_thread_id(uint64_t *tid) { *tid = 4242; return OK; }
/* As the SDK: the context must be one it created and the thread one it named; a test can make
 * the next pushes/pops fail (fake_fail_external) to see the failures counted. */
static int ext_fail = 0;
void fake_fail_external(int n) { ext_fail = n; }
int rocprofiler_push_external_correlation_id(uint64_t ctx, uint64_t tid, uint64_t v) {
    if (ctx != 0xC7 || tid != 4242) return NOT_FOUND;
    if (ext_fail > 0) { ext_fail--; return ERR; }
    if (ext_top < 16) ext_stack[ext_top++] = v;
    return OK;
}
int rocprofiler_pop_external_correlation_id(uint64_t ctx, uint64_t tid, uint64_t *v) {
    if (ctx != 0xC7 || tid != 4242) return NOT_FOUND;
    if (ext_fail > 0) { ext_fail--; return ERR; }
    if (ext_top) { ext_top--; if (v) *v = ext_stack[ext_top]; }
    return OK;
}
typedef int (*agents_cb_t)(int, const void **, size_t, void *);
int rocprofiler_query_available_agents(int version, agents_cb_t cb, size_t agent_size, void *d) {
    static agent_t agents[2] = {{sizeof(agent_t), CPU0, 1, 8, {0}}, {sizeof(agent_t), GPU0, 2, 0, {0}}};
    if (agent_size > sizeof(agent_t) || version != 1) return ERR;
    const void *ptrs[2] = {&agents[0], &agents[1]};
    return cb(version, ptrs, 2, d);
}
typedef int (*counters_cb_t)(uint64_t, uint64_t *, size_t, void *);
int rocprofiler_iterate_agent_supported_counters(uint64_t agent, counters_cb_t cb, void *d) {
    uint64_t ids[3] = {11, 12, 13};
    if (agent != GPU0) return ERR;
    return cb(agent, ids, 3, d);
}
int rocprofiler_query_counter_info(uint64_t id, int version, void *out) {
    static const char *names[] = {"SQ_WAVES", "SQ_INSTS_VALU", "GRBM_GUI_ACTIVE"};
    if (id < 11 || id > 13 || version != 1) return NOT_FOUND;
    counter_info_t *ci = (counter_info_t *)out;
    ci->id = id;
    ci->name = names[id - 11];
    ci->description = ci->block = ci->expression = "";
    return OK;
}
int rocprofiler_create_counter_config(uint64_t agent, uint64_t *ids, size_t n, uint64_t *cfg) {
    if (agent != GPU0 || n == 0 || n > 8 || n_configs == 4) return ERR;
    memcpy(config_counters[n_configs], ids, n * sizeof(uint64_t));
    config_n[n_configs] = n;
    *cfg = 0xF00 + (uint64_t)n_configs++;
    return OK;
}
int rocprofiler_configure_buffer_dispatch_counting_service(uint64_t ctx, uint64_t buf, counting_cb_t cb, void *d) {
    counting_cb = cb;
    return OK;
}
int rocprofiler_query_record_counter_id(uint64_t instance, uint64_t *counter) { *counter = instance >> 8; return OK; }

/* ------------------------------------------------------------------ the scripted program */
static void push(uint32_t category, uint32_t kind, void *payload) {
    if (n_pending < MAXREC) pending[n_pending++] = (header_t){category, kind, payload};
}
static void *copy_of(const void *p, size_t n) { void *q = malloc(n); memcpy(q, p, n); return q; }

static uint64_t corr_next = 1;
static void hip_call(int op, const void *args, size_t args_size, uint64_t *corr_out) {
    uint64_t c = corr_next++;
    uint64_t ext = ext_top ? ext_stack[ext_top - 1] : 0;
    if (corr_out) *corr_out = c;
    if (!active) return;
    uint64_t t0 = now();
    if (hip_cb && hip_ops_enabled[op]) {
        unsigned char payload[8 + 128] = {0};
        uint64_t sz = sizeof payload;
        memcpy(payload, &sz, 8);
        memcpy(payload + 8, args, args_size);
        call_tracing(hip_cb, CK_HIP, op, 1, c, ext, payload);
        call_tracing(hip_cb, CK_HIP, op, 2, c, ext, payload);
    }
    if (!buf_kinds[BK_HIP]) return;
    if (sdk_major >= 1) {
        hip_rec_v1_t h = {sizeof(hip_rec_v1_t), BK_HIP, op, {c, ext, c - 1}, t0, now() + 1000, 4242};
        if (hip_record_size) h.size = hip_record_size;
        push(1, BK_HIP, copy_of(&h, sizeof h));
    } else {
        hip_rec_t h = {sizeof(hip_rec_t), BK_HIP, op, {c, ext}, t0, now() + 1000, 4242};
        if (hip_record_size) h.size = hip_record_size;
        push(1, BK_HIP, copy_of(&h, sizeof h));
    }
}

static void dispatch(uint64_t corr, uint64_t kernel, uint64_t queue, uint64_t ext) {
    static uint64_t dispatch_id = 0;
    uint64_t t = now();
    disp_rec_t d = {sizeof(disp_rec_t), BK_DISPATCH, 0, {corr, ext}, 4242, t + 2000, t + 9000,
                    {sizeof(dispatch_info_t), GPU0, queue, kernel, ++dispatch_id, 0, 1024, {64, 1, 1}, {4096, 1, 1}, {0}}};
    if (buf_kinds[BK_DISPATCH]) push(1, BK_DISPATCH, copy_of(&d, sizeof d));
    if (counting_cb) {
        counting_data_t cd = {sizeof cd, {corr, ext}, d.start, d.end, d.info};
        uint64_t cfg = 0, ud = 0;
        counting_cb(cd, &cfg, &ud, NULL);
        if (cfg >= 0xF00 && cfg < 0xF00 + (uint64_t)n_configs) {
            uint64_t k = cfg - 0xF00;
            count_hdr_t h = {sizeof h, config_n[k] * 2, {corr, ext}, d.start, d.end, d.info};
            push(3, 1, copy_of(&h, sizeof h));
            for (uint64_t i = 0; i < config_n[k]; i++)
                for (uint64_t inst = 0; inst < 2; inst++) { /* two dimension instances, summed by xpuprof */
                    counter_rec_t v = {(config_counters[k][i] << 8) | inst, (double)(kernel * 100 + i * 10 + inst),
                                       dispatch_id, 0, GPU0};
                    push(3, 2, copy_of(&v, sizeof v));
                }
        }
    }
}

/* The program: hipLaunchKernel(A); hipEventRecord(E, A); hipStreamWaitEvent(B, E);
 * hipLaunchKernel(B); hipMemcpyAsync(H2D, B); hipEventSynchronize(E); hipGetDevice;
 * hipEventRecord(E, null stream); hipStreamWaitEvent(A, E). */
void fake_run_scenario(void) {
    const uint64_t A = 0xA000, B = 0xB000, E = 0xE1, Q1 = 0x51, Q2 = 0x52;
    if (code_cb) {
        struct { uint64_t size, kernel_id, code_object_id; const char *name; uint64_t obj; uint32_t a, b, c, d; } sym[2] = {
            {sizeof sym[0], 1, 7, "_Z6vecAddPfS_i", 0, 0, 0, 0, 0}, {sizeof sym[0], 2, 7, "gemm_kernel", 0, 0, 0, 0, 0}};
        for (int i = 0; i < 2; i++) {
            call_tracing(code_cb, CK_CODE, SYM_REG, 1, 0, 0, &sym[i]);
        }
    }
    uint64_t c, ext;
    struct { const void *f; dim3_t nb, db; void **args; size_t shm; uint64_t stream; } launch = {0, {1, 1, 1}, {1, 1, 1}, 0, 0, A};
    ext = ext_top ? ext_stack[ext_top - 1] : 0;
    hip_call(OP_LAUNCH, &launch, sizeof launch, &c);
    if (active) dispatch(c, 1, Q1, ext);
    uint64_t rec[2] = {E, A};
    hip_call(OP_RECORD, rec, sizeof rec, NULL);
    uint64_t wait[3] = {B, E, 0};
    hip_call(OP_WAIT, wait, sizeof wait, NULL);
    launch.stream = B;
    hip_call(OP_LAUNCH, &launch, sizeof launch, &c);
    if (active) dispatch(c, 2, Q2, ext);
    struct { void *dst; const void *src; size_t n; int kind; uint64_t stream; } mc = {0, 0, 1 << 20, 1, B};
    hip_call(OP_MEMCPY, &mc, sizeof mc, &c);
    if (active && buf_kinds[BK_COPY]) {
        uint64_t t = now();
        copy_rec_t cp = {sizeof cp, BK_COPY, CP_H2D, {c, ext}, 4242, t + 100, t + 1100, GPU0, CPU0, 1 << 20};
        if (sdk_major >= 1) {
            copy_rec_v1_t cp1 = {cp, 0xD57, 0x5C0};
            cp1.v0.size = sizeof cp1;
            push(1, BK_COPY, copy_of(&cp1, sizeof cp1));
        } else
            push(1, BK_COPY, copy_of(&cp, sizeof cp));
    }
    uint64_t sync[1] = {E};
    hip_call(OP_SYNC, sync, sizeof sync, NULL);
    hip_call(OP_GETDEV, NULL, 0, NULL);
    uint64_t rec0[2] = {E, 0};
    hip_call(OP_RECORD, rec0, sizeof rec0, NULL);
    uint64_t wait2[3] = {A, E, 0};
    hip_call(OP_WAIT, wait2, sizeof wait2, NULL);
    /* The launch APIs of rocBLAS/hipBLASLt/MIOpen/Triton and graphs, each on its own HSA queue so
     * only the captured HIP stream (api_args.h offsets) can put the kernel on its stream's row. */
    const uint64_t C = 0xC000;
    struct { const void *f; uint32_t g[3], b[3], shm; uint64_t stream; void **params, **extra; } mod = {
        0, {1, 1, 1}, {64, 1, 1}, 0, B, 0, 0}; /* hipModuleLaunchKernel: stream@40 */
    hip_call(OP_MODLAUNCH, &mod, sizeof mod, &c);
    if (active) dispatch(c, 1, 0x61, ext);
    struct { const void *f; uint32_t g[3], b[3]; size_t shm; uint64_t stream; void **params, **extra; } extmod = {
        0, {1, 1, 1}, {64, 1, 1}, 0, C, 0, 0}; /* hipExtModuleLaunchKernel: stream@40 */
    hip_call(OP_EXTMODLAUNCH, &extmod, sizeof extmod, &c);
    if (active) dispatch(c, 2, 0x62, ext);
    uint64_t graph[2] = {0x6E, A}; /* hipGraphLaunch: {graphExec; stream@8} */
    hip_call(OP_GRAPH, graph, sizeof graph, &c);
    if (active) dispatch(c, 2, 0x63, ext);
    uint64_t ssync[1] = {C};
    hip_call(OP_STREAMSYNC, ssync, sizeof ssync, NULL);
    hip_call(OP_DEVSYNC, NULL, 0, NULL);
}

/* One call of a named HIP API whose argument struct holds `stream` at byte `stream_offset` (the
 * test takes the offset from the real api_args.h), followed by a kernel dispatch on its own HSA
 * queue: only the captured stream can put that kernel on its stream's row. Returns 0 if unknown. */
int fake_launch_by_name(const char *name, int stream_offset, uint64_t stream, uint64_t queue) {
    int op = -1;
    for (int i = 0; i < N_MORE; i++) if (!strcmp(more_ops[i], name)) op = 200 + i;
    if (op < 0 || stream_offset < 0 || stream_offset > 120) return 0;
    unsigned char args[128] = {0};
    memcpy(args + stream_offset, &stream, 8);
    uint64_t c, ext = ext_top ? ext_stack[ext_top - 1] : 0;
    hip_call(op, args, sizeof args, &c);
    if (active) dispatch(c, 1, queue, ext);
    return 1;
}

static void *deliver(void *arg) {
    header_t *ptrs[MAXREC];
    for (size_t i = 0; i < n_pending; i++) ptrs[i] = &pending[i];
    delivered_from_other_thread = !pthread_equal(pthread_self(), main_thread);
    buffer_cb(0xC7, 0xB0, ptrs, n_pending, NULL, 3 /* drop_count */);
    return NULL;
}

int rocprofiler_flush_buffer(uint64_t buf) {
    if (!buffer_cb || !n_pending) return OK;
    pthread_t t;
    if (pthread_create(&t, NULL, deliver, NULL) != 0) return ERR;
    pthread_join(t, NULL);
    for (size_t i = 0; i < n_pending; i++) free(pending[i].payload);
    n_pending = 0;
    return OK;
}

int fake_delivered_from_other_thread(void) { return delivered_from_other_thread; }
int fake_external_depth(void) { return ext_top; }
