/* xpuprof._native.rocbuf: rocprofiler-sdk callbacks that never touch Python.
 *
 * rocprofiler-sdk calls its buffer callback from its own threads and its callback-tracing
 * callbacks on application (HIP) threads, in the middle of HIP calls. A Python (ctypes)
 * callback there would need the GIL while the thread holding the GIL may be blocked in that
 * very HIP call: a deadlock, as with PTI. So every callback lives here, in C:
 *
 *  - buffer_callback copies each record (header category/kind + payload) into one packed
 *    buffer and queues it (bufqueue.h); Python drains and `split`s by (category, kind).
 *  - hip_callback keeps, for the HIP operations Python named (hipEventRecord, hipStreamWaitEvent,
 *    hipEventSynchronize, launches, syncs), {correlation id, op code, event, stream} read from the
 *    argument struct at offsets Python supplied (rocprofiler-sdk/hip/api_args.h).
 *  - code_object_callback keeps kernel_id -> kernel name (KERNEL_SYMBOL_REGISTER, load phase).
 *
 * The callback-tracing record is passed BY VALUE and its layout differs between SDK generations:
 * rocprofiler-sdk 1.0 (ROCm 7) added `uint64_t ancestor` to rocprofiler_correlation_id_t (16 -> 24
 * bytes), moving kind/operation/phase/payload by 8 bytes (sizeof 56 -> 64). Checked with
 * sizeof/offsetof printers against ROCm/rocm-systems projects/rocprofiler-sdk/source/include/
 * rocprofiler-sdk/fwd.h at eb15bcdf (0.5.0), 0608bbb4 (0.6.0): kind@32 payload@48 size 56; and
 * 1b1610fc (1.0.0): kind@40 payload@56 size 64. So each callback exists once per layout
 * (hip_callback_v0 / _v1, ...) and Python hands rocprofiler the one matching the SDK's version.
 *  - dispatch_counting_callback picks the counter config of the dispatch's agent.
 *
 * Packed record layout in queued buffers: {u32 category; u32 kind; u32 nbytes; u32 pad;
 * payload[nbytes] padded to 8 bytes}.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "shared/bufqueue.h"
#include "shared/bufqueue_py.h"

#define MAX_CATEGORIES 8
#define MAX_KINDS 64
#define MAX_HIP_OPS 4096
#define MAX_AGENTS 64
#define MAX_RECORD_BYTES ((uint64_t)1 << 20)
#define PHASE_ENTER 1 /* ROCPROFILER_CALLBACK_PHASE_ENTER == ROCPROFILER_CALLBACK_PHASE_LOAD (fwd.h) */

typedef struct { uint64_t internal, external; } corr_t;

/* rocprofiler_record_header_t (fwd.h) */
typedef struct { uint32_t category, kind; void *payload; } header_t;

/* rocprofiler_callback_tracing_record_t (fwd.h), passed by value: SDK 0.x ... */
typedef struct {
    uint64_t context_id, thread_id;
    corr_t correlation_id;
    int32_t kind, operation, phase;
    void *payload;
} cb_record_v0_t;

/* ... and SDK 1.x, whose rocprofiler_correlation_id_t gained `uint64_t ancestor`. */
typedef struct { uint64_t internal, external, ancestor; } corr_v1_t;
typedef struct {
    uint64_t context_id, thread_id;
    corr_v1_t correlation_id;
    int32_t kind, operation, phase;
    void *payload;
} cb_record_v1_t;

typedef struct { uint32_t x, y, z; } dim3_t;

/* rocprofiler_kernel_dispatch_info_t */
typedef struct {
    uint64_t size, agent_id, queue_id, kernel_id, dispatch_id;
    uint32_t private_segment_size, group_segment_size;
    dim3_t workgroup_size, grid_size;
    uint8_t reserved_padding[56];
} dispatch_info_t;

/* rocprofiler_dispatch_counting_service_data_t (dispatch_counting_service.h), passed by value */
typedef struct {
    uint64_t size;
    corr_t correlation_id;
    uint64_t start_timestamp, end_timestamp;
    dispatch_info_t dispatch_info;
} counting_data_t;

