/* xpuprof._native.hostrec: the C fast path of xpuprof.record_function.
 *
 * A pure-Python context manager costs ~0.7 us per enter+exit on a small machine, over the
 * 0.5 us budget. Here enter/exit are C methods: enter reads the monotonic clock and takes a
 * correlation id; exit writes one fixed-size record (t0, t1, tid, id, name index, args index)
 * into the recorder's Int64Log - no Python object per range. A name gets an index in the
 * recorder's NameTable (shared/nametable.c: distinct names as UTF-8 text in one buffer) the first time
 * it is seen; dict args are encoded as JSON into the recorder's ArgsArea (shared/argsarea.c), other args
 * objects go to a list. stop() reads the log and the area as numpy arrays.
 * External correlation (shared/correlation.c): the logical range follows contextvars; each thread's open
 * ranges are mirrored for the sessions - a correlation_log (an Int64Log of (id or -id, tid, ns,
 * parent id) marks) written in C, correlation_hooks (the vendor library's C push/pop entry points)
 * called from C, or the session's push/pop_correlation_id methods.
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

#include "shared/argsarea.h"    /* ArgsArea: dict args encoded at the call */
#include "shared/correlation.h" /* the logical range, the sessions */
#include "shared/hostmem.h"     /* where the recorder's arrays live (memory or a spill file), the recording cap */
#include "shared/int64log.h"
#include "shared/nametable.h"
#include "shared/recorder.h"    /* the state below that correlation.c reads */

PyObject *recorder = NULL; /* the active HostRecorder (strong ref) or NULL */
int track_correlation = 0;
uint64_t generation = 1; /* bumps on every set_recorder: threads re-announce their name */
static int64_t last_correlation_id = 0;

static THREAD_LOCAL long cached_tid = 0;
static THREAD_LOCAL uint64_t named_generation = 0;

static PyObject *str_name_thread;

