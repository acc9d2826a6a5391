/* xpuprof._native.rowgather: copy fixed-size records from scattered offsets of a buffer into one
 * contiguous array, in C (numpy's fancy indexing over a (records x words) index costs ~10x more).
 *
 * gather_into(buffer, offsets: int64/uint64 buffer, size, out: writable buffer, out_offset)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

static PyObject *py_gather_into(PyObject *self, PyObject *args) {
    Py_buffer view, offs, out;
    Py_ssize_t size, out_off;
    if (!PyArg_ParseTuple(args, "y*y*nw*n", &view, &offs, &size, &out, &out_off)) return NULL;
    size_t n = (size_t)offs.len / sizeof(uint64_t);
    const uint64_t *o = (const uint64_t *)offs.buf;
    PyObject *result = NULL;
    if (size <= 0 || offs.len % 8 || out_off < 0 || (size_t)out.len < (size_t)out_off
        || (size_t)out.len - (size_t)out_off < n * (size_t)size) {
        PyErr_SetString(PyExc_ValueError, "gather_into: bad record size, offsets or output too small");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (o[i] > (uint64_t)view.len || (uint64_t)view.len - o[i] < (uint64_t)size) {
            PyErr_Format(PyExc_ValueError, "a %zd-byte record at offset %llu runs past the buffer's end (%zd bytes)",
                         size, (unsigned long long)o[i], view.len);
            goto done;
        }
    }
    char *dst = (char *)out.buf + out_off;
    const char *src = (const char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) memcpy(dst + i * (size_t)size, src + o[i], (size_t)size);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&out);
    return result;
}

/* gather_fields(buffer, offsets, spans, out, out_offset, out_size): from each record at `offsets`,
 * only the byte spans (int64 triples: source offset, length, destination offset) are copied, into
 * out_size-byte rows of `out` from byte out_offset. The decoders keep only the fields they read. */
static PyObject *py_gather_fields(PyObject *self, PyObject *args) {
    Py_buffer view, offs, spans, out;
    Py_ssize_t out_off, out_size;
    if (!PyArg_ParseTuple(args, "y*y*y*w*nn", &view, &offs, &spans, &out, &out_off, &out_size)) return NULL;
    size_t n = (size_t)offs.len / sizeof(uint64_t);
    size_t k = (size_t)spans.len / (3 * sizeof(int64_t));
    const uint64_t *o = (const uint64_t *)offs.buf;
    const int64_t *sp = (const int64_t *)spans.buf;
    PyObject *result = NULL;
    uint64_t reach = 0; /* bytes of a record the spans read */
    if (out_size <= 0 || offs.len % 8 || spans.len % 24 || out_off < 0 || (size_t)out.len < (size_t)out_off
        || (size_t)out.len - (size_t)out_off < n * (size_t)out_size) {
        PyErr_SetString(PyExc_ValueError, "gather_fields: bad row size, offsets, spans or output too small");
        goto done;
    }
    for (size_t j = 0; j < k; j++) {
        int64_t so = sp[3 * j], len = sp[3 * j + 1], dof = sp[3 * j + 2];
        if (so < 0 || len <= 0 || dof < 0 || dof + len > out_size) {
            PyErr_SetString(PyExc_ValueError, "gather_fields: a span lies outside the record or the output row");
            goto done;
        }
        if ((uint64_t)(so + len) > reach) reach = (uint64_t)(so + len);
    }
    for (size_t i = 0; i < n; i++) {
        if (o[i] > (uint64_t)view.len || (uint64_t)view.len - o[i] < reach) {
            PyErr_Format(PyExc_ValueError, "a record read to byte %llu at offset %llu runs past the buffer's end "
                         "(%zd bytes)", (unsigned long long)reach, (unsigned long long)o[i], view.len);
            goto done;
        }
    }
    char *dst = (char *)out.buf + out_off;
    const char *src = (const char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        char *row = dst + i * (size_t)out_size;
        const char *rec = src + o[i];
        for (size_t j = 0; j < k; j++) {
            char *d = row + sp[3 * j + 2];
            const char *r = rec + sp[3 * j];
            switch (sp[3 * j + 1]) { /* fixed sizes become single moves */
            case 4: memcpy(d, r, 4); break;
            case 8: memcpy(d, r, 8); break;
            case 16: memcpy(d, r, 16); break;
            default: memcpy(d, r, (size_t)sp[3 * j + 1]);
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"gather_into", py_gather_into, METH_VARARGS,
     "gather_into(buffer, uint64 offsets, size, out, out_offset): records copied into out."},
    {"gather_fields", py_gather_fields, METH_VARARGS,
     "gather_fields(buffer, uint64 offsets, int64 (src, len, dst) spans, out, out_offset, out_size)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rowgather", NULL, -1, methods};

PyMODINIT_FUNC PyInit_rowgather(void) { return PyModule_Create(&module); }