/* One captured HIP call: numpy dtype [corr <u8, op u1, event <u8, stream <u8] (packed, 25 bytes). */
#pragma pack(push, 1)
typedef struct { uint64_t correlation_id; uint8_t op; uint64_t event, stream; } event_op_t;
#pragma pack(pop)

typedef struct { uint8_t code; int16_t event_off, stream_off; } hip_op_t;

static bq_queue completed = BQ_INITIALIZER;
static uint64_t dropped = 0, malformed = 0, buffers_seen = 0, records_seen = 0, dispatches_counted = 0,
                dispatches_unconfigured = 0;
static uint32_t fixed_size[MAX_CATEGORIES][MAX_KINDS];

static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static hip_op_t hip_ops[MAX_HIP_OPS];
static int32_t hip_kind = -1, code_object_kind = -1, symbol_register_op = -1;
static event_op_t *event_ops = NULL;
static size_t n_event_ops = 0, cap_event_ops = 0;
typedef struct { uint64_t id; char *name; } symbol_t;
static symbol_t *symbols = NULL;
static size_t n_symbols = 0, cap_symbols = 0;
static uint64_t agent_handles[MAX_AGENTS], agent_configs[MAX_AGENTS];
static size_t n_agents = 0;

static inline size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static uint64_t payload_size(uint32_t category, uint32_t kind, const void *payload) {
    if (category < MAX_CATEGORIES && kind < MAX_KINDS && fixed_size[category][kind])
        return fixed_size[category][kind];
    uint64_t sz;
    memcpy(&sz, payload, sizeof sz); /* every tracing record starts with u64 size */
    return sz;
}

static void buffer_callback(uint64_t context, uint64_t buffer_id, header_t **headers, size_t n, void *data,
                            uint64_t drop_count) {
    (void)context, (void)buffer_id, (void)data;
    if (drop_count) __atomic_add_fetch(&dropped, drop_count, __ATOMIC_RELAXED);
    __atomic_add_fetch(&buffers_seen, 1, __ATOMIC_RELAXED);
    size_t total = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!headers[i] || !headers[i]->payload) { bad++; continue; }
        uint64_t sz = payload_size(headers[i]->category, headers[i]->kind, headers[i]->payload);
        if (sz < 8 || sz > MAX_RECORD_BYTES) { bad++; continue; }
        total += 16 + pad8((size_t)sz);
    }
    if (bad) __atomic_add_fetch(&malformed, bad, __ATOMIC_RELAXED);
    if (!total) return;
    unsigned char *buf = bq_alloc_buffer(total);
    if (!buf) { __atomic_add_fetch(&dropped, n - bad, __ATOMIC_RELAXED); return; }
    size_t off = 0, kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (!headers[i] || !headers[i]->payload) continue;
        uint64_t sz = payload_size(headers[i]->category, headers[i]->kind, headers[i]->payload);
        if (sz < 8 || sz > MAX_RECORD_BYTES) continue;
        uint32_t hdr[4] = {headers[i]->category, headers[i]->kind, (uint32_t)sz, 0};
        memcpy(buf + off, hdr, sizeof hdr);
        memcpy(buf + off + 16, headers[i]->payload, (size_t)sz);
        memset(buf + off + 16 + sz, 0, pad8((size_t)sz) - (size_t)sz);
        off += 16 + pad8((size_t)sz);
        kept++;
    }
    __atomic_add_fetch(&records_seen, kept, __ATOMIC_RELAXED);
    bq_push(&completed, buf, total, off);
}

