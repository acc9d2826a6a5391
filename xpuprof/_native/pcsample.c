/* xpuprof._native.pcsample: the one per-instruction step of reading PTI's EU stall samples.
 *
 * ptiPcSamplingGetSamplesPerInstruction fills a caller-owned array of {offset, source_info*}; the
 * source info ({file_path*, line}) lives in PTI's memory, one struct per instruction. Reading it
 * through ctypes costs a Python object per instruction; here one call reads them all:
 *
 *   source_info(pointers: bytes of uint64) -> (file pointers: bytes of uint64, lines: bytes of uint64)
 *
 * A NULL source_info gives file pointer 0 and line 0 (PTI has no source for that instruction).
 * The file strings are then read once per distinct pointer by the caller.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

typedef struct {
    const char *file_path;
    uint64_t file_line;
} source_info_t; /* pti_pc_sampling_source_info_t (16 bytes) */

static PyObject *py_source_info(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    if (view.len % 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "source_info takes an array of 8-byte pointers");
        return NULL;
    }
    Py_ssize_t n = view.len / 8;
    PyObject *files = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *lines = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!files || !lines) {
        Py_XDECREF(files);
        Py_XDECREF(lines);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint64_t *f = (uint64_t *)PyBytes_AS_STRING(files), *l = (uint64_t *)PyBytes_AS_STRING(lines);
    const unsigned char *src = (const unsigned char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t p;
        memcpy(&p, src + 8 * i, 8);
        if (!p) {
            f[i] = 0;
            l[i] = 0;
            continue;
        }
        const source_info_t *s = (const source_info_t *)(uintptr_t)p;
        f[i] = (uint64_t)(uintptr_t)s->file_path;
        l[i] = s->file_path ? s->file_line : 0;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(NN)", files, lines);
}

static PyMethodDef methods[] = {
    {"source_info", py_source_info, METH_VARARGS,
     "source_info($module, pointers, /)\n--\n\n"
     "(file pointers, lines) as uint64 bytes: PTI's source info behind each instruction's uint64 pointer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.pcsample", NULL, -1, methods};

PyMODINIT_FUNC PyInit_pcsample(void) { return PyModule_Create(&module); }
