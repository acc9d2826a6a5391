/* NameTable (nametable.h): the distinct names of one recording cycle as UTF-8 text in one buffer. */
#include "nametable.h"

#include <string.h>
#include <structmember.h>

static PyObject *name_cleaner = NULL; /* cleaner(name) -> (clean str, had invalid UTF-8: bool) */
static Py_ssize_t name_max_chars = 1 << 16;

static int nt_grow_slots(NameTableObject *t) {
    Py_ssize_t nslots = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *slots = PyMem_RawCalloc((size_t)nslots, sizeof(uint32_t));
    if (!slots) { PyErr_NoMemory(); return -1; }
    size_t mask = (size_t)nslots - 1;
    for (Py_ssize_t id = 0; id < t->n; id++) {
        size_t i = t->hashes[id] & mask;
        while (slots[i]) i = (i + 1) & mask;
        slots[i] = (uint32_t)(id + 1);
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* The id of `text` (len bytes, valid UTF-8, hash h), adding it the first time. -1 with an exception
 * set; -2 when refused (the table is exported: a cycle that ended). */
static int64_t nt_find_or_add(NameTableObject *t, const char *text, Py_ssize_t len, Py_hash_t h) {
    uint32_t h32 = (uint32_t)h;
    if (t->sealed) return -2;
    if (t->nslots) {
        size_t mask = (size_t)t->nslots - 1, i = h32 & mask;
        const int64_t *ends = t->offsets->data;
        for (uint32_t s; (s = t->slots[i]); i = (i + 1) & mask) {
            int64_t id = (int64_t)s - 1;
            if (t->hashes[id] == h32 && ends[id + 1] - ends[id] == len && memcmp(t->blob + ends[id], text, (size_t)len) == 0)
                return id;
        }
    }
    if (t->exports || t->offsets->exports) return -2;
    if (t->n >= (Py_ssize_t)UINT32_MAX - 1) { PyErr_SetString(PyExc_OverflowError, "too many distinct names"); return -1; }
    if ((t->n + 1) * 2 > t->nslots && nt_grow_slots(t) < 0) return -1;
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 1024;
        uint32_t *hashes = PyMem_RawRealloc(t->hashes, (size_t)cap * sizeof(uint32_t));
        if (!hashes) { PyErr_NoMemory(); return -1; }
        t->hashes = hashes;
        t->cap = cap;
    }
    if (t->blob_len + len > t->blob_cap
        && store_grow(&t->blob_store, &t->blob, &t->blob_cap, t->blob_len + len, 1, 1 << 16) < 0)
        return -1;
    int refused;
    int64_t *end = log_row(t->offsets, &refused);
    if (!end) return refused ? -2 : -1;
    memcpy(t->blob + t->blob_len, text, (size_t)len);
    t->blob_len += len;
    *end = t->blob_len;
    store_commit(&t->blob_store, t->blob_len);
    log_commit(t->offsets); /* after the text: a spill file's reader sees whole names */
    int64_t id = t->n++;
    t->hashes[id] = h32;
    size_t mask = (size_t)t->nslots - 1, i = h32 & mask;
    while (t->slots[i]) i = (i + 1) & mask;
    t->slots[i] = (uint32_t)(id + 1);
    return id;
}

static int64_t nt_intern_str(NameTableObject *t, PyObject *s) {
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(s, &len);
    if (!text) return -1;
    Py_hash_t h = PyObject_Hash(s); /* cached in the str object */
    if (h == -1) return -1;
    return nt_find_or_add(t, text, len, h);
}

/* A name the cleaner must see first: bytes, lone surrogates, or over the string bound. */
static int64_t nt_intern_slow(NameTableObject *t, PyObject *name) {
    PyObject *got = PyDict_GetItemWithError(t->slow, name);
    if (got) return PyLong_AsLongLong(got);
    if (PyErr_Occurred()) return -1;
    if (!name_cleaner) {
        PyErr_SetString(PyExc_RuntimeError, "xpuprof.host.annotations did not register its name cleaner");
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(name_cleaner, name);
    if (!r) return -1;
    PyObject *clean;
    int invalid;
    if (!PyArg_ParseTuple(r, "Up", &clean, &invalid)) { Py_DECREF(r); return -1; }
    int64_t id = nt_intern_str(t, clean);
    Py_DECREF(r);
    if (id < 0) return id;
    PyObject *v = PyLong_FromLongLong(id);
    if (!v || PyDict_SetItem(t->slow, name, v) < 0) { Py_XDECREF(v); return -1; }
    Py_DECREF(v);
    if (invalid) t->invalid_utf8++;
    return id;
}

int64_t nt_intern(NameTableObject *t, PyObject *name) {
    size_t c = ((uintptr_t)name >> 4) & (NT_CACHE - 1);
    if (t->cache_obj[c] == name) return t->cache_id[c];
    int64_t id;
    if (PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) <= name_max_chars) {
        id = nt_intern_str(t, name);
        if (id == -1 && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) { /* lone surrogates */
            PyErr_Clear();
            id = nt_intern_slow(t, name);
        }
    } else {
        id = nt_intern_slow(t, name);
    }
    if (id >= 0) {
        Py_INCREF(name);
        Py_XSETREF(t->cache_obj[c], name);
        t->cache_id[c] = id;
    }
    return id;
}

static PyObject *nt_new(PyTypeObject *type, PyObject *a, PyObject *kw) {
    if (PyTuple_GET_SIZE(a) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "NameTable() takes no arguments");
        return NULL;
    }
    NameTableObject *t = (NameTableObject *)type->tp_alloc(type, 0);
    if (!t) return NULL;
    t->slow = PyDict_New();
    PyObject *width = PyLong_FromLong(1);
    t->offsets = width ? (Int64LogObject *)PyObject_CallOneArg((PyObject *)&Int64LogType, width) : NULL;
    Py_XDECREF(width);
    int refused;
    int64_t *first = t->offsets && t->slow ? log_row(t->offsets, &refused) : NULL;
    if (!first) { Py_DECREF(t); return NULL; }
    *first = 0;
    log_commit(t->offsets);
    return (PyObject *)t;
}