static void on_hip(int32_t kind, int32_t operation, int32_t phase, uint64_t corr, const void *payload) {
    if (kind != __atomic_load_n(&hip_kind, __ATOMIC_RELAXED) || phase != PHASE_ENTER) return;
    if (operation < 0 || operation >= MAX_HIP_OPS || !payload) return;
    hip_op_t spec = hip_ops[operation];
    if (!spec.code) return;
    const unsigned char *args = (const unsigned char *)payload + 8; /* {u64 size; args union; ...} */
    event_op_t e = {corr, spec.code, 0, 0};
    if (spec.event_off >= 0) memcpy(&e.event, args + spec.event_off, 8);
    if (spec.stream_off >= 0) memcpy(&e.stream, args + spec.stream_off, 8);
    pthread_mutex_lock(&side_lock);
    if (n_event_ops == cap_event_ops) {
        size_t ncap = cap_event_ops ? cap_event_ops * 2 : 1024;
        event_op_t *p = (event_op_t *)realloc(event_ops, ncap * sizeof(event_op_t));
        if (!p) {
            pthread_mutex_unlock(&side_lock);
            __atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
            return;
        }
        event_ops = p;
        cap_event_ops = ncap;
    }
    event_ops[n_event_ops++] = e;
    pthread_mutex_unlock(&side_lock);
}

static void on_code_object(int32_t kind, int32_t operation, int32_t phase, const void *payload) {
    if (kind != code_object_kind || operation != symbol_register_op || phase != PHASE_ENTER || !payload) return;
    /* rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t (callback_tracing.h):
     * {u64 size; u64 kernel_id; u64 code_object_id; const char* kernel_name; ...}; kernel_id@8 and
     * kernel_name@24 in 0.5.0, 0.6.0 and 1.0.0 alike (the struct only grew at its end, 72 -> 88). */
    const unsigned char *p = (const unsigned char *)payload;
    uint64_t id;
    const char *name;
    memcpy(&id, p + 8, 8);
    memcpy(&name, p + 24, sizeof name);
    char *copy = strdup(name ? name : "");
    if (!copy) return;
    pthread_mutex_lock(&side_lock);
    if (n_symbols == cap_symbols) {
        size_t ncap = cap_symbols ? cap_symbols * 2 : 256;
        symbol_t *q = (symbol_t *)realloc(symbols, ncap * sizeof(symbol_t));
        if (!q) { pthread_mutex_unlock(&side_lock); free(copy); return; }
        symbols = q;
        cap_symbols = ncap;
    }
    symbols[n_symbols++] = (symbol_t){id, copy};
    pthread_mutex_unlock(&side_lock);
}

/* One entry point per callback-record layout (see the top of this file). */
static void hip_callback_v0(cb_record_v0_t r, void *user_data, void *data) {
    (void)user_data, (void)data;
    on_hip(r.kind, r.operation, r.phase, r.correlation_id.internal, r.payload);
}
static void hip_callback_v1(cb_record_v1_t r, void *user_data, void *data) {
    (void)user_data, (void)data;
    on_hip(r.kind, r.operation, r.phase, r.correlation_id.internal, r.payload);
}
static void code_object_callback_v0(cb_record_v0_t r, void *user_data, void *data) {
    (void)user_data, (void)data;
    on_code_object(r.kind, r.operation, r.phase, r.payload);
}
static void code_object_callback_v1(cb_record_v1_t r, void *user_data, void *data) {
    (void)user_data, (void)data;
    on_code_object(r.kind, r.operation, r.phase, r.payload);
}

/* rocprofiler_dispatch_counting_service_data_t uses rocprofiler_async_correlation_id_t (16 bytes)
 * in 1.0 as well, so one layout serves both generations. */
