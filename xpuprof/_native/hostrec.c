/* xpuprof._native.hostrec: the C fast path of xpuprof.record_function.
 *
 * A pure-Python context manager costs ~0.7 us per enter+exit on a small machine, over the
 * 0.5 us budget. Here enter/exit are C methods: enter reads the monotonic clock and takes a
 * correlation id; exit writes one fixed-size record (t0, t1, tid, id, name index, args index)
 * into the recorder's Int64Log - no Python object per range. A name is looked up in a dict
 * keyed by the name object (its hash is cached) and gets an index the first time it is seen;
 * dict args are encoded as JSON into the recorder's ArgsArea (argsarea.h), other args objects go to
 * a list. stop() reads the log and the area as numpy arrays.
 * External correlation: a per-thread stack of open ids lives here; sessions that hand over a
 * correlation_log (an Int64Log of (id or -1, tid, ns) marks) get marks written in C, sessions
 * that hand over correlation_hooks (their vendor library's C push/pop entry points) get those
 * called from C, other sessions get their push/pop_correlation_id methods called.
 * All state is touched with the GIL held.
 */
#define _GNU_SOURCE /* syscall(SYS_gettid) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static PyObject *recorder = NULL; /* the active HostRecorder (strong ref) or NULL */
static int track_correlation = 0;
static uint64_t generation = 1; /* bumps on every set_recorder: threads re-announce their name */
static int64_t last_correlation_id = 0;

static __thread long cached_tid = 0;
static __thread uint64_t named_generation = 0;

static PyObject *str_name_thread;

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


/* ---------------------------------------------------------------- Int64Log
 * Rows of `width` int64 values in one growing C array; exported read-only through the buffer
 * protocol (np.frombuffer) as n*width int64. Appends while a buffer is exported are refused
 * (the memory could move), counted in `refused`. */
typedef struct {
    PyObject_HEAD
    int64_t *data;
    Py_ssize_t rows, cap, width, exports, refused;
    Py_ssize_t shape; /* rows*width while exported (rows cannot change then) */
} Int64LogObject;

static PyTypeObject Int64LogType;

static int log_reserve(Int64LogObject *log) {
    if (log->rows < log->cap) return 0;
    Py_ssize_t cap = log->cap ? log->cap * 2 : 4096;
    /* realloc of large blocks is mremap on glibc: no copy, no doubled peak */
    int64_t *d = PyMem_RawRealloc(log->data, (size_t)cap * (size_t)log->width * sizeof(int64_t));
    if (!d) { PyErr_NoMemory(); return -1; }
    log->data = d;
    log->cap = cap;
    return 0;
}

/* One row; returns a pointer to its `width` slots or NULL (exception set, or refused: *refused=1). */
static inline int64_t *log_row(Int64LogObject *log, int *refused) {
    *refused = 0;
    if (log->exports) { log->refused++; *refused = 1; return NULL; }
    if (log_reserve(log) < 0) return NULL;
    return log->data + (log->rows++) * log->width;
}

static int log_init(Int64LogObject *self, PyObject *a, PyObject *kw) {
    static char *kwlist[] = {"width", NULL};
    Py_ssize_t width;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "n:Int64Log", kwlist, &width)) return -1;
    if (width < 1 || width > 64) { PyErr_SetString(PyExc_ValueError, "Int64Log width must be 1..64"); return -1; }
    if (self->exports) { PyErr_SetString(PyExc_BufferError, "Int64Log is exported"); return -1; }
    PyMem_RawFree(self->data);
    self->data = NULL;
    self->rows = self->cap = self->refused = 0;
    self->width = width;
    return 0;
}

