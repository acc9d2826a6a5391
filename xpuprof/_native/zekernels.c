/* xpuprof._native.zekernels: a Level Zero tracer that records each kernel's resources when it is created.
 *
 * PTI's kernel records carry no kernel properties, and the properties can only be asked of a kernel
 * handle, which the records do not carry either. So, like unitrace's -d, a tracer of the loader's
 * tracing layer watches zeModuleCreate (the module's format: SPIR-V = JIT, native = AOT),
 * zeModuleDestroy and zeKernelCreate, and at each kernel creation asks zeKernelGetProperties with
 * Intel's register-file-size extension chained in. The callbacks run on the application's threads
 * inside driver calls: they never touch Python, only a mutex-protected table.
 *
 * Fields the driver leaves unfilled keep the sentinel 0xFFFFFFFF (the null driver fills none), so
 * "not reported" is never written as 0.
 *
 *   install((zelTracerCreate, zelTracerDestroy, zelTracerSetEnabled, zelTracerModuleCreateRegisterCallback,
 *            zelTracerModuleDestroyRegisterCallback, zelTracerKernelCreateRegisterCallback,
 *            zeKernelGetProperties, zelEnableTracingLayer or 0)) -> None   (addresses; replaces a tracer)
 *   rows() -> (bytes: ROW_FIELDS rows, list of kernel names)
 *   count(), reset(), uninstall(), installed()
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOT_REPORTED 0xFFFFFFFFu
#define REGISTER_EPILOGUE 1u
#define STYPE_KERNEL_PROPERTIES 0x1Eu
#define STYPE_REGISTER_FILE_SIZE_EXP 0x00030012u

typedef struct { uint32_t stype; const void *pNext; void *pUserData; } tracer_desc_t;
typedef struct { uint8_t kid[16], mid[16]; } kernel_uuid_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t numKernelArgs, requiredGroupSizeX, requiredGroupSizeY, requiredGroupSizeZ,
        requiredNumSubGroups, requiredSubgroupSize, maxSubgroupSize, maxNumSubgroups, localMemSize, privateMemSize,
        spillMemSize;
    kernel_uuid_t uuid;
} kernel_properties_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t registerFileSize; } register_file_size_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t format; } module_desc_head_t; /* the fields read */
typedef struct { uint32_t stype; const void *pNext; uint32_t flags; const char *pKernelName; } kernel_desc_t;
typedef struct { void **phContext; void **phDevice; const module_desc_head_t **pdesc; void ***pphModule; void ***pphLog; }
    module_create_params_t;
typedef struct { void **phModule; } module_destroy_params_t;
typedef struct { void **phModule; const kernel_desc_t **pdesc; void ***pphKernel; } kernel_create_params_t;

typedef int (*create_fn)(const tracer_desc_t *, void **);
typedef int (*destroy_fn)(void *);
typedef int (*set_enabled_fn)(void *, uint8_t);
typedef int (*register_fn)(void *, uint32_t, void *);
typedef int (*get_props_fn)(void *, kernel_properties_t *);
typedef int (*enable_layer_fn)(void);

/* One row per kernel creation; the Python side mirrors it (backends/xpu/kernel_resources.ROW_DTYPE). */
typedef struct {
    uint64_t kernel, module, device, created_ns;
    int32_t format;       /* 0 SPIR-V (JIT), 1 native (AOT), -1 module not seen */
    int32_t props_result; /* zeKernelGetProperties' result */
    uint32_t num_args, req_x, req_y, req_z, req_num_subgroups, req_subgroup_size, max_subgroup_size,
        max_num_subgroups, slm, private_mem, spill_mem, register_file_size;
} row_t;

typedef struct { uint64_t module, device; int32_t format, alive; } module_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static row_t *rows_v;
static char **names_v;
static size_t nrows, cap_rows;
static module_t *mods;
static size_t nmods, cap_mods;
static void *tracer;
static destroy_fn fn_destroy;
static set_enabled_fn fn_set_enabled;
static get_props_fn fn_get_props;
static int user_data_anchor;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_module_create(module_create_params_t *p, int result, void *user, void **inst) {
    if (result != 0 || !p || !p->pphModule || !*p->pphModule || !**p->pphModule) return;
    module_t m = {(uint64_t)(uintptr_t)**p->pphModule, p->phDevice ? (uint64_t)(uintptr_t)*p->phDevice : 0,
                  (p->pdesc && *p->pdesc) ? (int32_t)(*p->pdesc)->format : -1, 1};
    pthread_mutex_lock(&lock);
    if (nmods == cap_mods) {
        size_t ncap = cap_mods ? 2 * cap_mods : 64;
        module_t *grown = realloc(mods, ncap * sizeof *mods);
        if (!grown) { pthread_mutex_unlock(&lock); return; }
        mods = grown;
        cap_mods = ncap;
    }
    mods[nmods++] = m;
    pthread_mutex_unlock(&lock);
}