static int nt_traverse(NameTableObject *t, visitproc visit, void *arg) {
    Py_VISIT(t->slow);
    Py_VISIT(t->offsets);
    for (int i = 0; i < NT_CACHE; i++) Py_VISIT(t->cache_obj[i]);
    return 0;
}

static int nt_clear(NameTableObject *t) {
    Py_CLEAR(t->slow);
    Py_CLEAR(t->offsets);
    for (int i = 0; i < NT_CACHE; i++) Py_CLEAR(t->cache_obj[i]);
    return 0;
}

static void nt_dealloc(NameTableObject *t) {
    PyObject_GC_UnTrack(t);
    nt_clear(t);
    store_free(&t->blob_store, t->blob);
    PyMem_RawFree(t->hashes);
    PyMem_RawFree(t->slots);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *nt_intern_method(NameTableObject *t, PyObject *name) {
    if (!PyUnicode_CheckExact(name) && !PyBytes_CheckExact(name)) {
        PyErr_Format(PyExc_TypeError, "NameTable.intern takes a str or bytes, not %.200s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    int64_t id = nt_intern(t, name);
    if (id == -2) {
        PyErr_SetString(PyExc_BufferError, "NameTable is exported: its cycle has ended");
        return NULL;
    }
    return id < 0 ? NULL : PyLong_FromLongLong(id);
}

static Py_ssize_t nt_len(NameTableObject *t) { return t->n; }

/* spill_to(text_fd, offsets_fd): the table's text and ends in these two new, empty files from now on. */
static PyObject *nt_spill_to(NameTableObject *t, PyObject *a) {
    PyObject *text_obj, *ends_obj;
    if (!PyArg_ParseTuple(a, "OO:spill_to", &text_obj, &ends_obj)) return NULL;
    int text_fd = PyObject_AsFileDescriptor(text_obj), ends_fd = text_fd < 0 ? -1 : PyObject_AsFileDescriptor(ends_obj);
    if (ends_fd < 0) return NULL;
    if (t->exports || t->offsets->exports || t->sealed) {
        PyErr_SetString(PyExc_BufferError, "NameTable is exported: its cycle has ended");
        return NULL;
    }
    if (store_spill_to(&t->blob_store, text_fd, 0, &t->blob, (size_t)t->blob_cap, t->blob_len) < 0) return NULL;
    PyObject *r = PyObject_CallMethod((PyObject *)t->offsets, "spill_to", "O", ends_obj);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static int nt_getbuffer(NameTableObject *t, Py_buffer *view, int flags) {
    static char empty = 0;
    if (flags & PyBUF_WRITABLE) { PyErr_SetString(PyExc_BufferError, "NameTable is read-only"); return -1; }
    if (PyBuffer_FillInfo(view, (PyObject *)t, t->blob ? t->blob : &empty, t->blob_len, 1, flags) < 0) return -1;
    t->exports++;
    if (!t->sealed) { /* the cycle ended: only the text is read from here on; the lookup tables go */
        t->sealed = 1;
        PyMem_RawFree(t->slots);
        PyMem_RawFree(t->hashes);
        t->slots = NULL;
        t->hashes = NULL;
        t->nslots = t->cap = 0;
    }
    return 0;
}

static void nt_releasebuffer(NameTableObject *t, Py_buffer *view) { t->exports--; }

static PyBufferProcs nt_as_buffer = {(getbufferproc)nt_getbuffer, (releasebufferproc)nt_releasebuffer};
static PySequenceMethods nt_as_sequence = {.sq_length = (lenfunc)nt_len};

static PyMethodDef nt_methods[] = {
    {"intern", (PyCFunction)nt_intern_method, METH_O,
     "intern($self, name, /)\n--\n\nThe id of a name (str or bytes), adding it the first time."},
    {"spill_to", (PyCFunction)nt_spill_to, METH_VARARGS,
     "spill_to($self, text_fd, offsets_fd, /)\n--\n\nKeep the text and the ends in these new, empty files from now on."},
    {NULL},
};

static PyMemberDef nt_members[] = {
    {"offsets", T_OBJECT, offsetof(NameTableObject, offsets), READONLY,
     "Int64Log(1) of n + 1 rows: name i is blob[offsets[i]:offsets[i + 1]]"},
    {"invalid_utf8", T_PYSSIZET, offsetof(NameTableObject, invalid_utf8), READONLY,
     "distinct names whose invalid UTF-8 was replaced with U+FFFD"},
    {NULL},
};

PyTypeObject NameTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xpuprof._native.hostrec.NameTable",
    .tp_basicsize = sizeof(NameTableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "NameTable()\n--\n\nDistinct names as UTF-8 text in one buffer (the object's buffer is the text; "
              "offsets holds the ends).",
    .tp_new = nt_new,
    .tp_dealloc = (destructor)nt_dealloc,
    .tp_traverse = (traverseproc)nt_traverse,
    .tp_clear = (inquiry)nt_clear,
    .tp_methods = nt_methods,
    .tp_members = nt_members,
    .tp_as_buffer = &nt_as_buffer,
    .tp_as_sequence = &nt_as_sequence,
};

PyObject *set_name_cleaner(PyObject *mod, PyObject *a) {
    PyObject *fn;
    Py_ssize_t max_chars;
    if (!PyArg_ParseTuple(a, "On:set_name_cleaner", &fn, &max_chars)) return NULL;
    Py_INCREF(fn);
    Py_XSETREF(name_cleaner, fn);
    name_max_chars = max_chars;
    Py_RETURN_NONE;
}