static void log_dealloc(Int64LogObject *self) {
    PyMem_RawFree(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *log_append(Int64LogObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != self->width) {
        PyErr_Format(PyExc_TypeError, "Int64Log.append takes %zd ints, got %zd", self->width, n);
        return NULL;
    }
    int64_t tmp[64];
    for (Py_ssize_t i = 0; i < n; i++) {
        tmp[i] = PyLong_AsLongLong(a[i]);
        if (tmp[i] == -1 && PyErr_Occurred()) return NULL;
    }
    int refused;
    int64_t *row = log_row(self, &refused);
    if (!row) { if (refused) Py_RETURN_FALSE; return NULL; }
    memcpy(row, tmp, (size_t)n * sizeof(int64_t));
    Py_RETURN_TRUE;
}

static PyObject *log_clear(Int64LogObject *self, PyObject *unused) {
    if (self->exports) { PyErr_SetString(PyExc_BufferError, "Int64Log is exported: release the array first"); return NULL; }
    PyMem_RawFree(self->data);
    self->data = NULL;
    self->rows = self->cap = self->refused = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t log_len(Int64LogObject *self) { return self->rows; }

static int log_getbuffer(Int64LogObject *self, Py_buffer *view, int flags) {
    static int64_t empty = 0;
    if (flags & PyBUF_WRITABLE) { PyErr_SetString(PyExc_BufferError, "Int64Log is read-only"); return -1; }
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->buf = self->data ? (void *)self->data : (void *)&empty;
    view->len = self->rows * self->width * (Py_ssize_t)sizeof(int64_t);
    view->readonly = 1;
    view->itemsize = sizeof(int64_t);
    view->format = (flags & PyBUF_FORMAT) ? "q" : NULL;
    view->ndim = 1;
    view->shape = NULL;
    if (flags & PyBUF_ND) {
        self->shape = self->rows * self->width;
        view->shape = &self->shape;
    }
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? &view->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    self->exports++;
    return 0;
}

static void log_releasebuffer(Int64LogObject *self, Py_buffer *view) { self->exports--; }

static PyBufferProcs log_as_buffer = {(getbufferproc)log_getbuffer, (releasebufferproc)log_releasebuffer};
static PySequenceMethods log_as_sequence = {.sq_length = (lenfunc)log_len};

static PyMethodDef log_methods[] = {
    {"append", (PyCFunction)(void (*)(void))log_append, METH_FASTCALL,
     "Append one row of `width` ints; False when refused (the log is exported)."},
    {"clear", (PyCFunction)log_clear, METH_NOARGS, "Drop every row and free the memory."},
    {NULL},
};

static PyMemberDef log_members[] = {
    {"width", T_PYSSIZET, offsetof(Int64LogObject, width), READONLY, "int64 values per row"},
    {"refused", T_PYSSIZET, offsetof(Int64LogObject, refused), READONLY,
     "rows refused because the log was exported at the time"},
    {NULL},
};

static PyTypeObject Int64LogType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.hostrec.Int64Log",
    .tp_basicsize = sizeof(Int64LogObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Int64Log(width): rows of `width` int64 values in one C array; np.frombuffer reads them.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)log_init,
    .tp_dealloc = (destructor)log_dealloc,
    .tp_methods = log_methods,
    .tp_members = log_members,
    .tp_as_buffer = &log_as_buffer,
    .tp_as_sequence = &log_as_sequence,
};

#include "argsarea.h" /* ArgsArea: dict args encoded at the call (uses Int64Log) */

/* ---------------------------------------------------------------- the active recorder */
enum { F_T0, F_T1, F_TID, F_CID, F_NAME, F_ARGS, RANGE_WIDTH };
#define MAX_SESSIONS 16
#define STACK_DEPTH 256

static Int64LogObject *ranges = NULL; /* recorder.ranges */
static PyObject *name_index = NULL;   /* recorder.name_index: name object -> int index */
static PyObject *name_list = NULL;    /* recorder.names: index -> name object */
static PyObject *args_list = NULL;    /* recorder.args: args kept as objects (see append_range) */
static ArgsAreaObject *args_area = NULL; /* recorder.args_area: args encoded at the call */
/* correlation targets: a session's Int64Log of marks, or its bound push/pop methods */
static Int64LogObject *mark_logs[MAX_SESSIONS];
static PyObject *push_fns[MAX_SESSIONS], *pop_fns[MAX_SESSIONS];
static int n_mark_logs = 0, n_push_fns = 0;
/* Sessions whose vendor library takes the ids through C entry points, called here with no Python
 * call per range. Two shapes, both returning 0 on success:
 * - by kind: PTI's ptiViewPush/PopExternalCorrelationId(kind, id) and CUPTI's
 *   cuptiActivityPush/PopExternalCorrelationId(kind, id);
 * - by context and thread: rocprofiler-sdk's rocprofiler_push/pop_external_correlation_id(context,
 *   thread, id) with the thread from rocprofiler_get_thread_id(&thread) (the context and the
 *   user-data union are 8-byte values, passed as uint64 by the platform ABI).
 * A failing call is counted into the session's own buffer (int64 failures, int64 last result):
 * never silent. */
typedef int (*push_hook_fn)(uint32_t kind, uint64_t id);
typedef int (*pop_hook_fn)(uint32_t kind, uint64_t *id);
typedef int (*ctx_push_hook_fn)(uint64_t context, uint64_t thread, uint64_t id);
typedef int (*ctx_pop_hook_fn)(uint64_t context, uint64_t thread, uint64_t *id);
typedef int (*thread_id_fn)(uint64_t *thread);
static void *push_hooks[MAX_SESSIONS], *pop_hooks[MAX_SESSIONS];
static uint64_t hook_kinds[MAX_SESSIONS]; /* the kind, or the context for the second shape */
static thread_id_fn hook_thread_ids[MAX_SESSIONS]; /* NULL for the first shape */
static Py_buffer hook_failures[MAX_SESSIONS];
static int n_hooks = 0;

static __thread int64_t cid_stack[STACK_DEPTH];
static __thread int cid_depth = 0;
static __thread uint64_t stack_generation = 0;

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *args;
    PyObject *rec; /* recorder at enter (strong ref) while open and recording */
    int64_t t0;
    int64_t cid;
} RangeObject;

