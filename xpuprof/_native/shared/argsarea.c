/* ArgsArea (argsarea.h): host ranges' args as JSON text in one growing byte area. */
#include "argsarea.h"

#include <math.h>
#include <string.h>
#include <structmember.h>

#include "jsonstr.h"


static int area_reserve(ArgsAreaObject *a, Py_ssize_t more) {
    if (a->len + more <= a->cap) return 0;
    return store_grow(&a->store, &a->data, &a->cap, a->len + more, 1, 1 << 16); /* large blocks: mremap */
}

/* Close the entry that starts at `start` (the text is in place): its index, or an ARGS_ code. */
static int64_t area_commit(ArgsAreaObject *a, Py_ssize_t start) {
    int refused;
    int64_t *row = log_row(a->ends, &refused);
    if (!row) {
        a->len = start;
        if (refused) { a->refused++; return ARGS_REFUSED; }
        return ARGS_ERROR;
    }
    *row = a->len;
    store_commit(&a->store, a->len);
    log_commit(a->ends); /* after the text: a spill file's reader sees whole entries */
    return a->ends->rows - 1;
}

/* A str as a JSON string at the end of the area; 0, or ARGS_UNSUPPORTED (lone surrogates), or -1. */
static int area_put_str(ArgsAreaObject *a, PyObject *str) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(str, &n);
    if (!s) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        return ARGS_UNSUPPORTED;
    }
    if (area_reserve(a, (Py_ssize_t)JSON_STRING_MAX(n)) < 0) return -1;
    a->len = json_string_put(a->data + a->len, s, (size_t)n) - a->data;
    return 0;
}

/* Decimal digits of v, written backwards ending at `end`; returns where they start. */
static inline char *digits_before(char *end, unsigned long long v) {
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static int area_put(ArgsAreaObject *a, const char *s, Py_ssize_t n) {
    if (area_reserve(a, n) < 0) return -1;
    memcpy(a->data + a->len, s, (size_t)n);
    a->len += n;
    return 0;
}

/* One value; 0, ARGS_UNSUPPORTED (another type, an int past uint64) or -1. */
static int area_put_value(ArgsAreaObject *a, PyObject *v) {
    char num[32];
    if (v == Py_None) return area_put(a, "null", 4);
    if (v == Py_True) return area_put(a, "true", 4);
    if (v == Py_False) return area_put(a, "false", 5);
    if (PyUnicode_CheckExact(v)) return area_put_str(a, v);
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        char *end = num + sizeof num, *p;
        if (!overflow) {
            p = digits_before(end, x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x);
            if (x < 0) *--p = '-';
            return area_put(a, p, end - p);
        }
        if (overflow < 0) return ARGS_UNSUPPORTED; /* below int64: orjson refuses it too */
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
            return ARGS_UNSUPPORTED;
        }
        p = digits_before(end, u);
        return area_put(a, p, end - p);
    }
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (!isfinite(x)) return area_put(a, "null", 4);
        char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!text) return -1;
        int rc = area_put(a, text, (Py_ssize_t)strlen(text));
        PyMem_Free(text);
        return rc;
    }
    return ARGS_UNSUPPORTED;
}

int64_t args_area_encode(ArgsAreaObject *a, PyObject *dict) {
    if (a->exports) { a->refused++; return ARGS_REFUSED; }
    Py_ssize_t start = a->len, pos = 0;
    PyObject *k, *v;
    int rc = area_put(a, "{", 1);
    int first = 1;
    while (rc == 0 && PyDict_Next(dict, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k)) { rc = ARGS_UNSUPPORTED; break; }
        if (!first && (rc = area_put(a, ",", 1)) < 0) break;
        first = 0;
        if ((rc = area_put_str(a, k)) != 0) break;
        if ((rc = area_put(a, ":", 1)) < 0) break;
        rc = area_put_value(a, v);
    }
    if (rc == 0) rc = area_put(a, "}", 1);
    if (rc != 0) {
        a->len = start;
        return rc == ARGS_UNSUPPORTED ? ARGS_UNSUPPORTED : ARGS_ERROR;
    }
    return area_commit(a, start);
}

int64_t args_area_add(ArgsAreaObject *a, PyObject *text) {
    if (a->exports) { a->refused++; return ARGS_REFUSED; }
    Py_buffer view;
    if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) return ARGS_ERROR;
    Py_ssize_t start = a->len;
    int rc = area_put(a, (const char *)view.buf, view.len);
    PyBuffer_Release(&view);
    if (rc < 0) return ARGS_ERROR;
    return area_commit(a, start);
}

/* ---------------------------------------------------------------- the Python type */
static int area_init(ArgsAreaObject *self, PyObject *a, PyObject *kw) {
    if (!PyArg_ParseTuple(a, ":ArgsArea")) return -1;
    if (self->exports || (self->ends && self->ends->exports)) {
        PyErr_SetString(PyExc_BufferError, "ArgsArea is exported");
        return -1;
    }
    PyObject *ends = PyObject_CallFunction((PyObject *)&Int64LogType, "n", (Py_ssize_t)1);
    if (!ends) return -1;
    Py_XSETREF(self->ends, (Int64LogObject *)ends);
    store_free(&self->store, self->data);
    self->data = NULL;
    self->len = self->cap = self->refused = 0;
    return 0;
}