static void dispatch_counting_callback(counting_data_t dispatch, uint64_t *config, uint64_t *user_data, void *data) {
    (void)user_data, (void)data;
    uint64_t agent = dispatch.dispatch_info.agent_id;
    pthread_mutex_lock(&side_lock);
    for (size_t i = 0; i < n_agents; i++) {
        if (agent_handles[i] == agent) {
            *config = agent_configs[i];
            pthread_mutex_unlock(&side_lock);
            __atomic_add_fetch(&dispatches_counted, 1, __ATOMIC_RELAXED);
            return;
        }
    }
    pthread_mutex_unlock(&side_lock);
    __atomic_add_fetch(&dispatches_unconfigured, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ Python side */

/* callback_addresses(layout): layout 0 = rocprofiler-sdk 0.x records, 1 = 1.x records. */
static PyObject *py_callback_addresses(PyObject *self, PyObject *args) {
    int layout;
    if (!PyArg_ParseTuple(args, "i", &layout)) return NULL;
    if (layout != 0 && layout != 1) {
        PyErr_Format(PyExc_ValueError, "unknown rocprofiler-sdk callback record layout %d (known: 0 for SDK 0.x, "
                     "1 for SDK 1.x)", layout);
        return NULL;
    }
    uintptr_t hip = layout ? (uintptr_t)&hip_callback_v1 : (uintptr_t)&hip_callback_v0;
    uintptr_t code = layout ? (uintptr_t)&code_object_callback_v1 : (uintptr_t)&code_object_callback_v0;
    return Py_BuildValue("{sKsKsKsK}", "buffer", (unsigned long long)(uintptr_t)&buffer_callback, "hip",
                         (unsigned long long)hip, "code_object", (unsigned long long)code, "dispatch_counting",
                         (unsigned long long)(uintptr_t)&dispatch_counting_callback);
}

static PyObject *py_set_fixed_size(PyObject *self, PyObject *args) {
    unsigned int category, kind, size;
    if (!PyArg_ParseTuple(args, "III", &category, &kind, &size)) return NULL;
    if (category >= MAX_CATEGORIES || kind >= MAX_KINDS || size > MAX_RECORD_BYTES) {
        PyErr_Format(PyExc_ValueError, "fixed record size out of range: category %u (< %d), kind %u (< %d), size %u",
                     category, MAX_CATEGORIES, kind, MAX_KINDS, size);
        return NULL;
    }
    fixed_size[category][kind] = size;
    Py_RETURN_NONE;
}

/* set_hip_ops(kind, [(operation, code, event_offset, stream_offset), ...]); offsets -1 = absent. */
static PyObject *py_set_hip_ops(PyObject *self, PyObject *args) {
    int kind;
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "iO", &kind, &seq)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "set_hip_ops needs a sequence of (operation, code, event_off, stream_off)");
    if (!fast) return NULL;
    hip_op_t table[MAX_HIP_OPS];
    memset(table, 0, sizeof table);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        int op, code, ev, st;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "iiii", &op, &code, &ev, &st)) {
            Py_DECREF(fast);
            return NULL;
        }
        if (op < 0 || op >= MAX_HIP_OPS || code <= 0 || code > 255 || ev > 4096 || st > 4096) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "bad HIP op spec (%d, %d, %d, %d)", op, code, ev, st);
            return NULL;
        }
        table[op] = (hip_op_t){(uint8_t)code, (int16_t)ev, (int16_t)st};
    }
    Py_DECREF(fast);
    pthread_mutex_lock(&side_lock);
    memcpy(hip_ops, table, sizeof table);
    pthread_mutex_unlock(&side_lock);
    __atomic_store_n(&hip_kind, kind, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

static PyObject *py_set_code_object(PyObject *self, PyObject *args) {
    int kind, op;
    if (!PyArg_ParseTuple(args, "ii", &kind, &op)) return NULL;
    code_object_kind = kind;
    symbol_register_op = op;
    Py_RETURN_NONE;
}

/* set_agent_configs([(agent_handle, config_handle), ...]) */
static PyObject *py_set_agent_configs(PyObject *self, PyObject *seq) {
    PyObject *fast = PySequence_Fast(seq, "set_agent_configs needs a sequence of (agent, config) handles");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_AGENTS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "at most %d agents, got %zd", MAX_AGENTS, n);
        return NULL;
    }
    uint64_t a[MAX_AGENTS], c[MAX_AGENTS];
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long ah, ch;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "KK", &ah, &ch)) {
            Py_DECREF(fast);
            return NULL;
        }
        a[i] = ah, c[i] = ch;
    }
    Py_DECREF(fast);
    pthread_mutex_lock(&side_lock);
    memcpy(agent_handles, a, sizeof a);
    memcpy(agent_configs, c, sizeof c);
    n_agents = (size_t)n;
    pthread_mutex_unlock(&side_lock);
    Py_RETURN_NONE;
}

