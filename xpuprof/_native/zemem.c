/* xpuprof._native.zemem: Level Zero allocations and frees, seen through the loader's tracing layer, in C.
 *
 * A tracer (zelTracerCreate) gets epilogue callbacks for zeMemAllocDevice/Host/Shared and zeMemFree/
 * zeMemFreeExt; each successful call appends one fixed record (no Python, no GIL: the calls come from any
 * thread of the program, inside the driver's locks). A free is matched to the allocation it releases
 * through a pointer table, so it carries that allocation's size and device; a free of memory allocated
 * before the tracer started is counted, not recorded (torch's profiler does the same).
 *
 * The parameter structs below mirror oneapi-src/level-zero v1.32.0 include/ze_api.h
 * (ze_mem_alloc_*_params_t, ze_mem_free_params_t) and include/layers/zel_tracing_register_cb.h
 * (ze_mem_free_ext_params_t, zel_tracer_reg_t) and zel_tracing_api.h (zel_tracer_desc_t), field for field.
 *
 * start(loader_path) -> None (RuntimeError naming the step and the ze_result_t on failure)
 * stop() -> None          drain() -> (records: bytes of int64 [n, 7], stats: dict)
 * record: (monotonic ns, thread id, kind 0 device 1 host 2 shared, address, bytes (negative: a free),
 *          device handle, context handle)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int32_t ze_result_t;
typedef void *ze_context_handle_t;
typedef void *ze_device_handle_t;
typedef void *zel_tracer_handle_t;

typedef struct {
    ze_context_handle_t *phContext;
    const void **pdevice_desc;
    size_t *psize;
    size_t *palignment;
    ze_device_handle_t *phDevice;
    void ***ppptr;
} ze_mem_alloc_device_params_t;

typedef struct {
    ze_context_handle_t *phContext;
    const void **phost_desc;
    size_t *psize;
    size_t *palignment;
    void ***ppptr;
} ze_mem_alloc_host_params_t;

typedef struct {
    ze_context_handle_t *phContext;
    const void **pdevice_desc;
    const void **phost_desc;
    size_t *psize;
    size_t *palignment;
    ze_device_handle_t *phDevice;
    void ***ppptr;
} ze_mem_alloc_shared_params_t;

typedef struct {
    ze_context_handle_t *phContext;
    void **pptr;
} ze_mem_free_params_t;

typedef struct {
    ze_context_handle_t *phContext;
    const void **ppMemFreeDesc;
    void **pptr;
} ze_mem_free_ext_params_t;

typedef struct {
    uint32_t stype; /* ZEL_STRUCTURE_TYPE_TRACER_DESC = 1 */
    const void *pNext;
    void *pUserData;
} zel_tracer_desc_t;

enum { ZEL_REGISTER_PROLOGUE = 0, ZEL_REGISTER_EPILOGUE = 1 };
enum { KIND_DEVICE = 0, KIND_HOST = 1, KIND_SHARED = 2 };
#define FIELDS 7

typedef ze_result_t (*create_fn)(const zel_tracer_desc_t *, zel_tracer_handle_t *);
typedef ze_result_t (*handle_fn)(zel_tracer_handle_t);
typedef ze_result_t (*enable_fn)(zel_tracer_handle_t, uint8_t);
typedef ze_result_t (*register_fn)(zel_tracer_handle_t, int, void *);
typedef ze_result_t (*void_fn)(void);

/* ------------------------------------------------------------------------------ state */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t *recs = NULL;
static size_t n_recs = 0, cap_recs = 0;
static uint64_t dropped = 0, unknown_frees = 0;
/* open-addressing table: address -> (bytes, kind, device) of a live allocation */
typedef struct { uintptr_t ptr; int64_t bytes; int64_t kind; int64_t device; } slot;
static slot *table = NULL;
static size_t table_cap = 0, table_used = 0;
static void *loader = NULL;
static zel_tracer_handle_t tracer = NULL;
static handle_fn destroy_tracer = NULL;
static enable_fn set_enabled = NULL;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t hash(uintptr_t p) { return (size_t)(((uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ULL) >> 32); }

static int table_grow(void) {
    size_t cap = table_cap ? table_cap * 2 : 1024;
    slot *t = calloc(cap, sizeof(slot));
    if (!t) return -1;
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].ptr) {
            size_t j = hash(table[i].ptr) & (cap - 1);
            while (t[j].ptr) j = (j + 1) & (cap - 1);
            t[j] = table[i];
        }
    }
    free(table);
    table = t;
    table_cap = cap;
    return 0;
}