int64_t mono_ns(void) {
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


/* ---------------------------------------------------------------- the active recorder */
enum { F_T0, F_T1, F_TID, F_CID, F_NAME, F_ARGS, RANGE_WIDTH };
#define MARK_WIDTH 4

static Int64LogObject *ranges = NULL; /* recorder.ranges */
static Int64LogObject *truncated = NULL; /* recorder.truncated: ranges still open when recording stopped */
static Int64LogObject *instants = NULL; /* recorder.instants (appended from Python; charged to the budget) */
static int64_t n_not_recorded = 0;     /* ranges not recorded since recording stopped (the cap, no memory) */
static NameTableObject *name_table = NULL; /* recorder.names: the cycle's distinct names */
static PyObject *args_list = NULL;    /* recorder.args: args kept as objects (see append_range) */
static ArgsAreaObject *args_area = NULL; /* recorder.args_area: args encoded at the call */
/* correlation targets (recorder.h): a session's Int64Log of marks, its bound push/pop methods, or its
 * vendor library's C entry points */
Int64LogObject *mark_logs[MAX_SESSIONS];
PyObject *push_fns[MAX_SESSIONS], *pop_fns[MAX_SESSIONS];
int n_mark_logs = 0, n_push_fns = 0;
void *push_hooks[MAX_SESSIONS], *pop_hooks[MAX_SESSIONS];
uint64_t hook_kinds[MAX_SESSIONS];
thread_id_fn hook_thread_ids[MAX_SESSIONS];
Py_buffer hook_failures[MAX_SESSIONS];
int n_hooks = 0;

/* ---------------------------------------------------------------- open ranges on file
 * With a crash-safe copy (host/spill.py), the ranges open now are on file too: a process that dies inside
 * `with record_function("step 17")` leaves that range, drawn up to its end. recorder.open_slots is an
 * Int64Log(OPEN_WIDTH) in a spill file; each open range holds one row (rows are reused through a free
 * list), whose state is written last on open and cleared on close. Without a copy: nothing of this runs. */
enum { O_T0, O_TID, O_CID, O_NAME, O_STATE, OPEN_WIDTH };
static Int64LogObject *open_log = NULL;
static Py_ssize_t *free_slots = NULL, n_free = 0, free_cap = 0;
static int64_t nt_intern_for_slot(PyObject *name) { return name_table ? nt_intern(name_table, name) : -1; }

static void slot_open(RangeObject *r) {
    int64_t name = nt_intern_for_slot(r->name);
    if (name < 0) { PyErr_Clear(); return; } /* not on file: a crash would lose only this open range */
    Py_ssize_t row;
    if (n_free) {
        row = free_slots[--n_free];
    } else {
        int refused;
        if (!log_row(open_log, &refused)) { PyErr_Clear(); return; }
        row = open_log->rows - 1;
    }
    int64_t *v = open_log->data + row * OPEN_WIDTH;
    v[O_T0] = r->t0;
    v[O_TID] = r->tid;
    v[O_CID] = r->cid;
    v[O_NAME] = name;
    __atomic_store_n(&v[O_STATE], 1, __ATOMIC_RELEASE);
    log_commit(open_log);
    r->slot1 = row + 1;
}

static void slot_close(RangeObject *r) {
    Py_ssize_t row = r->slot1 - 1;
    r->slot1 = 0;
    if (!open_log || row >= open_log->rows) return;
    __atomic_store_n(&open_log->data[row * OPEN_WIDTH + O_STATE], 0, __ATOMIC_RELEASE);
    if (n_free == free_cap) {
        Py_ssize_t cap = free_cap ? free_cap * 2 : 64;
        Py_ssize_t *f = PyMem_RawRealloc(free_slots, (size_t)cap * sizeof *f);
        if (!f) return; /* the row stays unused: the log grows instead */
        free_slots = f;
        free_cap = cap;
    }
    free_slots[n_free++] = row;
}

/* every open range of the active recorder (intrusive list; borrowed) */
static RangeObject *open_head = NULL;

static void open_link(RangeObject *r) {
    r->open_prev = NULL;
    r->open_next = open_head;
    if (open_head) open_head->open_prev = r;
    open_head = r;
    r->linked = 1;
    if (open_log) slot_open(r);
}

static void open_unlink(RangeObject *r) {
    if (!r->linked) return;
    if (r->slot1) slot_close(r);
    if (r->open_prev) r->open_prev->open_next = r->open_next;
    else open_head = r->open_next;
    if (r->open_next) r->open_next->open_prev = r->open_prev;
    r->open_prev = r->open_next = NULL;
    r->linked = 0;
}

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
    Py_VISIT(self->parent);
    Py_VISIT(self->frame);
    return 0;
}

static int range_clear(RangeObject *self) {
    Py_CLEAR(self->name);
    Py_CLEAR(self->args);
    Py_CLEAR(self->rec);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->frame);
    return 0;
}

