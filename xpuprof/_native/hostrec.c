/* xpuprof._native.hostrec: the C fast path of xpuprof.record_function.
 *
 * A pure-Python context manager costs ~0.7 us per enter+exit on a small machine, over the
 * 0.5 us budget. Here enter/exit are C methods: enter reads the monotonic clock and takes a
 * correlation id; exit appends (name, t0, t1, tid, id, args) to the active recorder's flat row
 * list. Everything else (correlation push/pop to device sessions, naming a thread the first
 * time it records) calls back into the Python HostRecorder, only when needed.
 * All state is touched with the GIL held.
 */
#define _GNU_SOURCE /* syscall(SYS_gettid) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static PyObject *recorder = NULL; /* the active HostRecorder (strong ref) or NULL */
static PyObject *rows = NULL;     /* recorder.rows (strong ref) */
static int track_correlation = 0;
static uint64_t generation = 1; /* bumps on every set_recorder: threads re-announce their name */
static int64_t last_correlation_id = 0;

static __thread long cached_tid = 0;
static __thread uint64_t named_generation = 0;

static PyObject *str_push, *str_pop, *str_name_thread;

static inline int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock time.monotonic_ns() reads on Linux */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long native_tid(void) {
    if (!cached_tid) cached_tid = (long)syscall(SYS_gettid);
    return cached_tid;
}

static void after_fork_child(void) {
    cached_tid = 0; /* the forking thread has a new tid in the child */
}

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *args;
    PyObject *rec; /* recorder at enter (strong ref) while open and recording */
    int64_t t0;
    int64_t cid;
} RangeObject;

static PyObject *decorate = NULL; /* Python helper: decorate(range, fn) -> wrapper */

static int range_init(RangeObject *self, PyObject *a, PyObject *kw) {
    static char *kwlist[] = {"name", "args", NULL};
    PyObject *name, *args = Py_None;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O|O:record_function", kwlist, &name, &args)) return -1;
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    Py_INCREF(args);
    Py_XSETREF(self->args, args);
    return 0;
}

/* record_function(name, args=None) without tuple/keyword parsing: construction is most of the
 * cost of a range when nothing records. */
static PyObject *range_vectorcall(PyObject *type, PyObject *const *a, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *name = NULL, *args = Py_None;
    if (kwnames == NULL && (n == 1 || n == 2)) {
        name = a[0];
        if (n == 2) args = a[1];
    } else {
        /* keywords or a wrong count: the general path gives the usual errors */
        PyObject *tuple = PyTuple_New(n);
        if (!tuple) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(a[i]);
            PyTuple_SET_ITEM(tuple, i, a[i]);
        }
        PyObject *kw = NULL;
        if (kwnames) {
            kw = PyDict_New();
            if (!kw) { Py_DECREF(tuple); return NULL; }
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++)
                if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), a[n + i]) < 0) {
                    Py_DECREF(tuple); Py_DECREF(kw); return NULL;
                }
        }
        PyObject *obj = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
        if (obj && range_init((RangeObject *)obj, tuple, kw) < 0) Py_CLEAR(obj);
        Py_DECREF(tuple);
        Py_XDECREF(kw);
        return obj;
    }
    RangeObject *self = (RangeObject *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (!self) return NULL;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(args);
    self->args = args;
    return (PyObject *)self;
}

static PyObject *range_call(RangeObject *self, PyObject *a, PyObject *kw) {
    PyObject *fn;
    if (kw != NULL || !PyArg_UnpackTuple(a, "record_function", 1, 1, &fn)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "record_function(...) decorates one callable");
        return NULL;
    }
    if (decorate == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "xpuprof.host.annotations did not register its decorator");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(decorate, (PyObject *)self, fn, NULL);
}

static int range_traverse(RangeObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->name);
    Py_VISIT(self->args);
    Py_VISIT(self->rec);
    return 0;
}

static int range_clear(RangeObject *self) {
    Py_CLEAR(self->name);
    Py_CLEAR(self->args);
    Py_CLEAR(self->rec);
    return 0;
}