static void area_dealloc(ArgsAreaObject *self) {
    store_free(&self->store, self->data);
    Py_XDECREF(self->ends);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int area_ready(ArgsAreaObject *self) {
    if (self->ends) return 0;
    PyErr_SetString(PyExc_ValueError, "ArgsArea was not initialized");
    return -1;
}

static PyObject *index_or_none(ArgsAreaObject *self, int64_t k) {
    if (k == ARGS_ERROR) return NULL;
    if (k == ARGS_UNSUPPORTED) Py_RETURN_NONE;
    return PyLong_FromLongLong(k); /* >= 0, or ARGS_REFUSED */
}

static PyObject *area_encode(ArgsAreaObject *self, PyObject *dict) {
    if (area_ready(self) < 0) return NULL;
    if (!PyDict_CheckExact(dict)) Py_RETURN_NONE;
    return index_or_none(self, args_area_encode(self, dict));
}

static PyObject *area_add(ArgsAreaObject *self, PyObject *text) {
    if (area_ready(self) < 0) return NULL;
    return index_or_none(self, args_area_add(self, text));
}

/* spill_to(data_fd, ends_fd): the area's bytes and entry ends in these two new, empty files from now on. */
static PyObject *area_spill_to(ArgsAreaObject *self, PyObject *a) {
    PyObject *data_obj, *ends_obj;
    if (!PyArg_ParseTuple(a, "OO:spill_to", &data_obj, &ends_obj)) return NULL;
    if (area_ready(self) < 0) return NULL;
    int data_fd = PyObject_AsFileDescriptor(data_obj);
    if (data_fd < 0) return NULL;
    if (self->exports || self->ends->exports) { PyErr_SetString(PyExc_BufferError, "ArgsArea is exported"); return NULL; }
    if (store_spill_to(&self->store, data_fd, 0, &self->data, (size_t)self->cap, self->len) < 0) return NULL;
    PyObject *r = PyObject_CallMethod((PyObject *)self->ends, "spill_to", "O", ends_obj);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static Py_ssize_t area_len(ArgsAreaObject *self) { return self->ends ? self->ends->rows : 0; }

static int area_getbuffer(ArgsAreaObject *self, Py_buffer *view, int flags) {
    static char empty = 0;
    if (flags & PyBUF_WRITABLE) { PyErr_SetString(PyExc_BufferError, "ArgsArea is read-only"); return -1; }
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : &empty, self->len, 1, flags) < 0) return -1;
    self->exports++;
    return 0;
}

static void area_releasebuffer(ArgsAreaObject *self, Py_buffer *view) { self->exports--; }

static PyObject *area_get_ends(ArgsAreaObject *self, void *closure) {
    if (area_ready(self) < 0) return NULL;
    Py_INCREF(self->ends);
    return (PyObject *)self->ends;
}

static PyBufferProcs area_as_buffer = {(getbufferproc)area_getbuffer, (releasebufferproc)area_releasebuffer};
static PySequenceMethods area_as_sequence = {.sq_length = (lenfunc)area_len};

static PyMethodDef area_methods[] = {
    {"encode", (PyCFunction)area_encode, METH_O,
     "encode($self, args, /)\n--\n\nThe new entry's index, or None when a key or value is not a plain JSON one "
     "(negative: refused while exported)."},
    {"add", (PyCFunction)area_add, METH_O,
     "add($self, text, /)\n--\n\nJSON text (bytes-like) as a new entry: its index (negative: refused)."},
    {"spill_to", (PyCFunction)area_spill_to, METH_VARARGS,
     "spill_to($self, data_fd, ends_fd, /)\n--\n\nKeep the bytes and the ends in these new, empty files from now on."},
    {NULL},
};

static PyMemberDef area_members[] = {
    {"refused", T_PYSSIZET, offsetof(ArgsAreaObject, refused), READONLY,
     "entries refused because the area was exported at the time"},
    {NULL},
};

static PyGetSetDef area_getset[] = {
    {"ends", (getter)area_get_ends, NULL, "Int64Log(1): each entry's end offset in the area", NULL},
    {NULL},
};

PyTypeObject ArgsAreaType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.hostrec.ArgsArea",
    .tp_basicsize = sizeof(ArgsAreaObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ArgsArea()\n--\n\nJSON objects one after another in one C buffer (the bytes through the buffer "
              "protocol, each entry's end in .ends).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)area_init,
    .tp_dealloc = (destructor)area_dealloc,
    .tp_methods = area_methods,
    .tp_members = area_members,
    .tp_getset = area_getset,
    .tp_as_buffer = &area_as_buffer,
    .tp_as_sequence = &area_as_sequence,
};
