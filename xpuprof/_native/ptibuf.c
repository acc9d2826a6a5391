/* xpuprof._native.ptibuf: Intel PTI buffer callbacks that never touch Python.
 *
 * PTI calls its buffer-request/complete callbacks from its own threads while holding its own
 * mutexes; a Python (ctypes) callback there waits for the GIL while the main thread, holding
 * the GIL, waits for that mutex: a deadlock. These C callbacks only allocate and queue
 * (bufqueue.h). Python registers their addresses with ptiViewSetCallbacks and, after
 * ptiFlushAllViews, drains the queue and locates records (walk / walk_sizes) without a
 * per-record Python call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "bufqueue.h"

#define DEFAULT_BUFFER_SIZE ((size_t)4 << 20) /* Kineto's choice: 4 MiB */

static bq_queue completed = BQ_INITIALIZER;
static size_t buffer_size = DEFAULT_BUFFER_SIZE;
static uint64_t requested = 0, request_failures = 0, empty_buffers = 0;

typedef uint32_t (*next_record_fn)(uint8_t *buffer, size_t valid_bytes, void **record);

static void request_buffer(unsigned char **buf, size_t *size) {
    size_t want = __atomic_load_n(&buffer_size, __ATOMIC_RELAXED);
    unsigned char *p = bq_alloc_buffer(want);
    __atomic_add_fetch(&requested, 1, __ATOMIC_RELAXED);
    if (!p) {
        /* PTI drops records it cannot store; the count tells the user records were lost. */
        __atomic_add_fetch(&request_failures, 1, __ATOMIC_RELAXED);
        want = 0;
    }
    *buf = p;
    *size = want;
}

static void complete_buffer(unsigned char *buf, size_t size, size_t used) {
    if (!buf) return;
    if (used == 0) { /* still ours to free (PTI hands back empty buffers at flush) */
        __atomic_add_fetch(&empty_buffers, 1, __ATOMIC_RELAXED);
        bq_free_buffer(buf);
        return;
    }
    bq_push(&completed, buf, size, used);
}

static PyObject *py_callback_addresses(PyObject *self, PyObject *noargs) {
    return Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)&request_buffer,
                         (unsigned long long)(uintptr_t)&complete_buffer);
}

static PyObject *py_set_buffer_size(PyObject *self, PyObject *arg) {
    unsigned long long n = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    if (n < 4096 || n > ((unsigned long long)1 << 34)) {
        PyErr_Format(PyExc_ValueError, "PTI buffer size must be between 4096 bytes and 16 GiB, got %llu", n);
        return NULL;
    }
    __atomic_store_n(&buffer_size, (size_t)n, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

static PyObject *py_buffer_size(PyObject *self, PyObject *noargs) {
    return PyLong_FromSize_t(__atomic_load_n(&buffer_size, __ATOMIC_RELAXED));
}

/* A completed buffer handed to Python without a copy: read-only bytes through the buffer
 * protocol, freed when the last view of it goes. A copy per buffer doubled the session's memory at
 * stop(): the collector thread's malloc arena keeps what it frees, so the copies never reused it. */
typedef struct {
    PyObject_HEAD
    unsigned char *buffer;
    Py_ssize_t used;
} completed_buffer;

static void completed_buffer_dealloc(PyObject *self) {
    bq_free_buffer(((completed_buffer *)self)->buffer);
    Py_TYPE(self)->tp_free(self);
}

static int completed_buffer_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    completed_buffer *b = (completed_buffer *)self;
    return PyBuffer_FillInfo(view, self, b->buffer, b->used, 1, flags);
}

static PyBufferProcs completed_buffer_as_buffer = {completed_buffer_getbuffer, NULL};

static PyTypeObject completed_buffer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.ptibuf.CompletedBuffer",
    .tp_basicsize = sizeof(completed_buffer),
    .tp_dealloc = completed_buffer_dealloc,
    .tp_as_buffer = &completed_buffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One completed PTI buffer's used bytes (read through memoryview / the buffer protocol).",
};

/* drain() -> list[memoryview]: every completed buffer's used bytes, oldest first, without a copy;
 * each buffer is freed when its view is. */