static void table_put(uintptr_t p, int64_t bytes, int64_t kind, int64_t device) {
    if ((table_used + 1) * 2 > table_cap && table_grow()) return;
    size_t j = hash(p) & (table_cap - 1);
    while (table[j].ptr && table[j].ptr != p) j = (j + 1) & (table_cap - 1);
    if (!table[j].ptr) table_used++;
    table[j] = (slot){p, bytes, kind, device};
}

static int table_take(uintptr_t p, slot *out) {
    if (!table_cap) return 0;
    size_t mask = table_cap - 1, j = hash(p) & mask;
    while (table[j].ptr) {
        if (table[j].ptr == p) {
            *out = table[j];
            table[j].ptr = 0;
            table_used--;
            /* the rest of the probe cluster goes back in, so no lookup stops at the hole */
            for (size_t k = (j + 1) & mask; table[k].ptr; k = (k + 1) & mask) {
                slot s = table[k];
                table[k].ptr = 0;
                table_used--;
                table_put(s.ptr, s.bytes, s.kind, s.device);
            }
            return 1;
        }
        j = (j + 1) & mask;
    }
    return 0;
}

static void append(int64_t kind, uintptr_t ptr, int64_t bytes, void *device, void *context) {
    if (n_recs == cap_recs) {
        size_t cap = cap_recs ? cap_recs * 2 : 4096;
        int64_t *r = realloc(recs, cap * FIELDS * sizeof(int64_t));
        if (!r) { dropped++; return; }
        recs = r;
        cap_recs = cap;
    }
    int64_t *r = recs + n_recs * FIELDS;
    r[0] = mono_ns();
    r[1] = (int64_t)syscall(SYS_gettid);
    r[2] = kind;
    r[3] = (int64_t)ptr;
    r[4] = bytes;
    r[5] = (int64_t)(uintptr_t)device;
    r[6] = (int64_t)(uintptr_t)context;
    n_recs++;
}

static void allocated(int64_t kind, void *ptr, size_t size, void *device, void *context) {
    pthread_mutex_lock(&lock);
    table_put((uintptr_t)ptr, (int64_t)size, kind, (int64_t)(uintptr_t)device);
    append(kind, (uintptr_t)ptr, (int64_t)size, device, context);
    pthread_mutex_unlock(&lock);
}

