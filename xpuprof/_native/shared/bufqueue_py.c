/* bufqueue_py.c: bufqueue.h's queues drained into Python objects (bufqueue_py.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bufqueue.h"
#include "bufqueue_py.h"

PyObject *bq_drain_to_list(bq_queue *q) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    bq_entry e;
    while (bq_pop(q, &e)) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)e.buffer, (Py_ssize_t)e.used);
        bq_free_buffer(e.buffer);
        if (!b || PyList_Append(out, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(b);
    }
    return out;
}