static PyObject *decorate = NULL; /* Python helper: decorate(range, fn) -> wrapper */
/* encode(args) -> exact-size JSON bytes: a dict's args are stored encoded (~60 B instead of the
 * dict); anything else, or a dict it cannot encode, is stored as the object and handled at stop. */
static PyObject *args_encoder = NULL;

/* A range's name as a new reference to a plain str or bytes (written as UTF-8, bad bytes replaced);
 * NULL with a TypeError for anything else. Checked at the call, so a bad name fails on the line that
 * passed it (a list reached only stop(), as an unhashable name, and lost the whole trace); a subclass
 * is stored as its plain value (its own __hash__, __eq__ or __str__ never run later). The exact-str
 * case is one pointer compare. */
static PyObject *checked_name(PyObject *name) {
    if (PyUnicode_CheckExact(name) || PyBytes_CheckExact(name)) {
        Py_INCREF(name);
        return name;
    }
    if (PyUnicode_Check(name)) return PyUnicode_FromObject(name);
    if (PyBytes_Check(name)) return PyBytes_FromStringAndSize(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name));
    PyErr_Format(PyExc_TypeError, "record_function name must be a str (or UTF-8 bytes), not %.200s (convert it "
                 "with str() first)", Py_TYPE(name)->tp_name);
    return NULL;
}

