/* Which range device work belongs to (correlation.h): the logical range, and what is told to device
 * sessions. */
#include "correlation.h"

#include <string.h>

#include "hostmem.h"
static PyObject *current_var = NULL; /* ContextVar: this context's frame */

typedef struct {
    PyObject_HEAD
    PyObject *ctx;   /* the context this frame belongs to (strong; identity only) */
    PyObject *range; /* the innermost range entered in it (strong), or NULL */
} FrameObject;

static int frame_traverse(FrameObject *f, visitproc visit, void *arg) {
    Py_VISIT(f->ctx);
    Py_VISIT(f->range);
    return 0;
}

static int frame_clear(FrameObject *f) {
    Py_CLEAR(f->ctx);
    Py_CLEAR(f->range);
    return 0;
}

static void frame_dealloc(FrameObject *f) {
    PyObject_GC_UnTrack(f);
    frame_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyTypeObject FrameType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.hostrec.ContextFrame",
    .tp_basicsize = sizeof(FrameObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The innermost range entered in one context.",
    .tp_dealloc = (destructor)frame_dealloc,
    .tp_traverse = (traverseproc)frame_traverse,
    .tp_clear = (inquiry)frame_clear,
};

/* This context's frame (borrowed from the context), made and set the first time it enters a range:
 * it starts from the innermost range of the frame it inherited (the context it was copied from). */
static FrameObject *own_frame(void) {
    PyObject *h = NULL;
    if (PyContextVar_Get(current_var, NULL, &h) < 0) return NULL;
    PyObject *ctx = PyThreadState_Get()->context; /* set by the Get above */
    if (h && ((FrameObject *)h)->ctx == ctx) {
        Py_DECREF(h); /* the context holds it */
        return (FrameObject *)h;
    }
    FrameObject *f = PyObject_GC_New(FrameObject, &FrameType);
    if (!f) { Py_XDECREF(h); return NULL; }
    f->ctx = ctx;
    Py_XINCREF(ctx);
    f->range = h ? ((FrameObject *)h)->range : NULL;
    Py_XINCREF(f->range);
    Py_XDECREF(h);
    PyObject_GC_Track(f);
    PyObject *token = PyContextVar_Set(current_var, (PyObject *)f);
    Py_DECREF(f); /* the context holds it */
    if (!token) return NULL;
    Py_DECREF(token);
    return f;
}

/* this thread's open ranges (strong refs), in enter order; any depth */
static THREAD_LOCAL RangeObject **tstack = NULL;
static THREAD_LOCAL Py_ssize_t tdepth = 0, tcap = 0;
static THREAD_LOCAL uint64_t stack_generation = 0;
static THREAD_LOCAL uint64_t pruned_at = 0;
static uint64_t closed_elsewhere = 0; /* bumps when a range is closed on a thread other than its own */

/* lifetimes of this recorder's ranges that the trace must mention */
int64_t n_cross_thread = 0;
static int64_t n_out_of_order = 0, n_interleaved = 0, max_depth = 0;

static inline int is_open(RangeObject *r) { return r && !r->closed && r->rec && r->rec == recorder; }

/* The innermost open range at or above `r` (a new reference, or NULL). */
static RangeObject *open_range(PyObject *r) {
    while (r && r != Py_None && PyObject_TypeCheck(r, &RangeType)) {
        if (is_open((RangeObject *)r)) {
            Py_INCREF(r);
            return (RangeObject *)r;
        }
        r = ((RangeObject *)r)->parent;
    }
    return NULL;
}

/* ---------------------------------------------------------------- sessions */
static int mark_all(int64_t v, long tid, int64_t t, int64_t parent) {
    for (int i = 0; i < n_mark_logs; i++) {
        int refused;
        int64_t *row = log_row(mark_logs[i], &refused);
        if (!row) {
            if (refused) continue; /* counted in the log's `refused` */
            if (!PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
            PyErr_Clear(); /* the recording cap (or no memory): recording stops, the program goes on */
            recording_stops("the system refused more memory");
            continue;
        }
        row[0] = v;
        row[1] = tid;
        row[2] = t;
        row[3] = parent;
    }
    return 0;
}

/* Push (cid > 0) or pop (cid == 0) the calling thread's external id in every vendor session. */
static int vendor(int64_t cid) {
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

static inline int has_vendor(void) { return n_hooks + n_push_fns > 0; }

/* ---------------------------------------------------------------- this thread's stack */
static void stack_sync(void) {
    if (stack_generation != generation) { /* a new recorder: ranges left open in the old one are gone */
        for (Py_ssize_t i = 0; i < tdepth; i++) Py_DECREF(tstack[i]);
        tdepth = 0;
        stack_generation = generation;
        pruned_at = closed_elsewhere;
    }
}

/* Remove entry k: pop it and everything above it from the vendor stacks, push the ones above again. */
static int stack_remove(Py_ssize_t k) {
    if (has_vendor()) {
        for (Py_ssize_t j = tdepth - 1; j >= k; j--)
            if (vendor(0) < 0) return -1;
    }
    RangeObject *gone = tstack[k];
    memmove(tstack + k, tstack + k + 1, (size_t)(tdepth - k - 1) * sizeof *tstack);
    tdepth--;
    Py_DECREF(gone);
    if (has_vendor()) {
        for (Py_ssize_t j = k; j < tdepth; j++)
            if (vendor(tstack[j]->cid) < 0) return -1;
    }
    return 0;
}

/* Ranges of this thread closed on another thread: out of its stack before it is used again. */
static int stack_prune(void) {
    if (pruned_at == closed_elsewhere) return 0;
    pruned_at = closed_elsewhere;
    for (Py_ssize_t k = tdepth - 1; k >= 0; k--)
        if (tstack[k]->closed && stack_remove(k) < 0) return -1;
    return 0;
}

static int stack_push(RangeObject *r) {
    if (tdepth == tcap) {
        Py_ssize_t cap = tcap ? tcap * 2 : 64;
        RangeObject **s = PyMem_RawRealloc(tstack, (size_t)cap * sizeof *s);
        if (!s) { PyErr_NoMemory(); return -1; }
        tstack = s;
        tcap = cap;
    }
    Py_INCREF(r);
    tstack[tdepth++] = r;
    if (tdepth > max_depth) max_depth = tdepth;
    return 0;
}

/* ---------------------------------------------------------------- enter / exit */
int corr_enter(RangeObject *self) {
    FrameObject *frame = own_frame();
    if (!frame) return -1;
    RangeObject *parent = open_range(frame->range);
    Py_XSETREF(self->parent, (PyObject *)parent); /* steals the new reference */
    Py_INCREF(frame);
    Py_XSETREF(self->frame, (PyObject *)frame);
    Py_INCREF(self);
    Py_XSETREF(frame->range, (PyObject *)self);
    stack_sync();
    if (stack_prune() < 0) return -1;
    RangeObject *top = tdepth ? tstack[tdepth - 1] : NULL;
    if (top != parent) n_interleaved++; /* another context's range is innermost on this thread */
    if (stack_push(self) < 0) return -1;
    if (mark_all(self->cid, self->tid, mono_ns(), parent ? parent->cid : 0) < 0) return -1;
    return vendor(self->cid);
}

int corr_exit(RangeObject *self, long tid) {
    self->closed = 1;
    FrameObject *frame = (FrameObject *)self->frame;
    self->frame = NULL;
    if (frame && frame->range == (PyObject *)self) { /* its context's innermost: back to what it nested in */
        Py_XINCREF(self->parent);
        Py_SETREF(frame->range, self->parent);
    }
    Py_XDECREF(frame);
    stack_sync();
    if (stack_prune() < 0) return -1;
    if (tid != self->tid) {
        closed_elsewhere++; /* its own thread removes it from its stack at its next range */
    } else {
        Py_ssize_t k = tdepth - 1;
        while (k >= 0 && tstack[k] != self) k--;
        if (k >= 0) {
            if (k != tdepth - 1) n_out_of_order++;
            if (stack_remove(k) < 0) return -1;
        }
    }
    return mark_all(-self->cid, tid, mono_ns(), 0);
}

/* ---------------------------------------------------------------- module functions */
PyObject *current_correlation_id(PyObject *mod, PyObject *unused) {
    if (recorder == NULL || !track_correlation) return PyLong_FromLong(0);
    PyObject *h = NULL;
    if (PyContextVar_Get(current_var, NULL, &h) < 0) return NULL;
    RangeObject *r = h ? open_range(((FrameObject *)h)->range) : NULL;
    Py_XDECREF(h);
    int64_t cid = r ? r->cid : 0;
    Py_XDECREF(r);
    return PyLong_FromLongLong(cid);
}

PyObject *lifetimes(PyObject *mod, PyObject *unused) {
    return Py_BuildValue("{s:L,s:L,s:L,s:L}", "exited_out_of_order", (long long)n_out_of_order,
                         "exited_on_another_thread", (long long)n_cross_thread,
                         "entered_over_another_context", (long long)n_interleaved, "max_depth", (long long)max_depth);
}

void reset_lifetimes(void) { n_out_of_order = n_cross_thread = n_interleaved = max_depth = 0; }

int correlation_init(void) {
    if (PyType_Ready(&FrameType) < 0) return -1;
    current_var = PyContextVar_New("xpuprof.current_range", NULL);
    return current_var ? 0 : -1;
}

void correlation_after_fork(void) {
    for (Py_ssize_t i = 0; i < tdepth; i++) Py_DECREF(tstack[i]);
    tdepth = 0;
}