static void on_module_destroy(module_destroy_params_t *p, int result, void *user, void **inst) {
    if (result != 0 || !p || !p->phModule) return;
    uint64_t h = (uint64_t)(uintptr_t)*p->phModule;
    pthread_mutex_lock(&lock);
    for (size_t i = nmods; i-- > 0;)
        if (mods[i].module == h && mods[i].alive) { mods[i].alive = 0; break; }
    pthread_mutex_unlock(&lock);
}

static void on_kernel_create(kernel_create_params_t *p, int result, void *user, void **inst) {
    if (result != 0 || !p || !p->pphKernel || !*p->pphKernel || !**p->pphKernel) return;
    void *kernel = **p->pphKernel;
    row_t r;
    memset(&r, 0, sizeof r);
    r.kernel = (uint64_t)(uintptr_t)kernel;
    r.module = p->phModule ? (uint64_t)(uintptr_t)*p->phModule : 0;
    r.created_ns = now_ns();
    r.format = -1;
    const char *name = (p->pdesc && *p->pdesc && (*p->pdesc)->pKernelName) ? (*p->pdesc)->pKernelName : "";
    kernel_properties_t props;
    register_file_size_t grf = {STYPE_REGISTER_FILE_SIZE_EXP, NULL, NOT_REPORTED};
    memset(&props, 0xFF, sizeof props);
    props.stype = STYPE_KERNEL_PROPERTIES;
    props.pNext = &grf;
    get_props_fn get = __atomic_load_n(&fn_get_props, __ATOMIC_ACQUIRE);
    r.props_result = get ? get(kernel, &props) : -1;
    if (r.props_result != 0) memset(&props, 0xFF, sizeof props);
    r.num_args = props.numKernelArgs; r.req_x = props.requiredGroupSizeX; r.req_y = props.requiredGroupSizeY;
    r.req_z = props.requiredGroupSizeZ; r.req_num_subgroups = props.requiredNumSubGroups;
    r.req_subgroup_size = props.requiredSubgroupSize; r.max_subgroup_size = props.maxSubgroupSize;
    r.max_num_subgroups = props.maxNumSubgroups; r.slm = props.localMemSize; r.private_mem = props.privateMemSize;
    r.spill_mem = props.spillMemSize;
    r.register_file_size = r.props_result == 0 ? grf.registerFileSize : NOT_REPORTED;
    char *copy = strdup(name);
    if (!copy) return;
    pthread_mutex_lock(&lock);
    for (size_t i = nmods; i-- > 0;)
        if (mods[i].module == r.module && mods[i].alive) { r.format = mods[i].format; r.device = mods[i].device; break; }
    if (nrows == cap_rows) {
        size_t ncap = cap_rows ? 2 * cap_rows : 256;
        row_t *grown_rows = realloc(rows_v, ncap * sizeof *rows_v);
        if (grown_rows) rows_v = grown_rows;
        char **grown_names = grown_rows ? realloc(names_v, ncap * sizeof *names_v) : NULL;
        if (grown_names) names_v = grown_names;
        if (!grown_rows || !grown_names) { pthread_mutex_unlock(&lock); free(copy); return; }
        cap_rows = ncap;
    }
    rows_v[nrows] = r;
    names_v[nrows++] = copy;
    pthread_mutex_unlock(&lock);
}

static void drop_tracer(void) {
    if (tracer) {
        if (fn_set_enabled) fn_set_enabled(tracer, 0);
        if (fn_destroy) fn_destroy(tracer);
        tracer = NULL;
    }
}

