/* Int64Log (int64log.h): rows of int64 values in one growing C array. */
#include "int64log.h"

#include <string.h>
#include <structmember.h>


static int log_reserve(Int64LogObject *log) {
    if (log->rows < log->cap) return 0;
    /* realloc of large blocks is mremap on glibc: no copy, no doubled peak (a spill file: mremap too) */
    return store_grow(&log->store, (char **)&log->data, &log->cap, log->rows + 1,
                      (size_t)log->width * sizeof(int64_t), 4096);
}

void log_commit(Int64LogObject *log) { store_commit(&log->store, log->rows); }

static void log_free_data(Int64LogObject *log) {
    store_free(&log->store, (char *)log->data);
    log->data = NULL;
    log->rows = log->cap = 0;
}

int64_t *log_row(Int64LogObject *log, int *refused) {
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
    log_free_data(self);
    self->refused = 0;
    self->width = width;
    return 0;
}

static void log_dealloc(Int64LogObject *self) {
    log_free_data(self);
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
    log_commit(self);
    Py_RETURN_TRUE;
}

static PyObject *log_clear(Int64LogObject *self, PyObject *unused) {
    if (self->exports) { PyErr_SetString(PyExc_BufferError, "Int64Log is exported: release the array first"); return NULL; }
    log_free_data(self);
    self->refused = 0;
    Py_RETURN_NONE;
}

static PyObject *log_spill_to(Int64LogObject *self, PyObject *fd_obj) {
    int fd = PyObject_AsFileDescriptor(fd_obj);
    if (fd < 0) return NULL;
    if (self->exports) { PyErr_SetString(PyExc_BufferError, "Int64Log is exported"); return NULL; }
    if (store_spill_to(&self->store, fd, self->width, (char **)&self->data,
                       (size_t)self->cap * (size_t)self->width * sizeof(int64_t), self->rows) < 0) return NULL;
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
     "append($self, /, *values)\n--\n\nAppend one row of `width` ints; False when refused (the log is exported)."},
    {"clear", (PyCFunction)log_clear, METH_NOARGS, "clear($self, /)\n--\n\nDrop every row and free the memory."},
    {"spill_to", (PyCFunction)log_spill_to, METH_O,
     "spill_to($self, fd, /)\n--\n\nKeep the rows in this new, empty file from now on (mapped: each row is in the "
     "file once written)."},
    {NULL},
};

static PyMemberDef log_members[] = {
    {"width", T_PYSSIZET, offsetof(Int64LogObject, width), READONLY, "int64 values per row"},
    {"refused", T_PYSSIZET, offsetof(Int64LogObject, refused), READONLY,
     "rows refused because the log was exported at the time"},
    {NULL},
};

PyTypeObject Int64LogType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.hostrec.Int64Log",
    .tp_basicsize = sizeof(Int64LogObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Int64Log(width)\n--\n\nRows of `width` int64 values in one C array; np.frombuffer reads them.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)log_init,
    .tp_dealloc = (destructor)log_dealloc,
    .tp_methods = log_methods,
    .tp_members = log_members,
    .tp_as_buffer = &log_as_buffer,
    .tp_as_sequence = &log_as_sequence,
};
