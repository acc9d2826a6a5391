/* bufqueue_py.h: the Python side of bufqueue.h, shared by every buffer-owning extension.
 * Include after <Python.h> and "bufqueue.h". Runs on the draining (Python) thread only. */
#ifndef XPUPROF_BUFQUEUE_PY_H
#define XPUPROF_BUFQUEUE_PY_H

/* Every completed buffer's used bytes as a list of bytes, oldest first; frees the buffers. */
static PyObject *bq_drain_to_list(bq_queue *q) {
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

#endif
