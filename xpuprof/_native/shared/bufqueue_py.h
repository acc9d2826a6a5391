/* bufqueue_py.h: the Python side of bufqueue.h (bufqueue_py.c), for the buffer-owning extensions.
 * Runs on the draining (Python) thread only. */
#ifndef XPUPROF_BUFQUEUE_PY_H
#define XPUPROF_BUFQUEUE_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bufqueue.h"

/* Every completed buffer's used bytes as a list of bytes, oldest first; frees the buffers. NULL with
 * an exception set when out of memory (the buffers drained until then are freed; later ones stay queued). */
PyObject *bq_drain_to_list(bq_queue *q);

#endif