static int range_init(RangeObject *self, PyObject *a, PyObject *kw) {
    static char *kwlist[] = {"name", "args", NULL};
    PyObject *name, *args = Py_None;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O|O:record_function", kwlist, &name, &args)) return -1;
    name = checked_name(name);
    if (!name) return -1;
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
    if (PyUnicode_CheckExact(name)) {
        Py_INCREF(name);
    } else if (!(name = checked_name(name))) {
        return NULL;
    }
    RangeObject *self = (RangeObject *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (!self) { Py_DECREF(name); return NULL; }
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

/* A correlation mark (id on enter, -1 on exit) to every session that takes them in C; the push/pop
 * methods of the others. Returns -1 with an exception set. */
static int correlate(int64_t cid, int64_t t) {
    long tid = native_tid();
    for (int i = 0; i < n_mark_logs; i++) {
        int refused;
        int64_t *row = log_row(mark_logs[i], &refused);
        if (!row) {
            if (refused) continue; /* counted in the log's `refused` */
            return -1;
        }
        row[0] = cid;
        row[1] = tid;
        row[2] = t;
    }
    for (int i = 0; i < n_hooks; i++) {
        uint64_t popped = 0, thread = 0;
        int rc;
        if (hook_thread_ids[i]) {
            rc = hook_thread_ids[i](&thread);
            if (rc == 0)
                rc = cid > 0 ? ((ctx_push_hook_fn)push_hooks[i])(hook_kinds[i], thread, (uint64_t)cid)
                             : ((ctx_pop_hook_fn)pop_hooks[i])(hook_kinds[i], thread, &popped);
        } else {
            rc = cid > 0 ? ((push_hook_fn)push_hooks[i])((uint32_t)hook_kinds[i], (uint64_t)cid)
                         : ((pop_hook_fn)pop_hooks[i])((uint32_t)hook_kinds[i], &popped);
        }
        if (rc != 0) {
            int64_t *failed = (int64_t *)hook_failures[i].buf;
            failed[0]++;
            failed[1] = rc;
        }
    }
    for (int i = 0; i < n_push_fns; i++) {
        PyObject *r;
        if (cid > 0) {
            PyObject *c = PyLong_FromLongLong(cid);
            if (!c) return -1;
            r = PyObject_CallOneArg(push_fns[i], c);
            Py_DECREF(c);
        } else {
            r = PyObject_CallNoArgs(pop_fns[i]);
        }
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static inline void stack_sync(void) {
    if (stack_generation != generation) { /* a new recorder: ranges left open in the old one are gone */
        cid_depth = 0;
        stack_generation = generation;
    }
}

static PyObject *range_enter(RangeObject *self, PyObject *unused) {
    if (recorder != NULL) {
        self->cid = ++last_correlation_id;
        self->t0 = mono_ns();
        Py_INCREF(recorder);
        Py_XSETREF(self->rec, recorder);
        if (track_correlation) { /* after the start time: linked work lies inside the range */
            stack_sync();
            if (cid_depth < STACK_DEPTH) cid_stack[cid_depth] = self->cid;
            cid_depth++;
            if (correlate(self->cid, mono_ns()) < 0) return NULL;
        }
    }
    Py_INCREF(self);
    return (PyObject *)self;
}

/* The name's index in the recorder's name table, adding it the first time. */
static int64_t name_slot(PyObject *name) {
    PyObject *idx = PyDict_GetItemWithError(name_index, name); /* str or bytes: checked when the range was made */
    if (idx) return PyLong_AsLongLong(idx);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t n = PyList_GET_SIZE(name_list);
    idx = PyLong_FromSsize_t(n);
    if (!idx) return -1;
    int rc = PyDict_SetItem(name_index, name, idx);
    Py_DECREF(idx);
    if (rc < 0 || PyList_Append(name_list, name) < 0) return -1;
    return n;
}

static int append_range(RangeObject *self, int64_t t1, long tid) {
    int64_t name = name_slot(self->name);
    if (name < 0) return -1;
    /* args: entry k >= 0 of the args area (a dict encoded here, or by the Python encoder when it holds
     * more than plain values); -1 none; -2 - j: object j of args_list (anything else, encoded at stop). */
    int64_t args = -1;
    if (self->args && self->args != Py_None) {
        int64_t k = ARGS_UNSUPPORTED;
        if (args_area && PyDict_CheckExact(self->args)) {
            k = args_area_encode(args_area, self->args);
            if (k == ARGS_UNSUPPORTED && args_encoder) {
                PyObject *text = PyObject_CallOneArg(args_encoder, self->args);
                if (text) {
                    k = args_area_add(args_area, text);
                    Py_DECREF(text);
                } else {
                    PyErr_Clear(); /* kept as the object: stop() reports why it cannot be written */
                }
            }
            if (k == ARGS_ERROR) return -1;
        }
        if (k >= 0) {
            args = k;
        } else if (k != ARGS_REFUSED) { /* refused: counted in args_area.refused */
            args = -2 - PyList_GET_SIZE(args_list);
            if (PyList_Append(args_list, self->args) < 0) return -1;
        }
    }
    int refused;
    int64_t *row = log_row(ranges, &refused);
    if (!row) return refused ? 0 : -1;
    row[F_T0] = self->t0;
    row[F_T1] = t1;
    row[F_TID] = tid;
    row[F_CID] = self->cid;
    row[F_NAME] = name;
    row[F_ARGS] = args;
    return 0;
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
        stack_sync();
        if (cid_depth > 0) cid_depth--;
        if (correlate(-1, mono_ns()) < 0) goto fail;
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
    if (ranges != NULL && append_range(self, t1, tid) < 0) goto fail;
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
    {"name", T_OBJECT, offsetof(RangeObject, name), READONLY, "range name (a str or bytes, checked when the range is made)"},
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

static void forget_recorder(void) {
    Py_CLEAR(recorder);
    Py_CLEAR(ranges);
    Py_CLEAR(name_index);
    Py_CLEAR(name_list);
    Py_CLEAR(args_list);
    Py_CLEAR(args_area);
    for (int i = 0; i < n_mark_logs; i++) Py_CLEAR(mark_logs[i]);
    for (int i = 0; i < n_push_fns; i++) { Py_CLEAR(push_fns[i]); Py_CLEAR(pop_fns[i]); }
    for (int i = 0; i < n_hooks; i++) PyBuffer_Release(&hook_failures[i]);
    n_mark_logs = n_push_fns = n_hooks = 0;
    track_correlation = 0;
    generation++;
}

static PyObject *attr_of_type(PyObject *obj, const char *name, PyTypeObject *type, const char *what) {
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "recorder.%s must be %s", name, what);
        Py_CLEAR(v);
    }
    return v;
}

/* A session's correlation_hooks: None, or (push address, pop address, kind, failures buffer of
 * >= 16 writable bytes), or for the context shape (push, pop, context, failures, thread-id
 * address). 1 when taken, 0 when the session has none, -1 with an exception set. */
static int take_hooks(PyObject *s) {
    PyObject *h = PyObject_GetAttrString(s, "correlation_hooks");
    if (!h) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (h == Py_None) { Py_DECREF(h); return 0; }
    unsigned long long push, pop, kind, thread_id = 0;
    PyObject *failures;
    if (!PyTuple_Check(h) || !PyArg_ParseTuple(h, "KKKO|K", &push, &pop, &kind, &failures, &thread_id)) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "correlation_hooks must be (push address, pop address, kind, buffer) "
                                             "or (push address, pop address, context, buffer, thread-id address)");
        }
        Py_DECREF(h);
        return -1;
    }
    if (!push || !pop || (PyTuple_GET_SIZE(h) == 5 && !thread_id)) {
        PyErr_SetString(PyExc_ValueError, "correlation_hooks: a NULL push, pop or thread-id address");
        Py_DECREF(h);
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(failures, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) { Py_DECREF(h); return -1; }
    Py_DECREF(h);
    if (view.len < 16 || ((uintptr_t)view.buf % sizeof(int64_t)) != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "correlation_hooks: the failures buffer must hold two aligned int64");
        return -1;
    }
    push_hooks[n_hooks] = (void *)(uintptr_t)push;
    pop_hooks[n_hooks] = (void *)(uintptr_t)pop;
    hook_kinds[n_hooks] = kind;
    hook_thread_ids[n_hooks] = (thread_id_fn)(uintptr_t)thread_id;
    hook_failures[n_hooks++] = view; /* held until the recorder is forgotten: the session keeps it alive */
    return 1;
}