static void freed(void *ptr, void *context) {
    slot s;
    pthread_mutex_lock(&lock);
    if (table_take((uintptr_t)ptr, &s)) {
        append(s.kind, (uintptr_t)ptr, -s.bytes, (void *)(uintptr_t)s.device, context);
    } else {
        unknown_frees++;
    }
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------------------ epilogues */
static void on_alloc_device(ze_mem_alloc_device_params_t *p, ze_result_t r, void *u, void **i) {
    if (r == 0 && p->ppptr && *p->ppptr) allocated(KIND_DEVICE, **p->ppptr, *p->psize, *p->phDevice, *p->phContext);
}

static void on_alloc_host(ze_mem_alloc_host_params_t *p, ze_result_t r, void *u, void **i) {
    if (r == 0 && p->ppptr && *p->ppptr) allocated(KIND_HOST, **p->ppptr, *p->psize, NULL, *p->phContext);
}

static void on_alloc_shared(ze_mem_alloc_shared_params_t *p, ze_result_t r, void *u, void **i) {
    if (r == 0 && p->ppptr && *p->ppptr) allocated(KIND_SHARED, **p->ppptr, *p->psize, *p->phDevice, *p->phContext);
}

static void on_free(ze_mem_free_params_t *p, ze_result_t r, void *u, void **i) {
    if (r == 0 && p->pptr) freed(*p->pptr, *p->phContext);
}

static void on_free_ext(ze_mem_free_ext_params_t *p, ze_result_t r, void *u, void **i) {
    if (r == 0 && p->pptr) freed(*p->pptr, *p->phContext);
}

/* ------------------------------------------------------------------------------ Python API */
static PyObject *fail(const char *step, long code) {
    if (code == -1)
        PyErr_Format(PyExc_RuntimeError, "%s", step);
    else
        PyErr_Format(PyExc_RuntimeError, "%s returned 0x%08lx", step, (unsigned long)code);
    return NULL;
}

static void *sym(const char *name) { return dlsym(loader, name); }

static PyObject *py_start(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (tracer) return fail("the Level Zero allocation tracer is already running", -1);
    loader = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!loader) return PyErr_Format(PyExc_RuntimeError, "cannot load the Level Zero loader %s: %s", path, dlerror());
    create_fn create = (create_fn)sym("zelTracerCreate");
    destroy_tracer = (handle_fn)sym("zelTracerDestroy");
    set_enabled = (enable_fn)sym("zelTracerSetEnabled");
    const char *names[5] = {"zelTracerMemAllocDeviceRegisterCallback", "zelTracerMemAllocHostRegisterCallback",
                            "zelTracerMemAllocSharedRegisterCallback", "zelTracerMemFreeRegisterCallback",
                            "zelTracerMemFreeExtRegisterCallback"};
    void *callbacks[5] = {(void *)on_alloc_device, (void *)on_alloc_host, (void *)on_alloc_shared, (void *)on_free,
                          (void *)on_free_ext};
    register_fn reg[5];
    for (int k = 0; k < 5; k++) reg[k] = (register_fn)sym(names[k]);
    if (!create || !destroy_tracer || !set_enabled || !reg[0] || !reg[1] || !reg[2] || !reg[3])
        return PyErr_Format(PyExc_RuntimeError, "the Level Zero loader %s has no tracing API (zelTracerCreate and "
                            "the zelTracerMem*RegisterCallback entry points): a loader older than 1.8?", path);
    void_fn enable_layer = (void_fn)sym("zelEnableTracingLayer");  /* loader >= 1.17: switch the layer on now */
    if (enable_layer) {
        ze_result_t r = enable_layer();
        if (r != 0) return fail("zelEnableTracingLayer", r);
    }
    zel_tracer_desc_t desc = {1, NULL, NULL};
    ze_result_t r = create(&desc, &tracer);
    if (r != 0) {
        tracer = NULL;
        return fail("zelTracerCreate (is libze_tracing_layer.so.1 next to the loader, and ZE_ENABLE_TRACING_LAYER=1 "
                    "set for loaders without zelEnableTracingLayer?)", r);
    }
    for (int k = 0; k < 5; k++) {
        if (!reg[k]) continue;  /* zeMemFreeExt: loaders before 1.9 lack it */
        r = reg[k](tracer, ZEL_REGISTER_EPILOGUE, callbacks[k]);
        if (r != 0) {
            destroy_tracer(tracer);
            tracer = NULL;
            return fail(names[k], r);
        }
    }
    pthread_mutex_lock(&lock);
    n_recs = 0;
    dropped = unknown_frees = 0;
    pthread_mutex_unlock(&lock);
    r = set_enabled(tracer, 1);
    if (r != 0) {
        destroy_tracer(tracer);
        tracer = NULL;
        return fail("zelTracerSetEnabled", r);
    }
    Py_RETURN_NONE;
}

static PyObject *py_stop(PyObject *self, PyObject *unused) {
    if (tracer) {
        set_enabled(tracer, 0);
        destroy_tracer(tracer);
        tracer = NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_drain(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&lock);
    PyObject *data = PyBytes_FromStringAndSize((const char *)recs, (Py_ssize_t)(n_recs * FIELDS * sizeof(int64_t)));
    PyObject *stats = Py_BuildValue("{s:K,s:K,s:n}", "dropped", (unsigned long long)dropped, "unknown_frees",
                                    (unsigned long long)unknown_frees, "live", (Py_ssize_t)table_used);
    n_recs = 0;
    dropped = unknown_frees = 0;
    pthread_mutex_unlock(&lock);
    if (!data || !stats) {
        Py_XDECREF(data);
        Py_XDECREF(stats);
        return NULL;
    }
    return Py_BuildValue("(NN)", data, stats);
}

static PyObject *py_running(PyObject *self, PyObject *unused) { return PyBool_FromLong(tracer != NULL); }

static PyMethodDef methods[] = {
    {"start", py_start, METH_VARARGS,
     "start($module, loader_path, /)\n--\n\nTrace zeMemAlloc*/zeMemFree through the loader at loader_path from now on."},
    {"stop", py_stop, METH_NOARGS, "stop($module, /)\n--\n\nStop tracing (the records stay until drain)."},
    {"drain", py_drain, METH_NOARGS, "drain($module, /)\n--\n\n(records bytes, stats dict)."},
    {"running", py_running, METH_NOARGS, "running($module, /)\n--\n\nWhether the tracer is running."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.zemem", NULL, -1, methods};

PyMODINIT_FUNC PyInit_zemem(void) { return PyModule_Create(&module); }