static PyObject *py_install(PyObject *self, PyObject *args) {
    unsigned long long a[8];
    if (!PyArg_ParseTuple(args, "(KKKKKKKK)", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7])) return NULL;
    for (int i = 0; i < 7; i++)
        if (!a[i]) { PyErr_Format(PyExc_ValueError, "install: function address %d is NULL", i); return NULL; }
    drop_tracer();
    create_fn create = (create_fn)(uintptr_t)a[0];
    register_fn reg_module = (register_fn)(uintptr_t)a[3], reg_destroy = (register_fn)(uintptr_t)a[4],
                reg_kernel = (register_fn)(uintptr_t)a[5];
    fn_destroy = (destroy_fn)(uintptr_t)a[1];
    fn_set_enabled = (set_enabled_fn)(uintptr_t)a[2];
    __atomic_store_n(&fn_get_props, (get_props_fn)(uintptr_t)a[6], __ATOMIC_RELEASE);
    int layer = a[7] ? ((enable_layer_fn)(uintptr_t)a[7])() : 0;
    if (layer != 0) {
        PyErr_Format(PyExc_RuntimeError, "zelEnableTracingLayer failed with 0x%08x", layer);
        return NULL;
    }
    tracer_desc_t desc = {1u, NULL, &user_data_anchor};
    void *t = NULL;
    int rc = create(&desc, &t);
    const char *step = "zelTracerCreate";
    if (rc == 0) { step = "zelTracerModuleCreateRegisterCallback"; rc = reg_module(t, REGISTER_EPILOGUE, (void *)on_module_create); }
    if (rc == 0) { step = "zelTracerModuleDestroyRegisterCallback"; rc = reg_destroy(t, REGISTER_EPILOGUE, (void *)on_module_destroy); }
    if (rc == 0) { step = "zelTracerKernelCreateRegisterCallback"; rc = reg_kernel(t, REGISTER_EPILOGUE, (void *)on_kernel_create); }
    if (rc == 0) { step = "zelTracerSetEnabled"; rc = fn_set_enabled(t, 1); }
    if (rc != 0) {
        if (t) fn_destroy(t);
        PyErr_Format(PyExc_RuntimeError, "%s failed with 0x%08x", step, rc);
        return NULL;
    }
    tracer = t;
    Py_RETURN_NONE;
}

static PyObject *py_uninstall(PyObject *self, PyObject *noargs) {
    drop_tracer();
    Py_RETURN_NONE;
}

static PyObject *py_installed(PyObject *self, PyObject *noargs) { return PyBool_FromLong(tracer != NULL); }

static PyObject *py_rows(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&lock);
    size_t n = nrows;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)rows_v, (Py_ssize_t)(n * sizeof(row_t)));
    PyObject *names = raw ? PyList_New((Py_ssize_t)n) : NULL;
    for (size_t i = 0; names && i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(names_v[i], (Py_ssize_t)strlen(names_v[i]), "replace");
        if (!s) { Py_CLEAR(names); break; }
        PyList_SET_ITEM(names, (Py_ssize_t)i, s);
    }
    pthread_mutex_unlock(&lock);
    if (!names) { Py_XDECREF(raw); return NULL; }
    return Py_BuildValue("(NN)", raw, names);
}

static PyObject *py_count(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&lock);
    size_t n = nrows;
    pthread_mutex_unlock(&lock);
    return PyLong_FromSize_t(n);
}

static PyObject *py_reset(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nrows; i++) free(names_v[i]);
    nrows = 0;
    nmods = 0;
    pthread_mutex_unlock(&lock);
    Py_RETURN_NONE;
}

static PyObject *py_row_size(PyObject *self, PyObject *noargs) { return PyLong_FromSize_t(sizeof(row_t)); }

static PyMethodDef methods[] = {
    {"install", py_install, METH_VARARGS,
     "install($module, addresses, /)\n--\n\n"
     "Trace zeModuleCreate/Destroy and zeKernelCreate; addresses: the loader's 8 tracer function addresses."},
    {"uninstall", py_uninstall, METH_NOARGS,
     "uninstall($module, /)\n--\n\nDisable and destroy the tracer (the rows stay)."},
    {"installed", py_installed, METH_NOARGS, "installed($module, /)\n--\n\nTrue while a tracer is installed."},
    {"rows", py_rows, METH_NOARGS,
     "rows($module, /)\n--\n\n(row bytes, kernel names) of every kernel created since install/reset."},
    {"count", py_count, METH_NOARGS, "count($module, /)\n--\n\nKernels recorded."},
    {"reset", py_reset, METH_NOARGS, "reset($module, /)\n--\n\nForget the recorded kernels and modules."},
    {"row_size", py_row_size, METH_NOARGS,
     "row_size($module, /)\n--\n\nsizeof one row (the Python dtype checks it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.zekernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit_zekernels(void) { return PyModule_Create(&module); }