static void range_dealloc(RangeObject *self) {
    PyObject_GC_UnTrack(self);
    open_unlink(self); /* entered, never exited, dropped: no longer open */
    range_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Opens the range for the active recorder (a range object entered again starts over). */
static int open_for_recorder(RangeObject *self) {
    open_unlink(self);
    self->cid = ++last_correlation_id;
    self->t0 = mono_ns();
    self->tid = native_tid();
    self->closed = 0;
    Py_INCREF(recorder);
    Py_XSETREF(self->rec, recorder);
    open_link(self);
    /* after the start time: linked work lies inside the range */
    return track_correlation ? corr_enter(self) : 0;
}

/* A MemoryError from the recorder's own storage is never raised into the user's code: recording stops
 * there (said in the trace) and the program goes on. 1 when the error was that (and is cleared). */
static int absorb_memory_error(void) {
    if (!PyErr_ExceptionMatches(PyExc_MemoryError)) return 0;
    PyErr_Clear();
    recording_stops("the system refused more memory");
    n_not_recorded++;
    return 1;
}

static PyObject *range_enter(RangeObject *self, PyObject *unused) {
    if (recorder != NULL) {
        if (stop_ns) n_not_recorded++; /* recording stopped at the cap: counted, not recorded */
        else if (open_for_recorder(self) < 0 && !absorb_memory_error()) return NULL;
    }
    Py_INCREF(self);
    return (PyObject *)self;
}

static int append_range(RangeObject *self, int64_t t1, Int64LogObject *log) {
    int64_t name = nt_intern(name_table, self->name); /* str or bytes: checked when the range was made */
    if (name == -2) { ranges->refused++; return 0; } /* the cycle's names were exported: it has ended */
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
    int64_t *row = log_row(log, &refused);
    if (!row) return refused ? 0 : -1;
    row[F_T0] = self->t0;
    row[F_T1] = t1;
    row[F_TID] = self->tid;
    row[F_CID] = self->cid;
    row[F_NAME] = name;
    row[F_ARGS] = args;
    log_commit(log);
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
    open_unlink(self);
    long tid = native_tid();
    if (tid != self->tid) n_cross_thread++; /* drawn on the entering thread's row; said in the trace */
    self->closed = 1;
    if (track_correlation && corr_exit(self, tid) < 0) goto fail;
    int64_t t1 = mono_ns();
    if (named_generation != generation) {
        PyObject *t = PyLong_FromLong(tid);
        if (!t) goto fail;
        PyObject *r = PyObject_CallMethodOneArg(rec, str_name_thread, t);
        Py_DECREF(t);
        if (!r) goto fail;
        Py_DECREF(r);
        named_generation = generation;
    }
    if (stop_ns) n_not_recorded++; /* entered before recording stopped, exited after: not recorded */
    else if (ranges != NULL && append_range(self, t1, ranges) < 0 && !absorb_memory_error()) goto fail;
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
    {"__enter__", (PyCFunction)range_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nOpen the range."},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL,
     "__exit__($self, exc_type, exc, tb, /)\n--\n\nClose the range."},
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

PyTypeObject RangeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof.record_function",
    .tp_basicsize = sizeof(RangeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "record_function(name, args=None)\n--\n\nA named host range (context manager and decorator).\n\n"
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
    while (open_head) open_unlink(open_head); /* ranges still open belong to no trace from here on */
    Py_CLEAR(open_log);
    n_free = 0;
    reset_lifetimes();
    Py_CLEAR(recorder);
    Py_CLEAR(ranges);
    Py_CLEAR(truncated);
    Py_CLEAR(instants);
    Py_CLEAR(name_table);
    Py_CLEAR(args_area);
    Py_CLEAR(args_list);
    for (int i = 0; i < n_mark_logs; i++) Py_CLEAR(mark_logs[i]);
    for (int i = 0; i < n_push_fns; i++) { Py_CLEAR(push_fns[i]); Py_CLEAR(pop_fns[i]); }
    for (int i = 0; i < n_hooks; i++) PyBuffer_Release(&hook_failures[i]);
    n_mark_logs = n_push_fns = n_hooks = 0;
    track_correlation = 0;
    generation++;
    budget_gen++; /* the old recorder's blocks are charged to no budget from here */
    budget_used = 0;
    budget_cap = INT64_MAX;
    stop_ns = 0;
    stop_reason[0] = 0;
    n_not_recorded = 0;
}

/* The active recorder's blocks, charged to its budget (`recorder.max_bytes`, 0: no cap) from here on. */
static int start_budget(PyObject *rec) {
    PyObject *v = PyObject_GetAttrString(rec, "max_bytes");
    if (!v) return -1;
    long long cap = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (cap == -1 && PyErr_Occurred()) return -1;
    if (cap < 0) { PyErr_SetString(PyExc_ValueError, "recorder.max_bytes must be >= 0 (0: no cap)"); return -1; }
    budget_cap = cap ? (int64_t)cap : INT64_MAX;
    budget_used = 0;
    Int64LogObject *logs[4 + MAX_SESSIONS] = {ranges, instants, name_table->offsets, args_area->ends};
    int n = 4;
    for (int i = 0; i < n_mark_logs; i++) logs[n++] = mark_logs[i];
    for (int i = 0; i < n; i++)
        store_charge(&logs[i]->store, (size_t)logs[i]->cap * (size_t)logs[i]->width * sizeof(int64_t));
    store_charge(&name_table->blob_store, (size_t)name_table->blob_cap);
    store_charge(&args_area->store, (size_t)args_area->cap);
    return 0;
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

/* set_recorder(recorder): take recorder.ranges/names/args and, per session in
 * recorder.sessions, its correlation_log (an Int64Log(4)) or its push/pop_correlation_id. */
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
    if (!(name_table = (NameTableObject *)attr_of_type(rec, "names", &NameTableType, "a NameTable"))) goto fail;
    truncated = (Int64LogObject *)attr_of_type(rec, "truncated", &Int64LogType, "an Int64Log");
    if (!truncated) goto fail;
    if (!(instants = (Int64LogObject *)attr_of_type(rec, "instants", &Int64LogType, "an Int64Log"))) goto fail;
    PyObject *slots = PyObject_GetAttrString(rec, "open_slots");
    if (!slots) goto fail;
    if (slots != Py_None) {
        if (!PyObject_TypeCheck(slots, &Int64LogType) || ((Int64LogObject *)slots)->width != OPEN_WIDTH) {
            Py_DECREF(slots);
            PyErr_SetString(PyExc_TypeError, "recorder.open_slots must be None or an Int64Log(5)");
            goto fail;
        }
        open_log = (Int64LogObject *)slots;
    } else {
        Py_DECREF(slots);
    }
    if (truncated->width != RANGE_WIDTH) {
        PyErr_SetString(PyExc_ValueError, "recorder.truncated must be an Int64Log(6)");
        goto fail;
    }
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
        if (lg && PyObject_TypeCheck(lg, &Int64LogType) && ((Int64LogObject *)lg)->width == MARK_WIDTH) {
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
    if (start_budget(rec) < 0) goto fail;
    Py_INCREF(rec);
    recorder = rec;
    track_correlation = (n_mark_logs + n_push_fns + n_hooks) > 0;
    Py_RETURN_NONE;
fail:
    forget_recorder();
    return NULL;
}

/* The pure-Python record_function takes part through a handle: a range object with no name, whose
 * correlation is this module's (the logical range, the threads' stacks, the sessions). */
static PyObject *correlation_enter(PyObject *mod, PyObject *cid) {
    int64_t v = PyLong_AsLongLong(cid);
    if (v == -1 && PyErr_Occurred()) return NULL;
    RangeObject *h = (RangeObject *)RangeType.tp_alloc(&RangeType, 0);
    if (!h) return NULL;
    if (recorder != NULL && track_correlation) {
        h->cid = v;
        h->t0 = mono_ns();
        h->tid = native_tid();
        Py_INCREF(recorder);
        h->rec = recorder;
        if (corr_enter(h) < 0) { Py_DECREF(h); return NULL; }
    }
    return (PyObject *)h;
}

static PyObject *correlation_exit(PyObject *mod, PyObject *h) {
    if (!PyObject_TypeCheck(h, &RangeType)) {
        PyErr_SetString(PyExc_TypeError, "correlation_exit takes the handle correlation_enter returned");
        return NULL;
    }
    RangeObject *r = (RangeObject *)h;
    if (r->rec == NULL || r->rec != recorder || !track_correlation) Py_RETURN_NONE;
    long tid = native_tid();
    if (tid != r->tid) n_cross_thread++;
    Py_CLEAR(r->rec);
    if (corr_exit(r, tid) < 0) return NULL;
    Py_RETURN_NONE;
}

/* close_open_ranges(end_ns): every range still open is recorded into recorder.truncated as ending
 * at end_ns (the window's end) and closed; a later exit of it records nothing more. Returns the count. */
static PyObject *close_open_ranges(PyObject *mod, PyObject *end_obj) {
    int64_t end = PyLong_AsLongLong(end_obj);
    if (end == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = 0;
    while (open_head) {
        RangeObject *r = open_head;
        open_unlink(r);
        if (r->rec != recorder || recorder == NULL) continue;
        r->closed = 1;
        Py_INCREF(r);
        int rc = truncated != NULL ? append_range(r, end > r->t0 ? end : r->t0, truncated) : 0;
        Py_CLEAR(r->rec);
        Py_DECREF(r);
        if (rc < 0) {
            if (absorb_memory_error()) continue; /* its name could not be stored: counted, not recorded */
            return NULL;
        }
        n++;
    }
    return PyLong_FromSsize_t(n);
}

/* After fork, in the child: nothing of the parent's recording goes on (the child records only if it
 * starts its own profile). Called from os.register_at_fork(after_in_child=...). */
static PyObject *after_fork(PyObject *mod, PyObject *unused) {
    cached_tid = 0;
    correlation_after_fork();
    forget_recorder();
    Py_RETURN_NONE;
}

/* recording_state() -> (stopped at ns or 0, why, ranges not recorded since, bytes taken, cap or 0). */
static PyObject *recording_state(PyObject *mod, PyObject *unused) {
    return Py_BuildValue("(LsLLL)", (long long)stop_ns, stop_reason, (long long)n_not_recorded, (long long)budget_used,
                         (long long)(budget_cap == INT64_MAX ? 0 : budget_cap));
}

/* stop_recording(why): what instant() calls when its own row cannot be stored (the same stop as a range's). */
static PyObject *stop_recording(PyObject *mod, PyObject *why) {
    const char *text = PyUnicode_AsUTF8(why);
    if (!text) return NULL;
    recording_stops(text);
    Py_RETURN_NONE;
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
    {"set_recorder", set_recorder, METH_O,
     "set_recorder($module, recorder, /)\n--\n\nInstall the active HostRecorder (None: stop recording)."},
    {"set_name_cleaner", set_name_cleaner, METH_VARARGS,
     "set_name_cleaner($module, cleaner, max_chars, /)\n--\n\n"
     "Register cleaner(name) -> (clean str, had invalid UTF-8) for names that are not plain valid text, and the "
     "longest name (in characters) stored as given."},
    {"set_args_encoder", set_args_encoder, METH_O,
     "set_args_encoder($module, encoder, /)\n--\n\n"
     "Register encode(dict) -> JSON bytes, used to store a range's dict args compactly (None: store objects)."},
    {"set_decorator", set_decorator, METH_O,
     "set_decorator($module, decorate, /)\n--\n\nRegister decorate(range, fn) -> wrapper for @record_function."},
    {"next_correlation_id", next_correlation_id, METH_NOARGS,
     "next_correlation_id($module, /)\n--\n\nA new process-wide correlation id."},
    {"correlation_enter", correlation_enter, METH_O,
     "correlation_enter($module, correlation_id, /)\n--\n\n"
     "Open a pure-Python range's correlation (its id); returns the handle correlation_exit takes."},
    {"correlation_exit", correlation_exit, METH_O,
     "correlation_exit($module, handle, /)\n--\n\nClose a pure-Python range's correlation."},
    {"current_correlation_id", current_correlation_id, METH_NOARGS,
     "current_correlation_id($module, /)\n--\n\n"
     "The innermost open range's id in the calling context (0 when none is linked)."},
    {"lifetimes", lifetimes, METH_NOARGS,
     "lifetimes($module, /)\n--\n\n"
     "Counts of this recording's ranges whose lifetimes the trace must mention (out of order, other thread, "
     "interleaved contexts) and the deepest nesting."},
    {"close_open_ranges", close_open_ranges, METH_O,
     "close_open_ranges($module, end_ns, /)\n--\n\n"
     "Record every range still open as ending at end_ns (into recorder.truncated) and close it; the count."},
    {"after_fork", after_fork, METH_NOARGS,
     "after_fork($module, /)\n--\n\nForget the parent's recording in a forked child."},
    {"recording_state", recording_state, METH_NOARGS,
     "recording_state($module, /)\n--\n\n"
     "(stopped at monotonic ns or 0, why, ranges not recorded since, bytes the recorder's storage takes, cap or 0)."},
    {"stop_recording", stop_recording, METH_O,
     "stop_recording($module, why, /)\n--\n\nStop recording now (why: a str); later ranges are only counted."},
    {NULL},
};


static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "xpuprof._native.hostrec", "record_function fast path", -1, module_methods,
};

PyMODINIT_FUNC PyInit_hostrec(void) {
    if (PyType_Ready(&RangeType) < 0 || PyType_Ready(&Int64LogType) < 0 || PyType_Ready(&NameTableType) < 0
        || PyType_Ready(&ArgsAreaType) < 0 || correlation_init() < 0)
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
    Py_INCREF(&NameTableType);
    if (PyModule_AddObject(m, "NameTable", (PyObject *)&NameTableType) < 0) {
        Py_DECREF(&NameTableType);
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