static PyObject *py_drain(PyObject *self, PyObject *noargs) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    bq_entry e;
    while (bq_pop(&completed, &e)) {
        completed_buffer *owner = PyObject_New(completed_buffer, &completed_buffer_type);
        if (!owner) {
            bq_free_buffer(e.buffer);
            Py_DECREF(out);
            return NULL;
        }
        owner->buffer = e.buffer;
        owner->used = (Py_ssize_t)e.used;
        PyObject *view = PyMemoryView_FromObject((PyObject *)owner);
        Py_DECREF(owner);
        if (!view || PyList_Append(out, view) < 0) {
            Py_XDECREF(view);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(view);
    }
    return out;
}

static PyObject *py_stats(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&completed.lock);
    unsigned long long pushed = completed.pushed, popped = completed.popped, lost = completed.push_failures,
                       pending = completed.count;
    pthread_mutex_unlock(&completed.lock);
    return Py_BuildValue("{sKsKsKsKsKsKsK}", "requested", (unsigned long long)__atomic_load_n(&requested, __ATOMIC_RELAXED),
                         "request_failures", (unsigned long long)__atomic_load_n(&request_failures, __ATOMIC_RELAXED),
                         "empty", (unsigned long long)__atomic_load_n(&empty_buffers, __ATOMIC_RELAXED),
                         "completed", pushed, "drained", popped, "queue_failures", lost, "pending", pending);
}

static PyObject *py_reset(PyObject *self, PyObject *noargs) {
    bq_clear(&completed);
    __atomic_store_n(&requested, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&request_failures, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&empty_buffers, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&completed.lock);
    completed.pushed = completed.popped = completed.push_failures = 0;
    pthread_mutex_unlock(&completed.lock);
    Py_RETURN_NONE;
}

/* Growable array of uint64 offsets, returned to Python as bytes (np.frombuffer(..., uint64)). */
typedef struct { uint64_t *v; size_t n, cap; } offsets_t;

static int offsets_add(offsets_t *o, uint64_t x) {
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 1024;
        uint64_t *nv = (uint64_t *)realloc(o->v, ncap * sizeof(uint64_t));
        if (!nv) return -1;
        o->v = nv;
        o->cap = ncap;
    }
    o->v[o->n++] = x;
    return 0;
}

static PyObject *offsets_result(offsets_t *o, Py_ssize_t stop) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)o->v, (Py_ssize_t)(o->n * sizeof(uint64_t)));
    free(o->v);
    if (!b) return NULL;
    return Py_BuildValue("(Nn)", b, stop);
}

/* walk(buffer, next_record_address) -> (offsets bytes, status):
 * records located by PTI's own ptiViewGetNextRecord. status 1 = end of buffer, other = the PTI
 * result code that stopped the walk (a parse error the caller reports). */
static PyObject *py_walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long fn_addr;
    if (!PyArg_ParseTuple(args, "y*K", &view, &fn_addr)) return NULL;
    if (!fn_addr) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk needs the address of ptiViewGetNextRecord");
        return NULL;
    }
    next_record_fn next = (next_record_fn)(uintptr_t)fn_addr;
    offsets_t o = {0};
    uint8_t *base = (uint8_t *)view.buf;
    size_t len = (size_t)view.len;
    void *rec = NULL;
    uint32_t rc = 0;
    int oom = 0, outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        rc = next(base, len, &rec);
        if (rc != 0) break;
        if (!rec || (uint8_t *)rec < base || (uint8_t *)rec >= base + len) { outside = 1; break; }
        if (offsets_add(&o, (uint64_t)((uint8_t *)rec - base)) < 0) { oom = 1; break; }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (oom) { free(o.v); return PyErr_NoMemory(); }
    if (outside) {
        free(o.v);
        PyErr_SetString(PyExc_ValueError, "ptiViewGetNextRecord returned a record outside the buffer");
        return NULL;
    }
    return offsets_result(&o, (Py_ssize_t)rc);
}