/* set_recorder(recorder): take recorder.ranges/name_index/names/args and, per session in
 * recorder.sessions, its correlation_log (an Int64Log(3)) or its push/pop_correlation_id. */
static PyObject *set_recorder(PyObject *mod, PyObject *rec) {
    forget_recorder();
    if (rec == Py_None) Py_RETURN_NONE;
    PyObject *sessions = NULL;
    ranges = (Int64LogObject *)attr_of_type(rec, "ranges", &Int64LogType, "an Int64Log");
    if (!ranges) goto fail;
    if (ranges->width != RANGE_WIDTH) {
        PyErr_SetString(PyExc_ValueError, "recorder.ranges must be an Int64Log(6)");
        goto fail;
    }
    if (!(name_index = attr_of_type(rec, "name_index", &PyDict_Type, "a dict"))) goto fail;
    if (!(name_list = attr_of_type(rec, "names", &PyList_Type, "a list"))) goto fail;
    if (!(args_list = attr_of_type(rec, "args", &PyList_Type, "a list"))) goto fail;
    if (!(args_area = (ArgsAreaObject *)attr_of_type(rec, "args_area", &ArgsAreaType, "an ArgsArea"))) goto fail;
    sessions = PyObject_GetAttrString(rec, "sessions");
    if (!sessions) goto fail;
    PyObject *seq = PySequence_Fast(sessions, "recorder.sessions must be a sequence");
    Py_CLEAR(sessions);
    if (!seq) goto fail;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    if (ns > MAX_SESSIONS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d sessions can link host ranges", MAX_SESSIONS);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *lg = PyObject_GetAttrString(s, "correlation_log");
        if (!lg) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) { Py_DECREF(seq); goto fail; }
            PyErr_Clear();
        }
        if (lg && PyObject_TypeCheck(lg, &Int64LogType) && ((Int64LogObject *)lg)->width == 3) {
            mark_logs[n_mark_logs++] = (Int64LogObject *)lg;
            continue;
        }
        Py_XDECREF(lg);
        int hooked = take_hooks(s);
        if (hooked < 0) { Py_DECREF(seq); goto fail; }
        if (hooked) continue;
        PyObject *push = PyObject_GetAttrString(s, "push_correlation_id");
        PyObject *pop = push ? PyObject_GetAttrString(s, "pop_correlation_id") : NULL;
        if (!pop) { Py_XDECREF(push); Py_DECREF(seq); goto fail; }
        push_fns[n_push_fns] = push;
        pop_fns[n_push_fns++] = pop;
    }
    Py_DECREF(seq);
    Py_INCREF(rec);
    recorder = rec;
    track_correlation = (n_mark_logs + n_push_fns + n_hooks) > 0;
    Py_RETURN_NONE;