static void range_dealloc(RangeObject *self) {
    PyObject_GC_UnTrack(self);
    range_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *range_enter(RangeObject *self, PyObject *unused) {
    if (recorder != NULL) {
        self->cid = ++last_correlation_id;
        self->t0 = mono_ns();
        Py_INCREF(recorder);
        Py_XSETREF(self->rec, recorder);
        if (track_correlation) {
            PyObject *cid = PyLong_FromLongLong(self->cid);
            if (!cid) return NULL;
            PyObject *r = PyObject_CallMethodOneArg(recorder, str_push, cid);
            Py_DECREF(cid);
            if (!r) return NULL;
            Py_DECREF(r);
        }
    }
    Py_INCREF(self);
    return (PyObject *)self;
}

static int append_row(RangeObject *self, int64_t t1, long tid) {
    PyObject *vals[6];
    vals[0] = self->name;
    vals[1] = PyLong_FromLongLong(self->t0);
    vals[2] = PyLong_FromLongLong(t1);
    vals[3] = PyLong_FromLong(tid);
    vals[4] = PyLong_FromLongLong(self->cid);
    vals[5] = self->args ? self->args : Py_None;
    int rc = 0;
    for (int i = 1; i < 5; i++)
        if (!vals[i]) rc = -1;
    for (int i = 0; i < 6 && rc == 0; i++)
        if (PyList_Append(rows, vals[i]) < 0) rc = -1;
    for (int i = 1; i < 5; i++) Py_XDECREF(vals[i]);
    return rc;
}

static PyObject *range_exit(RangeObject *self, PyObject *const *a, Py_ssize_t n) {
    PyObject *rec = self->rec;
    if (rec == NULL) Py_RETURN_FALSE;
    self->rec = NULL;
    /* A range still open when its recorder was replaced belongs to no trace: drop it. */
    if (rec != recorder) {
        Py_DECREF(rec);
        Py_RETURN_FALSE;
    }
    if (track_correlation) {
        PyObject *r = PyObject_CallMethodNoArgs(rec, str_pop);
        if (!r) goto fail;
        Py_DECREF(r);
    }
    int64_t t1 = mono_ns();
    long tid = native_tid();
    if (named_generation != generation) {
        PyObject *t = PyLong_FromLong(tid);
        if (!t) goto fail;
        PyObject *r = PyObject_CallMethodOneArg(rec, str_name_thread, t);
        Py_DECREF(t);
        if (!r) goto fail;
        Py_DECREF(r);
        named_generation = generation;
    }
    if (rows != NULL && append_row(self, t1, tid) < 0) goto fail;
    Py_DECREF(rec);
    Py_RETURN_FALSE;
fail:
    Py_DECREF(rec);
    return NULL;
}

static PyObject *range_get_cid(RangeObject *self, void *closure) {
    return PyLong_FromLongLong(self->cid);
}

static PyMethodDef range_methods[] = {
    {"__enter__", (PyCFunction)range_enter, METH_NOARGS, "Open the range."},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL, "Close the range."},
    {NULL},
};

static PyMemberDef range_members[] = {
    {"name", T_OBJECT, offsetof(RangeObject, name), 0, "range name"},
    {"args", T_OBJECT, offsetof(RangeObject, args), 0, "args written to the slice (or None)"},
    {NULL},
};

static PyGetSetDef range_getset[] = {
    {"correlation_id", (getter)range_get_cid, NULL,
     "the id device work launched inside this range links to (0 when not recorded)", NULL},
    {NULL},
};

static PyTypeObject RangeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof.record_function",
    .tp_basicsize = sizeof(RangeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "record_function(name, args=None): a named host range (context manager and decorator).\n\n"
              "Becomes a user_annotation slice on the calling thread while a profiler records.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)range_init,
    .tp_dealloc = (destructor)range_dealloc,
    .tp_traverse = (traverseproc)range_traverse,
    .tp_clear = (inquiry)range_clear,
    .tp_methods = range_methods,
    .tp_members = range_members,
    .tp_getset = range_getset,
    .tp_call = (ternaryfunc)range_call,
    .tp_vectorcall = range_vectorcall,
};

static PyObject *set_recorder(PyObject *mod, PyObject *rec) {
    if (rec == Py_None) {
        Py_CLEAR(recorder);
        Py_CLEAR(rows);
        track_correlation = 0;
        generation++;
        Py_RETURN_NONE;
    }
    PyObject *r = PyObject_GetAttrString(rec, "rows");
    if (!r) return NULL;
    if (!PyList_CheckExact(r)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "recorder.rows must be a list");
        return NULL;
    }
    PyObject *t = PyObject_GetAttrString(rec, "track_correlation");
    if (!t) {
        Py_DECREF(r);
        return NULL;
    }
    int track = PyObject_IsTrue(t);
    Py_DECREF(t);
    if (track < 0) {
        Py_DECREF(r);
        return NULL;
    }
    Py_INCREF(rec);
    Py_XSETREF(recorder, rec);
    Py_XSETREF(rows, r);
    track_correlation = track;
    generation++;
    Py_RETURN_NONE;
}

static PyObject *set_decorator(PyObject *mod, PyObject *fn) {
    Py_INCREF(fn);
    Py_XSETREF(decorate, fn);
    Py_RETURN_NONE;
}

static PyObject *next_correlation_id(PyObject *mod, PyObject *unused) {
    return PyLong_FromLongLong(++last_correlation_id);
}

static PyMethodDef module_methods[] = {
    {"set_recorder", set_recorder, METH_O, "Install the active HostRecorder (None: stop recording)."},
    {"set_decorator", set_decorator, METH_O, "Register decorate(range, fn) -> wrapper for @record_function."},
    {"next_correlation_id", next_correlation_id, METH_NOARGS, "A new process-wide correlation id."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "xpuprof._native.hostrec", "record_function fast path", -1, module_methods,
};

PyMODINIT_FUNC PyInit_hostrec(void) {
    if (PyType_Ready(&RangeType) < 0) return NULL;
    str_push = PyUnicode_InternFromString("push");
    str_pop = PyUnicode_InternFromString("pop");
    str_name_thread = PyUnicode_InternFromString("name_thread");
    if (!str_push || !str_pop || !str_name_thread) return NULL;
    pthread_atfork(NULL, NULL, after_fork_child);
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&RangeType);
    if (PyModule_AddObject(m, "Range", (PyObject *)&RangeType) < 0) {
        Py_DECREF(&RangeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