/* walk_sizes(buffer, sizes) -> (offsets bytes, stop):
 * records located with a kind -> record-size table (uint32 array indexed by view kind, 0 =
 * unknown), for replaying captures without PTI. stop = -1 when the buffer was consumed
 * exactly, else the offset of the record that could not be walked (unknown kind, or truncated). */
static PyObject *py_walk_sizes(PyObject *self, PyObject *args) {
    Py_buffer view, sizes;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &sizes)) return NULL;
    const uint32_t *table = (const uint32_t *)sizes.buf;
    size_t nkinds = (size_t)sizes.len / sizeof(uint32_t);
    const uint8_t *base = (const uint8_t *)view.buf;
    size_t len = (size_t)view.len, off = 0;
    offsets_t o = {0};
    Py_ssize_t stop = -1;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    while (off < len) {
        uint32_t kind;
        if (len - off < sizeof(uint32_t)) { stop = (Py_ssize_t)off; break; }
        memcpy(&kind, base + off, sizeof kind);
        uint32_t sz = kind < nkinds ? table[kind] : 0;
        if (sz == 0 || sz > len - off) { stop = (Py_ssize_t)off; break; }
        if (offsets_add(&o, off) < 0) { oom = 1; break; }
        off += sz;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&sizes);
    if (oom) { free(o.v); return PyErr_NoMemory(); }
    return offsets_result(&o, stop);
}

/* gather_into(buffer, offsets, record_size, out, out_offset): copies the records at `offsets`
 * (each record_size bytes) into a caller-owned writable buffer at byte out_offset. */
static PyObject *py_gather_into(PyObject *self, PyObject *args) {
    Py_buffer view, offs, out;
    Py_ssize_t size, out_off;
    if (!PyArg_ParseTuple(args, "y*y*nw*n", &view, &offs, &size, &out, &out_off)) return NULL;
    size_t n = (size_t)offs.len / sizeof(uint64_t);
    const uint64_t *o = (const uint64_t *)offs.buf;
    PyObject *result = NULL;
    if (size <= 0 || out_off < 0 || (size_t)out.len < (size_t)out_off || (size_t)out.len - (size_t)out_off < n * (size_t)size) {
        PyErr_SetString(PyExc_ValueError, "gather_into: bad record size or output too small");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (o[i] > (uint64_t)view.len || (uint64_t)view.len - o[i] < (uint64_t)size) {
            PyErr_Format(PyExc_ValueError, "truncated PTI buffer: a %zd-byte record at offset %llu runs past the "
                         "buffer's end (%zd bytes)", size, (unsigned long long)o[i], view.len);
            goto done;
        }
    }
    char *dst = (char *)out.buf + out_off;
    const char *src = (const char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) memcpy(dst + i * (size_t)size, src + o[i], (size_t)size);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"gather_into", py_gather_into, METH_VARARGS,
     "gather_into(buffer, uint64 offsets, size, out, out_offset): records copied into out."},
    {"callback_addresses", py_callback_addresses, METH_NOARGS,
     "(request, complete) C function addresses to pass to ptiViewSetCallbacks."},
    {"set_buffer_size", py_set_buffer_size, METH_O, "Bytes per buffer handed to PTI (default 4 MiB)."},
    {"buffer_size", py_buffer_size, METH_NOARGS, "Bytes per buffer handed to PTI."},
    {"drain", py_drain, METH_NOARGS, "Completed buffers (read-only memoryviews, oldest first, no copy)."},
    {"stats", py_stats, METH_NOARGS, "Buffer counters: requested, request_failures, completed, drained, ..."},
    {"reset", py_reset, METH_NOARGS, "Free queued buffers and zero the counters."},
    {"walk", py_walk, METH_VARARGS, "walk(buffer, next_record_address) -> (uint64 offsets bytes, status)."},
    {"walk_sizes", py_walk_sizes, METH_VARARGS, "walk_sizes(buffer, uint32 size table) -> (offsets bytes, stop)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.ptibuf",
                                    "Intel PTI buffer callbacks and record walking in C.", -1, methods};

PyMODINIT_FUNC PyInit_ptibuf(void) {
    if (PyType_Ready(&completed_buffer_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "DEFAULT_BUFFER_SIZE", (long)DEFAULT_BUFFER_SIZE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