static PyObject *py_drain(PyObject *self, PyObject *noargs) {
    return bq_drain_to_list(&completed);
}

static PyObject *py_drain_event_ops(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&side_lock);
    PyObject *b = PyBytes_FromStringAndSize((const char *)event_ops, (Py_ssize_t)(n_event_ops * sizeof(event_op_t)));
    if (b) n_event_ops = 0;
    pthread_mutex_unlock(&side_lock);
    return b;
}

static PyObject *py_drain_kernel_symbols(PyObject *self, PyObject *noargs) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    pthread_mutex_lock(&side_lock);
    symbol_t *s = symbols;
    size_t n = n_symbols;
    symbols = NULL;
    n_symbols = cap_symbols = 0;
    pthread_mutex_unlock(&side_lock);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (!failed) {
            PyObject *k = PyLong_FromUnsignedLongLong(s[i].id);
            PyObject *v = PyUnicode_DecodeUTF8(s[i].name, (Py_ssize_t)strlen(s[i].name), "replace");
            if (!k || !v || PyDict_SetItem(out, k, v) < 0) failed = 1;
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
        free(s[i].name);
    }
    free(s);
    if (failed) { Py_DECREF(out); return NULL; }
    return out;
}

/* split(buffer) -> {(category, kind): (stride, bytes)}: the packed records grouped by type, each
 * group as fixed-stride rows (stride = the group's largest record, shorter ones zero-padded). */
typedef struct { uint32_t category, kind; size_t count, stride, filled; char *dst; } group_t;

static PyObject *py_split(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    size_t len = (size_t)view.len, off = 0, ng = 0;
    group_t groups[MAX_CATEGORIES * MAX_KINDS];
    PyObject *out = PyDict_New(), *blobs[MAX_CATEGORIES * MAX_KINDS] = {0};
    if (!out) goto fail;
    for (int pass = 0; pass < 2; pass++) {
        off = 0;
        while (off < len) {
            uint32_t hdr[4];
            if (len - off < 16) goto truncated;
            memcpy(hdr, base + off, 16);
            if (pad8(hdr[2]) > len - off - 16) goto truncated;
            size_t g = 0;
            while (g < ng && !(groups[g].category == hdr[0] && groups[g].kind == hdr[1])) g++;
            if (pass == 0) {
                if (g == ng) {
                    if (ng == MAX_CATEGORIES * MAX_KINDS) goto truncated;
                    groups[ng++] = (group_t){hdr[0], hdr[1], 0, 0, 0, NULL};
                }
                groups[g].count++;
                if (hdr[2] > groups[g].stride) groups[g].stride = hdr[2];
            } else {
                char *row = groups[g].dst + groups[g].filled * groups[g].stride;
                memcpy(row, base + off + 16, hdr[2]);
                memset(row + hdr[2], 0, groups[g].stride - hdr[2]);
                groups[g].filled++;
            }
            off += 16 + pad8(hdr[2]);
        }
        if (pass == 0) {
            for (size_t g = 0; g < ng; g++) {
                blobs[g] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(groups[g].count * groups[g].stride));
                if (!blobs[g]) goto fail;
                groups[g].dst = PyBytes_AS_STRING(blobs[g]);
            }
        }
    }
    for (size_t g = 0; g < ng; g++) {
        PyObject *key = Py_BuildValue("(II)", groups[g].category, groups[g].kind);
        PyObject *val = Py_BuildValue("(nO)", (Py_ssize_t)groups[g].stride, blobs[g]);
        int rc = (key && val) ? PyDict_SetItem(out, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (rc < 0) goto fail;
    }
    for (size_t g = 0; g < ng; g++) Py_XDECREF(blobs[g]);
    PyBuffer_Release(&view);
    return out;
truncated:
    PyErr_Format(PyExc_ValueError, "corrupt rocbuf buffer: record at offset %zu runs past the end (%zu bytes)", off,
                 len);
fail:
    for (size_t g = 0; g < ng; g++) Py_XDECREF(blobs[g]);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *py_stats(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&completed.lock);
    unsigned long long pushed = completed.pushed, lost = completed.push_failures, pending = completed.count;
    pthread_mutex_unlock(&completed.lock);
    return Py_BuildValue("{sKsKsKsKsKsKsKsKsK}", "dropped", (unsigned long long)__atomic_load_n(&dropped, __ATOMIC_RELAXED),
                         "malformed", (unsigned long long)__atomic_load_n(&malformed, __ATOMIC_RELAXED),
                         "callbacks", (unsigned long long)__atomic_load_n(&buffers_seen, __ATOMIC_RELAXED),
                         "records", (unsigned long long)__atomic_load_n(&records_seen, __ATOMIC_RELAXED),
                         "completed", pushed, "queue_failures", lost, "pending", pending,
                         "dispatches_counted", (unsigned long long)__atomic_load_n(&dispatches_counted, __ATOMIC_RELAXED),
                         "dispatches_unconfigured",
                         (unsigned long long)__atomic_load_n(&dispatches_unconfigured, __ATOMIC_RELAXED));
}

