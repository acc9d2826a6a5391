/* xpuprof._native.ptibuf: Intel PTI buffer callbacks that never touch Python.
 *
 * PTI calls its buffer-request/complete callbacks from its own threads while holding its own
 * mutexes; a Python (ctypes) callback there waits for the GIL while the main thread, holding
 * the GIL, waits for that mutex: a deadlock. These C callbacks only allocate and queue
 * (bufqueue.h). Python registers their addresses with ptiViewSetCallbacks and, after
 * ptiFlushAllViews, drains the queue; the records stage (xpuprof._native.records) walks and
 * decodes the buffers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "shared/bufqueue.h"

#define DEFAULT_BUFFER_SIZE ((size_t)4 << 20) /* Kineto's choice: 4 MiB */

static bq_queue completed = BQ_INITIALIZER;
static size_t buffer_size = DEFAULT_BUFFER_SIZE;
static uint64_t requested = 0, request_failures = 0, empty_buffers = 0;

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

static PyMethodDef methods[] = {
    {"callback_addresses", py_callback_addresses, METH_NOARGS,
     "callback_addresses($module, /)\n--\n\n"
     "(request, complete) C function addresses to pass to ptiViewSetCallbacks."},
    {"set_buffer_size", py_set_buffer_size, METH_O,
     "set_buffer_size($module, size, /)\n--\n\nBytes per buffer handed to PTI (4096 to 16 GiB; default 4 MiB)."},
    {"buffer_size", py_buffer_size, METH_NOARGS, "buffer_size($module, /)\n--\n\nBytes per buffer handed to PTI."},
    {"drain", py_drain, METH_NOARGS,
     "drain($module, /)\n--\n\nCompleted buffers (read-only memoryviews, oldest first, no copy)."},
    {"stats", py_stats, METH_NOARGS,
     "stats($module, /)\n--\n\nBuffer counters: requested, request_failures, completed, drained, ..."},
    {"reset", py_reset, METH_NOARGS, "reset($module, /)\n--\n\nFree queued buffers and zero the counters."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.ptibuf",
                                    "Intel PTI buffer callbacks in C.", -1, methods};

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