fail:
    forget_recorder();
    return NULL;
}

/* The pure-Python record_function keeps its ids on the same per-thread stack. */
static PyObject *stack_push(PyObject *mod, PyObject *cid) {
    int64_t v = PyLong_AsLongLong(cid);
    if (v == -1 && PyErr_Occurred()) return NULL;
    stack_sync();
    if (cid_depth < STACK_DEPTH) cid_stack[cid_depth] = v;
    cid_depth++;
    Py_RETURN_NONE;
}

static PyObject *stack_pop(PyObject *mod, PyObject *unused) {
    stack_sync();
    if (cid_depth > 0) cid_depth--;
    Py_RETURN_NONE;
}

static PyObject *current_correlation_id(PyObject *mod, PyObject *unused) {
    if (recorder == NULL || !track_correlation) return PyLong_FromLong(0);
    stack_sync();
    if (cid_depth == 0) return PyLong_FromLong(0);
    /* deeper than STACK_DEPTH: the innermost stored id (the deepest ones are not kept) */
    return PyLong_FromLongLong(cid_stack[(cid_depth <= STACK_DEPTH ? cid_depth : STACK_DEPTH) - 1]);
}

static PyObject *set_args_encoder(PyObject *mod, PyObject *fn) {
    if (fn == Py_None) {
        Py_CLEAR(args_encoder);
    } else {
        Py_INCREF(fn);
        Py_XSETREF(args_encoder, fn);
    }
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
    {"set_args_encoder", set_args_encoder, METH_O,
     "Register encode(dict) -> JSON bytes, used to store a range's dict args compactly (None: store objects)."},
    {"set_decorator", set_decorator, METH_O, "Register decorate(range, fn) -> wrapper for @record_function."},
    {"next_correlation_id", next_correlation_id, METH_NOARGS, "A new process-wide correlation id."},
    {"stack_push", stack_push, METH_O, "Push an id on this thread's correlation stack (pure-Python ranges)."},
    {"stack_pop", stack_pop, METH_NOARGS, "Pop this thread's innermost correlation id (pure-Python ranges)."},
    {"current_correlation_id", current_correlation_id, METH_NOARGS,
     "The innermost open range's id on this thread (0 when none is linked)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "xpuprof._native.hostrec", "record_function fast path", -1, module_methods,
};

PyMODINIT_FUNC PyInit_hostrec(void) {
    if (PyType_Ready(&RangeType) < 0 || PyType_Ready(&Int64LogType) < 0 || PyType_Ready(&ArgsAreaType) < 0)
        return NULL;
    str_name_thread = PyUnicode_InternFromString("name_thread");
    if (!str_name_thread) return NULL;
    pthread_atfork(NULL, NULL, after_fork_child);
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&RangeType);
    if (PyModule_AddObject(m, "Range", (PyObject *)&RangeType) < 0) {
        Py_DECREF(&RangeType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&Int64LogType);
    if (PyModule_AddObject(m, "Int64Log", (PyObject *)&Int64LogType) < 0) {
        Py_DECREF(&Int64LogType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ArgsAreaType);
    if (PyModule_AddObject(m, "ArgsArea", (PyObject *)&ArgsAreaType) < 0) {
        Py_DECREF(&ArgsAreaType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