static PyObject *py_reset(PyObject *self, PyObject *noargs) {
    bq_clear(&completed);
    pthread_mutex_lock(&completed.lock);
    completed.pushed = completed.popped = completed.push_failures = 0;
    pthread_mutex_unlock(&completed.lock);
    pthread_mutex_lock(&side_lock);
    n_event_ops = 0;
    for (size_t i = 0; i < n_symbols; i++) free(symbols[i].name);
    n_symbols = 0;
    pthread_mutex_unlock(&side_lock);
    __atomic_store_n(&dropped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&malformed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&buffers_seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&records_seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dispatches_counted, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dispatches_unconfigured, 0, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"callback_addresses", py_callback_addresses, METH_VARARGS,
     "callback_addresses($module, layout, /)\n--\n\n"
     "{'buffer', 'hip', 'code_object', 'dispatch_counting'}: C callback addresses for rocprofiler-sdk; layout 0 = "
     "SDK 0.x callback records, 1 = SDK 1.x (24-byte correlation id)."},
    {"set_fixed_size", py_set_fixed_size, METH_VARARGS,
     "set_fixed_size($module, category, kind, size, /)\n--\n\n"
     "Records of this type are size bytes with no leading size field."},
    {"set_hip_ops", py_set_hip_ops, METH_VARARGS,
     "set_hip_ops($module, kind, ops, /)\n--\n\n"
     "HIP calls whose args are kept: ops is [(operation, code, event_offset, stream_offset)], offsets -1 = absent."},
    {"set_code_object", py_set_code_object, METH_VARARGS,
     "set_code_object($module, kind, operation, /)\n--\n\n"
     "The code-object tracing kind and its kernel-symbol-register operation."},
    {"set_agent_configs", py_set_agent_configs, METH_O,
     "set_agent_configs($module, configs, /)\n--\n\n"
     "[(agent handle, counter config handle)] for dispatch counting."},
    {"drain", py_drain, METH_NOARGS,
     "drain($module, /)\n--\n\nCompleted packed buffers (bytes, oldest first); frees them."},
    {"drain_event_ops", py_drain_event_ops, METH_NOARGS,
     "drain_event_ops($module, /)\n--\n\nCaptured HIP call args as packed 25-byte rows."},
    {"drain_kernel_symbols", py_drain_kernel_symbols, METH_NOARGS,
     "drain_kernel_symbols($module, /)\n--\n\n{kernel_id: name} registered since the last drain."},
    {"split", py_split, METH_O,
     "split($module, packed, /)\n--\n\n{(category, kind): (stride, rows bytes)}: a packed buffer's records by type."},
    {"stats", py_stats, METH_NOARGS,
     "stats($module, /)\n--\n\nCounters: dropped, malformed, callbacks, records, pending, ..."},
    {"reset", py_reset, METH_NOARGS, "reset($module, /)\n--\n\nFree everything queued and zero the counters."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.rocbuf",
                                    "rocprofiler-sdk buffer and tracing callbacks in C.", -1, methods};

PyMODINIT_FUNC PyInit_rocbuf(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "EVENT_OP_SIZE", (long)sizeof(event_op_t)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
